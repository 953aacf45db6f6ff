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

// listenerProbe is an EventListener whose every function reads the store
// it listens to: Metrics, Get of a key written before, and a snapshot (which
// takes the DB's lock, so a listener called with it held never returns). It
// records which functions ran and what went wrong in them.
type listenerProbe struct {
	db    atomic.Pointer[DB]
	key   string
	value string

	mu       sync.Mutex
	calls    map[string]int
	problems []string
}

// hangLimit bounds how long a listener's reads may take before the probe
// reports them stuck: far beyond what they need, short of the test timeout,
// so that a listener called with a lock held fails with a message instead
// of hanging the run.
const hangLimit = 20 * time.Second

func (p *listenerProbe) called(name string) {
	d := p.db.Load()
	if d == nil {
		return // before Open returned: nothing to read yet
	}
	done := make(chan string, 1)
	go func() { done <- p.read(d) }()
	var problem string
	select {
	case problem = <-done:
	case <-time.After(hangLimit):
		problem = "reads did not return: the listener was called with a lock of the DB held"
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls[name]++
	if problem != "" {
		p.problems = append(p.problems, name+": "+problem)
	}
}

// read makes the reads a listener may make, and describes what failed.
func (p *listenerProbe) read(d *DB) string {
	if m := d.Metrics(); m == nil {
		return "Metrics returned nil"
	}
	got, err := d.Get([]byte(p.key))
	if err != nil || string(got) != p.value {
		return fmt.Sprintf("Get(%q) = %q, %v; want %q", p.key, got, err, p.value)
	}
	s, err := d.NewSnapshot()
	if err != nil {
		return fmt.Sprintf("NewSnapshot: %v", err)
	}
	if err := s.Close(); err != nil {
		return fmt.Sprintf("Snapshot.Close: %v", err)
	}
	return ""
}

func (p *listenerProbe) listener() EventListener {
	return EventListener{
		FlushBegin:      func(FlushInfo) { p.called("FlushBegin") },
		FlushEnd:        func(FlushInfo) { p.called("FlushEnd") },
		CompactionBegin: func(CompactionInfo) { p.called("CompactionBegin") },
		CompactionEnd:   func(CompactionInfo) { p.called("CompactionEnd") },
		WriteStallBegin: func(string) { p.called("WriteStallBegin") },
		WriteStallEnd:   func() { p.called("WriteStallEnd") },
		BackgroundError: func(error) { p.called("BackgroundError") },
	}
}

func (p *listenerProbe) count(name string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls[name]
}

// TestListenersMayReadTheStore: every EventListener function runs with no
// lock of the DB held, so each may call Metrics, Get and NewSnapshot. The
// test makes every event happen: flushes, compactions, a write stall on
// level 0 (compactions held back), and a background error (a flush that
// cannot create its table).
func TestListenersMayReadTheStore(t *testing.T) {
	efs := vfs.NewErrorFS(vfs.NewMem())
	p := &listenerProbe{key: "probe", value: "here", calls: map[string]int{}}
	o := memOpts(efs)
	o.L0CompactionThreshold, o.L0StopWritesThreshold = 2, 3
	o.EventListener = p.listener()
	d := mustOpen(t, "/db", o)
	closeAtCleanup(t, d)
	if err := d.Set([]byte(p.key), []byte(p.value), Sync); err != nil {
		t.Fatal(err)
	}
	p.db.Store(d)

	// A stall: compactions wait at the gate while the writer fills level 0.
	release := holdCompactions(t, d)
	done := fillInBackground(d, 6000)
	for p.count("WriteStallBegin") == 0 {
		select {
		case err := <-done:
			t.Fatalf("the writer finished with compactions held back, no stall: %v", err)
		default:
			runtime.Gosched()
		}
	}
	release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	// FlushEnd comes before the Flush waiting for it returns.
	if err := d.Set([]byte("last"), []byte("v"), NoSync); err != nil {
		t.Fatal(err)
	}
	before := p.count("FlushEnd")
	if err := d.Flush(); err != nil {
		t.Fatal(err)
	}
	if after := p.count("FlushEnd"); after == before {
		t.Errorf("Flush returned before FlushEnd was called (FlushEnd calls: %d before and after)", before)
	}

	// A background error: the next flush cannot create its table. The
	// compactions the fill left due run first, or one of them would meet
	// the injected failure before the flush does.
	waitForCompactions(t, d)
	efs.SetInjector(func(op vfs.Op, name string) error {
		if op == vfs.OpCreate && strings.HasSuffix(name, ".sst") {
			return errors.New("injected ENOSPC")
		}
		return nil
	})
	if err := d.Set([]byte("doomed"), []byte("v"), NoSync); err != nil {
		t.Fatal(err)
	}
	if err := d.Flush(); err == nil {
		t.Fatal("Flush succeeded with table creation failing")
	}
	efs.SetInjector(nil)
	// BackgroundError runs on the flusher, once the store has failed: it
	// may come after the Flush that met the failure returns.
	waitFor(t, "BackgroundError to be called", func() bool { return p.count("BackgroundError") > 0 })

	p.mu.Lock()
	defer p.mu.Unlock()
	for _, name := range []string{"FlushBegin", "FlushEnd", "CompactionBegin", "CompactionEnd", "WriteStallBegin", "WriteStallEnd", "BackgroundError"} {
		if p.calls[name] == 0 {
			t.Errorf("%s was never called", name)
		}
	}
	for _, problem := range p.problems {
		t.Error(problem)
	}
}

// TestCloseReportsAWALFailureWithNoLockHeld: when the WAL's last sync fails
// in Close, BackgroundError hears of it with neither of the DB's locks held
// (Close records the failure under them and reports it after).
func TestCloseReportsAWALFailureWithNoLockHeld(t *testing.T) {
	efs := vfs.NewErrorFS(vfs.NewMem())
	o := memOpts(efs)
	var d *DB
	var calls, locked int
	o.EventListener.BackgroundError = func(error) {
		calls++
		// Another goroutine must be able to take each lock: a background
		// goroutine may hold one for a moment (a TryLock here would count
		// that), but one the caller holds stays held while it waits.
		for _, mu := range []*sync.Mutex{&d.mu.Mutex, &d.commitMu} {
			took := make(chan struct{})
			go func() {
				mu.Lock()
				//lint:ignore SA2001 taking the lock is the test
				mu.Unlock()
				close(took)
			}()
			select {
			case <-took:
			case <-time.After(10 * time.Second):
				locked++ // the caller holds it: the goroutine is left to take it once it returns
			}
		}
	}
	d = mustOpen(t, "/db", o)
	if err := d.Set([]byte("k"), []byte("v"), NoSync); err != nil {
		t.Fatal(err)
	}
	efs.SetInjector(func(op vfs.Op, name string) error {
		if op == vfs.OpSync && strings.HasSuffix(name, ".log") {
			return errors.New("injected EIO")
		}
		return nil
	})
	if err := d.Close(); err == nil {
		t.Fatal("Close returned nil after the WAL's sync failed")
	}
	if calls != 1 {
		t.Fatalf("BackgroundError called %d times, want 1", calls)
	}
	if locked > 0 {
		t.Fatalf("BackgroundError ran with %d of the DB's locks held", locked)
	}
}
