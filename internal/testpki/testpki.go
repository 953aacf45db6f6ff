// Package testpki makes the certificates that tests and benchmarks of TLS
// need: certificate authorities, and certificates they sign for 127.0.0.1
// and localhost, with their keys, as Go values and PEM.
package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"net"
	"time"
)

// CA is a certificate authority: its certificate and key.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
	// PEM is the CA's certificate, PEM-encoded.
	PEM []byte
}

// Leaf is a certificate a CA signed, with its key.
type Leaf struct {
	Cert tls.Certificate
	// CertPEM and KeyPEM are the certificate and its key (PKCS #8),
	// PEM-encoded.
	CertPEM, KeyPEM []byte
}

// NewCA makes a self-signed CA named name, valid from two hours ago to a
// day from now.
func NewCA(name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{Subject: pkix.Name{CommonName: name}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage:  x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		NotBefore: now.Add(-2 * time.Hour), NotAfter: now.Add(24 * time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key) // a random serial number
	if err != nil {
		return nil, fmt.Errorf("testpki: CA %s: %w", name, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// Issue makes a certificate named name for 127.0.0.1 and localhost, for
// the given uses, signed by c and valid from two hours ago to notAfter (in
// the past for an expired one).
func (c *CA) Issue(name string, notAfter time.Time, usage ...x509.ExtKeyUsage) (*Leaf, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{Subject: pkix.Name{CommonName: name},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: usage,
		NotBefore: time.Now().Add(-2 * time.Hour), NotAfter: notAfter}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.Cert, &key.PublicKey, c.Key)
	if err != nil {
		return nil, fmt.Errorf("testpki: certificate %s: %w", name, err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return &Leaf{
		Cert:    tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key},
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

// PKI is a CA and one certificate it signed for server and client use,
// valid for an hour.
type PKI struct {
	// Pool trusts the CA.
	Pool *x509.CertPool
	// Cert is the signed certificate with its key.
	Cert tls.Certificate
	// CAPEM, CertPEM and KeyPEM are the CA's certificate and the signed
	// certificate and its key (PKCS #8), PEM-encoded.
	CAPEM, CertPEM, KeyPEM []byte
}

// New makes a CA and a certificate it signs for 127.0.0.1, for server and
// client use.
func New() (*PKI, error) {
	ca, err := NewCA("test CA")
	if err != nil {
		return nil, err
	}
	leaf, err := ca.Issue("node", time.Now().Add(time.Hour), x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	return &PKI{Pool: pool, Cert: leaf.Cert, CAPEM: ca.PEM, CertPEM: leaf.CertPEM, KeyPEM: leaf.KeyPEM}, nil
}
