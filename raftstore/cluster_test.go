package raftstore

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

var long = flag.Bool("long", false, "run the long versions of the cluster tests")

// errPartitioned is the error of a message dropTransport drops.
var errPartitioned = errors.New("partitioned")

// dropTransport wraps a raft transport and drops the messages to and from
// the addresses blocked, both ways.
type dropTransport struct {
	raft.Transport
	mu      sync.Mutex
	blocked map[raft.ServerAddress]bool
	ch      chan raft.RPC
	done    chan struct{}
	once    sync.Once
}

func newDropTransport(inner raft.Transport) *dropTransport {
	t := &dropTransport{Transport: inner, blocked: map[raft.ServerAddress]bool{}, ch: make(chan raft.RPC), done: make(chan struct{})}
	go func() {
		for {
			select {
			case rpc := <-inner.Consumer():
				if t.dropIn(rpc) {
					rpc.Respond(nil, errPartitioned)
					continue
				}
				select {
				case t.ch <- rpc:
				case <-t.done:
					return
				}
			case <-t.done:
				return
			}
		}
	}()
	return t
}

func (t *dropTransport) block(addrs ...raft.ServerAddress) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, a := range addrs {
		t.blocked[a] = true
	}
}

func (t *dropTransport) heal() {
	t.mu.Lock()
	defer t.mu.Unlock()
	clear(t.blocked)
}

func (t *dropTransport) isBlocked(a raft.ServerAddress) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.blocked[a]
}

func (t *dropTransport) dropIn(rpc raft.RPC) bool {
	h, ok := rpc.Command.(raft.WithRPCHeader)
	return ok && t.isBlocked(raft.ServerAddress(h.GetRPCHeader().Addr))
}

func (t *dropTransport) Consumer() <-chan raft.RPC { return t.ch }

func (t *dropTransport) SetHeartbeatHandler(cb func(raft.RPC)) {
	t.Transport.SetHeartbeatHandler(func(rpc raft.RPC) {
		if t.dropIn(rpc) {
			rpc.Respond(nil, errPartitioned)
			return
		}
		cb(rpc)
	})
}

func (t *dropTransport) AppendEntriesPipeline(raft.ServerID, raft.ServerAddress) (raft.AppendPipeline, error) {
	return nil, raft.ErrPipelineReplicationNotSupported
}

func (t *dropTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	if t.isBlocked(target) {
		return errPartitioned
	}
	return t.Transport.AppendEntries(id, target, args, resp)
}

func (t *dropTransport) RequestVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestVoteRequest, resp *raft.RequestVoteResponse) error {
	if t.isBlocked(target) {
		return errPartitioned
	}
	return t.Transport.RequestVote(id, target, args, resp)
}

func (t *dropTransport) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	if t.isBlocked(target) {
		return errPartitioned
	}
	return t.Transport.(raft.WithPreVote).RequestPreVote(id, target, args, resp)
}

func (t *dropTransport) InstallSnapshot(id raft.ServerID, target raft.ServerAddress, args *raft.InstallSnapshotRequest, resp *raft.InstallSnapshotResponse, data io.Reader) error {
	if t.isBlocked(target) {
		return errPartitioned
	}
	return t.Transport.InstallSnapshot(id, target, args, resp, data)
}

func (t *dropTransport) TimeoutNow(id raft.ServerID, target raft.ServerAddress, args *raft.TimeoutNowRequest, resp *raft.TimeoutNowResponse) error {
	if t.isBlocked(target) {
		return errPartitioned
	}
	return t.Transport.TimeoutNow(id, target, args, resp)
}

func (t *dropTransport) Close() error {
	t.once.Do(func() { close(t.done) })
	return t.Transport.(raft.WithClose).Close()
}

// testCluster is a set of nodes on loopback, started and stopped by tests.
type testCluster struct {
	t     *testing.T
	dir   string
	mu    sync.Mutex
	nodes map[string]*Node
	drops map[string]*dropTransport
	addrs map[string][2]string // raft and HTTP address of each node ever started
}

func newTestCluster(t *testing.T) *testCluster {
	c := &testCluster{t: t, dir: t.TempDir(), nodes: map[string]*Node{}, drops: map[string]*dropTransport{}, addrs: map[string][2]string{}}
	t.Cleanup(func() {
		for _, n := range c.all() {
			n.Close()
		}
	})
	return c
}

