package bloomkv

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/bloomkv/bloomkv/vfs"
)

// TestWALSyncFailure: a failed fsync fails its write and every later write
// (it is never retried as if it had succeeded); reads keep working; after the
// fault is gone and the store reopened, every acknowledged write is there.
func TestWALSyncFailure(t *testing.T) {
	mem := vfs.NewMem()
	efs := vfs.NewErrorFS(mem)
	d := mustOpen(t, "/db", memOpts(efs))
	for i := range 10 {
		if err := d.Set([]byte(fmt.Sprintf("k%d", i)), []byte("v"), Sync); err != nil {
			t.Fatal(err)
		}
	}
	efs.SetInjector(func(op vfs.Op, name string) error {
		if op == vfs.OpSync && strings.HasSuffix(name, ".log") {
			return errors.New("EIO")
		}
		return nil
	})
	if err := d.Set([]byte("lost"), []byte("v"), Sync); err == nil {
		t.Fatal("a Sync write whose fsync failed returned success")
	}
	efs.SetInjector(nil) // the device recovers, but the store must not trust it
	if err := d.Set([]byte("after"), []byte("v"), Sync); err == nil || !strings.Contains(err.Error(), "no more writes") {
		t.Fatalf("write after a failed fsync: %v", err)
	}
	expect(t, d, "k3", "v") // reads work
	d.Close()
	d = mustOpen(t, "/db", memOpts(mem))
	defer d.Close()
	for i := range 10 {
		expect(t, d, fmt.Sprintf("k%d", i), "v")
	}
	if err := d.Set([]byte("again"), []byte("v"), Sync); err != nil {
		t.Fatalf("reopened store refuses writes: %v", err)
	}
}

