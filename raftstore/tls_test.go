package raftstore

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bloomkv/bloomkv/internal/testpki"
	"github.com/hashicorp/raft"
)

// testPKI is a CA and what it signed for the tests.
type testPKI struct{ *testpki.PKI }

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	p, err := testpki.New()
	if err != nil {
		t.Fatal(err)
	}
	return &testPKI{p}
}

// nodeTLS is a node's configuration: its certificate, the CA for both
// sides.
func (p *testPKI) nodeTLS() *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{p.Cert}, RootCAs: p.Pool, ClientCAs: p.Pool, MinVersion: tls.VersionTLS12}
}

// TestClusterTLS: three nodes with TLS and a token replicate, forward and
// compare; the API refuses a request without the token or over plain
// HTTP, and raft's port a connection without a certificate.
func TestClusterTLS(t *testing.T) {
	pki := newTestPKI(t)
	dir := t.TempDir()
	const token = "s3cret-token"
	var nodes []*Node
	defer func() {
		for _, n := range nodes {
			n.Close()
		}
	}()
	for i, id := range []string{"n1", "n2", "n3"} {
		o := Options{ID: id, Dir: filepath.Join(dir, id), RaftAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0",
			Bootstrap: i == 0, Fast: true, LogOutput: io.Discard, TLS: pki.nodeTLS(), Token: token}
		if i > 0 {
			o.Join = nodes[0].URL()
		}
		n, err := Open(o)
		if err != nil {
			t.Fatalf("open %s: %v", id, err)
		}
		nodes = append(nodes, n)
	}
	if !strings.HasPrefix(nodes[0].URL(), "https://") {
		t.Fatalf("URL %s of a TLS node", nodes[0].URL())
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b := &Batch{}
	b.Set([]byte("k"), []byte("v"))
	follower := nodes[1]
	if follower.Raft().State() == raft.Leader {
		follower = nodes[2]
	}
	if err := follower.Apply(ctx, b); err != nil { // forwarded over HTTPS with the token
		t.Fatal(err)
	}
	for _, n := range nodes {
		if v, err := n.Get(ctx, []byte("k"), Linearizable); err != nil || string(v) != "v" {
			t.Fatalf("%s: Get = %q, %v", n.ID(), v, err)
		}
	}
	st, err := nodes[0].Status(ctx)
	if err != nil || len(st.Servers) != 3 {
		t.Fatalf("Status = %+v, %v", st, err)
	}
	for _, s := range st.Servers {
		if s.Applied == 0 {
			t.Fatalf("no applied index from %s over HTTPS: %+v", s.ID, st.Servers)
		}
	}

	// The API: the token or nothing.
	anon := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pki.Pool}}}
	get := func(c *http.Client, u, tok string) (int, error) {
		req, _ := http.NewRequest(http.MethodGet, u, nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := c.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	// Linearizable: a stale read of a follower may come before it has
	// applied the write.
	u := nodes[2].URL() + "/kv/k?consistency=linearizable"
	if code, err := get(anon, u, ""); err != nil || code != http.StatusUnauthorized {
		t.Fatalf("no token: %d, %v; want 401", code, err)
	}
	if code, err := get(anon, u, "wrong"); err != nil || code != http.StatusUnauthorized {
		t.Fatalf("a wrong token: %d, %v; want 401", code, err)
	}
	if code, err := get(anon, u, token); err != nil || code != http.StatusOK {
		t.Fatalf("the token: %d, %v; want 200", code, err)
	}
	certified := &http.Client{Transport: &http.Transport{TLSClientConfig: pki.nodeTLS()}}
	if code, err := get(certified, u, ""); err != nil || code != http.StatusOK {
		t.Fatalf("a client certificate: %d, %v; want 200", code, err)
	}
	if code, err := get(http.DefaultClient, "http://"+nodes[2].HTTPAddr()+"/kv/k", token); err == nil && code == http.StatusOK {
		t.Fatal("plain HTTP was served")
	}

	// Raft's port: no certificate, no conversation.
	conn, err := tls.Dial("tcp", nodes[0].RaftAddr(), &tls.Config{RootCAs: pki.Pool})
	if err == nil {
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		conn.Write([]byte{0})
		_, err = conn.Read(make([]byte, 1))
		conn.Close()
	}
	if err == nil {
		t.Fatal("raft's transport answered a connection without a client certificate")
	}

	// Compare, from a node and from outside.
	rep, err := nodes[0].Compare(ctx, nodes[1].URL())
	if err != nil || len(rep.Differences) != 0 {
		t.Fatalf("Compare: %+v, %v", rep, err)
	}
	if _, err := CompareURLs(ctx, nodes[0].URL(), nodes[1].URL()); err == nil {
		t.Fatal("CompareURLs without the CA or the token succeeded")
	}
	rep, err = CompareURLsWith(ctx, nodes[0].URL(), nodes[1].URL(), &ClientOptions{Client: anon, Token: token})
	if err != nil || len(rep.Differences) != 0 {
		t.Fatalf("CompareURLsWith: %+v, %v", rep, err)
	}
}

// TestNodeTLSNeedsClientCAs: a TLS node without ClientCAs is refused, as is
// one whose raft address no other node could reach.
func TestNodeTLSNeedsClientCAs(t *testing.T) {
	pki := newTestPKI(t)
	conf := pki.nodeTLS()
	conf.ClientCAs = nil
	_, err := Open(Options{ID: "n1", Dir: t.TempDir(), RaftAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", Bootstrap: true, TLS: conf})
	if err == nil || !strings.Contains(err.Error(), "ClientCAs") {
		t.Fatalf("TLS without ClientCAs: %v", err)
	}
	_, err = Open(Options{ID: "n1", Dir: t.TempDir(), RaftAddr: "0.0.0.0:0", HTTPAddr: "127.0.0.1:0", Bootstrap: true,
		TLS: pki.nodeTLS(), LogOutput: io.Discard})
	if err == nil || !strings.Contains(err.Error(), "reach") {
		t.Fatalf("TLS on an unspecified raft address: %v", err)
	}
}
