package semijoin

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bloomkv/bloomkv"
	"github.com/bloomkv/bloomkv/internal/frame"
	"github.com/bloomkv/bloomkv/internal/testpki"
)

// pki holds the PEM files of a test's certificates: two CAs, a server
// certificate for 127.0.0.1 and localhost from the first, a client
// certificate from each, and an expired client certificate from the first.
type pki struct {
	dir                       string
	ca, otherCA               string
	serverCert, serverKey     string
	clientCert, clientKey     string
	otherClientCert, otherKey string
	expiredCert, expiredKey   string
}

func newPKI(t testing.TB) *pki {
	t.Helper()
	p := &pki{dir: t.TempDir()}
	ca, err := testpki.NewCA("test CA")
	if err != nil {
		t.Fatal(err)
	}
	other, err := testpki.NewCA("other CA")
	if err != nil {
		t.Fatal(err)
	}
	p.ca, p.otherCA = p.write(t, "ca.pem", ca.PEM), p.write(t, "other-ca.pem", other.PEM)
	hour := time.Now().Add(time.Hour)
	p.serverCert, p.serverKey = p.issue(t, ca, "server", hour, x509.ExtKeyUsageServerAuth)
	p.clientCert, p.clientKey = p.issue(t, ca, "client", hour, x509.ExtKeyUsageClientAuth)
	p.otherClientCert, p.otherKey = p.issue(t, other, "other-client", hour, x509.ExtKeyUsageClientAuth)
	p.expiredCert, p.expiredKey = p.issue(t, ca, "expired-client", time.Now().Add(-time.Hour), x509.ExtKeyUsageClientAuth)
	return p
}

// issue has ca sign a certificate named name and writes it and its key to
// PEM files named after it.
func (p *pki) issue(t testing.TB, ca *testpki.CA, name string, notAfter time.Time, usage x509.ExtKeyUsage) (certFile, keyFile string) {
	t.Helper()
	leaf, err := ca.Issue(name, notAfter, usage)
	if err != nil {
		t.Fatal(err)
	}
	return p.write(t, name+".pem", leaf.CertPEM), p.write(t, name+"-key.pem", leaf.KeyPEM)
}

