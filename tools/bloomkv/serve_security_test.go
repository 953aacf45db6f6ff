package main

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bloomkv/bloomkv/internal/testpki"
)

// testPKI is a CA, a server certificate for 127.0.0.1 and a client
// certificate, both signed by the CA, a second CA and a client certificate
// it signed, as PEM files in a temporary directory, and a token file.
type testPKI struct {
	dir                       string
	ca, otherCA               string
	serverCert, serverKey     string
	clientCert, clientKey     string
	strangerCert, strangerKey string // signed by otherCA
	tokenF                    string // a token file, mode 0600
}

// newTestPKI writes a testPKI into t.TempDir().
func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	dir := t.TempDir()
	p := &testPKI{dir: dir}
	write := func(name string, data []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	newCA := func(name string) *testpki.CA {
		ca, err := testpki.NewCA(name)
		if err != nil {
			t.Fatal(err)
		}
		return ca
	}
	ca, other := newCA("bloomkv test CA"), newCA("another CA")
	p.ca, p.otherCA = write("ca.pem", ca.PEM), write("other-ca.pem", other.PEM)
	leaf := func(name string, usage x509.ExtKeyUsage, ca *testpki.CA) (cert, key string) {
		l, err := ca.Issue(name, time.Now().Add(time.Hour), usage)
		if err != nil {
			t.Fatal(err)
		}
		return write(name+".pem", l.CertPEM), write(name+"-key.pem", l.KeyPEM)
	}
	p.serverCert, p.serverKey = leaf("server", x509.ExtKeyUsageServerAuth, ca)
	p.clientCert, p.clientKey = leaf("client", x509.ExtKeyUsageClientAuth, ca)
	p.strangerCert, p.strangerKey = leaf("stranger", x509.ExtKeyUsageClientAuth, other)
	p.tokenF = writeToken(t, dir, "token", "s3cret-token-of-the-test", 0o600)
	return p
}

// writeToken writes a token file of the given mode and returns its path.
func writeToken(t *testing.T, dir, name, token string, mode os.FileMode) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(token+"\n"), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil { // past the umask
		t.Fatal(err)
	}
	return path
}

var anyServingLine = regexp.MustCompile(`serving .* \((read-only|writable)[^)]*\) at (https?://\S+); stop with Ctrl-C\n`)

// startServe runs serve in-process with args and returns the URL it
// printed and a function that stops it and returns its exit status and
// output.
func startServe(t *testing.T, args ...string) (url string, stop func() (code int, stdout, stderr string)) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var out, errOut syncBuffer
	exit := make(chan int, 1)
	go func() { exit <- runContext(ctx, append([]string{"serve"}, args...), &out, &errOut) }()
	var once sync.Once
	var code int
	stop = func() (int, string, string) {
		once.Do(func() {
			cancel()
			select {
			case code = <-exit:
			case <-time.After(15 * time.Second):
				t.Error("serve did not stop")
			}
		})
		return code, out.String(), errOut.String()
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if m := anyServingLine.FindStringSubmatch(out.String()); m != nil {
			t.Cleanup(func() { stop() })
			return m[2], stop
		}
		select {
		case code = <-exit:
			once.Do(func() {})
			t.Fatalf("serve %v exited %d: stdout %q, stderr %q", args, code, out.String(), errOut.String())
		default:
		}
	}
	c, o, e := stop()
	t.Fatalf("serve %v printed no serving line: exit %d, stdout %q, stderr %q", args, c, o, e)
	return "", nil
}

