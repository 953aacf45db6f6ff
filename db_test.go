package bloomkv

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/bloomkv/bloomkv/vfs"
)

// TestBasicAndReopen: sets, deletes and a batch read back, and again after
// reopening, the WAL then recovered into a table.
func TestBasicAndReopen(t *testing.T) {
	fs := vfs.NewMem()
	d := mustOpen(t, "/db", memOpts(fs))
	if err := d.Set([]byte("a"), []byte("1"), Sync); err != nil {
		t.Fatal(err)
	}
	d.Set([]byte("b"), []byte("2"), NoSync)
	d.Set([]byte("c"), []byte("3"), NoSync)
	d.Delete([]byte("b"), NoSync)
	b := d.NewBatch()
	b.Set([]byte("d"), []byte("4"))
	b.Set([]byte("a"), []byte("1'"))
	b.Delete([]byte("c"))
	if err := d.Apply(b, Sync); err != nil {
		t.Fatal(err)
	}
	check := func(d *DB) {
		expect(t, d, "a", "1'")
		expect(t, d, "b", "")
		expect(t, d, "c", "")
		expect(t, d, "d", "4")
		expect(t, d, "zzz", "")
	}
	check(d)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d = mustOpen(t, "/db", memOpts(fs))
	defer d.Close()
	check(d)
	// One table, in level 0 or already moved down: alone, it overlaps
	// nothing, and a compaction may move it as soon as Open returns.
	files := levelFiles(d.Metrics())
	tables := 0
	for _, n := range files {
		tables += n
	}
	if tables != 1 {
		t.Fatalf("recovered WAL not flushed at open: tables per level %v", files)
	}
}

// TestBadInput: each bad call or option is refused with its error, and
// leaves the store as it was.
func TestBadInput(t *testing.T) {
	t.Run("key too long", func(t *testing.T) {
		d := mustOpen(t, "/db", memOpts(vfs.NewMem()))
		defer d.Close()
		if err := d.Set(make([]byte, MaxKeySize+1), nil, NoSync); !errors.Is(err, ErrTooLarge) {
			t.Fatalf("oversized key: %v", err)
		}
		if _, err := d.Get(make([]byte, MaxKeySize+1)); !errors.Is(err, ErrTooLarge) {
			t.Fatalf("Get of an oversized key: %v", err)
		}
	})
	t.Run("value too long", func(t *testing.T) {
		d := mustOpen(t, "/db", memOpts(vfs.NewMem()))
		defer d.Close()
		if err := d.Set([]byte("k"), make([]byte, MaxValueSize+1), NoSync); !errors.Is(err, ErrTooLarge) {
			t.Fatalf("oversized value: %v", err)
		}
	})
	t.Run("store already open", func(t *testing.T) {
		fs := vfs.NewMem()
		d := mustOpen(t, "/db", memOpts(fs))
		defer d.Close()
		if _, err := Open("/db", memOpts(fs)); !errors.Is(err, vfs.ErrLocked) {
			t.Fatalf("second Open: %v, want ErrLocked", err)
		}
	})
	t.Run("closed handle", func(t *testing.T) {
		d := mustOpen(t, "/db", memOpts(vfs.NewMem()))
		d.Set([]byte("k"), []byte("v"), Sync)
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
		for name, err := range map[string]error{
			"Set":    d.Set([]byte("k"), nil, NoSync),
			"Delete": d.Delete([]byte("k"), NoSync),
			"Apply":  d.Apply(&Batch{}, NoSync),
			"Flush":  d.Flush(),
			"Close":  d.Close(),
		} {
			if !errors.Is(err, ErrClosed) {
				t.Errorf("%s after Close: %v", name, err)
			}
		}
		if _, err := d.Get([]byte("k")); !errors.Is(err, ErrClosed) {
			t.Errorf("Get after Close: %v", err)
		}
	})
	t.Run("ErrorIfExists on an existing store", func(t *testing.T) {
		o := memOpts(closedStoreWithK(t))
		o.ErrorIfExists = true
		if _, err := Open("/db", o); err == nil {
			t.Fatal("ErrorIfExists accepted an existing store")
		}
	})
	t.Run("read-only open of a missing store", func(t *testing.T) {
		ro := memOpts(vfs.NewMem())
		ro.ReadOnly = true
		if _, err := Open("/nowhere", ro); err == nil {
			t.Fatal("read-only Open of a missing store succeeded")
		}
	})
	t.Run("write to a read-only store", func(t *testing.T) {
		ro := memOpts(closedStoreWithK(t))
		ro.ReadOnly = true
		rd := mustOpen(t, "/db", ro)
		defer rd.Close()
		expect(t, rd, "k", "v")
		if err := rd.Set([]byte("x"), nil, NoSync); !errors.Is(err, ErrReadOnly) {
			t.Fatalf("write to a read-only store: %v", err)
		}
	})
	t.Run("invalid options", func(t *testing.T) {
		fs := vfs.NewMem()
		for _, bad := range []*Options{{MemTableSize: 10}, {BloomBitsPerKey: 40}, {BlockSize: 1}, {L0CompactionThreshold: 5, L0StopWritesThreshold: 2}} {
			bad.FS = fs
			if _, err := Open("/other", bad); err == nil {
				t.Errorf("options %+v accepted", bad)
			}
		}
	})
}

