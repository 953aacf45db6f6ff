package bloomkv

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bloomkv/bloomkv/vfs"
)

// The DB's side of a WAL rotation whose old log is synced by the new log's
// writer while commits go on (rotateLocked, logFile.follow).

// heldLogSync makes the syncs of one log file wait until release is
// called, then return fail (nil for success), and, if asked, the syncs of
// tables, so flushes, until releaseTables. The test's cleanup releases
// both, so that a failing test does not leave Close waiting.
type heldLogSync struct {
	name      string
	fail      error
	gate      chan struct{}
	once      sync.Once
	reached   chan struct{} // closed once a sync of name waits at the gate
	reachOn   sync.Once
	tableGate chan struct{}
	tableOnce sync.Once
}

// holdLogSync sets efs to hold the syncs of the log num of d, and those of
// tables too if holdTables.
func holdLogSync(t *testing.T, efs *vfs.ErrorFS, d *DB, num uint64, fail error, holdTables bool) *heldLogSync {
	h := &heldLogSync{name: d.path(logName(num)), fail: fail, gate: make(chan struct{}), reached: make(chan struct{}),
		tableGate: make(chan struct{})}
	if !holdTables {
		h.releaseTables()
	}
	t.Cleanup(h.release)
	t.Cleanup(h.releaseTables)
	efs.SetInjector(func(op vfs.Op, name string) error {
		switch {
		case op == vfs.OpSync && name == h.name:
			h.reachOn.Do(func() { close(h.reached) })
			<-h.gate
			return h.fail
		case op == vfs.OpSync && strings.HasSuffix(name, ".sst"):
			<-h.tableGate
		}
		return nil
	})
	return h
}

func (h *heldLogSync) release()       { h.once.Do(func() { close(h.gate) }) }
func (h *heldLogSync) releaseTables() { h.tableOnce.Do(func() { close(h.tableGate) }) }

// waitReached waits until a sync of the held log waits at the gate.
func (h *heldLogSync) waitReached(t *testing.T) {
	t.Helper()
	select {
	case <-h.reached:
	case <-time.After(time.Minute):
		t.Fatalf("no sync of %s came", h.name)
	}
}

// currentLog returns the number of the log commits write to.
func currentLog(d *DB) uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.mu.mem.logNum
}

// rotate freezes the memtable and starts a new log, as a Flush does,
// without waiting for the flush, and returns the new log's number.
func rotate(t *testing.T, d *DB) uint64 {
	t.Helper()
	if err := d.commit(&commitWaiter{flush: true}); err != nil {
		t.Fatalf("rotating the log: %v", err)
	}
	return currentLog(d)
}

// within runs fn and fails the test if it has not returned within a
// minute, far beyond what it takes unless it waits for something held.
func within(t *testing.T, what string, fn func() error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	case <-time.After(time.Minute):
		t.Fatalf("%s waited for the held sync", what)
	}
}

// notReturned fails the test if what, which sends its result on ch, has
// returned while the held sync has not.
func notReturned(t *testing.T, what string, ch <-chan error) {
	t.Helper()
	select {
	case err := <-ch:
		t.Fatalf("%s returned while the old log's sync was held: %v", what, err)
	default:
	}
}

// setKeys writes keys prefix0..prefix(n-1) with value v, NoSync.
func setKeys(t *testing.T, d *DB, prefix string, n int) {
	t.Helper()
	for i := range n {
		if err := d.Set(fmt.Appendf(nil, "%s%d", prefix, i), []byte("v-"+prefix), NoSync); err != nil {
			t.Fatal(err)
		}
	}
}

// expectKeys checks that keys prefix0..prefix(n-1) hold what setKeys wrote.
func expectKeys(t *testing.T, d *DB, prefix string, n int) {
	t.Helper()
	for i := range n {
		expect(t, d, fmt.Sprintf("%s%d", prefix, i), "v-"+prefix)
	}
}

