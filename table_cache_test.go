package bloomkv

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/bloomkv/bloomkv/vfs"
)

// TestTableOpenFailureIsNotShared: a table open that failed (a transient
// I/O error) is reported by the call that made it, and neither a call that
// found the failed entry nor a later one gets that error: each opens the
// table again.
func TestTableOpenFailureIsNotShared(t *testing.T) {
	mem := vfs.NewMem()
	d := mustOpen(t, "/db", memOpts(mem))
	if err := d.Set([]byte("k"), []byte("v"), NoSync); err != nil {
		t.Fatal(err)
	}
	if err := d.Flush(); err != nil {
		t.Fatal(err)
	}
	meta := newestTable(d)
	num := meta.FileNum
	d.Close()

	efs := vfs.NewErrorFS(mem)
	tc := &tableCache{fs: efs, dir: "/db", tables: map[uint64]*openTable{}}
	defer tc.close()
	open := vfs.OpOpen
	efs.SetInjector(vfs.FailOnce(&open, 0))
	if _, err := tc.get(meta); !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("the open that meets the fault: %v", err)
	}
	if r, err := tc.get(meta); err != nil || r == nil {
		t.Fatalf("the next open: %v", err)
	}

	// A call that finds another call's failed entry (as it would while
	// that call, a compaction say, was failing) opens the table itself.
	failed := &openTable{err: errors.New("another call's failed open")}
	failed.once.Do(func() {})
	tc.evict(num)
	tc.tables[num] = failed
	if r, err := tc.get(meta); err != nil || r == nil {
		t.Fatalf("a call that found a failed entry: %v", err)
	}
	tc.mu.Lock()
	good := tc.tables[num]
	tc.mu.Unlock()
	if good == nil || good == failed || good.r == nil {
		t.Fatal("the table's entry is not the reopened one")
	}
}

// TestTableCacheForgets: a get finds the reader kept with the table's
// metadata without the cache's map; a table evicted is opened again by the
// next get, not served from what its metadata keeps; after close, a get of
// a table opened before is ErrClosed, its kept reader included.
func TestTableCacheForgets(t *testing.T) {
	mem := vfs.NewMem()
	d := mustOpen(t, "/db", memOpts(mem))
	if err := d.Set([]byte("k"), []byte("v"), NoSync); err != nil {
		t.Fatal(err)
	}
	if err := d.Flush(); err != nil {
		t.Fatal(err)
	}
	meta := newestTable(d)
	d.Close()

	tc := &tableCache{fs: mem, dir: "/db", tables: map[uint64]*openTable{}}
	first, err := tc.get(meta)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := tc.get(meta); err != nil || again != first {
		t.Fatalf("second get = %p, %v; want the open table %p", again, err, first)
	}
	tc.mu.Lock()
	entry := tc.tables[meta.FileNum]
	tc.tables[meta.FileNum] = &openTable{err: errors.New("not to be read")}
	tc.mu.Unlock()
	if kept, err := tc.get(meta); err != nil || kept != first {
		t.Fatalf("get with the reader kept = %p, %v; want %p without the map", kept, err, first)
	}
	tc.mu.Lock()
	tc.tables[meta.FileNum] = entry
	tc.mu.Unlock()
	tc.evict(meta.FileNum)
	reopened, err := tc.get(meta)
	if err != nil || reopened == first {
		t.Fatalf("get after evict = %p, %v; want a new open of the table", reopened, err)
	}
	if err := tc.close(); err != nil {
		t.Fatal(err)
	}
	if _, err := tc.get(meta); !errors.Is(err, ErrClosed) {
		t.Fatalf("get after close: %v, want ErrClosed", err)
	}
}

// TestCacheWrittenBlocks writes a store that fits its cache, then flushes
// and compacts it. With Options.CacheWrittenBlocks, the cache holds the
// blocks the tables were written with, those of the live tables only, and
// every Get after reads no block back; without it, the cache stays empty
// until the Gets.
func TestCacheWrittenBlocks(t *testing.T) {
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprintf("on=%v", on), func(t *testing.T) { testCacheWrittenBlocks(t, on) })
	}
}