// start starts (or restarts, on its directory and addresses) node id.
func (c *testCluster) start(id string, bootstrap bool, join string) *Node {
	c.t.Helper()
	c.mu.Lock()
	a, ok := c.addrs[id]
	c.mu.Unlock()
	if !ok {
		a = [2]string{"127.0.0.1:0", "127.0.0.1:0"}
	}
	var drop *dropTransport
	opts := Options{
		ID: id, Dir: filepath.Join(c.dir, id), RaftAddr: a[0], HTTPAddr: a[1],
		Bootstrap: bootstrap, Join: join, Fast: true,
		SnapshotThreshold: 200, TrailingLogs: 50, SnapshotInterval: 300 * time.Millisecond,
		LogOutput: io.Discard,
		wrapTransport: func(tr raft.Transport) raft.Transport {
			drop = newDropTransport(tr)
			return drop
		},
	}
	var n *Node
	var err error
	// A restart may find its ports not yet free.
	for i := 0; i < 50; i++ {
		if n, err = Open(opts); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		c.t.Fatalf("start %s: %v", id, err)
	}
	c.mu.Lock()
	c.nodes[id], c.drops[id] = n, drop
	c.addrs[id] = [2]string{n.RaftAddr(), n.HTTPAddr()}
	c.mu.Unlock()
	return n
}

func (c *testCluster) stop(id string) {
	c.t.Helper()
	c.mu.Lock()
	n := c.nodes[id]
	delete(c.nodes, id)
	c.mu.Unlock()
	if err := n.Close(); err != nil {
		c.t.Fatalf("stop %s: %v", id, err)
	}
}

func (c *testCluster) all() []*Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ns []*Node
	for _, n := range c.nodes {
		ns = append(ns, n)
	}
	return ns
}

