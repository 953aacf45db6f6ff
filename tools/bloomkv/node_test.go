package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// freeAddr returns a loopback address with a port free at the time.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// nodeProc is a bloomkv node process.
type nodeProc struct {
	id, dir, raft, http string
	cmd                 *exec.Cmd
	log                 bytes.Buffer
}

func (p *nodeProc) url() string { return "http://" + p.http }

func (p *nodeProc) start(t *testing.T, bin string, extra ...string) {
	t.Helper()
	args := append([]string{"node", "--id", p.id, "--dir", p.dir, "--raft", p.raft, "--http", p.http}, extra...)
	p.cmd = exec.Command(bin, args...)
	p.log.Reset()
	p.cmd.Stdout, p.cmd.Stderr = &p.log, &p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
}

func (p *nodeProc) kill() {
	if p.cmd != nil && p.cmd.Process != nil {
		p.cmd.Process.Kill()
		p.cmd.Wait()
		p.cmd = nil
	}
}

type clusterStatus struct {
	State   string `json:"state"`
	Applied uint64 `json:"applied_index"`
}

func status(p *nodeProc) (*clusterStatus, error) {
	resp, err := http.Get(p.url() + "/cluster?local=1")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var st clusterStatus
	return &st, json.NewDecoder(resp.Body).Decode(&st)
}

func waitFor(t *testing.T, what string, d time.Duration, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func put(u, key, val string) error {
	req, _ := http.NewRequest(http.MethodPut, u+"/kv/"+key+"?timeout=2s", strings.NewReader(val))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusNoContent {
		return fmt.Errorf("%s", resp.Status)
	}
	return nil
}

// TestNodeKill9 runs three node processes under writes, kills them with
// SIGKILL and restarts them: every acknowledged write ends on every node,
// and node compare finds no difference.
func TestNodeKill9(t *testing.T) {
	bin := buildTool(t)
	dir := t.TempDir()
	var ps []*nodeProc
	for i := 1; i <= 3; i++ {
		ps = append(ps, &nodeProc{id: fmt.Sprintf("n%d", i), dir: filepath.Join(dir, fmt.Sprintf("n%d", i)), raft: freeAddr(t), http: freeAddr(t)})
	}
	defer func() {
		for _, p := range ps {
			p.kill()
		}
	}()
	ps[0].start(t, bin, "--bootstrap")
	waitFor(t, "n1 leads", 20*time.Second, func() bool {
		st, err := status(ps[0])
		return err == nil && st.State == "Leader"
	})
	for _, p := range ps[1:] {
		p.start(t, bin, "--join", ps[0].url())
	}

	var mu sync.Mutex
	acked := map[string]string{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := 0; g < 3; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 3))
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				k, v := fmt.Sprintf("g%d-%05d", g, i), fmt.Sprintf("v%d", i)
				if put(ps[rng.IntN(3)].url(), k, v) == nil {
					mu.Lock()
					acked[k] = v
					mu.Unlock()
				} else {
					time.Sleep(20 * time.Millisecond)
				}
			}
		}()
	}
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }
	more := func(n int) {
		want := count() + n
		waitFor(t, fmt.Sprintf("%d acknowledged writes", want), 90*time.Second, func() bool { return count() >= want })
	}
	more(50)
	// Kill the leader, then a follower, each with SIGKILL mid-writes, and
	// restart them on their directories.
	for round := 0; round < 2; round++ {
		var victim *nodeProc
		for _, p := range ps {
			st, err := status(p)
			if err == nil && (st.State == "Leader") == (round == 0) {
				victim = p
				break
			}
		}
		if victim == nil {
			t.Fatalf("round %d: no node to kill", round)
		}
		victim.kill()
		more(50)
		victim.start(t, bin)
		more(50)
	}
	close(stop)
	wg.Wait()

	// A last write through the leader; then every node applies up to it.
	var leaderApplied uint64
	waitFor(t, "a final write", 20*time.Second, func() bool {
		for _, p := range ps {
			st, err := status(p)
			if err == nil && st.State == "Leader" && put(p.url(), "final", "x") == nil {
				st, err = status(p)
				leaderApplied = st.Applied
				return err == nil
			}
		}
		return false
	})
	waitFor(t, "nodes converge", 30*time.Second, func() bool {
		for _, p := range ps {
			st, err := status(p)
			if err != nil || st.Applied < leaderApplied {
				return false
			}
		}
		return true
	})
	t.Logf("%d writes acknowledged", len(acked))
	for _, p := range ps {
		for k, v := range acked {
			resp, err := http.Get(p.url() + "/kv/" + k)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || string(b) != v {
				t.Fatalf("%s: acknowledged %s=%s reads %s %q", p.id, k, v, resp.Status, b)
			}
		}
	}
	for _, pair := range [][2]*nodeProc{{ps[0], ps[1]}, {ps[1], ps[2]}} {
		out, err := exec.Command(bin, "node", "compare", pair[0].url(), pair[1].url()).CombinedOutput()
		if err != nil || !strings.Contains(string(out), ": 0 differences") {
			t.Fatalf("node compare %s %s: %v\n%s", pair[0].id, pair[1].id, err, out)
		}
	}
}