// write writes data to the file name in p.dir and returns its path.
func (p *pki) write(t testing.TB, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(p.dir, name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// secureKeys is the number of B's keys, chosen so that its digits are
// unlikely in a refusal's text.
const secureKeys = 1237

const valueMarker = "VALUEMARKER-"

// secureSides returns the maps of A and B: B holds secureKeys keys whose
// values carry valueMarker; A most of them with the same values, some
// changed, some missing, and keys of its own.
func secureSides() (a, b map[string]string) {
	a, b = map[string]string{}, map[string]string{}
	for i := range secureKeys {
		k := fmt.Sprintf("key%05d", i)
		b[k] = fmt.Sprintf("%s%d", valueMarker, i)
		switch {
		case i%97 == 5:
			// only B
		case i%101 == 7:
			a[k] = fmt.Sprintf("changed-%d", i)
		default:
			a[k] = b[k]
		}
	}
	for i := range 9 {
		a[fmt.Sprintf("key%05d-a", i*131)] = fmt.Sprintf("only-a-%d", i)
	}
	return a, b
}

// storeOf returns a store holding m.
func storeOf(t testing.TB, m map[string]string) *bloomkv.DB {
	d := openStore(t)
	fill(t, d, m)
	return d
}

// startServer serves h with NewServer's server of o on a loopback port and
// returns its address, the server stopped at the end of the test.
func startServer(t testing.TB, h http.Handler, o *ServerOptions) string {
	t.Helper()
	if o == nil {
		o = &ServerOptions{}
	}
	if o.ErrorLog == nil {
		// Refused handshakes are logged: the tests make them on purpose.
		o.ErrorLog = log.New(io.Discard, "", 0)
	}
	srv, err := NewServer(h, o)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- Serve(srv, ln) }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
	return ln.Addr().String()
}

// tlsClient returns a client trusting p's CA with the given client
// certificate (none when certFile is empty).
func tlsClient(t testing.TB, p *pki, certFile, keyFile string) *http.Client {
	t.Helper()
	pool, err := loadCAs(p.ca)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &tls.Config{RootCAs: pool}
	if certFile != "" {
		c, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{c}
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
}

// rawPost posts a valid request to endpoint e with the given Authorization
// header (none when empty) and returns the response and its whole body.
func rawPost(t testing.TB, c *http.Client, base string, e endpoint, auth string) (*http.Response, []byte, error) {
	t.Helper()
	body := frame.AppendMessage(nil, (&request{}).append(nil))
	if e == epLookup {
		body = frame.AppendMessage(nil, (&request{has: set(pKeys, pValues), keys: [][]byte{[]byte("key00001")}, values: true}).append(nil))
	}
	req, err := http.NewRequest(http.MethodPost, base+pathPrefix+e.String(), bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, b, err
}

// checkNothingOfStore fails unless b says nothing of the store: no key, no
// value, not its number of keys.
func checkNothingOfStore(t testing.TB, what string, b []byte) {
	t.Helper()
	for _, s := range []string{"key0", valueMarker, fmt.Sprint(secureKeys), "changed-", "only-a"} {
		if bytes.Contains(b, []byte(s)) {
			t.Errorf("%s: the answer %q holds %q", what, b, s)
		}
	}
}

// TestSecureRefusals: a server with a token and mutual TLS refuses a
// request without a token, with a malformed or wrong one, with a client
// certificate of another CA, an expired one or none, and plain HTTP; each
// refusal's answer holds nothing of the store. The right token with a
// good certificate then joins and diffs exactly.
func TestSecureRefusals(t *testing.T) {
	p := newPKI(t)
	const token = "s3cret-token_value.42"
	ma, mb := secureSides()
	db := storeOf(t, mb)
	addr := startServer(t, LocalHandler(db, &HandlerOptions{Token: token}),
		&ServerOptions{CertFile: p.serverCert, KeyFile: p.serverKey, ClientCAFile: p.ca})
	base := "https://" + addr
	good := tlsClient(t, p, p.clientCert, p.clientKey)

	// Refusals by the handler: fixed bodies, before the endpoint or the
	// body is looked at.
	for _, tc := range []struct {
		what, auth string
		e          endpoint
		status     int
		body       string
	}{
		{"no token", "", epScan, 401, "unauthorized\n"},
		{"no token, lookup", "", epLookup, 401, "unauthorized\n"},
		{"another scheme", "Basic " + token, epScan, 401, "unauthorized\n"},
		{"no token after the scheme", "Bearer", epScan, 401, "unauthorized\n"},
		{"two tokens", "Bearer " + token + " " + token, epScan, 401, "unauthorized\n"},
		{"wrong token", "Bearer not-the-token", epScan, 403, "forbidden\n"},
		{"token's prefix", "Bearer " + token[:len(token)-1], epStats, 403, "forbidden\n"},
		{"token with more", "Bearer " + token + "x", epLookup, 403, "forbidden\n"},
		{"lower-case scheme, wrong token", "bearer x", epStats, 403, "forbidden\n"},
	} {
		resp, body, err := rawPost(t, good, base, tc.e, tc.auth)
		if err != nil {
			t.Fatalf("%s: %v", tc.what, err)
		}
		if resp.StatusCode != tc.status || string(body) != tc.body {
			t.Errorf("%s: %d %q, want %d %q", tc.what, resp.StatusCode, body, tc.status, tc.body)
		}
		if tc.status == 401 && resp.Header.Get("WWW-Authenticate") != "Bearer" {
			t.Errorf("%s: WWW-Authenticate %q", tc.what, resp.Header.Get("WWW-Authenticate"))
		}
		checkNothingOfStore(t, tc.what, body)
	}
	// Unknown endpoints and methods are refused for the token first.
	for _, path := range []string{"/", "/semijoin/v1/nothing", pathPrefix + "scan?x=1"} {
		resp, err := good.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 401 || string(body) != "unauthorized\n" {
			t.Errorf("GET %s: %d %q", path, resp.StatusCode, body)
		}
	}

	// The same refusals through DialWith.
	ctx := context.Background()
	dialErr := func(what, url string, o *DialOptions, want error, words string) {
		t.Helper()
		s, err := DialWith(url, o)
		if err == nil {
			_, err = s.Stats(ctx, KeyRange{}, nil)
		}
		if !errors.Is(err, want) || !strings.Contains(err.Error(), words) {
			t.Errorf("%s: %v, want an error wrapping %v saying %q", what, err, want, words)
		}
		if err != nil {
			checkNothingOfStore(t, what, []byte(err.Error()))
		}
	}
	full := DialOptions{CAFile: p.ca, CertFile: p.clientCert, KeyFile: p.clientKey, Token: token}
	with := func(f func(o *DialOptions)) *DialOptions {
		o := full
		f(&o)
		return &o
	}
	dialErr("no token", base, with(func(o *DialOptions) { o.Token = "" }), ErrUnauthorized, "needs a token")
	dialErr("wrong token", base, with(func(o *DialOptions) { o.Token = "wrong" }), ErrUnauthorized, "refused the token")
	dialErr("client certificate of another CA", base, with(func(o *DialOptions) { o.CertFile, o.KeyFile = p.otherClientCert, p.otherKey }),
		ErrUnauthorized, "client certificate")
	dialErr("expired client certificate", base, with(func(o *DialOptions) { o.CertFile, o.KeyFile = p.expiredCert, p.expiredKey }),
		ErrUnauthorized, "refused the client certificate")
	dialErr("no client certificate", base, with(func(o *DialOptions) { o.CertFile, o.KeyFile = "", "" }),
		ErrUnauthorized, "requires a client certificate")
	dialErr("server of an untrusted CA", base, with(func(o *DialOptions) { o.CAFile = p.otherCA }), ErrRemote, "not signed by a CA trusted")
	dialErr("no CA: the system's roots", base, with(func(o *DialOptions) { o.CAFile = "" }), ErrRemote, "not signed by a CA trusted")
	dialErr("plain HTTP to the TLS port", "http://"+addr, &DialOptions{Token: token}, ErrRemote, "speaks TLS: use an https:// URL")

	// Refusals in the handshake: no answer at all.
	for _, tc := range []struct {
		what string
		c    *http.Client
	}{
		{"client certificate of another CA", tlsClient(t, p, p.otherClientCert, p.otherKey)},
		{"expired client certificate", tlsClient(t, p, p.expiredCert, p.expiredKey)},
		{"no client certificate", tlsClient(t, p, "", "")},
	} {
		resp, body, err := rawPost(t, tc.c, base, epScan, "Bearer "+token)
		if err == nil {
			t.Errorf("%s: %d %q, want a failed handshake", tc.what, resp.StatusCode, body)
		}
	}
	// Plain HTTP to the TLS port: Go's TLS server answers 400 with a fixed
	// text of its own.
	resp, body, err := rawPost(t, http.DefaultClient, "http://"+addr, epScan, "Bearer "+token)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("plain HTTP to the TLS port: %d %q", resp.StatusCode, body)
	}
	checkNothingOfStore(t, "plain HTTP to the TLS port", body)

	// Accepted: the right token, over TLS, with a good certificate.
	b, err := DialWith(base, &full)
	if err != nil {
		t.Fatal(err)
	}
	a := Local(storeOf(t, ma), Limits{})
	for s := Auto; s <= TwoWay; s++ {
		got, rep := collect(t, a, b, &Options{Strategy: s, BatchKeys: 300})
		if want := modelJoin(ma, mb, KeyRange{}, false); !sameMatches(got, want) || rep.KeysOnlyB {
			t.Errorf("%v: %d matches, want %d (keys-only %v)", s, len(got), len(want), rep.KeysOnlyB)
		}
	}
	got, _ := collectDiff(t, a, b, nil)
	if want := modelDiff(ma, mb); !sameDifferences(got, want) {
		t.Errorf("Diff: %d differences, want %d", len(got), len(want))
	}
}

func sameDifferences(x, y []Difference) bool {
	if len(x) != len(y) {
		return false
	}
	for i := range x {
		p, q := x[i], y[i]
		if p.Kind != q.Kind || !bytes.Equal(p.Key, q.Key) || !bytes.Equal(p.A, q.A) || !bytes.Equal(p.B, q.B) || (p.B == nil) != (q.B == nil) {
			return false
		}
	}
	return true
}

// TestHTTPSToPlainServer: https:// to a server of plain HTTP fails saying
// so.
func TestHTTPSToPlainServer(t *testing.T) {
	p := newPKI(t)
	addr := startServer(t, LocalHandler(openStore(t), nil), nil)
	s, err := DialWith("https://"+addr, &DialOptions{CAFile: p.ca})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Stats(context.Background(), KeyRange{}, nil)
	if !errors.Is(err, ErrRemote) || !strings.Contains(err.Error(), "speaks plain HTTP") {
		t.Fatalf("%v", err)
	}
}

// TestDialWithOptions: options that cannot work are refused before any
// call, naming the file or saying why; a token goes over plain HTTP only
// to a loopback host.
func TestDialWithOptions(t *testing.T) {
	p := newPKI(t)
	missing := filepath.Join(t.TempDir(), "missing.pem")
	notPEM := filepath.Join(t.TempDir(), "not.pem")
	os.WriteFile(notPEM, []byte("not a certificate\n"), 0o600)
	for _, tc := range []struct {
		url   string
		o     DialOptions
		words string
	}{
		{"http://db.example:8080", DialOptions{Token: "t"}, "clear text"},
		{"http://10.1.2.3:8080", DialOptions{Token: "t"}, "clear text"},
		{"https://db.example", DialOptions{Token: "two words"}, "spaces or control characters"},
		{"https://db.example", DialOptions{CAFile: missing}, missing},
		{"https://db.example", DialOptions{CAFile: notPEM}, notPEM},
		{"https://db.example", DialOptions{CertFile: missing, KeyFile: p.clientKey}, missing},
		{"https://db.example", DialOptions{CertFile: p.clientCert}, "go together"},
		{"http://127.0.0.1:1", DialOptions{CAFile: p.ca}, "plain http://"},
		{"https://db.example", DialOptions{CAFile: p.ca, Client: &http.Client{}}, "Client's transport"},
	} {
		if _, err := DialWith(tc.url, &tc.o); err == nil || !strings.Contains(err.Error(), tc.words) {
			t.Errorf("%s %+v: %v, want an error saying %q", tc.url, tc.o, err, tc.words)
		}
	}
	for _, url := range []string{"http://127.0.0.1:1", "http://localhost:1", "http://[::1]:1", "https://db.example"} {
		if _, err := DialWith(url, &DialOptions{Token: "t"}); err != nil {
			t.Errorf("%s: %v", url, err)
		}
	}
}

// TestNewServerOptions: bad files are errors naming them; every timeout
// is set, the write timeout per frame rather than the server's.
func TestNewServerOptions(t *testing.T) {
	p := newPKI(t)
	missing := filepath.Join(t.TempDir(), "missing.pem")
	for _, tc := range []struct {
		o     ServerOptions
		words string
	}{
		{ServerOptions{CertFile: missing, KeyFile: p.serverKey}, missing},
		{ServerOptions{CertFile: p.serverCert, KeyFile: p.clientKey}, p.serverCert},
		{ServerOptions{CertFile: p.serverCert, KeyFile: p.serverKey, ClientCAFile: missing}, missing},
		{ServerOptions{CertFile: p.serverCert, KeyFile: p.serverKey, ClientCAFile: p.serverKey}, p.serverKey},
		{ServerOptions{ClientCAFile: p.ca}, "go together"},
		{ServerOptions{CertFile: p.serverCert}, "go together"},
	} {
		if _, err := NewServer(http.NotFoundHandler(), &tc.o); err == nil || !strings.Contains(err.Error(), tc.words) {
			t.Errorf("%+v: %v, want an error naming %q", tc.o, err, tc.words)
		}
	}
	srv, err := NewServer(http.NotFoundHandler(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if srv.ReadHeaderTimeout != DefaultReadHeaderTimeout || srv.ReadTimeout != DefaultReadTimeout ||
		srv.IdleTimeout != DefaultIdleTimeout || srv.WriteTimeout != 0 || srv.TLSConfig != nil {
		t.Errorf("timeouts %v %v %v %v", srv.ReadHeaderTimeout, srv.ReadTimeout, srv.IdleTimeout, srv.WriteTimeout)
	}
	srv, err = NewServer(http.NotFoundHandler(), &ServerOptions{CertFile: p.serverCert, KeyFile: p.serverKey, ClientCAFile: p.ca})
	if err != nil {
		t.Fatal(err)
	}
	if c := srv.TLSConfig; c == nil || c.MinVersion != tls.VersionTLS12 || c.ClientAuth != tls.RequireAndVerifyClientCert || c.CipherSuites != nil {
		t.Errorf("TLS config %+v", c)
	}
}

// TestReadTokenFile: the token without surrounding whitespace; an empty
// file, a missing one or two words are errors naming the file.
func TestReadTokenFile(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		content, want string
	}{
		{"abc123\n", "abc123"},
		{"  \tabc-_.~+/=\r\n\n", "abc-_.~+/="},
		{"", ""},
		{" \n\t", ""},
		{"two words\n", ""},
		{"line\nline\n", ""},
	} {
		path := filepath.Join(dir, "token")
		if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := ReadTokenFile(path)
		switch {
		case tc.want == "" && (err == nil || !strings.Contains(err.Error(), path)):
			t.Errorf("%q: %q, %v: want an error naming the file", tc.content, got, err)
		case tc.want != "" && (err != nil || got != tc.want):
			t.Errorf("%q: %q, %v: want %q", tc.content, got, err, tc.want)
		}
		if err != nil && tc.content != "" && strings.Contains(err.Error(), strings.TrimSpace(tc.content)) && strings.TrimSpace(tc.content) != "" {
			t.Errorf("%q: the error %q shows the token", tc.content, err)
		}
	}
	if _, err := ReadTokenFile(filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("missing file: %v", err)
	}
}

// TestDialFollowsNoRedirect: a store's answer that redirects elsewhere is
// not followed, so a request's body (keys, filters) never goes to the host
// the redirect names; a URL with credentials is refused, since errors name
// the URL.
func TestDialFollowsNoRedirect(t *testing.T) {
	var reached atomic.Int32
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reached.Add(1) }))
	defer elsewhere.Close()
	redirecting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer redirecting.Close()
	for _, o := range []*DialOptions{nil, {Client: &http.Client{}}, {Token: "t0ken"}} {
		s, err := DialWith(redirecting.URL, o)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Lookup(context.Background(), KeyRange{}, [][]byte{[]byte("private-key")}, true, func(k, v []byte) error { return nil }); err == nil {
			t.Errorf("%+v: a redirected lookup succeeded", o)
		}
	}
	if n := reached.Load(); n != 0 {
		t.Errorf("the redirect's target got %d requests", n)
	}
	if _, err := Dial("http://user:secret@127.0.0.1:1/", nil); !errors.Is(err, ErrBadRequest) || strings.Contains(err.Error(), "secret") {
		t.Errorf("a URL with credentials: %v", err)
	}
}
