package semijoin

// Securing the HTTP protocol: bearer tokens, TLS and mutual TLS, the
// server's timeouts, and the client's options for all of them.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// ErrUnauthorized: the server refused the client: it needs a token, refused
// the one sent, or refused the client's certificate. Checkable with
// errors.Is.
var ErrUnauthorized = errors.New("semijoin: unauthorized")

// Fixed bodies of the refusals of an unauthenticated request: they say
// nothing of the store or of why the token was refused.
const (
	unauthorizedBody = "unauthorized"
	forbiddenBody    = "forbidden"
)

// keysOnlyHeader names the header, valued "1", that every response of a
// keys-only handler carries.
const keysOnlyHeader = "Bloomkv-Keys-Only"

// validToken reports whether s can be a bearer token: not empty, and
// printable ASCII without spaces, so that it fits an Authorization header
// as is.
func validToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// bearerToken returns the token of an Authorization header's value of the
// form "Bearer <token>" (the scheme in any case, one or more spaces after
// it), or false when the value has another form.
func bearerToken(h string) (string, bool) {
	scheme, rest, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok := strings.TrimLeft(rest, " ")
	if !validToken(tok) {
		return "", false
	}
	return tok, true
}

// authorize checks r's bearer token against want, a hash of the token the
// handler takes, and answers a refusal itself, reporting false, when the
// token is missing, malformed or wrong.
func authorize(w http.ResponseWriter, r *http.Request, want *[sha256.Size]byte) bool {
	vals := r.Header.Values("Authorization")
	tok, ok := "", len(vals) == 1
	if ok {
		tok, ok = bearerToken(vals[0])
	}
	if !ok {
		w.Header().Set("WWW-Authenticate", "Bearer")
		http.Error(w, unauthorizedBody, http.StatusUnauthorized)
		return false
	}
	// Hashes of fixed length: the comparison's time says nothing of the
	// token's length or of how much of it matched.
	got := sha256.Sum256([]byte(tok))
	if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
		http.Error(w, forbiddenBody, http.StatusForbidden)
		return false
	}
	return true
}

// ReadTokenFile returns the bearer token held in the file at path, without
// the whitespace around it. A file holding no token, or one that cannot be
// a token (with spaces or control characters inside), is an error; errors
// name the file, never the token.
func ReadTokenFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("semijoin: token file: %w", err)
	}
	tok := string(bytes.TrimSpace(b))
	switch {
	case tok == "":
		return "", fmt.Errorf("semijoin: token file %s holds no token", path)
	case !validToken(tok):
		return "", fmt.Errorf("semijoin: token file %s: the token holds spaces or control characters: want one line of printable ASCII", path)
	}
	return tok, nil
}

// ServerOptions configure NewServer. The zero value, like nil, means plain
// HTTP and the default timeouts.
type ServerOptions struct {
	// CertFile and KeyFile are the PEM files of the server's certificate
	// (with any intermediates after it) and its private key: with them the
	// server speaks TLS (1.2 or later) only.
	CertFile, KeyFile string
	// ClientCAFile is a PEM bundle of the CAs whose client certificates the
	// server accepts: with it every client must present a certificate one of
	// them signed (mutual TLS). It needs CertFile.
	ClientCAFile string
	// ReadHeaderTimeout bounds the reading of a request's headers (default
	// DefaultReadHeaderTimeout); ReadTimeout the reading of a whole request,
	// body included (default DefaultReadTimeout); IdleTimeout how long a
	// kept-alive connection waits for its next request (default
	// DefaultIdleTimeout).
	ReadHeaderTimeout, ReadTimeout, IdleTimeout time.Duration
	// WriteTimeout bounds the writing of each frame of an answer, not of the
	// whole answer, which may stream for as long as the client keeps reading
	// (default DefaultWriteTimeout): a client that stops reading is cut off
	// after it. The server's own http.Server.WriteTimeout stays 0; each
	// request starts with a write deadline WriteTimeout away, which Handler
	// moves before every frame it writes. Another handler served by
	// NewServer's server must finish its answer within WriteTimeout or move
	// the deadline itself (http.ResponseController.SetWriteDeadline).
	WriteTimeout time.Duration
	// BaseContext, when set, returns the base context of the requests
	// accepted on a listener (http.Server.BaseContext).
	BaseContext func(net.Listener) context.Context
	// ErrorLog receives the server's errors (default: the log package's
	// standard logger).
	ErrorLog *log.Logger
}

// Defaults of ServerOptions.
const (
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultReadTimeout       = 30 * time.Second
	DefaultIdleTimeout       = 2 * time.Minute
	DefaultWriteTimeout      = 30 * time.Second
)

// maxHeaderBytes bounds a request's headers: the protocol's are a few
// hundred bytes.
const maxHeaderBytes = 64 << 10

// frameTimeoutKey is the request context key under which NewServer's server
// gives Handler the time allowed for each frame of an answer.
type frameTimeoutKey struct{}

