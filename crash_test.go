package bloomkv

import (
	"bytes"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/bloomkv/bloomkv/vfs"
)

// crashFS wraps a MemFS and takes a crash image right after its at-th
// mutating operation (create, write, sync, directory sync, rename, remove),
// wherever in the store's work that falls: a WAL append, a flush or
// compaction writing its table, a manifest edit, a CURRENT switch, a file
// removal. The image keeps, of each file's unsynced bytes, a prefix of random
// length, as a disk may.
type crashFS struct {
	*vfs.MemFS
	at      int64 // 0: never crash, only count
	keep    *rand.Rand
	ops     atomic.Int64
	crashed atomic.Bool
	mu      sync.Mutex
	image   *vfs.MemFS
	what    string // the operation the crash followed
	torn    int    // files whose image kept some unsynced bytes
}

func (c *crashFS) after(what, name string) {
	if c.ops.Add(1) != c.at {
		return
	}
	// The flag goes up before the image is taken: a write the workload
	// sees return with the flag down was durable, or not, before the image.
	c.crashed.Store(true)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.what = what + " " + fileLabel(name)
	c.image = c.MemFS.CrashCloneKeeping(func(_ string, unsynced int) int {
		if c.keep.IntN(2) == 0 {
			return 0
		}
		c.torn++
		return c.keep.IntN(unsynced + 1)
	})
}

func (c *crashFS) Create(name string) (vfs.File, error) {
	f, err := c.MemFS.Create(name)
	if err != nil {
		return nil, err
	}
	c.after("create", name)
	return &crashFile{File: f, c: c, name: name}, nil
}

func (c *crashFS) SyncDir(dir string) error {
	err := c.MemFS.SyncDir(dir)
	c.after("syncdir", dir)
	return err
}

func (c *crashFS) Rename(oldname, newname string) error {
	err := c.MemFS.Rename(oldname, newname)
	c.after("rename", newname)
	return err
}

func (c *crashFS) Remove(name string) error {
	err := c.MemFS.Remove(name)
	c.after("remove", name)
	return err
}

type crashFile struct {
	vfs.File
	c    *crashFS
	name string
}

func (f *crashFile) Write(p []byte) (int, error) {
	n, err := f.File.Write(p)
	f.c.after("write", f.name)
	return n, err
}

func (f *crashFile) Sync() error {
	err := f.File.Sync()
	f.c.after("sync", f.name)
	return err
}

// crashRun is what a workload run saw before its crash.
type crashRun struct {
	acked    int // ops returned before the crash
	lastSync int // ops up to and including the last Sync one among them
	flushes  int64
	compacts int64
}

// runUntilCrash applies ops to a store on c until c crashes (stopping at the
// first op that returns after it) or the ops run out.
func runUntilCrash(t *testing.T, c *crashFS, ops []op) crashRun {
	t.Helper()
	d, err := Open("/db", crashOpts(c, quietLogger()))
	if err != nil {
		if c.crashed.Load() {
			return crashRun{}
		}
		t.Fatal(err)
	}
	var run crashRun
	for i, o := range ops {
		err := o.apply(d)
		if c.crashed.Load() {
			break
		}
		if err != nil {
			t.Fatalf("op %d: %v", i, err)
		}
		run.acked = i + 1
		if o.sync {
			run.lastSync = i + 1
		}
	}
	if !c.crashed.Load() {
		waitForCompactions(t, d)
	}
	m := d.Metrics()
	run.flushes, run.compacts = int64(m.Flushes), int64(m.Compactions)
	d.Close()
	return run
}