// leader waits for one running node to be leader, and returns it.
func (c *testCluster) leader(among ...string) *Node {
	c.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		for _, n := range c.all() {
			if len(among) > 0 && !contains(among, n.ID()) {
				continue
			}
			if n.Raft().State() == raft.Leader {
				return n
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, n := range c.all() {
		st := n.localStatus()
		cf := n.Raft().GetConfiguration()
		c.t.Logf("%s: %s term %d leader %q applied %d last %d; configuration %v", n.ID(), st.State, st.Term, st.Leader, st.Applied, st.Last, cf.Configuration().Servers)
	}
	c.t.Fatal("no leader within 20s")
	return nil
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// converge waits until every running node has applied the leader's last
// index.
func (c *testCluster) converge() {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		l := c.leader()
		// An entry of the leader's term commits everything before it.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		var b Batch
		b.Set([]byte("converge"), []byte(l.ID()))
		err := l.Apply(ctx, &b)
		cancel()
		if err != nil {
			continue
		}
		want := l.fsm.Applied()
		ok := true
		for time.Now().Before(deadline) {
			ok = true
			for _, n := range c.all() {
				ok = ok && n.fsm.Applied() >= want
			}
			if ok {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	for _, n := range c.all() {
		c.t.Logf("%s: applied %d, state %v", n.ID(), n.fsm.Applied(), n.Raft().State())
	}
	c.t.Fatal("nodes did not converge within 30s")
}

// writers write keys through random running nodes until stopped, and
// record the acknowledged ones.
type writers struct {
	stop  chan struct{}
	wg    sync.WaitGroup
	mu    sync.Mutex
	acked map[string]string
	errs  atomic.Int64
}

func startWriters(c *testCluster, n int) *writers {
	w := &writers{stop: make(chan struct{}), acked: map[string]string{}}
	for g := 0; g < n; g++ {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			// A client avoids for a while a node that failed it.
			avoid := map[string]time.Time{}
			for i := 0; ; i++ {
				select {
				case <-w.stop:
					return
				default:
				}
				ns := c.all()
				if len(ns) == 0 {
					time.Sleep(10 * time.Millisecond)
					continue
				}
				node := ns[rng.IntN(len(ns))]
				if time.Now().Before(avoid[node.ID()]) {
					continue
				}
				k, v := fmt.Sprintf("w%d-%06d", g, i), fmt.Sprintf("v%d", i)
				var b Batch
				b.Set([]byte(k), []byte(v))
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				err := node.Apply(ctx, &b)
				cancel()
				if err != nil {
					w.errs.Add(1)
					avoid[node.ID()] = time.Now().Add(2 * time.Second)
					time.Sleep(10 * time.Millisecond)
					continue
				}
				w.mu.Lock()
				w.acked[k] = v
				w.mu.Unlock()
			}
		}()
	}
	return w
}

func (w *writers) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.acked)
}

// waitMore waits until d more writes were acknowledged.
func (w *writers) waitMore(t *testing.T, d int) {
	t.Helper()
	start := time.Now()
	defer func() { t.Logf("%d more writes in %v", d, time.Since(start)) }()
	want := w.count() + d
	deadline := time.Now().Add(30 * time.Second)
	for w.count() < want {
		if time.Now().After(deadline) {
			t.Fatalf("writes stalled at %d acknowledged (want %d), %d errors", w.count(), want, w.errs.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (w *writers) halt() {
	close(w.stop)
	w.wg.Wait()
}

// checkAcked checks that every acknowledged write is on every running node.
func checkAcked(t *testing.T, c *testCluster, acked map[string]string) {
	t.Helper()
	for _, n := range c.all() {
		for k, v := range acked {
			got, err := n.Get(context.Background(), []byte(k), Stale)
			if err != nil || string(got) != v {
				t.Fatalf("%s: acknowledged write %s=%s reads %q, %v", n.ID(), k, v, got, err)
			}
		}
	}
}

func TestCluster(t *testing.T) {
	c := newTestCluster(t)
	n1 := c.start("n1", true, "")
	c.leader()
	c.start("n2", false, n1.URL())
	c.start("n3", false, n1.URL())
	c.converge()
	per := 100
	if *long {
		per = 1000
	}

	w := startWriters(c, 4)
	w.waitMore(t, per)

	// The leader shuts down; another takes over and writes go on.
	old := c.leader()
	c.stop(old.ID())
	c.leader()
	w.waitMore(t, per)
	c.start(old.ID(), false, "")
	w.waitMore(t, per)
	// A restarted node catches up once the leader retries it, which raft
	// backs off from while the node was down (up to 10 s): every phase
	// below needs every node current, so that the others always hold a
	// majority.
	c.converge()

	// A follower restarts from its directory.
	var follower string
	for _, n := range c.all() {
		if n.Raft().State() != raft.Leader {
			follower = n.ID()
			break
		}
	}
	c.stop(follower)
	w.waitMore(t, per)
	c.start(follower, false, "")
	w.waitMore(t, per)
	c.converge()

	// A fourth node joins through a follower and catches up through a
	// snapshot: the log it would need is truncated.
	var via *Node
	for _, n := range c.all() {
		if n.Raft().State() != raft.Leader {
			via = n
		}
	}
	// A snapshot now truncates the log to its last TrailingLogs entries.
	if err := c.leader().Raft().Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	n4 := c.start("n4", false, via.URL())
	w.waitMore(t, per)
	deadline := time.Now().Add(30 * time.Second)
	for n4.fsm.restores.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("n4 installed no snapshot; applied %d", n4.fsm.Applied())
		}
		time.Sleep(20 * time.Millisecond)
	}

	// The leader is cut off both ways; the others elect a new one and
	// writes go on; then the partition heals. The others are a majority
	// only once each is current.
	c.converge()
	l := c.leader()
	var others []string
	var otherAddrs []raft.ServerAddress
	for _, n := range c.all() {
		if n != l {
			others = append(others, n.ID())
			otherAddrs = append(otherAddrs, raft.ServerAddress(n.RaftAddr()))
		}
	}
	c.drops[l.ID()].block(otherAddrs...)
	for _, id := range others {
		c.drops[id].block(raft.ServerAddress(l.RaftAddr()))
	}
	nl := c.leader(others...)
	if nl == l {
		t.Fatal("the cut-off leader is still the leader")
	}
	w.waitMore(t, per)
	for _, d := range c.drops {
		d.heal()
	}
	w.waitMore(t, per)

	w.halt()
	c.converge()
	t.Logf("%d writes acknowledged, %d failed or unknown", len(w.acked), w.errs.Load())
	checkAcked(t, c, w.acked)

	st, err := c.leader().Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Servers) != 4 || st.Applied == 0 {
		t.Fatalf("status %+v", st)
	}
	for _, s := range st.Servers {
		if s.Lag < 0 || s.HTTPAddr == "" {
			t.Fatalf("status of %s: %+v", s.ID, s)
		}
	}

	// Every replica holds the same keys at one applied index.
	ns := c.all()
	for _, n := range ns[1:] {
		rep, err := ns[0].Compare(context.Background(), n.URL())
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Differences) != 0 {
			t.Fatalf("%s and %s differ at index %d: %+v", ns[0].ID(), n.ID(), rep.Index, rep.Differences)
		}
	}

	// Membership: n4 is removed through a follower.
	var f *Node
	for _, n := range c.all() {
		if n.Raft().State() != raft.Leader && n.ID() != "n4" {
			f = n
		}
	}
	if err := f.RemoveServer(context.Background(), "n4"); err != nil {
		t.Fatal(err)
	}
	cf := c.leader().Raft().GetConfiguration()
	if err := cf.Error(); err != nil {
		t.Fatal(err)
	}
	if len(cf.Configuration().Servers) != 3 {
		t.Fatalf("configuration after removal: %+v", cf.Configuration().Servers)
	}
}