// NewServer returns an http.Server that serves h with every timeout set:
// of o, or the defaults. With o.CertFile and o.KeyFile it is set up for TLS
// (TLSConfig set: serve it with Serve, or ServeTLS with empty file names),
// and with o.ClientCAFile for mutual TLS. A file that cannot be read or
// holds no certificate or key is an error naming it.
func NewServer(h http.Handler, o *ServerOptions) (*http.Server, error) {
	if o == nil {
		o = &ServerOptions{}
	}
	or := func(d, def time.Duration) time.Duration {
		if d > 0 {
			return d
		}
		return def
	}
	frameTimeout := or(o.WriteTimeout, DefaultWriteTimeout)
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			// The deadline a previous request on the connection left is
			// replaced; an answer that outlasts this one moves it.
			http.NewResponseController(w).SetWriteDeadline(time.Now().Add(frameTimeout))
			h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), frameTimeoutKey{}, frameTimeout)))
		}),
		ReadHeaderTimeout: or(o.ReadHeaderTimeout, DefaultReadHeaderTimeout),
		ReadTimeout:       or(o.ReadTimeout, DefaultReadTimeout),
		IdleTimeout:       or(o.IdleTimeout, DefaultIdleTimeout),
		MaxHeaderBytes:    maxHeaderBytes,
		BaseContext:       o.BaseContext,
		ErrorLog:          o.ErrorLog,
	}
	switch {
	case o.CertFile == "" && o.KeyFile == "" && o.ClientCAFile == "":
		return srv, nil
	case o.CertFile == "" || o.KeyFile == "":
		return nil, fmt.Errorf("semijoin: server TLS: a certificate file and a key file go together (certificate %q, key %q)", o.CertFile, o.KeyFile)
	}
	cert, err := tls.LoadX509KeyPair(o.CertFile, o.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("semijoin: server certificate %s and key %s: %w", o.CertFile, o.KeyFile, err)
	}
	srv.TLSConfig = &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{cert},
	}
	if o.ClientCAFile != "" {
		pool, err := loadCAs(o.ClientCAFile)
		if err != nil {
			return nil, err
		}
		srv.TLSConfig.ClientCAs = pool
		srv.TLSConfig.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return srv, nil
}

// loadCAs reads a PEM bundle of CA certificates.
func loadCAs(path string) (*x509.CertPool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("semijoin: CA bundle: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("semijoin: CA bundle %s holds no PEM certificate", path)
	}
	return pool, nil
}

// Serve serves srv on ln: over TLS when srv.TLSConfig is set (NewServer with
// a certificate), else plain HTTP. It returns as srv.Serve does.
func Serve(srv *http.Server, ln net.Listener) error {
	if srv.TLSConfig != nil {
		return srv.ServeTLS(ln, "", "")
	}
	return srv.Serve(ln)
}

// DialOptions configure DialWith. The zero value, like nil, is Dial's
// behaviour with http.DefaultClient.
type DialOptions struct {
	// Client, when set, makes the calls; its transport's TLS settings are
	// then its own (CAFile, CertFile and KeyFile must be empty).
	Client *http.Client
	// CAFile is a PEM bundle of the CAs trusted for an https:// server's
	// certificate, in place of the system's roots.
	CAFile string
	// CertFile and KeyFile are the PEM files of the client's certificate
	// and key, for a server that requires one (mutual TLS).
	CertFile, KeyFile string
	// Token is sent with every call as a bearer token (Authorization:
	// Bearer). It is refused over plain http:// to a host other than a
	// loopback one, where it would cross the network in clear text.
	Token string
}

