package raftstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/bloomkv/bloomkv"
)

// twoNodes starts a leader and a follower that knows the leader's HTTP
// address.
func twoNodes(t *testing.T) (leader, follower *Node) {
	c := newTestCluster(t)
	a := c.start("a", true, "")
	c.leader()
	b := c.start("b", false, a.URL())
	c.converge()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := b.leaderURL(); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the follower does not know the leader's URL")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if b.Raft().State() == raft.Leader {
		t.Fatal("b leads")
	}
	return a, b
}

// A batch over MaxCommandSize is refused before raft, by Apply and over
// HTTP, and the leader keeps its term: raft's log store never sees it
// (an entry it could not store would make the leader step down).
func TestApplyOverMaxCommandSize(t *testing.T) {
	a, b := twoNodes(t)
	term := a.Raft().CurrentTerm()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var big Batch
	big.Set([]byte("k"), make([]byte, MaxCommandSize))
	for _, n := range []*Node{a, b} {
		if err := n.Apply(ctx, &big); !errors.Is(err, bloomkv.ErrTooLarge) {
			t.Errorf("%s: Apply of a %d-byte batch: %v, want ErrTooLarge", n.ID(), big.Size(), err)
		}
	}
	for _, n := range []*Node{a, b} {
		req, _ := http.NewRequest(http.MethodPut, n.URL()+"/kv/k", bytes.NewReader(make([]byte, MaxCommandSize)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		msg, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(msg), "MaxCommandSize") {
			t.Errorf("%s: PUT of a %d-byte value: %s %q, want 413 naming MaxCommandSize", n.ID(), MaxCommandSize, resp.Status, msg)
		}
	}
	if a.Raft().State() != raft.Leader || a.Raft().CurrentTerm() != term {
		t.Fatalf("the leader lost its term: %v, term %d -> %d", a.Raft().State(), term, a.Raft().CurrentTerm())
	}
	var ok Batch
	ok.Set([]byte("k"), make([]byte, MaxCommandSize-100))
	if err := b.Apply(ctx, &ok); err != nil {
		t.Fatalf("Apply of a %d-byte batch through the follower: %v", ok.Size(), err)
	}
	v, err := b.Get(ctx, []byte("k"), Linearizable)
	if err != nil || len(v) != MaxCommandSize-100 {
		t.Fatalf("Get: %d bytes, %v", len(v), err)
	}
}

// A command past what the FSM applies, as another log store might hold,
// fails its entry on every replica alike: nothing of it applies, and the
// FSM does not panic.
func TestFSMRefusesCommandPastItsLimit(t *testing.T) {
	f := openTestFSM(t, t.TempDir())
	defer f.Close()
	cmd := make([]byte, maxAppliedCommand+1)
	cmd[0] = commandVersion
	resp := f.ApplyBatch([]*raft.Log{
		{Index: 1, Term: 1, Type: raft.LogCommand, Data: cmd},
		cmdLog(2, setBatch("k", "v")),
	})
	if err, ok := resp[0].(error); !ok || !errors.Is(err, bloomkv.ErrTooLarge) {
		t.Fatalf("response to the large command: %v, want ErrTooLarge", resp[0])
	}
	if resp[1] != nil {
		t.Fatalf("response to the next command: %v", resp[1])
	}
	if got := f.Applied(); got != 2 {
		t.Fatalf("applied %d, want 2", got)
	}
	if v, err := f.Get([]byte("k")); err != nil || string(v) != "v" {
		t.Fatalf("Get: %q, %v", v, err)
	}
}

// StoreLogs writes entries that together pass its batch bound in several
// batches, every entry stored and the bounds right.
func TestStoreLogsInSeveralBatches(t *testing.T) {
	s := openTestLogStore(t, t.TempDir())
	defer s.Close()
	s.batchBytes = 64 << 10
	var logs []*raft.Log
	for i := uint64(1); i <= 64; i++ {
		logs = append(logs, &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: bytes.Repeat([]byte{byte(i)}, 10<<10)})
	}
	batches := 0
	for rest := logs; len(rest) > 0; batches++ {
		n := logsInBatch(rest, s.batchBytes)
		size := 0
		for _, l := range rest[:n] {
			size += len(l.Data)
		}
		if n < 1 || n > 1 && size > s.batchBytes {
			t.Fatalf("a batch of %d entries, %d bytes, with a bound of %d", n, size, s.batchBytes)
		}
		rest = rest[n:]
	}
	if batches < 10 {
		t.Fatalf("640 KiB of entries in %d batches of at most 64 KiB", batches)
	}
	if n := logsInBatch([]*raft.Log{{Data: make([]byte, 1<<20)}, {}}, 1024); n != 1 {
		t.Fatalf("an entry over the bound: %d in its batch, want 1", n)
	}
	if err := s.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	first, _ := s.FirstIndex()
	last, _ := s.LastIndex()
	if first != 1 || last != 64 {
		t.Fatalf("bounds %d-%d, want 1-64", first, last)
	}
	for i := uint64(1); i <= 64; i++ {
		var l raft.Log
		if err := s.GetLog(i, &l); err != nil || !bytes.Equal(l.Data, logs[i-1].Data) {
			t.Fatalf("GetLog(%d): %d bytes, %v", i, len(l.Data), err)
		}
	}
}

