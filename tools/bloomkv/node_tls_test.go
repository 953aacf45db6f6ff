package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bloomkv/bloomkv/internal/testpki"
)

// nodeCerts writes a CA and a node certificate and key (server and client
// use, for 127.0.0.1) into dir and returns their paths and the CA's pool.
func nodeCerts(t *testing.T, dir string) (ca, cert, key string, pool *x509.CertPool) {
	t.Helper()
	p, err := testpki.New()
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, data []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	return write("ca.pem", p.CAPEM), write("node.pem", p.CertPEM), write("node-key.pem", p.KeyPEM), p.Pool
}

// TestSecuredNodes runs two node processes with TLS and a token: one joins
// the other over HTTPS, writes need the token, and node compare reaches
// them with the CA and the token.
func TestSecuredNodes(t *testing.T) {
	bin := buildTool(t)
	dir := t.TempDir()
	ca, cert, key, pool := nodeCerts(t, dir)
	token := writeToken(t, dir, "token", "node-token-of-the-test", 0o600)
	sec := []string{"--tls-cert", cert, "--tls-key", key, "--ca", ca, "--token-file", token}
	n1 := &nodeProc{id: "n1", dir: filepath.Join(dir, "n1"), raft: freeAddr(t), http: freeAddr(t)}
	n2 := &nodeProc{id: "n2", dir: filepath.Join(dir, "n2"), raft: freeAddr(t), http: freeAddr(t)}
	n1.start(t, bin, append(sec, "--bootstrap")...)
	defer n1.kill()
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	call := func(method, u, body, tok string) (int, error) {
		req, _ := http.NewRequest(method, u, strings.NewReader(body))
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	base := func(p *nodeProc) string { return "https://" + p.http }
	const tok = "node-token-of-the-test"
	waitFor(t, "n1 serves HTTPS", 20*time.Second, func() bool {
		code, err := call("PUT", base(n1)+"/kv/k?timeout=2s", "v", tok)
		return err == nil && code == http.StatusNoContent
	})
	n2.start(t, bin, append(sec, "--join", base(n1))...)
	defer n2.kill()
	waitFor(t, "n2 joined and serves the write", 20*time.Second, func() bool {
		code, err := call("GET", base(n2)+"/kv/k?consistency=linearizable", "", tok)
		return err == nil && code == http.StatusOK
	})
	if code, err := call("PUT", base(n2)+"/kv/k", "x", ""); err != nil || code != http.StatusUnauthorized {
		t.Fatalf("a write without the token: %d, %v; want 401", code, err)
	}
	if code, err := call("GET", "http://"+n2.http+"/kv/k", "", tok); err == nil && code == http.StatusOK {
		t.Fatal("plain HTTP was served")
	}
	cmd := exec.Command(bin, "node", "compare", "--ca", ca, "--token-file", token, base(n1), base(n2))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil || !strings.Contains(out.String(), "0 differences") {
		t.Fatalf("node compare: %v\n%s", err, out.String())
	}
	cmd = exec.Command(bin, "node", "compare", base(n1), base(n2))
	out.Reset()
	cmd.Stdout, cmd.Stderr = &out, &out
	var ee *exec.ExitError
	if err := cmd.Run(); !errors.As(err, &ee) {
		t.Fatalf("node compare without the CA: %v\n%s", err, out.String())
	}
}
