package raftstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/bloomkv/bloomkv"
	"github.com/hashicorp/raft"
)

// kvInput is an operation of the porcupine model: a put of value, or a get.
type kvInput struct {
	put        bool
	key, value string
}

// kvModel is a map of registers, one per key, each checked on its own.
func kvModel() porcupine.Model {
	return porcupine.Model{
		Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
			by := map[string][]porcupine.Operation{}
			var keys []string
			for _, op := range h {
				k := op.Input.(kvInput).key
				if _, ok := by[k]; !ok {
					keys = append(keys, k)
				}
				by[k] = append(by[k], op)
			}
			var out [][]porcupine.Operation
			for _, k := range keys {
				out = append(out, by[k])
			}
			return out
		},
		Init: func() interface{} { return "" },
		Step: func(state, input, output interface{}) (bool, interface{}) {
			in := input.(kvInput)
			if in.put {
				return true, in.value
			}
			return output.(string) == state.(string), state
		},
		Equal: func(a, b interface{}) bool { return a.(string) == b.(string) },
		DescribeOperation: func(input, output interface{}) string {
			in := input.(kvInput)
			if in.put {
				return fmt.Sprintf("put(%s, %s)", in.key, in.value)
			}
			return fmt.Sprintf("get(%s) -> %q", in.key, output)
		},
	}
}

// history records operations from concurrent clients.
type history struct {
	mu  sync.Mutex
	ops []porcupine.Operation
	t0  time.Time
}

func (h *history) now() int64 { return int64(time.Since(h.t0)) }

func (h *history) add(op porcupine.Operation) {
	h.mu.Lock()
	h.ops = append(h.ops, op)
	h.mu.Unlock()
}

// runClients runs n clients of puts and linearizable gets on keys through
// random running nodes until stop closes.
func runClients(c *testCluster, h *history, n int, stop chan struct{}) (*sync.WaitGroup, *int64) {
	var wg sync.WaitGroup
	var acked int64
	var mu sync.Mutex
	for g := 0; g < n; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			avoid := map[string]time.Time{}
			for i := 0; ; i++ {
				select {
				case <-stop:
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
				key := fmt.Sprintf("k%d", rng.IntN(3))
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				call := h.now()
				if rng.IntN(2) == 0 {
					in := kvInput{put: true, key: key, value: fmt.Sprintf("c%d-%d", g, i)}
					var b Batch
					b.Set([]byte(in.key), []byte(in.value))
					err := node.Apply(ctx, &b)
					switch {
					case err == nil:
						h.add(porcupine.Operation{ClientId: g, Input: in, Call: call, Output: "", Return: h.now()})
						mu.Lock()
						acked++
						mu.Unlock()
					case errors.Is(err, ErrNoLeader) && !errors.Is(err, context.DeadlineExceeded):
						// Not applied.
					default:
						// Outcome unknown: it may take effect at any later time.
						h.add(porcupine.Operation{ClientId: g, Input: in, Call: call, Output: "", Return: math.MaxInt64})
						avoid[node.ID()] = time.Now().Add(2 * time.Second)
					}
				} else {
					v, err := node.Get(ctx, []byte(key), Linearizable)
					if errors.Is(err, bloomkv.ErrNotFound) {
						v, err = nil, nil
					}
					if err == nil {
						h.add(porcupine.Operation{ClientId: g, Input: kvInput{key: key}, Call: call, Output: string(v), Return: h.now()})
					} else {
						avoid[node.ID()] = time.Now().Add(2 * time.Second)
					}
				}
				cancel()
			}
		}()
	}
	return &wg, &acked
}

func TestLinearizable(t *testing.T) {
	c := newTestCluster(t)
	n1 := c.start("n1", true, "")
	c.leader()
	c.start("n2", false, n1.URL())
	c.start("n3", false, n1.URL())
	c.converge()

	h := &history{t0: time.Now()}
	stop := make(chan struct{})
	wg, acked := runClients(c, h, 6, stop)
	rounds := 2
	if *long {
		rounds = 6
	}
	for r := 0; r < rounds; r++ {
		time.Sleep(400 * time.Millisecond)
		// Fail the leader over, then bring it back.
		l := c.leader()
		c.stop(l.ID())
		c.leader()
		time.Sleep(400 * time.Millisecond)
		c.start(l.ID(), false, "")
	}
	time.Sleep(400 * time.Millisecond)
	close(stop)
	wg.Wait()

	// A final linearizable read of each key after the failovers: every
	// acknowledged write is either the latest or overwritten.
	c.converge()
	l := c.leader()
	for k := 0; k < 3; k++ {
		key := fmt.Sprintf("k%d", k)
		call := h.now()
		v, err := l.Get(context.Background(), []byte(key), Linearizable)
		if errors.Is(err, bloomkv.ErrNotFound) {
			v, err = nil, nil
		}
		if err != nil {
			t.Fatal(err)
		}
		h.add(porcupine.Operation{ClientId: 99, Input: kvInput{key: key}, Call: call, Output: string(v), Return: h.now()})
	}
	var gets int
	for _, op := range h.ops {
		if !op.Input.(kvInput).put {
			gets++
		}
	}
	t.Logf("%d operations: %d acknowledged puts, %d gets", len(h.ops), *acked, gets)
	if *acked < 20 || gets < 20 {
		t.Fatalf("too few operations to check: %d puts, %d gets", *acked, gets)
	}
	res := porcupine.CheckOperationsTimeout(kvModel(), h.ops, 30*time.Second)
	if res != porcupine.Ok {
		t.Fatalf("history is not linearizable (%v)", res)
	}
}

