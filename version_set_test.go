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

// holdOp is an Injector step that holds up the first operation op on a
// file whose name contains part, once armed: it closes entered and waits
// for release, then lets the operation go on, or fail with fail if set.
type holdOp struct {
	op       vfs.Op
	part     string
	armed    atomic.Bool
	entered  chan struct{}
	release  chan struct{}
	fail     atomic.Pointer[error]
	writesAt atomic.Int64 // writes to files named with part once released
	released atomic.Bool
	once     sync.Once
}

// newHoldOp returns a holdOp, armed. The test's cleanup releases the
// operation, so that a failing test does not leave Close waiting for it
// (when the test closes its store at cleanup, registered before).
func newHoldOp(t *testing.T, op vfs.Op, part string) *holdOp {
	h := &holdOp{op: op, part: part, entered: make(chan struct{}), release: make(chan struct{})}
	h.armed.Store(true)
	t.Cleanup(h.let)
	return h
}

// let releases the held operation (again: no effect).
func (h *holdOp) let() { h.once.Do(func() { close(h.release) }) }

func (h *holdOp) inject(op vfs.Op, name string) error {
	if !strings.Contains(name, h.part) {
		return nil
	}
	if op == vfs.OpWrite && h.released.Load() {
		h.writesAt.Add(1)
	}
	if op != h.op || !h.armed.CompareAndSwap(true, false) {
		return nil
	}
	close(h.entered)
	<-h.release
	h.released.Store(true)
	if err := h.fail.Load(); err != nil {
		return *err
	}
	return nil
}

// await waits for the held operation to begin.
func (h *holdOp) await(t *testing.T) {
	t.Helper()
	select {
	case <-h.entered:
	case <-time.After(hangLimit):
		t.Fatalf("no %v of a file named with %q began", h.op, h.part)
	}
}

// done waits for the error of a step that must finish: while an operation
// is held up, or once it is let go.
func done(t *testing.T, what string, ch <-chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(hangLimit):
		t.Fatalf("%s waited for the file operation held up", what)
		return nil
	}
}