// TestRotationWhileOldLogSyncs: while the sync of a log two rotations back
// is held, a second rotation, which finds the current log still waiting to
// write its queue, completes without waiting for that sync, and DB.mu stays
// free for others; a Checkpoint taken then waits for the sync without
// holding DB.mu and copies every log whole (flushes are held, so the copy
// has the writes from the logs only). Once the sync returns, all writes are
// there, in the store and in the copy.
func TestRotationWhileOldLogSyncs(t *testing.T) {
	mem := vfs.NewMem()
	efs := vfs.NewErrorFS(mem)
	d := mustOpen(t, "/db", memOpts(efs))
	closeAtCleanup(t, d)
	setKeys(t, d, "a", 10)
	held := holdLogSync(t, efs, d, currentLog(d), nil, true)
	rotate(t, d)
	held.waitReached(t)
	setKeys(t, d, "b", 10) // queued in the new log, which waits for the sync
	within(t, "a rotation while the log before the current one syncs", func() error {
		return d.commit(&commitWaiter{flush: true})
	})
	setKeys(t, d, "c", 10)

	ckpt := make(chan error, 1)
	go func() { ckpt <- d.Checkpoint("/ckpt") }()
	waitFor(t, "the checkpoint to lead the commit queue", func() bool {
		d.commitMu.Lock()
		defer d.commitMu.Unlock()
		return len(d.queue) > 0 && d.queue[0].checkpoint != nil
	})
	time.Sleep(20 * time.Millisecond) // let it reach the pin
	within(t, "taking DB.mu while a checkpoint waits for the held sync", func() error {
		d.mu.Lock()
		//lint:ignore SA2001 taking the lock is the test
		d.mu.Unlock()
		return nil
	})
	notReturned(t, "Checkpoint", ckpt)
	held.release()
	if err := <-ckpt; err != nil {
		t.Fatal(err)
	}
	held.releaseTables()
	for _, p := range []string{"a", "b", "c"} {
		expectKeys(t, d, p, 10)
	}
	c := mustOpen(t, "/ckpt", memOpts(mem))
	defer c.Close()
	for _, p := range []string{"a", "b", "c"} {
		expectKeys(t, c, p, 10)
	}
}

// TestSyncWriteDurableAcrossRotation: a Sync write acknowledged before a
// rotation is in a crash image taken while the old log's sync (the new
// log's writer's) is held, and that image opens cleanly, without the
// writes the new log holds back; a Sync write made after the rotation
// returns once the old log is synced, and is in a crash image then.
func TestSyncWriteDurableAcrossRotation(t *testing.T) {
	mem := vfs.NewMem()
	efs := vfs.NewErrorFS(mem)
	d := mustOpen(t, "/db", memOpts(efs))
	closeAtCleanup(t, d)
	setKeys(t, d, "a", 10)
	rotate(t, d)
	if err := d.Set([]byte("synced-before"), []byte("v"), Sync); err != nil {
		t.Fatal(err)
	}
	held := holdLogSync(t, efs, d, currentLog(d), nil, false)
	rotate(t, d)
	held.waitReached(t)
	setKeys(t, d, "b", 10)
	synced := make(chan error, 1)
	go func() { synced <- d.Set([]byte("synced-after"), []byte("v"), Sync) }()

	img := mem.CrashClone()
	notReturned(t, "a Sync write", synced)
	c := mustOpen(t, "/db", memOpts(img))
	expectKeys(t, c, "a", 10)
	expect(t, c, "synced-before", "v")
	expect(t, c, "b0", "")
	expect(t, c, "synced-after", "")
	c.Close()

	held.release()
	if err := <-synced; err != nil {
		t.Fatal(err)
	}
	c = mustOpen(t, "/db", memOpts(mem.CrashClone()))
	defer c.Close()
	expectKeys(t, c, "a", 10)
	expectKeys(t, c, "b", 10)
	expect(t, c, "synced-before", "v")
	expect(t, c, "synced-after", "v")
}

// TestCloseWhileOldLogSyncs: Close during a held sync of the old log waits
// for it, and closes cleanly; the store reopens with every write.
func TestCloseWhileOldLogSyncs(t *testing.T) {
	mem := vfs.NewMem()
	efs := vfs.NewErrorFS(mem)
	d := mustOpen(t, "/db", memOpts(efs))
	setKeys(t, d, "a", 10)
	held := holdLogSync(t, efs, d, currentLog(d), nil, false)
	rotate(t, d)
	held.waitReached(t)
	setKeys(t, d, "b", 10)
	closed := make(chan error, 1)
	go func() { closed <- d.Close() }()
	time.Sleep(20 * time.Millisecond)
	notReturned(t, "Close", closed)
	held.release()
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	d = mustOpen(t, "/db", memOpts(mem))
	defer d.Close()
	expectKeys(t, d, "a", 10)
	expectKeys(t, d, "b", 10)
}