// The checker rejects a history with a stale read, so the check above can
// fail.
func TestLinearizableCheckerRejectsStaleRead(t *testing.T) {
	ops := []porcupine.Operation{
		{Input: kvInput{put: true, key: "k", value: "1"}, Call: 0, Output: "", Return: 10},
		{Input: kvInput{put: true, key: "k", value: "2"}, Call: 20, Output: "", Return: 30},
		{Input: kvInput{key: "k"}, Call: 40, Output: "1", Return: 50},
	}
	if porcupine.CheckOperations(kvModel(), ops) {
		t.Fatal("a stale read passed the check")
	}
	ops[2].Output = "2"
	if !porcupine.CheckOperations(kvModel(), ops) {
		t.Fatal("a linearizable history failed the check")
	}
}

// TestLinearizableReadsWithoutWrites: once writes stop, the last entry a
// leader commits is the barrier of its term's first linearizable read,
// which raft applies without the state machine, so the state's applied
// index stays below the commit index. Linearizable reads must go on
// answering, each at once, not wait for an index the state never reaches.
func TestLinearizableReadsWithoutWrites(t *testing.T) {
	n, err := Open(Options{ID: "n1", Dir: t.TempDir(), RaftAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", Bootstrap: true, Fast: true, LogOutput: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The node writes its HTTP address once it leads; wait for that write,
	// so that the barrier below is the last entry.
	awaitAddressWrite(ctx, t, n)
	b := &Batch{}
	b.Set([]byte("k"), []byte("v"))
	if err := n.Apply(ctx, b); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
		v, err := n.Get(rctx, []byte("k"), Linearizable)
		rcancel()
		if err != nil || string(v) != "v" {
			t.Fatalf("linearizable read %d with no write since: %q, %v", i, v, err)
		}
	}
	if applied, ci := n.fsm.Applied(), n.raft.CommitIndex(); applied >= ci {
		t.Fatalf("the state applied %d of %d committed entries: the reads met no barrier above it", applied, ci)
	}
}

// TestFSMTarget: the index a linearizable read waits for is the newest
// command or configuration entry up to the commit index; barrier and no-op
// entries above it are passed over, and an entry the log no longer holds
// (in a snapshot the state holds) ends the walk at the applied index.
func TestFSMTarget(t *testing.T) {
	fsm, logs := openFSMAndLog(t)
	b := &Batch{}
	b.Set([]byte("k"), []byte("v"))
	cmd := func(i uint64) *raft.Log { return &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: b.Bytes()} }
	for _, r := range fsm.ApplyBatch([]*raft.Log{cmd(4)}) {
		if r != nil {
			t.Fatal(r)
		}
	}
	// The log holds 7 to 12; 5 and 6 went into a snapshot.
	if err := logs.StoreLogs([]*raft.Log{
		{Index: 7, Term: 2, Type: raft.LogBarrier},
		{Index: 8, Term: 2, Type: raft.LogNoop},
		cmd(9),
		{Index: 10, Term: 3, Type: raft.LogConfiguration},
		{Index: 11, Term: 3, Type: raft.LogBarrier},
		{Index: 12, Term: 3, Type: raft.LogNoop},
	}); err != nil {
		t.Fatal(err)
	}
	n := &Node{fsm: fsm, logs: logs}
	for _, c := range []struct{ ci, want uint64 }{
		{4, 4}, {7, 4}, {8, 4}, {9, 9}, {10, 10}, {11, 10}, {12, 10},
	} {
		if got, err := n.fsmTarget(c.ci); err != nil || got != c.want {
			t.Errorf("fsmTarget(%d) = %d, %v; want %d", c.ci, got, err, c.want)
		}
	}
}