// TestCrashAtRandomPoints crashes mixed workloads (batches of sets, deletes
// and range deletions, Sync and not, with flushes and compactions running)
// at random points, the image keeping random parts of unsynced data. After
// each crash the store must open, hold exactly the operation log applied up
// to some point at or after the last Sync-acknowledged op (so every such op
// is there and batches are all or nothing), agree between Get and scans,
// pass Check, and take writes again.
func TestCrashAtRandomPoints(t *testing.T) {
	points := trials(15, 60, 500)
	const nOps, nKeys = 300, 60
	byWhat := map[string]int{}
	failures, torn, loggedTorn := 0, 0, 0
	var flushes, compacts int64
	for trial := range points {
		seed := uint64(trial)
		ops := mixedWorkload(seed, "key", nKeys, nOps)
		probe := &crashFS{MemFS: vfs.NewMem()}
		full := runUntilCrash(t, probe, ops)
		flushes += full.flushes
		compacts += full.compacts
		r := rand.New(rand.NewPCG(seed, 99))
		at := 1 + r.Int64N(probe.ops.Load())
		// Background work interleaves differently from run to run, so a
		// run may end before reaching op at: try again, then pick earlier.
		var c *crashFS
		var run crashRun
		for try := 0; c == nil || c.image == nil; try++ {
			if try >= 5 {
				at = 1 + r.Int64N(at)
			}
			c = &crashFS{MemFS: vfs.NewMem(), at: at, keep: rand.New(rand.NewPCG(seed, 7))}
			run = runUntilCrash(t, c, ops)
		}
		byWhat[c.what]++
		torn += c.torn

		var logs bytes.Buffer
		o := crashOpts(c.image, slog.New(slog.NewTextHandler(&logs, nil)))
		fail := func(format string, args ...any) {
			t.Helper()
			failures++
			t.Errorf("seed %d, crash after op %d (%s), %d ops acknowledged, last Sync op %d: "+format,
				append([]any{seed, at, c.what, run.acked, run.lastSync}, args...)...)
		}
		d, err := Open("/db", o)
		if err != nil {
			fail("reopen: %v", err)
			continue
		}
		if strings.Contains(logs.String(), "torn") {
			loggedTorn++
		}
		got, err := readKeys(d, "key", nKeys)
		switch {
		case err != nil:
			fail("reading: %v", err)
		case matchPrefix(got, ops, run.lastSync, run.acked+1) < 0:
			fail("the store matches no prefix of the log from op %d to %d: against the acknowledged ops, %s",
				run.lastSync, run.acked+1, diffSummary(got, model(ops[:run.acked])))
		}
		if _, err := d.Check(); err != nil {
			fail("Check: %v", err)
		}
		// Rebuilt from what survived, the differential-file filter misses
		// no version above the base.
		waitFor(t, "the differential-file filter after recovery", func() bool {
			m := d.Metrics().DiffFilter
			return m.On || m.LastLevel < 0
		})
		checkDiffFilter(t, d)
		if err := d.Set([]byte("after"), []byte("crash"), Sync); err != nil {
			fail("write after recovery: %v", err)
		}
		if err := d.Close(); err != nil {
			fail("close after recovery: %v", err)
		}
		d, err = Open("/db", &Options{FS: c.image, Logger: quietLogger()})
		if err != nil {
			fail("second reopen: %v", err)
			continue
		}
		expect(t, d, "after", "crash")
		d.Close()
	}
	report(t, "crash", "%d crash points (by the operation they followed: %v); %d files kept part of their unsynced bytes, %d recoveries dropped a torn record; the workloads ran %d flushes and %d compactions uncrashed; %d failures",
		points, byWhat, torn, loggedTorn, flushes, compacts, failures)
	if compacts == 0 {
		t.Fatal("the workloads never compact: crash points miss compactions")
	}
}

// crashOpts are the crash test's options: small memtables, level targets
// and tables, so that its stores reach a base level above the last (and
// Compact merges three levels) within the ops of one run.
func crashOpts(fs vfs.FS, logger *slog.Logger) *Options {
	return &Options{FS: fs, MemTableSize: 64 << 10, LBaseMaxBytes: 64 << 10, TargetFileSize: 16 << 10, Logger: logger}
}