// TestFailedOldLogSync: when the old log's sync, run by the new log's
// writer, fails, a Sync write waiting for it gets the error, later writes
// are refused, BackgroundError hears of it once, and Close reports it; the
// store reopens with every write acknowledged before the failure, the
// NoSync ones in the new log included (the store flushed them to a table).
func TestFailedOldLogSync(t *testing.T) {
	mem := vfs.NewMem()
	efs := vfs.NewErrorFS(mem)
	o := memOpts(efs)
	var bgErrs atomic.Int32
	o.EventListener.BackgroundError = func(error) { bgErrs.Add(1) }
	d := mustOpen(t, "/db", o)
	setKeys(t, d, "a", 10)
	injected := errors.New("injected EIO")
	held := holdLogSync(t, efs, d, currentLog(d), injected, false)
	rotate(t, d)
	held.waitReached(t)
	setKeys(t, d, "b", 10)
	synced := make(chan error, 1)
	go func() { synced <- d.Set([]byte("synced"), []byte("v"), Sync) }()
	held.release()
	if err := <-synced; !errors.Is(err, injected) {
		t.Fatalf("a Sync write after the old log's failed sync: %v", err)
	}
	if err := d.Set([]byte("later"), []byte("v"), NoSync); err == nil || !strings.Contains(err.Error(), "no more writes") {
		t.Fatalf("a write after the old log's failed sync: %v", err)
	}
	expectKeys(t, d, "b", 10) // reads go on
	if err := d.Close(); !errors.Is(err, injected) {
		t.Fatalf("Close after the old log's failed sync: %v", err)
	}
	if n := bgErrs.Load(); n != 1 {
		t.Fatalf("BackgroundError called %d times, want 1", n)
	}
	efs.SetInjector(nil)
	d = mustOpen(t, "/db", memOpts(mem))
	defer d.Close()
	expectKeys(t, d, "a", 10)
	expectKeys(t, d, "b", 10)
	expect(t, d, "later", "")
	if err := d.Set([]byte("again"), []byte("v"), Sync); err != nil {
		t.Fatalf("the reopened store refuses writes: %v", err)
	}
}

// TestCloseWaitsForFailedOldLogSync: when the old log's sync fails while
// Close waits for it, Close returns only once the failure is reported: no
// BackgroundError call runs or comes after it returns, and no goroutine of
// the store is left.
func TestCloseWaitsForFailedOldLogSync(t *testing.T) {
	for range 3 {
		efs := vfs.NewErrorFS(vfs.NewMem())
		o := memOpts(efs)
		var running, calls atomic.Int32
		o.EventListener.BackgroundError = func(error) {
			running.Add(1)
			time.Sleep(50 * time.Millisecond) // a listener that logs, say
			calls.Add(1)
			running.Add(-1)
		}
		d := mustOpen(t, "/db", o)
		setKeys(t, d, "a", 10)
		held := holdLogSync(t, efs, d, currentLog(d), errors.New("injected EIO"), false)
		rotate(t, d)
		held.waitReached(t)
		setKeys(t, d, "b", 10)
		closed := make(chan error, 1)
		go func() { closed <- d.Close() }()
		time.Sleep(10 * time.Millisecond)
		held.release()
		if err := <-closed; err == nil {
			t.Fatal("Close returned nil after the old log's sync failed")
		}
		if n := running.Load(); n != 0 {
			t.Fatal("BackgroundError still runs after Close returned")
		}
		if left := storeGoroutines(); left != "" {
			t.Fatalf("goroutines of the store left after Close returned:\n%s", left)
		}
		n := calls.Load()
		time.Sleep(100 * time.Millisecond)
		if calls.Load() != n || n != 1 {
			t.Fatalf("BackgroundError called %d times by Close's return, %d times after; want once, before", n, calls.Load()-n)
		}
	}
}

// storeGoroutines returns the stacks of the goroutines running a log's
// follow or a WAL failure's report, which a store's Close must have waited
// for. A goroutine Close waited for may still be seen for an instant as it
// returns (its deferred close is what Close waited for), so the stacks are
// taken again until none is left or a second has passed.
func storeGoroutines() string {
	var left []string
	for try := 0; try < 100; try++ {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		left = left[:0]
		for _, g := range strings.Split(string(buf), "\n\n") {
			if strings.Contains(g, "bloomkv.(*logFile).follow") || strings.Contains(g, "bloomkv.(*DB).walFailed") {
				left = append(left, g)
			}
		}
		if len(left) == 0 {
			return ""
		}
		time.Sleep(10 * time.Millisecond)
	}
	return strings.Join(left, "\n\n")
}