// A follower forwards a linearizable read of any key the store holds, and
// the leader's answer is the value: keys a URL path would change ("." and
// "..", cleaned away), the empty key, and one too long for a URL.
func TestFollowerLinearizableGetOfAnyKey(t *testing.T) {
	a, b := twoNodes(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	keys := []string{"plain", "a/b", "a%2Fb", "a b?c#d", "\xff\x00\x01", "./x", "a/../b", ".", "..", "", strings.Repeat("\xff", 400<<10)}
	value := func(k string) string { return "v-" + k[:min(len(k), 8)] }
	for _, k := range keys {
		var bt Batch
		bt.Set([]byte(k), []byte(value(k)))
		if err := a.Apply(ctx, &bt); err != nil {
			t.Fatalf("Apply: %v", err)
		}
	}
	for _, k := range keys {
		v, err := b.Get(ctx, []byte(k), Linearizable)
		if err != nil || string(v) != value(k) {
			t.Errorf("follower's linearizable Get of a %d-byte key %.16q: %q, %v", len(k), k, v, err)
		}
	}
	if _, err := b.Get(ctx, []byte(".."+"absent"), Linearizable); !errors.Is(err, bloomkv.ErrNotFound) {
		t.Errorf("an absent key: %v, want ErrNotFound", err)
	}
}

// A follower forwards the removal of a server of any id.
func TestFollowerRemovesServerOfAnyID(t *testing.T) {
	a, b := twoNodes(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, id := range []string{"x/y", "..", "."} {
		if err := a.Raft().AddNonvoter(raft.ServerID(id), "127.0.0.1:1", 0, 5*time.Second).Error(); err != nil {
			t.Fatal(err)
		}
		if err := b.RemoveServer(ctx, id); err != nil {
			t.Errorf("RemoveServer(%q) through the follower: %v", id, err)
		}
		for _, s := range a.Raft().GetConfiguration().Configuration().Servers {
			if string(s.ID) == id {
				t.Errorf("server %q still in the configuration", id)
			}
		}
	}
	if err := b.RemoveServer(ctx, ""); err == nil {
		t.Error("RemoveServer of the empty id: no error")
	}
}

// A node does not bind its HTTP API to an address its peers cannot reach
// it at: it gives that address to them to forward to.
func TestOpenRefusesUnspecifiedHTTPAddress(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", "[::]:0", ":0"} {
		n, err := Open(Options{ID: "u", Dir: t.TempDir(), RaftAddr: "127.0.0.1:0", HTTPAddr: addr, Bootstrap: true, Fast: true, LogOutput: io.Discard})
		if err == nil {
			n.Close()
			t.Errorf("Open with HTTP address %s: no error", addr)
		} else if !strings.Contains(err.Error(), "reach") {
			t.Errorf("Open with HTTP address %s: %v", addr, err)
		}
	}
}

// Requests waiting together on a compare point all get its snapshot: the
// one that finds the channel closed after another took the snapshot must
// not settle the point as having none.
func TestComparePointWaitersShareTheSnapshot(t *testing.T) {
	db, err := bloomkv.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for round := 0; round < 200; round++ {
		ch := make(chan markedSnapshot, 1)
		p := newComparePoint("0123456789abcdef", ch)
		var wg sync.WaitGroup
		errs := make([]error, 3)
		for w := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				_, errs[w] = p.wait(ctx)
			}()
		}
		time.Sleep(time.Millisecond)
		snap, err := db.NewSnapshot()
		if err != nil {
			t.Fatal(err)
		}
		// As FSM.ApplyBatch does: send, then close.
		ch <- markedSnapshot{snap: snap, index: 7}
		close(ch)
		wg.Wait()
		for w, err := range errs {
			if err != nil {
				t.Fatalf("round %d, waiter %d: %v", round, w, err)
			}
		}
		p.release()
	}
	// A point whose channel closes with no snapshot settles as having none.
	ch := make(chan markedSnapshot, 1)
	p := newComparePoint("0123456789abcdef", ch)
	close(ch)
	if _, err := p.wait(context.Background()); err == nil || !strings.Contains(err.Error(), "no snapshot") {
		t.Fatalf("a point with no snapshot: %v", err)
	}
}