// TestCommitsGoOnDuringAManifestSync holds up the manifest's sync of a
// flush's edit: writes and reads carry on meanwhile, reads still finding
// the flushed memtable's keys, and the edit is installed once the sync ends.
func TestCommitsGoOnDuringAManifestSync(t *testing.T) {
	e := vfs.NewErrorFS(vfs.NewMem())
	d := mustOpen(t, "/db", memOpts(e))
	closeAtCleanup(t, d)
	for i := range 200 {
		if err := d.Set([]byte(fmt.Sprintf("k%04d", i)), []byte(fmt.Sprint("v", i)), NoSync); err != nil {
			t.Fatal(err)
		}
	}
	tables := func() (n int) {
		for _, l := range d.Metrics().Levels {
			n += l.Files
		}
		return n
	}
	before := tables()
	h := newHoldOp(t, vfs.OpSync, "MANIFEST")
	e.SetInjector(h.inject)
	flushed := make(chan error, 1)
	go func() { flushed <- d.Flush() }()
	h.await(t)

	set := make(chan error, 1)
	go func() { set <- d.Set([]byte("during"), []byte("sync"), NoSync) }()
	if err := done(t, "a Set", set); err != nil {
		t.Fatal(err)
	}
	expect(t, d, "k0007", "v7")
	expect(t, d, "during", "sync")
	if n := tables(); n != before {
		t.Fatalf("the store holds %d tables while the flush's edit is being synced, %d before: the edit was installed before it was durable", n, before)
	}
	h.let()
	if err := done(t, "Flush", flushed); err != nil {
		t.Fatal(err)
	}
	if n := tables(); n != before+1 {
		t.Fatalf("the store holds %d tables after the flush, %d before", n, before)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d = mustOpen(t, "/db", memOpts(e))
	closeAtCleanup(t, d)
	expect(t, d, "k0199", "v199")
	expect(t, d, "during", "sync")
}

// TestCommitsGoOnDuringATableRemoval holds up the removal of a table a
// compaction replaced: writes carry on meanwhile, and Compact returns once
// the table is gone.
func TestCommitsGoOnDuringATableRemoval(t *testing.T) {
	e := vfs.NewErrorFS(vfs.NewMem())
	d := mustOpen(t, "/db", memOpts(e))
	closeAtCleanup(t, d)
	// Held from the start: the first table removal, whether of a
	// compaction the flushes start or of Compact's, waits, and Compact
	// waits for it (under load the flushes' compactions may leave Compact
	// nothing to replace).
	h := newHoldOp(t, vfs.OpRemove, ".sst")
	e.SetInjector(h.inject)
	for round := range 3 {
		for i := range 100 {
			if err := d.Set([]byte(fmt.Sprintf("k%04d", i)), []byte(fmt.Sprint("v", round)), NoSync); err != nil {
				t.Fatal(err)
			}
		}
		if err := d.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	compacted := make(chan error, 1)
	go func() { compacted <- d.Compact(nil, nil) }()
	h.await(t)

	set := make(chan error, 1)
	go func() { set <- d.Set([]byte("during"), []byte("removal"), NoSync) }()
	if err := done(t, "a Set", set); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-compacted:
		t.Fatalf("Compact returned (%v) before the tables it replaced were removed", err)
	default:
	}
	h.let()
	if err := done(t, "Compact", compacted); err != nil {
		t.Fatal(err)
	}
	if stray := strayTables(t, d, e); len(stray) > 0 {
		t.Fatalf("after Compact the directory still holds the tables it replaced: %v", stray)
	}
	expect(t, d, "k0042", "v2")
	expect(t, d, "during", "removal")
}

// TestNoEditAfterAFailedManifestSync starts an Ingest while a flush's edit
// is being synced, then fails that sync: the ingest, which waited for the
// edit, fails without writing to the manifest, since the failed edit may or
// may not be durable, and the store reopens with the memtable's writes and
// without the ingested table.
func TestNoEditAfterAFailedManifestSync(t *testing.T) {
	mem := vfs.NewMem()
	e := vfs.NewErrorFS(mem)
	d := mustOpen(t, "/db", memOpts(e))
	closeAtCleanup(t, d)
	for i := range 100 {
		if err := d.Set(diffKey(i), []byte("mem"), NoSync); err != nil {
			t.Fatal(err)
		}
	}
	setsTable(t, mem, "/in/1.sst", 1000, 1100, "ing", map[string]string{})
	h := newHoldOp(t, vfs.OpSync, "MANIFEST")
	injected := fmt.Errorf("manifest sync: %w", vfs.ErrInjected)
	h.fail.Store(&injected)
	e.SetInjector(h.inject)
	flushed := make(chan error, 1)
	go func() { flushed <- d.Flush() }()
	h.await(t)

	ingested := make(chan error, 1)
	go func() { ingested <- d.Ingest([]string{"/in/1.sst"}) }()
	waitForGoroutineIn(t, "(*DB).waitEditLocked")
	h.let()
	if err := done(t, "Flush", flushed); !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("Flush with a failing manifest sync: %v", err)
	}
	if err := done(t, "Ingest", ingested); !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("Ingest after a failed manifest sync: %v; want the sync's error", err)
	}
	if n := h.writesAt.Load(); n != 0 {
		t.Fatalf("%d writes to the manifest after its sync failed", n)
	}
	d.Close()
	e.SetInjector(nil)
	d = mustOpen(t, "/db", memOpts(e))
	defer d.Close()
	for _, i := range []int{0, 99} {
		expect(t, d, string(diffKey(i)), "mem")
	}
	expect(t, d, string(diffKey(1000)), "")
	if stray := strayTables(t, d, e); len(stray) > 0 {
		t.Fatalf("after reopening, the directory holds tables no version names: %v", stray)
	}
}