// TestServeAddressCheck: serve refuses an address that is not loopback
// unless it has TLS and authentication, or --insecure; --insecure warns at
// start of what it exposes.
func TestServeAddressCheck(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:0": true, "127.9.8.7:80": true, "[::1]:7380": true, "localhost:1": true, "LOCALHOST:1": true,
		"[::ffff:127.0.0.1]:1": true, "0.0.0.0:0": false, ":7380": false, "[::]:0": false, "192.168.1.5:80": false,
		"example.com:80": false, "10.0.0.1:0": false, "[fe80::1%lo]:0": false,
	} {
		if got, err := isLoopbackAddr(addr); err != nil || got != want {
			t.Errorf("isLoopbackAddr(%q) = %v, %v; want %v", addr, got, err, want)
		}
	}
	p := newTestPKI(t)
	for _, c := range []struct {
		flags serveFlags
		ok    bool
	}{
		{serveFlags{addr: "0.0.0.0:0"}, false},
		{serveFlags{addr: "192.0.2.1:7380", tlsCert: p.serverCert, tlsKey: p.serverKey}, false},
		{serveFlags{addr: "192.0.2.1:7380", tokenFile: p.tokenF}, false},
		{serveFlags{addr: ":7380", tlsCert: p.serverCert, tlsKey: p.serverKey, tokenFile: p.tokenF}, true},
		{serveFlags{addr: "[::]:7380", tlsCert: p.serverCert, tlsKey: p.serverKey, clientCA: p.ca}, true},
		{serveFlags{addr: "0.0.0.0:0", insecure: true}, true},
		{serveFlags{addr: "127.0.0.1:0"}, true},
		{serveFlags{addr: "127.0.0.1:0", tlsCert: p.serverCert}, false},
		{serveFlags{addr: "127.0.0.1:0", clientCA: p.ca}, false},
	} {
		if err := c.flags.check(); (err == nil) != c.ok {
			t.Errorf("%+v: %v", c.flags, err)
		}
	}
	a, _, _, _ := twoStores(t)
	for _, args := range [][]string{
		{"--addr", "0.0.0.0:0"},
		{"--addr", ":0"},
		{"--addr", "192.0.2.1:7380", "--tls-cert", p.serverCert, "--tls-key", p.serverKey},
	} {
		out, errOut, code := runTool(append(append([]string{"serve"}, args...), a)...)
		if code != 2 || out != "" || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, "is not a loopback address") ||
			!strings.Contains(errOut, "--insecure") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out, errOut)
		}
	}
	// --insecure on 0.0.0.0: serve starts and warns. The test binds
	// loopback in its place.
	listen = func(network, addr string) (net.Listener, error) { return net.Listen(network, "127.0.0.1:0") }
	defer func() { listen = net.Listen }()
	_, stop := startServe(t, "--addr", "0.0.0.0:0", "--insecure", a)
	code, out, errOut := stop()
	if code != 0 || !strings.HasSuffix(out, "stopped serving "+a+"\n") || errOut !=
		"bloomkv: warning: serving without TLS or authentication on a non-loopback address (0.0.0.0:0): anyone who reaches it can read the store\n" {
		t.Errorf("--insecure: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	_, stop = startServe(t, "--addr", "0.0.0.0:0", "--insecure", "--keys-only", "--token-file", p.tokenF, a)
	if code, _, errOut := stop(); code != 0 || !strings.Contains(errOut, "without TLS on a non-loopback address (0.0.0.0:0): the token and the store's keys cross the network in clear text") {
		t.Errorf("--insecure --token-file --keys-only: exit %d, stderr %q", code, errOut)
	}
}

// TestServeTLS serves a store over mutual TLS with a token and joins,
// estimates and diffs against it with --ca, --cert, --key and
// --token-file; a wrong token, a missing client certificate or one from
// another CA is refused in one line.
func TestServeTLS(t *testing.T) {
	p := newTestPKI(t)
	a, b, ma, mb := twoStores(t)
	url, stop := startServe(t, "--addr", "127.0.0.1:0", "--tls-cert", p.serverCert, "--tls-key", p.serverKey,
		"--client-ca", p.ca, "--token-file", p.tokenF, b)
	if !strings.HasPrefix(url, "https://127.0.0.1:") {
		t.Fatalf("URL %q", url)
	}
	client := []string{"--ca", p.ca, "--cert", p.clientCert, "--key", p.clientKey, "--token-file", p.tokenF}
	want := joinLines(ma, mb, "", "", false)
	for _, s := range []string{"auto", "keys", "filter"} {
		out, report, code := runTool(append(append([]string{"join", "--strategy", s}, client...), a, url)...)
		if got := recordLines(out); code != 0 || !slices.Equal(got, want) || !strings.HasPrefix(report, "join of ") {
			t.Errorf("join --strategy %s over TLS: exit %d, stderr %q:\n%s", s, code, report, out)
		}
	}
	if out, errOut, code := runTool(append(append([]string{"--json", "estimate"}, client...), a, url)...); code != 0 || !strings.Contains(out, `"a":101,"b":101`) {
		t.Errorf("estimate over TLS: exit %d, %q %q", code, out, errOut)
	}
	cp := filepath.Join(t.TempDir(), "copy")
	copyDir(t, b, cp)
	if out, rep, code := runTool(append(append([]string{"--json", "diff"}, client...), url, cp)...); code != 0 || out != "" || !strings.Contains(rep, `"differences":0`) {
		t.Errorf("diff over TLS: exit %d, %q %q", code, out, rep)
	}

	wrong := writeToken(t, t.TempDir(), "wrong", "not-the-token", 0o600)
	for _, c := range []struct {
		name  string
		flags []string
		msg   string
	}{
		{"wrong token", []string{"--ca", p.ca, "--cert", p.clientCert, "--key", p.clientKey, "--token-file", wrong}, "refused"},
		{"no token", []string{"--ca", p.ca, "--cert", p.clientCert, "--key", p.clientKey}, "refused"},
		{"no client certificate", []string{"--ca", p.ca, "--token-file", p.tokenF}, url[len("https://"):]},
		{"a client certificate of another CA", []string{"--ca", p.ca, "--cert", p.strangerCert, "--key", p.strangerKey, "--token-file", p.tokenF}, url[len("https://"):]},
		{"the server's CA not trusted", []string{"--ca", p.otherCA, "--cert", p.clientCert, "--key", p.clientKey, "--token-file", p.tokenF}, "certificate"},
	} {
		out, errOut, code := runTool(append(append([]string{"join"}, c.flags...), a, url)...)
		if code != 1 || out != "" || strings.Count(errOut, "\n") != 1 || !strings.HasPrefix(errOut, "bloomkv: ") || !strings.Contains(errOut, c.msg) {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit 1 and one line naming %q", c.name, code, out, errOut, c.msg)
		}
		if strings.Contains(errOut, "s3cret") || strings.Contains(errOut, "not-the-token") {
			t.Errorf("%s: stderr shows a token: %q", c.name, errOut)
		}
	}
	// The client's flags checked before any store is opened.
	for _, args := range [][]string{
		{"join", "--cert", p.clientCert, a, url},
		{"join", "--token-file", p.tokenF, a, a},
	} {
		if _, errOut, code := runTool(args...); code != 2 || strings.Count(errOut, "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q", args, code, errOut)
		}
	}
	// The server logs the handshakes it refused, and nothing else.
	code, out, errOut := stop()
	for _, l := range recordLines(errOut) {
		if !strings.HasPrefix(l, "bloomkv: serve: http: TLS handshake error from 127.0.0.1:") {
			t.Errorf("serve's stderr: %q", l)
		}
	}
	if code != 0 || !strings.HasSuffix(out, "stopped serving "+b+"\n") {
		t.Errorf("serve: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// TestServeKeysOnly: join against a keys-only store prints the matching
// keys with A's values and says B served keys only, diff prints the
// differing keys, and no output holds a value of B's.
func TestServeKeysOnly(t *testing.T) {
	a, _, ma, mb := twoStores(t)
	// B's values carry a marker no output may show.
	for k, v := range mb {
		mb[k] = "BVALUE-" + v
	}
	b := writeKV(t, mb)
	url, stop := startServe(t, "--addr", "127.0.0.1:0", "--keys-only", b)
	want := joinLines(ma, mb, "", "", true)
	var all strings.Builder
	for _, s := range []string{"auto", "keys", "filter", "compressed", "two-way"} {
		out, report, code := runTool("join", "--strategy", s, a, url)
		all.WriteString(out + report)
		if got := recordLines(out); code != 0 || !slices.Equal(got, want) {
			t.Errorf("join --strategy %s against keys only: exit %d, stderr %q:\n%s", s, code, report, out)
		}
		if !strings.Contains(report, "B served keys only") {
			t.Errorf("%s: report:\n%s", s, report)
		}
	}
	out, report, code := runTool("--json", "join", a, url)
	all.WriteString(out + report)
	var rep joinOut
	if err := json.Unmarshal([]byte(report), &rep); err != nil || code != 0 || !rep.KeysOnlyB || len(recordLines(out)) != len(want) ||
		strings.Contains(out, `"b":`) {
		t.Errorf("--json: exit %d, report %s (%v):\n%s", code, report, err, out)
	}
	out, report, code = runTool("join", "--semi", a, url)
	all.WriteString(out + report)
	if code != 0 || !slices.Equal(recordLines(out), want) {
		t.Errorf("--semi: exit %d, %q:\n%s", code, report, out)
	}
	// diff finds the differing keys, without B's values.
	out, report, code = runTool("diff", a, url)
	all.WriteString(out + report)
	if code != 0 || !strings.Contains(out, "\nonly-b \"user102\"\n") || !strings.Contains(out, "changed \"user000\" \"a0\"\n") {
		t.Errorf("diff: exit %d, %q:\n%s", code, report, out)
	}
	if strings.Contains(all.String(), "BVALUE") {
		t.Errorf("a value of B's in the output:\n%s", all.String())
	}
	code, sout, serr := stop()
	if code != 0 || serr != "" || !strings.Contains(sout, "(read-only, keys only)") {
		t.Errorf("serve: exit %d, stdout %q, stderr %q", code, sout, serr)
	}
}

// TestTokenFileReadable: serve warns when --token-file is readable by
// every user.
func TestTokenFileReadable(t *testing.T) {
	_, b, _, _ := twoStores(t)
	tok := writeToken(t, t.TempDir(), "token", "open-token", 0o644)
	_, stop := startServe(t, "--addr", "127.0.0.1:0", "--token-file", tok, b)
	if code, _, errOut := stop(); code != 0 || errOut != "bloomkv: warning: --token-file "+tok+" is open to other users (mode 0644); chmod 600 it\n" {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
}

// TestOneTokenOneServer: --token-file is refused when A and B are two
// servers, since the token of one would go to the other; each side then
// takes its own with --token-file-a and --token-file-b, which only a URL
// side accepts.
func TestOneTokenOneServer(t *testing.T) {
	dir := t.TempDir()
	tok := filepath.Join(dir, "tok")
	if err := os.WriteFile(tok, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"join", "--token-file", tok, "https://a.example:7380", "https://b.example:7380"}, "--token-file would send one token to two servers, https://a.example:7380 and https://b.example:7380"},
		{[]string{"diff", "--token-file", tok, "http://127.0.0.1:1", "http://127.0.0.1:2"}, "give each its own with --token-file-a and --token-file-b"},
		{[]string{"join", "--token-file-a", tok, dir, "https://b.example:7380"}, "--token-file-a is for a served store"},
		{[]string{"join", "--token-file", tok, "--token-file-b", tok, "https://b.example:7380", dir}, "not both"},
	} {
		_, errOut, code := runTool(c.args...)
		if code != exitUsage || !strings.Contains(errOut, c.want) || strings.Contains(errOut, "s3cret") {
			t.Errorf("%v: exit %d, %q", c.args, code, errOut)
		}
	}
}
