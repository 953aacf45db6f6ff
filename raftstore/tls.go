package raftstore

// Raft's transport over TLS, and the HTTP API's authentication.

import (
	"crypto/subtle"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// tlsStream is a raft.StreamLayer over TLS: it accepts connections whose
// client certificates the listener's configuration verifies, and dials
// with the node's certificate, verifying the other node's.
type tlsStream struct {
	net.Listener
	dial *tls.Config
	addr net.Addr
}

// Dial connects to the node at address (raft.StreamLayer).
func (s *tlsStream) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	d := &net.Dialer{Timeout: timeout}
	return tls.DialWithDialer(d, "tcp", string(address), s.dial)
}

// Addr is the address other nodes reach this one at.
func (s *tlsStream) Addr() net.Addr { return s.addr }

// newTLSTransport starts raft's network transport on addr over TLS with
// conf (conf.ClientCAs verifies the nodes that connect).
func newTLSTransport(addr string, conf *tls.Config, logger hclog.Logger) (*raft.NetworkTransport, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	tcpAddr, ok := ln.Addr().(*net.TCPAddr)
	if !ok || tcpAddr.IP == nil || tcpAddr.IP.IsUnspecified() {
		ln.Close()
		return nil, fmt.Errorf("%s is not an address other nodes can reach: bind a specific one", ln.Addr())
	}
	server := conf.Clone()
	server.ClientAuth = tls.RequireAndVerifyClientCert
	stream := &tlsStream{Listener: tls.NewListener(ln, server), dial: conf.Clone(), addr: tcpAddr}
	return raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: stream, MaxPool: 3, Timeout: 10 * time.Second, Logger: logger,
	}), nil
}

// authorize wraps h with the node's authentication: with a token set, a
// request must carry it or present a client certificate the HTTP API's
// TLS verified.
func (n *Node) authorize(h http.Handler) http.Handler {
	if n.opts.Token == "" {
		return h
	}
	want := []byte("Bearer " + n.opts.Token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 {
			h.ServeHTTP(w, r)
			return
		}
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="bloomkv node"`)
			http.Error(w, "raftstore: missing or wrong bearer token", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}