// TestFormatRaisesInTurn raises the format version twice at once, the
// higher raise's edit held at its sync: the lower one, which waited for it,
// finds nothing to do, and the store reopens at the higher version. (Had
// it compared the versions before waiting, it would have recorded the
// lower one after the higher, which Open refuses.)
func TestFormatRaisesInTurn(t *testing.T) {
	e := vfs.NewErrorFS(vfs.NewMem())
	o := memOpts(e)
	o.FormatVersion = FormatOriginal
	d := mustOpen(t, "/db", o)
	closeAtCleanup(t, d)
	h := newHoldOp(t, vfs.OpSync, "MANIFEST")
	e.SetInjector(h.inject)
	high := make(chan error, 1)
	go func() { high <- d.RatchetFormatVersion(FormatNewest) }()
	h.await(t)
	low := make(chan error, 1)
	go func() { low <- d.RatchetFormatVersion(FormatIngest) }()
	waitForGoroutineIn(t, "(*DB).waitEditLocked")
	h.let()
	for _, ch := range []chan error{high, low} {
		if err := done(t, "RatchetFormatVersion", ch); err != nil {
			t.Fatal(err)
		}
	}
	if v := d.FormatVersion(); v != FormatNewest {
		t.Fatalf("format version %v after raises to %v and %v", v, FormatNewest, FormatIngest)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	o.FormatVersion = 0
	d = mustOpen(t, "/db", o)
	closeAtCleanup(t, d)
	if v := d.FormatVersion(); v != FormatNewest {
		t.Fatalf("reopened at format version %v; want %v", v, FormatNewest)
	}
}

// TestNoCompactionPickedDuringAnIngestEdit ingests a table into the last
// level while level 0 holds tables on both sides of it, with the
// compactor held until the ingest's edit is being synced. Picked from the
// version that edit replaces, a compaction of level 0 would write an
// output spanning the ingested table into its level; picked after, it
// takes the table in. Either way no edit may fail and every key reads.
func TestNoCompactionPickedDuringAnIngestEdit(t *testing.T) {
	mem := vfs.NewMem()
	e := vfs.NewErrorFS(mem)
	o := memOpts(e)
	o.L0CompactionThreshold = 2
	o.MaxConcurrentCompactions = 1
	hold, held := make(chan struct{}), atomic.Bool{}
	var once sync.Once
	let := func() { once.Do(func() { close(hold) }) }
	o.EventListener.CompactionEnd = func(CompactionInfo) {
		if held.CompareAndSwap(false, true) {
			<-hold
		}
	}
	d := mustOpen(t, "/db", o)
	closeAtCleanup(t, d)
	t.Cleanup(let)
	flushed := func(keys ...int) {
		t.Helper()
		for _, k := range keys {
			if err := d.Set(diffKey(k), []byte("old"), NoSync); err != nil {
				t.Fatal(err)
			}
		}
		if err := d.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	flushed(0)
	flushed(0) // two tables: the first compaction, held in CompactionEnd
	waitFor(t, "the first compaction to end", held.Load)
	flushed(1)
	flushed(1)
	flushed(999)
	if n := d.Metrics().Levels[0].Files; n < 3 {
		t.Fatalf("level 0 holds %d tables; the test needs 3 there", n)
	}
	setsTable(t, mem, "/in/1.sst", 500, 501, "ing", map[string]string{})
	h := newHoldOp(t, vfs.OpSync, "MANIFEST")
	e.SetInjector(h.inject)
	ingested := make(chan error, 1)
	go func() { ingested <- d.Ingest([]string{"/in/1.sst"}) }()
	h.await(t)
	let()
	// The compactor is free to pick now: give it the time to, were it
	// allowed during the edit.
	time.Sleep(20 * time.Millisecond)
	h.let()
	if err := done(t, "Ingest", ingested); err != nil {
		t.Fatal(err)
	}
	waitForCompactions(t, d)
	if err := d.Set([]byte("after"), []byte("v"), NoSync); err != nil {
		t.Fatalf("the store failed: %v", err)
	}
	expect(t, d, string(diffKey(500)), "ing-500")
	for _, k := range []int{0, 1, 999} {
		expect(t, d, string(diffKey(k)), "old")
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d = mustOpen(t, "/db", memOpts(mem))
	closeAtCleanup(t, d)
	expect(t, d, string(diffKey(500)), "ing-500")
}

// waitForGoroutineIn waits until some goroutine's stack holds fn.
func waitForGoroutineIn(t *testing.T, fn string) {
	t.Helper()
	buf := make([]byte, 1<<20)
	waitFor(t, "a goroutine in "+fn, func() bool {
		return strings.Contains(string(buf[:runtime.Stack(buf, true)]), fn)
	})
}