// TestNodeBadRequests checks the HTTP API's answers to bad requests and
// the command line's to bad flags.
func TestNodeBadRequests(t *testing.T) {
	bin := buildTool(t)
	p := &nodeProc{id: "n1", dir: filepath.Join(t.TempDir(), "n1"), raft: freeAddr(t), http: freeAddr(t)}
	p.start(t, bin, "--bootstrap")
	defer p.kill()
	waitFor(t, "n1 leads", 20*time.Second, func() bool {
		st, err := status(p)
		return err == nil && st.State == "Leader"
	})
	waitFor(t, "a first write", 10*time.Second, func() bool { return put(p.url(), "k", "v") == nil })
	for _, c := range []struct {
		method, path, body string
		code               int
		msg                string
	}{
		{"GET", "/kv/k?consistency=strong", "", 400, "consistency"},
		{"GET", "/kv/k?bogus=1", "", 400, "unknown parameter"},
		{"GET", "/kv/", "", 400, "empty key"},
		{"GET", "/kv/k?timeout=-1s", "", 400, "timeout"},
		{"GET", "/kv/absent", "", 404, "not found"},
		{"POST", "/kv/k", "", 405, ""},
		{"POST", "/raft/apply", "\x01\x63", 400, "unknown operation"},
		{"POST", "/raft/apply", "", 400, "empty command"},
		{"POST", "/cluster/join", "{", 400, "join request"},
		{"POST", "/cluster/join", "{}", 400, "needs id"},
		{"POST", "/compare/short", "", 400, "token"},
		{"GET", "/nope", "", 404, ""},
	} {
		req, _ := http.NewRequest(c.method, p.url()+c.path, strings.NewReader(c.body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.code || !strings.Contains(string(b), c.msg) {
			t.Errorf("%s %s: %s %q, want %d with %q", c.method, c.path, resp.Status, b, c.code, c.msg)
		}
	}
	// The node is still up and serving.
	if err := put(p.url(), "k", "v2"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"node", "--dir", "x"}, "needs --id and --dir"},
		{[]string{"node", "--id", "a", "--dir", "x", "--bootstrap", "--join", "http://h"}, "exclude"},
		{[]string{"node", "--id", "a", "--dir", "x", "--http", "0.0.0.0:1"}, "not a loopback"},
		{[]string{"node", "compare", "http://a"}, "accepts 2 arg"},
		{[]string{"node", "--id", "a", "--dir", "x", "--tls-cert", "c.pem"}, "go together"},
		{[]string{"node", "--id", "a", "--dir", "x", "--tls-cert", "c.pem", "--tls-key", "k.pem"}, "needs --ca"},
		{[]string{"node", "--id", "a", "--dir", "x", "--ca", "ca.pem"}, "--ca needs --tls-cert"},
	} {
		cmd := exec.Command(bin, c.args...)
		var errOut bytes.Buffer
		cmd.Stderr = &errOut
		err := cmd.Run()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != exitUsage || !strings.Contains(errOut.String(), c.msg) {
			t.Errorf("%v: %v, stderr %q", c.args, err, errOut.String())
		}
	}
}