func testCacheWrittenBlocks(t *testing.T, on bool) {
	d, err := Open(t.TempDir(), &Options{CacheSize: 64 << 20, MemTableSize: 1 << 20, CacheWrittenBlocks: on})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	r := rand.New(rand.NewPCG(1, 2))
	const n = 30_000
	values := make([][]byte, n)
	for i := range n {
		values[i] = randomValue(r) // incompressible: blocks are stored as cached
		if err := d.Set([]byte(fmt.Sprintf("key%08d", i)), values[i], NoSync); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := d.Compact(nil, nil); err != nil {
		t.Fatal(err)
	}
	m := d.Metrics()
	var live uint64
	for _, l := range m.Levels {
		live += l.Bytes
	}
	c := m.BlockCache
	if !on {
		if c.Entries != 0 {
			t.Fatalf("without CacheWrittenBlocks, the cache holds %+v before any read", c)
		}
		return
	}
	if c.Misses != 0 || c.Evictions != 0 || c.Bytes == 0 || uint64(c.Bytes) > live*6/5 {
		t.Fatalf("after the compaction the cache holds %d bytes (%+v); the live tables %d", c.Bytes, c, live)
	}
	for i := range n {
		v, err := d.Get([]byte(fmt.Sprintf("key%08d", i)))
		if err != nil || !bytes.Equal(v, values[i]) {
			t.Fatalf("key %d: %v", i, err)
		}
	}
	if c := d.Metrics().BlockCache; c.Misses != 0 {
		t.Fatalf("Gets of a store its cache holds read %d blocks", c.Misses)
	}
}

// TestCacheWrittenBlocksOfAFailedTable flushes a table, then fails the
// sync of the next: the blocks the cache took as that one was written leave
// with it, and the first table's stay.
func TestCacheWrittenBlocksOfAFailedTable(t *testing.T) {
	e := vfs.NewErrorFS(vfs.NewMem())
	o := memOpts(e)
	o.CacheSize, o.MemTableSize, o.CacheWrittenBlocks = 64<<20, 4<<20, true
	d := mustOpen(t, "/db", o)
	closeAtCleanup(t, d)
	write := func(from int) {
		for i := from; i < from+5000; i++ {
			if err := d.Set([]byte(fmt.Sprintf("key%08d", i)), bytes.Repeat([]byte{byte(i)}, 100), NoSync); err != nil {
				t.Fatal(err)
			}
		}
	}
	write(0)
	if err := d.Flush(); err != nil {
		t.Fatal(err)
	}
	first := d.Metrics().BlockCache
	if first.Entries == 0 {
		t.Fatalf("after a flush the cache holds %+v", first)
	}
	write(5000)
	// A range deletion, which the table keeps for the differential filter
	// once it is complete, before its sync fails.
	if err := d.DeleteRange([]byte("key00005000"), []byte("key00005010"), NoSync); err != nil {
		t.Fatal(err)
	}
	e.SetInjector(func(op vfs.Op, name string) error {
		if op == vfs.OpSync && strings.HasSuffix(name, ".sst") {
			return vfs.ErrInjected
		}
		return nil
	})
	if err := d.Flush(); !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("Flush with a failing table sync: %v", err)
	}
	if c := d.Metrics().BlockCache; c.Entries != first.Entries || c.Bytes != first.Bytes {
		t.Fatalf("after the failed flush the cache holds %+v; after the first, %+v", c, first)
	}
	noTableDels(t, d, "the failed flush")
}