// DialWith returns the store a Handler serves at baseURL, as Dial does,
// with o's TLS settings and token. Bad options or files are errors naming
// them; the server is met at the first call.
//
// A call the server refuses for want of a token, or with a wrong one, or
// whose client certificate it refuses, is an error wrapping
// ErrUnauthorized. A TLS failure (a certificate no trusted CA signed, an
// expired one, https:// to a plain HTTP server or http:// to a TLS one) is
// an error wrapping ErrRemote that says which.
func DialWith(baseURL string, o *DialOptions) (Differ, error) {
	if o == nil {
		o = &DialOptions{}
	}
	s, err := Dial(baseURL, o.Client)
	if err != nil {
		return nil, err
	}
	c := s.(*remote)
	u, _ := url.Parse(c.base)
	tlsFiles := o.CAFile != "" || o.CertFile != "" || o.KeyFile != ""
	switch {
	case tlsFiles && o.Client != nil:
		return nil, fmt.Errorf("semijoin: store %s: CA, certificate or key files given with a Client: set them in the Client's transport instead: %w", c.base, ErrBadRequest)
	case tlsFiles && u.Scheme != "https":
		return nil, fmt.Errorf("semijoin: store %s: CA, certificate or key files given for a plain http:// URL: use https://: %w", c.base, ErrBadRequest)
	case (o.CertFile == "") != (o.KeyFile == ""):
		return nil, fmt.Errorf("semijoin: client certificate: a certificate file and a key file go together (certificate %q, key %q): %w", o.CertFile, o.KeyFile, ErrBadRequest)
	case o.Token != "" && !validToken(o.Token):
		return nil, fmt.Errorf("semijoin: store %s: the token holds spaces or control characters: %w", c.base, ErrBadRequest)
	case o.Token != "" && u.Scheme == "http" && !isLoopback(u.Hostname()):
		return nil, fmt.Errorf("semijoin: store %s: a token is sent only over https://, or over http:// to a loopback host: it would cross the network in clear text: %w", c.base, ErrBadRequest)
	}
	c.caFile = o.CAFile
	if tlsFiles {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if o.CAFile != "" {
			if cfg.RootCAs, err = loadCAs(o.CAFile); err != nil {
				return nil, err
			}
		}
		if o.CertFile != "" {
			cert, err := tls.LoadX509KeyPair(o.CertFile, o.KeyFile)
			if err != nil {
				return nil, fmt.Errorf("semijoin: client certificate %s and key %s: %w", o.CertFile, o.KeyFile, err)
			}
			cfg.Certificates = []tls.Certificate{cert}
		}
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.TLSClientConfig = cfg
		// HTTP/1.1: each call is one request streaming its answer, and a
		// refused handshake then reports the server's alert as is.
		t.ForceAttemptHTTP2 = false
		c.hc = noRedirects(&http.Client{Transport: t})
	}
	if o.Token != "" {
		hc := *c.hc
		rt := hc.Transport
		if rt == nil {
			rt = http.DefaultTransport
		}
		hc.Transport = &bearer{rt: rt, token: "Bearer " + o.Token, scheme: u.Scheme, host: u.Host}
		c.hc = &hc
		c.hasToken = true
	}
	return c, nil
}

// isLoopback reports whether host names this machine: localhost or a
// loopback address.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// bearer adds a bearer token to the requests sent to one scheme and host,
// and to no other (a redirect elsewhere goes without it).
type bearer struct {
	rt           http.RoundTripper
	token        string
	scheme, host string
}

func (b *bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != b.scheme || req.URL.Host != b.host {
		return b.rt.RoundTrip(req)
	}
	r := req.Clone(req.Context())
	r.Header.Set("Authorization", b.token)
	return b.rt.RoundTrip(r)
}

// transportError describes err, met sending a request or reading its
// answer's headers: TLS failures in words, and a client certificate the
// server refused as ErrUnauthorized.
func (c *remote) transportError(e endpoint, err error) error {
	var (
		unknownCA x509.UnknownAuthorityError
		invalid   x509.CertificateInvalidError
		hostname  x509.HostnameError
		recordErr tls.RecordHeaderError
	)
	trusted := "the system's roots"
	if c.caFile != "" {
		trusted = "the CAs of " + c.caFile
	}
	msg := err.Error()
	switch {
	case errors.As(err, &unknownCA):
		return c.fail(e, ErrRemote, err, "TLS: the server's certificate is not signed by a CA trusted (%s): %v", trusted, err)
	case errors.As(err, &invalid) && invalid.Reason == x509.Expired:
		return c.fail(e, ErrRemote, err, "TLS: the server's certificate has expired or is not yet valid: %v", err)
	case errors.As(err, &invalid):
		return c.fail(e, ErrRemote, err, "TLS: the server's certificate is not valid: %v", err)
	case errors.As(err, &hostname):
		return c.fail(e, ErrRemote, err, "TLS: the server's certificate is not for this host: %v", err)
	case errors.As(err, &recordErr) || strings.Contains(msg, "server gave HTTP response to HTTPS client"):
		return c.fail(e, ErrRemote, err, "TLS: the server speaks plain HTTP, not TLS: use an http:// URL, or serve with a certificate: %v", err)
	case strings.Contains(msg, "tls: certificate required"):
		return c.fail(e, ErrUnauthorized, err, "TLS: the server requires a client certificate signed by a CA it trusts: none was given, or the one given is of a CA the server does not name: %v", err)
	case strings.Contains(msg, "remote error: tls: bad certificate"),
		strings.Contains(msg, "remote error: tls: unknown certificate authority"),
		strings.Contains(msg, "remote error: tls: expired certificate"),
		strings.Contains(msg, "remote error: tls: unknown certificate"),
		strings.Contains(msg, "remote error: tls: certificate revoked"),
		strings.Contains(msg, "remote error: tls: unsupported certificate"):
		return c.fail(e, ErrUnauthorized, err, "TLS: the server refused the client certificate (not signed by a CA it trusts, expired, or not for a client): %v", err)
	case strings.Contains(msg, "remote error: tls:"):
		return c.fail(e, ErrRemote, err, "TLS: the server refused the handshake: %v", err)
	}
	return c.fail(e, ErrRemote, err, "%v", err)
}

// httpToHTTPS is the start of the answer of Go's TLS server to a request
// in plain HTTP.
const httpToHTTPS = "Client sent an HTTP request to an HTTPS server"