// TestConcurrentWritersAndReaders runs under -race in CI.
func TestConcurrentWritersAndReaders(t *testing.T) {
	d := mustOpen(t, "/db", memOpts(vfs.NewMem()))
	defer d.Close()
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 1500 {
				o := NoSync
				if i%50 == 0 {
					o = Sync
				}
				if err := d.Set([]byte(fmt.Sprintf("w%d-%05d", w, i)), bytes.Repeat([]byte{byte(i)}, 50), o); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	for r := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rnd := rand.New(rand.NewPCG(uint64(r), 9))
			for range 3000 {
				w, i := rnd.IntN(4), rnd.IntN(1500)
				v, err := d.Get([]byte(fmt.Sprintf("w%d-%05d", w, i)))
				if err == nil && (len(v) != 50 || v[0] != byte(i)) {
					t.Errorf("w%d-%05d = %x", w, i, v[:1])
					return
				}
				if err != nil && !errors.Is(err, ErrNotFound) {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	for w := range 4 {
		for i := 0; i < 1500; i += 97 {
			if _, err := d.Get([]byte(fmt.Sprintf("w%d-%05d", w, i))); err != nil {
				t.Fatalf("w%d-%05d: %v", w, i, err)
			}
		}
	}
}

// TestRangeArguments: an inverted range is refused with a clear error; an
// empty one does nothing.
func TestRangeArguments(t *testing.T) {
	t.Run("inverted DeleteRange", func(t *testing.T) {
		d := mustOpen(t, "/db", &Options{FS: vfs.NewMem(), Logger: quietLogger()})
		defer d.Close()
		if err := d.DeleteRange([]byte("b"), []byte("a"), NoSync); err == nil || !strings.Contains(err.Error(), "start after its end") {
			t.Fatalf("inverted DeleteRange: %v", err)
		}
	})
	t.Run("inverted Compact", func(t *testing.T) {
		d := mustOpen(t, "/db", &Options{FS: vfs.NewMem(), Logger: quietLogger()})
		defer d.Close()
		if err := d.Compact([]byte("b"), []byte("a")); err == nil {
			t.Fatal("inverted Compact accepted")
		}
	})
	t.Run("empty DeleteRange", func(t *testing.T) {
		d := mustOpen(t, "/db", &Options{FS: vfs.NewMem(), Logger: quietLogger()})
		defer d.Close()
		d.Set([]byte("a"), []byte("1"), NoSync)
		if err := d.DeleteRange([]byte("a"), []byte("a"), NoSync); err != nil {
			t.Fatal(err)
		}
		expect(t, d, "a", "1")
	})
}
