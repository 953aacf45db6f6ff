package bloomkv

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/bloomkv/bloomkv/internal/vfs"
)

// TestCompactionKeepsNewestAndDropsTheRest writes overwrites and deletes over
// many flushes, so level 0 is compacted into level 1 repeatedly, and checks
// every key against a model, before and after reopening; compacted tables'
// files are gone.
func TestCompactionKeepsNewestAndDropsTheRest(t *testing.T) {
	fs := vfs.NewMem()
	o := memOpts(fs)
	var mu sync.Mutex
	var began, ended []CompactionInfo
	o.EventListener.CompactionBegin = func(i CompactionInfo) { mu.Lock(); began = append(began, i); mu.Unlock() }
	o.EventListener.CompactionEnd = func(i CompactionInfo) { mu.Lock(); ended = append(ended, i); mu.Unlock() }
	d := mustOpen(t, "/db", o)
	model := map[string]string{}
	r := rand.New(rand.NewPCG(5, 5))
	for i := range 20_000 {
		k := fmt.Sprintf("key%05d", r.IntN(3000))
		if r.IntN(5) == 0 {
			if err := d.Delete([]byte(k), NoSync); err != nil {
				t.Fatal(err)
			}
			delete(model, k)
			continue
		}
		v := fmt.Sprintf("v%d-%s", i, strings.Repeat("x", r.IntN(200)))
		if err := d.Set([]byte(k), []byte(v), NoSync); err != nil {
			t.Fatal(err)
		}
		model[k] = v
	}
	if err := d.Flush(); err != nil {
		t.Fatal(err)
	}
	check := func(d *DB) {
		for i := range 3000 {
			k := fmt.Sprintf("key%05d", i)
			expect(t, d, k, model[k])
		}
	}
	check(d)
	waitForCompactions(t, d) // a running compaction's outputs are not yet in the version
	m := d.Metrics()
	if m.Compactions == 0 || m.Levels[1].Files == 0 || m.Levels[0].Files >= o.withDefaultsMust(t).L0StopWritesThreshold {
		t.Fatalf("no compaction into L1: %+v", m)
	}
	// Every table file on disk is one the version holds.
	names, _ := fs.List("/db")
	onDisk := 0
	for _, n := range names {
		if k, _ := parseName(n); k == kindTable {
			onDisk++
		}
	}
	held := 0
	for _, l := range m.Levels {
		held += l.Files
	}
	if onDisk != held {
		t.Fatalf("%d tables on disk, %d in the version: compacted tables were not deleted", onDisk, held)
	}
	d.Close()
	mu.Lock()
	if len(began) == 0 || len(ended) != len(began) || ended[0].Err != nil || len(ended[0].Inputs) < 4 || len(ended[0].Outputs) == 0 || ended[0].BytesOut == 0 || ended[0].ToLevel != 1 {
		t.Fatalf("compaction events: %d began, %d ended, first %+v", len(began), len(ended), ended[0])
	}
	mu.Unlock()
	d = mustOpen(t, "/db", o)
	defer d.Close()
	check(d)
}

func (o *Options) withDefaultsMust(t *testing.T) *Options {
	c, err := o.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestReadsHoldTheirTables: a read that took a state before a compaction
// still reads the tables that state names, after the compaction replaced
// them.
func TestReadsHoldTheirTables(t *testing.T) {
	d := mustOpen(t, "/db", memOpts(vfs.NewMem()))
	defer d.Close()
	gate := make(chan struct{})
	d.mu.Lock()
	d.compactionGate = gate
	d.mu.Unlock()
	for i := range 4 {
		for j := range 200 {
			d.Set([]byte(fmt.Sprintf("k%d-%03d", i, j)), []byte("v"), NoSync)
		}
		d.Flush()
	}
	old := d.acquire() // pins the four L0 tables
	close(gate)        // let the compaction run
	for d.Metrics().Compactions == 0 {
		runtime.Gosched()
	}
	if n := len(old.version.Levels[0]); n != 4 {
		t.Fatalf("pinned state has %d L0 tables", n)
	}
	v, err := d.get(old, []byte("k2-100"), old.version.Levels[0][0].LargestSeq+1)
	if err != nil || string(v) != "v" {
		t.Fatalf("read through a pinned state after compaction: %q, %v", v, err)
	}
	d.release(old)
	expect(t, d, "k3-199", "v")
}

// TestWritesStallOnLevel0: with compaction held back, writes stop once L0
// reaches L0StopWritesThreshold tables, tell the EventListener, and resume
// after compaction.
func TestWritesStallOnLevel0(t *testing.T) {
	var mu sync.Mutex
	var reasons []string
	o := memOpts(vfs.NewMem())
	o.L0CompactionThreshold, o.L0StopWritesThreshold = 2, 3
	o.EventListener.WriteStallBegin = func(r string) { mu.Lock(); reasons = append(reasons, r); mu.Unlock() }
	d := mustOpen(t, "/db", o)
	defer d.Close()
	gate := make(chan struct{})
	var openGate sync.Once
	t.Cleanup(func() { openGate.Do(func() { close(gate) }) }) // a failure must not leave Close waiting on it
	d.mu.Lock()
	d.compactionGate = gate
	d.mu.Unlock()
	done := make(chan error, 1)
	go func() {
		for i := range 6000 { // several 64 KiB memtables
			if err := d.Set([]byte(fmt.Sprintf("k%05d", i)), make([]byte, 100), NoSync); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	// With compaction held back, L0 fills to the stop threshold and the
	// writer, which needs about eleven more memtables, can only wait. (A
	// stall may begin for a flush backlog and go on for L0: the listener
	// hears of it once, when it begins.)
	// The listener runs under the DB's lock, so the test's lock is not
	// held across a call into the DB (Metrics may take the DB's lock).
	stalledOnL0 := func() bool {
		mu.Lock()
		stalled := len(reasons) > 0
		mu.Unlock()
		return stalled && d.Metrics().Levels[0].Files >= 3
	}
	for !stalledOnL0() {
		select {
		case err := <-done:
			t.Fatalf("writer finished with compaction held back: %v (L0 %d tables)", err, d.Metrics().Levels[0].Files)
		default:
			runtime.Gosched()
		}
	}
	openGate.Do(func() { close(gate) })
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	expect(t, d, "k05999", string(make([]byte, 100)))
	if d.Metrics().Compactions == 0 {
		t.Fatal("the stall ended without a compaction")
	}
}

// TestCompactionKeepsTheEmptyKeyDeleted: the empty key, deleted after being
// set, stays deleted through a compaction that drops its tombstone (review
// finding: the merge took a nil previous key for "none seen").
func TestCompactionKeepsTheEmptyKeyDeleted(t *testing.T) {
	o := memOpts(vfs.NewMem())
	o.L0CompactionThreshold = 2
	d := mustOpen(t, "/db", o)
	defer d.Close()
	d.Set([]byte(""), []byte("old"), NoSync)
	d.Set([]byte("a"), []byte("1"), NoSync)
	d.Flush()
	d.Delete([]byte(""), NoSync)
	d.Set([]byte("b"), []byte("2"), NoSync)
	d.Flush()
	for d.Metrics().Compactions == 0 {
		runtime.Gosched()
	}
	expect(t, d, "", "")
	expect(t, d, "a", "1")
	expect(t, d, "b", "2")
}