// A client with a token does not send it over plain http:// to a host
// that is not loopback (an http:// typed for https://, say): the request
// is refused before it leaves.
func TestCompareTokenNotSentInClearText(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		if a := r.Header.Get("Authorization"); a != "" {
			seen = append(seen, r.Method+" "+r.URL.Path)
		}
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	// Every host name reaches the test server, as an operator's would
	// reach the nodes.
	addr := srv.Listener.Addr().String()
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := CompareURLsWith(ctx, "http://node-a.example:8001", "http://node-b.example:8001", &ClientOptions{Client: client, Token: "s3cret"})
	if err == nil || !strings.Contains(err.Error(), "clear text") {
		t.Errorf("CompareURLsWith over http:// with a token: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) > 0 {
		t.Errorf("the token went over plain http to a remote host: %v", seen)
	}
}

// openSnapshots returns the number of snapshots open on n's store.
func openSnapshots(n *Node) int {
	n.fsm.mu.RLock()
	defer n.fsm.mu.RUnlock()
	return n.fsm.db.Metrics().Snapshots
}

// markPoint registers the compare point token on n over its API, marks the
// log with it and waits for the point's snapshot.
func markPoint(t *testing.T, n *Node, token string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := caller{client: http.DefaultClient}
	if err := c.post(ctx, http.MethodPost, n.URL()+"/compare/"+token, nil); err != nil {
		t.Fatal(err)
	}
	var b Batch
	b.mark([]byte(token))
	if err := n.Apply(ctx, &b); err != nil {
		t.Fatal(err)
	}
	var body []byte
	if err := c.get(ctx, n.URL()+"/compare/"+token, &body); err != nil {
		t.Fatal(err)
	}
}

// waitSnapshots waits up to d for n to have want snapshots open, and
// returns how many it has.
func waitSnapshots(n *Node, want int, d time.Duration) int {
	deadline := time.Now().Add(d)
	for {
		got := openSnapshots(n)
		if got == want || time.Now().After(deadline) {
			return got
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Compare points release their snapshots however they end: registered a
// second time (a retried request) and then deleted, abandoned past their
// time to live, or left at Close; and a node keeps at most
// maxComparePoints at once.
func TestComparePointsReleaseTheirSnapshots(t *testing.T) {
	c := newTestCluster(t)
	n := c.start("a", true, "")
	c.leader()
	base := openSnapshots(n)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := caller{client: http.DefaultClient}

	const token = "0123456789abcdef0123456789abcdef"
	markPoint(t, n, token)
	if got := openSnapshots(n); got != base+1 {
		t.Fatalf("%d snapshots open with the point settled, want %d", got, base+1)
	}
	if err := cl.post(ctx, http.MethodPost, n.URL()+"/compare/"+token, nil); err != nil {
		t.Fatal(err)
	}
	if err := cl.post(ctx, http.MethodDelete, n.URL()+"/compare/"+token, nil); err != nil {
		t.Fatal(err)
	}
	if got := waitSnapshots(n, base, 5*time.Second); got != base {
		t.Errorf("registered twice, then deleted: %d snapshots open, want %d", got, base)
	}

	n.cmp.ttl.Store(int64(300 * time.Millisecond))
	markPoint(t, n, "fedcba9876543210fedcba9876543210")
	if got := waitSnapshots(n, base, 10*time.Second); got != base {
		t.Errorf("abandoned past its time to live: %d snapshots open, want %d", got, base)
	}

	n.cmp.ttl.Store(int64(compareTTL))
	for i := range maxComparePoints {
		if err := cl.post(ctx, http.MethodPost, n.URL()+fmt.Sprintf("/compare/%032x", i), nil); err != nil {
			t.Fatalf("point %d: %v", i, err)
		}
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, n.URL()+"/compare/ffffffffffffffffffffffffffffffff", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("a point past %d: %s, want 429", maxComparePoints, resp.Status)
	}
	if err := cl.post(ctx, http.MethodPost, n.URL()+fmt.Sprintf("/compare/%032x", 0), nil); err != nil {
		t.Errorf("a point registered again at the bound: %v", err)
	}

	markPoint(t, n, fmt.Sprintf("%032x", 1))
	if got := openSnapshots(n); got != base+1 {
		t.Fatalf("%d snapshots open, want %d", got, base+1)
	}
	n.dropPoints() // as Close does
	if got := openSnapshots(n); got != base {
		t.Errorf("after dropPoints: %d snapshots open, want %d", got, base)
	}
}

// The node's HTTP server bounds how long a request may take to arrive and
// how long a connection may stay idle, so that slow or idle clients do not
// hold connections and their buffers.
func TestNodeServerTimeouts(t *testing.T) {
	c := newTestCluster(t)
	n := c.start("a", true, "")
	if n.srv.ReadHeaderTimeout == 0 || n.srv.ReadTimeout == 0 || n.srv.IdleTimeout == 0 {
		t.Fatalf("timeouts: header %v, read %v, idle %v", n.srv.ReadHeaderTimeout, n.srv.ReadTimeout, n.srv.IdleTimeout)
	}
}

// A leader's 404 means no such key only with Bloomkv-Absent; without it the
// leader lacks the route (an earlier version's, without /raft/get), which
// a follower's linearizable read then falls back from.
func TestForwardTellsAbsentFromNoRoute(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/absent" {
			w.Header().Set(absentHeader, "1")
		}
		http.Error(w, "404 page not found", http.StatusNotFound)
	}))
	defer srv.Close()
	n := &Node{caller: caller{client: http.DefaultClient}}
	for path, want := range map[string]error{"/absent": bloomkv.ErrNotFound, "/raft/get": errNoRoute} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+path, nil)
		if err := n.forward(req, nil); !errors.Is(err, want) {
			t.Errorf("%s: %v, want %v", path, err, want)
		}
	}
}

// A node with a token and no TLS binds only a loopback HTTP address: its
// requests to the others carry the token, which never goes over plain
// http:// to another host.
func TestOpenRefusesATokenInClearText(t *testing.T) {
	_, err := Open(Options{ID: "t", Dir: t.TempDir(), RaftAddr: "127.0.0.1:0", HTTPAddr: "192.0.2.1:0", Token: "s3cret", Bootstrap: true, Fast: true, LogOutput: io.Discard})
	if err == nil || !strings.Contains(err.Error(), "clear text") {
		t.Fatalf("Open with a token, no TLS, on a remote address: %v", err)
	}
}