// TestStateHolds: a snapshot holds no more than the state when the log
// holds the snapshot's entry, of its term, and between the applied index
// and it only no-ops and barriers; an entry the log no longer holds, a
// command, an unknown type or another term means the state may be older.
func TestStateHolds(t *testing.T) {
	fsm, logs := openFSMAndLog(t)
	b := &Batch{}
	b.Set([]byte("k"), []byte("v"))
	cmd := func(i, term uint64) *raft.Log {
		return &raft.Log{Index: i, Term: term, Type: raft.LogCommand, Data: b.Bytes()}
	}
	apply := func(l *raft.Log) {
		t.Helper()
		for _, r := range fsm.ApplyBatch([]*raft.Log{l}) {
			if r != nil {
				t.Fatal(r)
			}
		}
	}
	if err := logs.StoreLogs([]*raft.Log{
		cmd(4, 1),
		{Index: 5, Term: 1, Type: raft.LogNoop},
		{Index: 6, Term: 1, Type: raft.LogBarrier},
		{Index: 7, Term: 2, Type: raft.LogNoop},
		cmd(8, 2),
		{Index: 9, Term: 2, Type: raft.LogBarrier},
		{Index: 10, Term: 2, Type: raft.LogType(200)},
	}); err != nil {
		t.Fatal(err)
	}
	apply(cmd(4, 1))
	type holdsCase struct {
		index, term uint64
		holds       bool
	}
	check := func(when string, cases []holdsCase) {
		t.Helper()
		for _, c := range cases {
			if got := stateHolds(fsm, logs, c.index, c.term); got != c.holds {
				t.Errorf("%s: stateHolds(%d, term %d) = %v, want %v", when, c.index, c.term, got, c.holds)
			}
		}
	}
	check("4 applied", []holdsCase{
		{3, 1, true}, {4, 1, true}, {6, 1, true}, {7, 2, true},
		{6, 2, false}, {7, 1, false}, {8, 2, false}, {9, 2, false}, {11, 2, false},
	})
	if err := logs.DeleteRange(5, 5); err != nil {
		t.Fatal(err)
	}
	check("5 dropped from the log", []holdsCase{{7, 2, false}})
	apply(cmd(8, 2))
	check("8 applied", []holdsCase{{8, 2, true}, {9, 2, true}, {10, 2, false}})
}

// TestRestartAfterSnapshotAtBarrier: a node whose last snapshot was taken
// just after a barrier (its index above the state's applied one, which
// counts commands only) restarts on its own state, without restoring the
// snapshot, and still holds every write.
func TestRestartAfterSnapshotAtBarrier(t *testing.T) {
	dir := t.TempDir()
	opts := Options{ID: "n1", Dir: dir, RaftAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", Bootstrap: true, Fast: true, LogOutput: io.Discard}
	n, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The node writes its HTTP address once it leads; wait for that write,
	// so that the barrier below is the last entry.
	awaitAddressWrite(ctx, t, n)
	b := &Batch{}
	b.Set([]byte("k"), []byte("v"))
	if err := n.Apply(ctx, b); err != nil {
		t.Fatal(err)
	}
	if err := n.Raft().Barrier(10 * time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	if err := n.Raft().Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	snaps, err := n.snaps.List()
	if err != nil || len(snaps) == 0 {
		t.Fatalf("snapshots %v, %v", snaps, err)
	}
	if applied := n.fsm.Applied(); applied >= snaps[0].Index {
		t.Fatalf("snapshot at %d, state applied %d: the barrier is not above the state", snaps[0].Index, applied)
	}
	opts.RaftAddr, opts.HTTPAddr = n.RaftAddr(), n.HTTPAddr()
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	// A restart may find its ports not yet free.
	for i := 0; i < 50; i++ {
		if n, err = Open(opts); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if r := n.fsm.restores.Load(); r != 0 {
		t.Errorf("the restart restored %d snapshots over a state that held them", r)
	}
	if v, err := n.Get(ctx, []byte("k"), Linearizable); err != nil || string(v) != "v" {
		t.Errorf("after the restart: %q, %v", v, err)
	}
}

// awaitAddressWrite waits until node n1, leading, has written its HTTP
// address (its first entry of the term after the no-op), so that no entry
// the test does not make comes after.
func awaitAddressWrite(ctx context.Context, t *testing.T, n *Node) {
	t.Helper()
	for _, err := n.fsm.meta(metaHTTP("n1")); err != nil; _, err = n.fsm.meta(metaHTTP("n1")) {
		if ctx.Err() != nil {
			t.Fatalf("the node never wrote its address: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// openFSMAndLog opens a state machine and a log store in a new directory,
// closed when the test ends.
func openFSMAndLog(t *testing.T) (*FSM, *LogStore) {
	t.Helper()
	dir := t.TempDir()
	fsm, err := OpenFSM(filepath.Join(dir, "fsm"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fsm.Close() })
	logs, err := OpenLogStore(filepath.Join(dir, "log"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logs.Close() })
	return fsm, logs
}
