package bloomkv

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bloomkv/bloomkv/sstable"
	"github.com/bloomkv/bloomkv/vfs"
)

// heldFS wraps a file system for TestCloseAtEveryStep. Once counting
// starts it numbers the operations that change the store's files (Create,
// Remove, Rename, SyncDir, and Write, Sync and Close of a file it created),
// holds the one numbered hold until released, and records every operation,
// of any kind, made after the test marks Close as returned.
type heldFS struct {
	vfs.FS
	held    chan string   // gets the held operation, when it comes
	release chan struct{} // closed (letGo) to let it go on
	once    sync.Once

	mu       sync.Mutex
	counting bool
	ops      []string // the operations counted so far
	hold     int      // the operation to hold; -1: none
	closed   bool
	late     []string // operations made after Close returned
}

func newHeldFS(fs vfs.FS) *heldFS {
	return &heldFS{FS: fs, held: make(chan string, 1), release: make(chan struct{}), hold: -1}
}

// count starts numbering operations from 0, holding operation hold (-1:
// none).
func (h *heldFS) count(hold int) {
	h.mu.Lock()
	h.counting, h.ops, h.hold = true, nil, hold
	h.mu.Unlock()
}

// counted returns the operations counted so far.
func (h *heldFS) counted() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.ops)
}

func (h *heldFS) letGo() { h.once.Do(func() { close(h.release) }) }

// closeReturned marks Close as returned: every operation from now on is late.
func (h *heldFS) closeReturned() {
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
}

func (h *heldFS) lateOps() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.late)
}

// op notes an operation, and holds it if it is the one to hold.
func (h *heldFS) op(what, name string, changes bool) {
	h.mu.Lock()
	if h.closed {
		h.late = append(h.late, what+" "+name)
	}
	hold := false
	if changes && h.counting {
		hold = len(h.ops) == h.hold
		h.ops = append(h.ops, what+" "+name)
	}
	h.mu.Unlock()
	if hold {
		h.held <- what + " " + name
		<-h.release
	}
}

func (h *heldFS) Create(name string) (vfs.File, error) {
	h.op("create", name, true)
	f, err := h.FS.Create(name)
	if err != nil {
		return nil, err
	}
	return &heldFile{File: f, h: h, name: name, writable: true}, nil
}

func (h *heldFS) Open(name string) (vfs.File, error) {
	h.op("open", name, false)
	f, err := h.FS.Open(name)
	if err != nil {
		return nil, err
	}
	return &heldFile{File: f, h: h, name: name}, nil
}

func (h *heldFS) Remove(name string) error {
	h.op("remove", name, true)
	return h.FS.Remove(name)
}

func (h *heldFS) Rename(oldname, newname string) error {
	h.op("rename", oldname, true)
	return h.FS.Rename(oldname, newname)
}

func (h *heldFS) List(dir string) ([]string, error) {
	h.op("list", dir, false)
	return h.FS.List(dir)
}

func (h *heldFS) SyncDir(dir string) error {
	h.op("syncdir", dir, true)
	return h.FS.SyncDir(dir)
}

type heldFile struct {
	vfs.File
	h        *heldFS
	name     string
	writable bool
}

func (f *heldFile) Write(p []byte) (int, error) {
	f.h.op("write", f.name, true)
	return f.File.Write(p)
}

func (f *heldFile) Sync() error {
	f.h.op("sync", f.name, true)
	return f.File.Sync()
}

func (f *heldFile) Close() error {
	f.h.op("close", f.name, f.writable)
	return f.File.Close()
}

func (f *heldFile) ReadAt(p []byte, off int64) (int, error) {
	f.h.op("read", f.name, false)
	return f.File.ReadAt(p, off)
}

func (f *heldFile) Read(p []byte) (int, error) {
	f.h.op("read", f.name, false)
	return f.File.Read(p)
}