// TestFlushFailure: a flush that cannot write its table stops writes with a
// clear error and tells the EventListener; the data stays in the WAL and is
// recovered by the next Open.
func TestFlushFailure(t *testing.T) {
	mem := vfs.NewMem()
	efs := vfs.NewErrorFS(mem)
	var bgErr error
	o := memOpts(efs)
	o.EventListener.BackgroundError = func(err error) { bgErr = err }
	d := mustOpen(t, "/db", o)
	efs.SetInjector(func(op vfs.Op, name string) error {
		if op == vfs.OpCreate && strings.HasSuffix(name, ".sst") {
			return errors.New("ENOSPC")
		}
		return nil
	})
	for i := range 100 {
		if err := d.Set([]byte(fmt.Sprintf("k%03d", i)), []byte("v"), NoSync); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Flush(); err == nil || !strings.Contains(err.Error(), "ENOSPC") {
		t.Fatalf("Flush with a failing disk: %v", err)
	}
	if err := d.Set([]byte("x"), nil, NoSync); err == nil {
		t.Fatal("write accepted after a failed flush")
	}
	if bgErr == nil {
		t.Fatal("the EventListener was not told")
	}
	expect(t, d, "k050", "v")
	d.Close()
	efs.SetInjector(nil)
	d = mustOpen(t, "/db", memOpts(mem))
	defer d.Close()
	for i := range 100 {
		expect(t, d, fmt.Sprintf("k%03d", i), "v")
	}
}

// walWriteFault fails every write to a WAL once armed, with injected.
func walWriteFault(injected error, alsoTables bool) vfs.Injector {
	return func(op vfs.Op, name string) error {
		switch {
		case op == vfs.OpWrite && strings.HasSuffix(name, ".log"):
			return injected
		case alsoTables && op == vfs.OpCreate && strings.HasSuffix(name, ".sst"):
			return injected
		}
		return nil
	}
}

// setUntilRefused makes NoSync writes until one is refused, and returns the
// keys of those acknowledged and the refusal.
func setUntilRefused(t *testing.T, d *DB) ([]string, error) {
	t.Helper()
	var acked []string
	for i := range 1_000_000 {
		k := fmt.Sprintf("k%07d", i)
		if err := d.Set([]byte(k), []byte("v"), NoSync); err != nil {
			return acked, err
		}
		acked = append(acked, k)
	}
	t.Fatal("a million writes were acknowledged after the WAL started failing")
	return nil, nil
}

// TestWALWriteFailureKeepsNoSyncWrites: NoSync commits return before their
// WAL record is written, so when the log's writer fails, writes already
// acknowledged are missing from the log. The store refuses writes from then
// on, flushes its memtable to a table instead, and Close reports the
// failure; after reopening, every acknowledged write is there.
func TestWALWriteFailureKeepsNoSyncWrites(t *testing.T) {
	mem := vfs.NewMem()
	efs := vfs.NewErrorFS(mem)
	o := memOpts(efs)
	var bgErrs atomic.Int32
	o.EventListener.BackgroundError = func(error) { bgErrs.Add(1) }
	d := mustOpen(t, "/db", o)
	if err := d.Set([]byte("before"), []byte("v"), Sync); err != nil {
		t.Fatal(err)
	}
	injected := errors.New("EIO")
	efs.SetInjector(walWriteFault(injected, false))
	acked, err := setUntilRefused(t, d)
	if !errors.Is(err, injected) {
		t.Fatalf("the refused write's error does not wrap the WAL's: %v", err)
	}
	if len(acked) == 0 {
		t.Fatal("no write was acknowledged before the WAL failed: the test shows nothing")
	}
	expect(t, d, acked[len(acked)-1], "v")
	if err := d.Set([]byte("later"), []byte("v"), Sync); err == nil {
		t.Fatal("a Sync write succeeded after the WAL failed")
	}
	cerr := d.Close()
	if !errors.Is(cerr, injected) {
		t.Fatalf("Close after a failed WAL write: %v", cerr)
	}
	if bgErrs.Load() == 0 {
		t.Fatal("the EventListener was not told")
	}

	efs.SetInjector(nil)
	d = mustOpen(t, "/db", memOpts(mem))
	defer d.Close()
	expect(t, d, "before", "v")
	for _, k := range acked {
		expect(t, d, k, "v")
	}
	if _, err := d.Check(); err != nil {
		t.Fatal(err)
	}
	if err := d.Set([]byte("again"), []byte("v"), Sync); err != nil {
		t.Fatalf("reopened store refuses writes: %v", err)
	}
}

// TestWALWriteFailureWithFailingFlush: when the flush that should save the
// writes a failed WAL lacks fails too, Close says that writes may be lost,
// and the store still reopens consistent, with everything synced before.
func TestWALWriteFailureWithFailingFlush(t *testing.T) {
	mem := vfs.NewMem()
	efs := vfs.NewErrorFS(mem)
	d := mustOpen(t, "/db", memOpts(efs))
	if err := d.Set([]byte("before"), []byte("v"), Sync); err != nil {
		t.Fatal(err)
	}
	injected := errors.New("EIO")
	efs.SetInjector(walWriteFault(injected, true))
	if _, err := setUntilRefused(t, d); !errors.Is(err, injected) {
		t.Fatalf("the refused write's error does not wrap the WAL's: %v", err)
	}
	cerr := d.Close()
	if !errors.Is(cerr, injected) || !strings.Contains(cerr.Error(), "may be lost") {
		t.Fatalf("Close after a failed WAL write and a failed flush: %v", cerr)
	}
	efs.SetInjector(nil)
	d = mustOpen(t, "/db", memOpts(mem))
	defer d.Close()
	expect(t, d, "before", "v")
	if _, err := d.Check(); err != nil {
		t.Fatal(err)
	}
}

// TestOpenFailsCleanly: I/O errors during Open return an error and leave
// nothing locked, so a later Open succeeds.
func TestOpenFailsCleanly(t *testing.T) {
	mem := vfs.NewMem()
	d := mustOpen(t, "/db", memOpts(mem))
	d.Set([]byte("k"), []byte("v"), Sync)
	d.Close()
	for op := vfs.OpCreate; op <= vfs.OpLock; op++ {
		efs := vfs.NewErrorFS(mem)
		o := op
		efs.SetInjector(vfs.FailOnce(&o, 0))
		if d, err := Open("/db", memOpts(efs)); err == nil {
			d.Close() // this op is not used by Open, or only after the point of no return
		}
		d := mustOpen(t, "/db", memOpts(mem))
		expect(t, d, "k", "v")
		d.Close()
	}
}

// TestFailedOpenAfterTornWAL: after a crash leaves a torn WAL, an Open that
// fails part way (here: the CURRENT rename) must leave a store the next Open
// recovers (review finding: a new empty WAL made the torn one "not the
// last", and every later Open failed).
func TestFailedOpenAfterTornWAL(t *testing.T) {
	fs := storeWithWAL(t, 20)
	name := walFile(t, fs)
	data := walRecords(t, fs, name)
	rewrite(t, fs, name, data[:len(data)-30])
	efs := vfs.NewErrorFS(fs)
	rename := vfs.OpRename
	efs.SetInjector(vfs.FailOnce(&rename, 0))
	if _, err := Open("/db", memOpts(efs)); err == nil {
		t.Fatal("Open succeeded despite the failed rename")
	}
	d := mustOpen(t, "/db", memOpts(fs))
	defer d.Close()
	for i := range 19 {
		expect(t, d, fmt.Sprintf("k%03d", i), strings.Repeat("v", 200))
	}
}

// TestCloseReportsAFailedSync: Close must not pass off a failed WAL sync as
// success by syncing again.
func TestCloseReportsAFailedSync(t *testing.T) {
	efs := vfs.NewErrorFS(vfs.NewMem())
	d := mustOpen(t, "/db", memOpts(efs))
	sync := vfs.OpSync
	efs.SetInjector(vfs.FailOnce(&sync, 0))
	if err := d.Set([]byte("k"), []byte("v"), Sync); err == nil {
		t.Fatal("write with a failed fsync succeeded")
	}
	efs.SetInjector(nil)
	if err := d.Close(); err == nil {
		t.Fatal("Close returned nil after a failed fsync")
	}
}

// faultOps are the operations TestIOErrorsAtRandom fails.
var faultOps = []vfs.Op{vfs.OpWrite, vfs.OpSync, vfs.OpRead, vfs.OpCreate, vfs.OpRename, vfs.OpRemove, vfs.OpOpen, vfs.OpSyncDir}

// faultInjector fails the n-th (0-based) operation of kind op, once, and
// records where. It counts the operations of that kind either way.
type faultInjector struct {
	op    vfs.Op
	n     int64
	count atomic.Int64
	fired atomic.Bool
	file  atomic.Value // string: the file the failure hit
}

func (f *faultInjector) inject(op vfs.Op, name string) error {
	if op != f.op || f.count.Add(1)-1 != f.n {
		return nil
	}
	f.file.Store(name)
	f.fired.Store(true)
	return fmt.Errorf("%w (trial's %s #%d) on %s", vfs.ErrInjected, op, f.n, name)
}

// TestIOErrorsAtRandom runs the mixed workload, with reads between the
// writes, on a file system that fails one operation (a write, fsync, read,
// create, rename, remove, open or directory sync) chosen at random. The call
// that meets the failure returns it, or the store refuses writes from then
// on with an error wrapping it; a failed write or flush is never followed by
// an acknowledged write (an fsync failure is not retried as if it had
// succeeded);
// reads go on answering correctly; and once the fault is gone, the store
// reopens (as is, and from a crash image) with every acknowledged write and
// passes Check.
func TestIOErrorsAtRandom(t *testing.T) {
	n := trials(24, 80, 1000)
	const nOps, nKeys = 200, 60
	fired := map[string]int{}
	failures, refused, openFailed, unfired := 0, 0, 0, 0
	for trial := range n {
		seed := uint64(trial)
		ops := mixedWorkload(seed, "key", nKeys, nOps)
		fop := faultOps[trial%len(faultOps)]
		probe := &faultInjector{op: fop, n: -1}
		runWithFault(t, seed, probe, ops)
		r := rand.New(rand.NewPCG(seed, 5))
		inj := &faultInjector{op: fop, n: r.Int64N(max(probe.count.Load(), 1))}
		res := runWithFault(t, seed, inj, ops)
		fail := func(format string, args ...any) {
			t.Helper()
			failures++
			file, _ := inj.file.Load().(string)
			t.Errorf("seed %d, %s #%d failing (on %q): "+format, append([]any{seed, fop, inj.n, file}, args...)...)
		}
		for _, p := range res.problems {
			fail("%s", p)
		}
		if !inj.fired.Load() {
			unfired++ // background work ran differently this time
		} else {
			file, _ := inj.file.Load().(string)
			fired[fop.String()+" "+fileLabel(file)]++
		}
		if res.refused {
			refused++
		}
		if res.openFailed {
			openFailed++
		}
		if inj.fired.Load() && fop != vfs.OpRemove && !res.reported {
			fail("no call returned the failure")
		}
		if res.image == nil {
			continue
		}
		// The fault is gone: the store as it is, and as a crash would
		// have left it, holds every acknowledged write.
		for _, c := range []struct {
			fs    *vfs.MemFS
			crash bool
		}{{res.fs, false}, {res.image, true}} {
			d, err := Open("/db", memOpts(c.fs))
			if err != nil {
				fail("reopen (crash %v): %v", c.crash, err)
				continue
			}
			got, err := readKeys(d, "key", nKeys)
			if err != nil {
				fail("reading after reopen (crash %v): %v", c.crash, err)
			} else if !res.matches(got, c.crash) {
				fail("after reopen (crash %v) the store holds neither the acknowledged writes nor those and the failed one: %s",
					c.crash, diffSummary(got, model(res.acked)))
			}
			if _, err := d.Check(); err != nil {
				fail("Check after reopen (crash %v): %v", c.crash, err)
			}
			if err := d.Close(); err != nil {
				fail("close after reopen (crash %v): %v", c.crash, err)
			}
		}
	}
	report(t, "faults", "%d trials, %d injected I/O errors (%v; %d trials' runs did not reach the chosen operation), %d Opens failed, %d stores refused writes after a failure; %d failures",
		n, n-unfired, fired, unfired, openFailed, refused, failures)
}

// faultRun is the outcome of one run of TestIOErrorsAtRandom's workload.
type faultRun struct {
	fs, image  *vfs.MemFS // the store's files after Close, and a crash image of them
	acked      []op       // the ops whose writes were acknowledged, in order
	lastSync   int        // len(acked) when the last Sync write was acknowledged
	failed     *op        // the first write that failed: it may or may not be applied
	failedAt   int        // len(acked) when it failed
	problems   []string
	reported   bool // some call returned an error wrapping the injected one
	refused    bool // writes were refused after a failure
	openFailed bool
}

// matches reports whether got is what the run may have left: the
// acknowledged writes with or without the failed one, and after a crash a
// prefix of those at least up to the last Sync write.
func (res *faultRun) matches(got map[string]string, crash bool) bool {
	seqs := [][]op{res.acked}
	if res.failed != nil {
		with := append(slices.Clone(res.acked[:res.failedAt]), *res.failed)
		seqs = append(seqs, append(with, res.acked[res.failedAt:]...))
	}
	for i, seq := range seqs {
		lo := len(seq)
		if crash {
			lo = res.lastSync
			if i == 1 && res.failedAt < res.lastSync {
				lo++
			}
		}
		if matchPrefix(got, seq, lo, len(seq)) >= 0 {
			return true
		}
	}
	return false
}

func runWithFault(t *testing.T, seed uint64, inj *faultInjector, ops []op) *faultRun {
	t.Helper()
	res := &faultRun{fs: vfs.NewMem()}
	efs := vfs.NewErrorFS(res.fs)
	efs.SetInjector(inj.inject)
	// check judges an error a call returned.
	check := func(what string, err error) {
		if err == nil {
			return
		}
		if errors.Is(err, vfs.ErrInjected) {
			res.reported = true
		} else if !errors.Is(err, ErrNotFound) {
			res.problems = append(res.problems, fmt.Sprintf("%s: an error that is not the injected one: %v", what, err))
		}
	}
	// The differential-file filter's reads belong to no call: a build, or
	// the read of tables moved into the base, that meets the failure logs
	// it, and the filter answers maybe meanwhile.
	buildLog := &injectedLog{messages: []string{diffBuildFailedMessage, diffMoveReadFailedMessage}}
	defer func() { res.reported = res.reported || buildLog.seen.Load() }()
	opts := func() *Options {
		o := memOpts(efs)
		o.Logger = slog.New(buildLog)
		return o
	}
	d, err := Open("/db", opts())
	if err != nil {
		check("Open", err)
		res.openFailed = true
		efs.SetInjector(nil)
		if d, err = Open("/db", opts()); err != nil {
			res.problems = append(res.problems, fmt.Sprintf("Open after a failed Open: %v", err))
			return res
		}
	}
	r := rand.New(rand.NewPCG(seed, 11))
	writeFailed := false
	for i, o := range ops {
		oo := o
		oo.then = ""
		err := oo.apply(d)
		check(fmt.Sprintf("op %d", i), err)
		switch {
		case err == nil && writeFailed:
			res.problems = append(res.problems, fmt.Sprintf("op %d: a write acknowledged after an earlier write failed", i))
		case err == nil:
			res.acked = append(res.acked, o)
			if o.sync {
				res.lastSync = len(res.acked)
			}
		case !writeFailed:
			res.failed, res.failedAt = &ops[i], len(res.acked)
		}
		if err != nil {
			if writeFailed {
				res.refused = true
			}
			writeFailed = true
		}
		var thenErr error
		switch o.then {
		case "flush":
			thenErr = d.Flush()
		case "compact":
			thenErr = d.Compact(nil, nil)
		}
		check(fmt.Sprintf("op %d: %s", i, o.then), thenErr)
		if thenErr != nil && o.then == "flush" {
			// A failed Compact may have failed in the foreground (opening
			// a table, say) and leave the store taking writes.
			writeFailed = true
		}
		// A read between writes: it answers correctly, or fails with the
		// injected error (once: reads work again after it).
		if r.IntN(3) == 0 {
			k := fmt.Sprintf("key%03d", r.IntN(60))
			before := inj.fired.Load()
			v, err := d.Get([]byte(k))
			if err != nil && !errors.Is(err, ErrNotFound) {
				check("Get "+k, err)
				if before {
					res.problems = append(res.problems, fmt.Sprintf("op %d: Get %s fails after the failure: %v", i, k, err))
				}
				continue
			}
			ok := false
			for _, m := range res.models() {
				want, present := m[k]
				ok = ok || (err == nil && present && string(v) == want) || (err != nil && !present)
			}
			if !ok {
				res.problems = append(res.problems, fmt.Sprintf("op %d: Get %s = %.12q, %v: a wrong answer", i, k, v, err))
			}
		}
	}
	check("Close", d.Close())
	res.image = res.fs.CrashClone()
	return res
}

// models returns the contents the store may show now.
func (res *faultRun) models() []map[string]string {
	ms := []map[string]string{model(res.acked)}
	if res.failed != nil {
		m := model(res.acked[:res.failedAt])
		res.failed.applyTo(m)
		for _, o := range res.acked[res.failedAt:] {
			o.applyTo(m)
		}
		ms = append(ms, m)
	}
	return ms
}

// injectedLog is a slog handler that notes a record with one of the given
// messages whose "err" wraps vfs.ErrInjected.
type injectedLog struct {
	messages []string
	seen     atomic.Bool
}

func (h *injectedLog) Enabled(context.Context, slog.Level) bool { return true }
func (h *injectedLog) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *injectedLog) WithGroup(string) slog.Handler            { return h }
func (h *injectedLog) Handle(_ context.Context, r slog.Record) error {
	if !slices.Contains(h.messages, r.Message) {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if err, ok := a.Value.Any().(error); ok && a.Key == "err" && errors.Is(err, vfs.ErrInjected) {
			h.seen.Store(true)
		}
		return true
	})
	return nil
}
