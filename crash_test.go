package bloomkv

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/bloomkv/bloomkv/internal/vfs"
)

// crashFS wraps a MemFS and takes a crash image right after its n-th sync
// (file Sync or SyncDir).
type crashFS struct {
	*vfs.MemFS
	syncs   atomic.Int64
	at      int64
	mu      sync.Mutex
	image   *vfs.MemFS
	crashed atomic.Bool
}

func (c *crashFS) afterSync() {
	if c.syncs.Add(1) == c.at {
		// The flag goes up before the image is taken: a write the workload
		// sees return with the flag down had synced before the image. (The
		// other order let a write that synced after the image count as
		// acknowledged before the crash.)
		c.crashed.Store(true)
		c.mu.Lock()
		c.image = c.MemFS.CrashClone()
		c.mu.Unlock()
	}
}

func (c *crashFS) SyncDir(dir string) error {
	err := c.MemFS.SyncDir(dir)
	c.afterSync()
	return err
}

func (c *crashFS) Create(name string) (vfs.File, error) {
	f, err := c.MemFS.Create(name)
	if err != nil {
		return nil, err
	}
	return &crashFile{File: f, c: c}, nil
}

type crashFile struct {
	vfs.File
	c *crashFS
}

func (f *crashFile) Sync() error {
	err := f.File.Sync()
	f.c.afterSync()
	return err
}

// op is one step of the scripted workload: a batch of writes.
type op struct {
	sets map[string]string // value "" means delete
	sync bool
}

func workload(seed uint64, n int) []op {
	r := rand.New(rand.NewPCG(seed, 17))
	var ops []op
	for i := range n {
		o := op{sets: map[string]string{}, sync: r.IntN(3) == 0}
		for range 1 + r.IntN(4) {
			k := fmt.Sprintf("key%03d", r.IntN(60))
			if r.IntN(5) == 0 {
				o.sets[k] = ""
			} else {
				// Values up to 3 KB fill the 64 KiB memtable every few dozen
				// ops: rotations happen on their own, with the flusher
				// running while later writes go to the new WAL.
				o.sets[k] = fmt.Sprintf("v%d-%s", i, string(make([]byte, r.IntN(3000))))
			}
		}
		ops = append(ops, o)
	}
	return ops
}

// runWorkload applies ops to a store on fs and returns how many ops had been
// acknowledged (returned) before the crash, and the index of the last Sync
// op among them (-1 if none).
func runWorkload(t *testing.T, fs vfs.FS, ops []op, crashed func() bool) (acked, lastSync int, compactions uint64) {
	o := &Options{FS: fs, MemTableSize: 64 << 10, Logger: quietLogger()}
	d, err := Open("/db", o)
	if err != nil {
		t.Fatal(err)
	}
	lastSync = -1
	acked = -1
	for i, op := range ops {
		b := d.NewBatch()
		for k, v := range op.sets {
			if v == "" {
				b.Delete([]byte(k))
			} else {
				b.Set([]byte(k), []byte(v))
			}
		}
		wo := NoSync
		if op.sync {
			wo = Sync
		}
		if err := d.Apply(b, wo); err != nil {
			t.Fatal(err)
		}
		if !crashed() {
			acked = i
			if op.sync {
				lastSync = i
			}
		}
		if i%100 == 99 {
			if err := d.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !crashed() {
		waitForCompactions(t, d) // fewer timing-dependent syncs at Close
	}
	compactions = d.Metrics().Compactions
	d.Close()
	return acked, lastSync, compactions
}

// model returns the store's contents after the first n ops.
func model(ops []op, n int) map[string]string {
	m := map[string]string{}
	for _, op := range ops[:n] {
		for k, v := range op.sets {
			if v == "" {
				delete(m, k)
			} else {
				m[k] = v
			}
		}
	}
	return m
}

func contentsOf(t *testing.T, d *DB) map[string]string {
	m := map[string]string{}
	for i := range 60 {
		k := fmt.Sprintf("key%03d", i)
		v, err := d.Get([]byte(k))
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		m[k] = string(v)
	}
	return m
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestCrashAtEverySyncPoint runs a scripted workload (batches, Sync and
// NoSync, flushes) once to count its syncs, then again for each sync point,
// crashing right after it: the recovered store must open cleanly and equal
// the operation log applied up to some point at or after the last
// Sync-acknowledged write (so every such write is there, and batches are all
// or nothing).
func TestCrashAtEverySyncPoint(t *testing.T) {
	ops := workload(1, 300)
	probe := &crashFS{MemFS: vfs.NewMem(), at: -1}
	_, _, compactions := runWorkload(t, probe, ops, func() bool { return false })
	total := probe.syncs.Load()
	if compactions == 0 {
		t.Fatal("the workload never compacts: crash points miss compactions")
	}
	if total < 20 {
		t.Fatalf("the workload syncs only %d times", total)
	}
	step := int64(1)
	if testing.Short() {
		step = 3
	}
	checked := 0
	for at := int64(1); at <= total; at += step {
		// Background flushes and compactions interleave with the
		// writes differently from run to run, so the number of syncs
		// varies a little: a run that ends before sync point at is
		// repeated until one reaches it.
		var c *crashFS
		var acked, lastSync int
		for try := 0; try < 20 && (c == nil || c.image == nil); try++ {
			c = &crashFS{MemFS: vfs.NewMem(), at: at}
			acked, lastSync, _ = runWorkload(t, c, ops, c.crashed.Load)
		}
		if c.image == nil {
			t.Fatalf("sync point %d not reached in 20 runs", at)
		}
		d, err := Open("/db", &Options{FS: c.image, MemTableSize: 64 << 10, Logger: quietLogger()})
		if err != nil {
			t.Fatalf("crash after sync %d: reopen: %v", at, err)
		}
		got := contentsOf(t, d)
		ok := false
		for n := lastSync + 1; n <= len(ops) && !ok; n++ {
			ok = equalMaps(got, model(ops, n))
		}
		if !ok {
			t.Fatalf("crash after sync %d (acked %d ops, last Sync op %d): the store matches no prefix of the log from op %d on", at, acked+1, lastSync, lastSync+1)
		}
		// The recovered store works: write, reopen.
		if err := d.Set([]byte("after"), []byte("crash"), Sync); err != nil {
			t.Fatal(err)
		}
		d.Close()
		d = mustOpen(t, "/db", &Options{FS: c.image, Logger: quietLogger()})
		expect(t, d, "after", "crash")
		d.Close()
		checked++
	}
	t.Logf("%d sync points in the workload (%d compactions), %d crashes checked", total, compactions, checked)
}