// closeStepStore opens a store with o (and sizes of its own) holding a
// table in the last level, a table of newer versions over it in level 0,
// and newer writes still in the memtable, every write synced; it returns
// the store and its contents. A Flush then writes a second level-0 table,
// which makes level 0 due for a compaction into the last level, written as
// several tables.
func closeStepStore(t *testing.T, o *Options) (*DB, map[string]string) {
	t.Helper()
	o.TargetFileSize = 8 << 10
	o.Compression = sstable.NoCompression // else the values, runs of zeros, make a single small output
	o.MaxConcurrentCompactions = 1        // one order of operations, run to run
	d := mustOpen(t, "/db", o)
	want := map[string]string{}
	write := func(round string, step int, del func(i int) bool) {
		t.Helper()
		b := d.NewBatch()
		for i := 0; i < 200; i += step {
			k := fmt.Sprintf("k%04d", i)
			var err error
			if del(i) {
				err = b.Delete([]byte(k))
				delete(want, k)
			} else {
				v := fmt.Sprintf("%s-%d-%0100d", round, i, i)
				err = b.Set([]byte(k), []byte(v))
				want[k] = v
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if err := d.Apply(b, Sync); err != nil {
			t.Fatal(err)
		}
	}
	never := func(int) bool { return false }
	write("a", 1, never) // into the last level, where a lone table moves
	if err := d.Flush(); err != nil {
		t.Fatal(err)
	}
	waitForCompactions(t, d)
	write("b", 2, never) // level 0: over the last level's table, it stays
	if err := d.Flush(); err != nil {
		t.Fatal(err)
	}
	waitForCompactions(t, d)
	write("c", 3, func(i int) bool { return i%9 == 0 }) // the memtable
	if m := d.Metrics(); m.Levels[0].Files != 1 || m.Levels[len(m.Levels)-1].Files != 1 {
		t.Fatalf("the store's shape is not the one the test needs: tables per level %v", levelFiles(m))
	}
	return d, want
}

// flushAndCompact is the work TestCloseAtEveryStep cuts short: a Flush,
// then the compaction it makes due, to the end (or until Close).
func flushAndCompact(t *testing.T, d *DB) chan error {
	done := make(chan error, 1)
	go func() {
		err := d.Flush()
		waitForCompactions(t, d) // it returns at Close
		done <- err
	}()
	return done
}

// TestCloseAtEveryStep calls Close while a flush, or the compaction that
// follows it, is held at one of its file operations, for each of them in
// turn, and once with the work done: a held create, write, sync, close,
// directory sync or removal goes on once Close has begun. After Close
// returns, nothing touches the store's files (not the background work, and
// not a read that held tables the compaction replaced, released after
// Close), the directory holds no file that the store does not need (an
// output of a compaction Close cut short included), not even after a crash,
// and the store reopens with every acknowledged write. It runs with no read
// under way, and with an iterator opened before the work and closed after
// Close.
func TestCloseAtEveryStep(t *testing.T) {
	for _, withIter := range []bool{false, true} {
		variant := "no read under way"
		if withIter {
			variant = "iterator open"
		}
		t.Run(variant, func(t *testing.T) {
			// Close after the work, which counts its operations.
			ops, _ := closeAtStep(t, -1, withIter)
			t.Logf("the flush and the compaction make %d file operations: %v", len(ops), ops)
			stops := 0
			for step := range ops {
				t.Run(fmt.Sprintf("op %d", step), func(t *testing.T) {
					if _, stopped := closeAtStep(t, step, withIter); stopped {
						stops++
					}
				})
			}
			t.Logf("Close stopped the compaction at %d of the %d operations", stops, len(ops))
			if stops == 0 {
				t.Error("Close never stopped the compaction: the test did not exercise the deletion of a cut-short compaction's outputs")
			}
		})
	}
}

// closeAtStep is one case of TestCloseAtEveryStep: Close with the work held
// at operation step, or done when step is -1. It returns the operations
// the work made before Close, and whether Close stopped a compaction.
func closeAtStep(t *testing.T, step int, withIter bool) (ops []string, stoppedCompaction bool) {
	mem := vfs.NewMem()
	fs := newHeldFS(mem)
	t.Cleanup(fs.letGo) // a failing test leaves no operation held
	o := memOpts(fs)
	var stopped atomic.Bool
	o.EventListener.CompactionEnd = func(info CompactionInfo) {
		if errors.Is(info.Err, ErrClosed) {
			stopped.Store(true)
		}
	}
	d, want := closeStepStore(t, o)
	d.onClose = fs.letGo
	var it *Iterator
	if withIter {
		var err error
		if it, err = d.NewIter(nil); err != nil {
			t.Fatal(err)
		}
		if !it.First() {
			t.Fatalf("the iterator found nothing: %v", it.Error())
		}
	}
	fs.count(step)
	work := flushAndCompact(t, d)
	held := "nothing: the work is done"
	if step < 0 {
		if err := <-work; err != nil {
			t.Fatal(err)
		}
		close(work)
		if d.Metrics().Compactions == 0 {
			t.Fatal("the work ran no compaction: the test would exercise only a flush")
		}
	} else {
		select {
		case held = <-fs.held:
		case err := <-work:
			// The held operation may be off the work's path (the
			// replaced log's sync and close, which the new log's
			// writer makes), and the work done meanwhile.
			select {
			case held = <-fs.held:
				work <- err // for the receive after Close
			case <-time.After(5 * time.Second):
				t.Fatalf("the work ended (%v) without reaching operation %d (%v): its operations are not the same run to run", err, step, fs.counted())
			}
		}
	}
	ops = fs.counted()
	if err := d.Close(); err != nil {
		t.Fatalf("Close with %s held: %v", held, err)
	}
	fs.closeReturned()
	<-work // Flush's error, if any, is ErrClosed: Close came first
	if late := fs.lateOps(); len(late) > 0 {
		t.Errorf("with %s held at Close, after Close returned: %v", held, late)
	}
	assertNoLeftovers(t, mem, "/db")
	assertNoLeftovers(t, mem.CrashClone(), "/db") // the deletions are synced
	if it != nil {
		it.Close()
		if late := fs.lateOps(); len(late) > 0 {
			t.Errorf("with %s held at Close, an iterator closed after Close: %v", held, late)
		}
		assertNoLeftovers(t, mem, "/db")
	}

	d2 := mustOpen(t, "/db", memOpts(mem))
	defer d2.Close()
	got := map[string]string{}
	for i := range 200 {
		k := fmt.Sprintf("k%04d", i)
		v, err := d2.Get([]byte(k))
		switch {
		case err == nil:
			got[k] = string(v)
		case !errors.Is(err, ErrNotFound):
			t.Fatalf("reopened, Get(%s): %v", k, err)
		}
	}
	if !maps.Equal(got, want) {
		t.Fatalf("with %s held at Close, the reopened store differs from the acknowledged writes: %s", held, diffSummary(got, want))
	}
	if _, err := d2.Check(); err != nil {
		t.Fatalf("reopened, Check: %v", err)
	}
	return ops, stopped.Load()
}