// TestCacheWrittenBlocksOfAFailedCompaction fails the writes, then the
// sync, of a compaction's third output: the blocks the cache took from its
// outputs, the two it finished included, leave with them, and its inputs'
// stay. Removing the outputs logs no warning: the one whose sync failed
// is already gone.
func TestCacheWrittenBlocksOfAFailedCompaction(t *testing.T) {
	for _, fail := range []vfs.Op{vfs.OpWrite, vfs.OpSync} {
		t.Run(fail.String(), func(t *testing.T) {
			e := vfs.NewErrorFS(vfs.NewMem())
			o := memOpts(e)
			var logs lockedBuffer
			o.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
			o.CacheSize, o.MemTableSize, o.CacheWrittenBlocks = 64<<20, 4<<20, true
			o.L0CompactionThreshold, o.L0StopWritesThreshold = 10, 20 // compactions only when asked
			o.TargetFileSize = 256 << 10
			d := mustOpen(t, "/db", o)
			closeAtCleanup(t, d)
			r := rand.New(rand.NewPCG(3, 4))
			for round := range 2 {
				for i := range 5000 {
					k := []byte(fmt.Sprintf("key%08d", 2*i+round))
					if err := d.Set(k, randomValue(r), NoSync); err != nil {
						t.Fatal(err)
					}
				}
				if err := d.Flush(); err != nil {
					t.Fatal(err)
				}
			}
			inputs := d.Metrics().BlockCache
			if inputs.Entries == 0 {
				t.Fatalf("after two flushes the cache holds %+v", inputs)
			}
			var mu sync.Mutex
			outputs := map[string]bool{}
			third := ""
			e.SetInjector(func(op vfs.Op, name string) error {
				mu.Lock()
				defer mu.Unlock()
				if strings.HasSuffix(name, ".sst") && (op == vfs.OpWrite || op == vfs.OpSync) {
					if !outputs[name] {
						outputs[name] = true
						if len(outputs) == 3 {
							third = name // the fourth may start before its sync
						}
					}
					if op == fail && name == third {
						return vfs.ErrInjected
					}
				}
				return nil
			})
			if err := d.Compact(nil, nil); !errors.Is(err, vfs.ErrInjected) {
				t.Fatalf("Compact with a failing table %s: %v", fail, err)
			}
			if c := d.Metrics().BlockCache; c.Entries != inputs.Entries || c.Bytes != inputs.Bytes {
				t.Fatalf("after the failed compaction the cache holds %+v; before it, %+v", c, inputs)
			}
			names, err := e.List("/db")
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range names {
				if outputs[vfs.Join("/db", n)] {
					t.Errorf("the failed compaction left its output %s", n)
				}
			}
			if l := logs.String(); strings.Contains(l, "removing") {
				t.Fatalf("removing the failed compaction's outputs logged:\n%s", l)
			}
		})
	}
}

// TestFlushRemovesItsTableWhenTheDirectorySyncFails: a flush whose table is
// written and synced but whose directory sync fails leaves neither the
// file nor the range deletions kept of it, and the next flush succeeds.
func TestFlushRemovesItsTableWhenTheDirectorySyncFails(t *testing.T) {
	e := vfs.NewErrorFS(vfs.NewMem())
	d := mustOpen(t, "/db", memOpts(e))
	closeAtCleanup(t, d)
	for i := range 100 {
		if err := d.Set([]byte(fmt.Sprintf("key%04d", i)), []byte("v"), NoSync); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.DeleteRange([]byte("key0010"), []byte("key0020"), NoSync); err != nil {
		t.Fatal(err)
	}
	tables := func() []string {
		names, err := e.List("/db")
		if err != nil {
			t.Fatal(err)
		}
		var ts []string
		for _, n := range names {
			if strings.HasSuffix(n, ".sst") {
				ts = append(ts, n)
			}
		}
		slices.Sort(ts)
		return ts
	}
	before := tables()
	// The flush's own directory sync: the new WAL's, which runs beside
	// it, must not fail (that fails the store, with the table kept).
	var fired atomic.Bool
	e.SetInjector(func(op vfs.Op, _ string) error {
		if op == vfs.OpSyncDir && calledFrom(".(*DB).writeTable") && fired.CompareAndSwap(false, true) {
			return vfs.ErrInjected
		}
		return nil
	})
	if err := d.Flush(); !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("Flush with a failing directory sync: %v", err)
	}
	if after := tables(); !slices.Equal(after, before) {
		t.Fatalf("after the failed flush the directory holds tables %v, before it %v", after, before)
	}
	noTableDels(t, d, "the failed flush")
}

// noTableDels fails t if d keeps the range deletions of any table for the
// differential-file filter: after what, no table with any is live.
func noTableDels(t *testing.T, d *DB, after string) {
	t.Helper()
	d.mu.Lock()
	kept := len(d.mu.diff.tableDels)
	d.mu.Unlock()
	if kept != 0 {
		t.Fatalf("after %s the store keeps the range deletions of %d tables, want none", after, kept)
	}
}

// calledFrom reports whether the calling goroutine's stack holds a frame of
// the function whose name ends with fn.
func calledFrom(fn string) bool {
	pcs := make([]uintptr, 64)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs)])
	for {
		f, more := frames.Next()
		if strings.HasSuffix(f.Function, fn) {
			return true
		}
		if !more {
			return false
		}
	}
}

// randomValue returns 100 incompressible bytes.
func randomValue(r *rand.Rand) []byte {
	v := make([]byte, 100)
	for i := range v {
		v[i] = byte(r.Uint32())
	}
	return v
}
