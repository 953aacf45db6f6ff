package bloomkv

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/bloomkv/bloomkv/internal/vfs"
)

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func memOpts(fs vfs.FS) *Options {
	return &Options{FS: fs, MemTableSize: 64 << 10, Logger: quietLogger()}
}

func mustOpen(t testing.TB, dir string, o *Options) *DB {
	t.Helper()
	d, err := Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func expect(t testing.TB, d *DB, key, want string) {
	t.Helper()
	got, err := d.Get([]byte(key))
	if want == "" {
		if !errors.Is(err, ErrNotFound) {
			t.Fatalf("Get(%q) = %q, %v; want ErrNotFound", key, got, err)
		}
		return
	}
	if err != nil || string(got) != want {
		t.Fatalf("Get(%q) = %q, %v; want %q", key, got, err, want)
	}
}

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
	if m := d.Metrics(); m.Levels[0].Files != 1 {
		t.Fatalf("recovered WAL not flushed at open: %+v", m.Levels)
	}
}

// TestGetReturnsTheCallersCopy: changing the value Get returned changes
// nothing in the store.
func TestGetReturnsTheCallersCopy(t *testing.T) {
	d := mustOpen(t, "/db", memOpts(vfs.NewMem()))
	defer d.Close()
	d.Set([]byte("d"), []byte("4"), NoSync)
	v, _ := d.Get([]byte("d"))
	v[0] = 'X'
	expect(t, d, "d", "4")
}

func TestFlushesAndTables(t *testing.T) {
	fs := vfs.NewMem()
	var flushes int
	var mu sync.Mutex
	o := memOpts(fs)
	o.EventListener.FlushEnd = func(FlushInfo) { mu.Lock(); flushes++; mu.Unlock() }
	d := mustOpen(t, "/db", o)
	val := bytes.Repeat([]byte("v"), 100)
	const n = 5000
	for i := range n {
		if err := d.Set([]byte(fmt.Sprintf("key%06d", i)), val, NoSync); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Flush(); err != nil {
		t.Fatal(err)
	}
	m := d.Metrics()
	tables := 0
	for _, l := range m.Levels {
		tables += l.Files
	}
	if tables == 0 || m.Flushes < 5 || m.ImmutableMemTables != 0 || m.MemTableSize != 0 {
		t.Fatalf("after 500 KB of writes and Flush: %+v", m)
	}
	for i := 0; i < n; i += 37 {
		expect(t, d, fmt.Sprintf("key%06d", i), string(val))
	}
	// Absent keys are answered by the filters, nearly all without a read.
	before := d.Metrics()
	for i := range 2000 {
		expect(t, d, fmt.Sprintf("key%06d-absent", i), "") // inside the tables' key ranges
	}
	after := d.Metrics()
	probes := after.FilterProbes - before.FilterProbes
	neg := after.FilterNegatives - before.FilterNegatives
	if probes == 0 || float64(probes-neg)/float64(probes) > 0.03 {
		t.Fatalf("filters: %d probes, %d negatives", probes, neg)
	}
	// Overwrites and deletes in the memtable shadow the tables.
	d.Set([]byte("key000010"), []byte("new"), NoSync)
	d.Delete([]byte("key000011"), NoSync)
	expect(t, d, "key000010", "new")
	expect(t, d, "key000011", "")
	d.Close()
	d = mustOpen(t, "/db", o)
	defer d.Close()
	expect(t, d, "key000010", "new")
	expect(t, d, "key000011", "")
	expect(t, d, "key004999", string(val))
	mu.Lock()
	defer mu.Unlock()
	if flushes < 5 {
		t.Fatalf("%d flush events", flushes)
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

// closedStoreWithK returns the files of a closed store at /db holding k=v.
func closedStoreWithK(t *testing.T) *vfs.MemFS {
	t.Helper()
	fs := vfs.NewMem()
	d := mustOpen(t, "/db", memOpts(fs))
	if err := d.Set([]byte("k"), []byte("v"), Sync); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	return fs
}

// TestCorruptOrMissingManifest: Open refuses, with ErrCorruption, a store
// whose manifest or CURRENT is damaged or gone.
func TestCorruptOrMissingManifest(t *testing.T) {
	t.Run("flipped byte with a valid record after it", func(t *testing.T) {
		fs := closedStoreWithK(t)
		name := manifestFile(t, fs)
		f, _ := fs.Open(name)
		data, _ := io.ReadAll(f)
		f.Close()
		// A flipped byte in the manifest's only record, with a valid
		// chunk after it, is corruption; as the last record it is a torn
		// tail.
		bad := append([]byte(nil), data...)
		bad[len(bad)/2] ^= 0xff
		bad = append(bad, data...) // a valid copy follows
		w, _ := fs.Create(name)
		w.Write(bad)
		w.Sync()
		w.Close()
		if _, err := Open("/db", memOpts(fs)); !errors.Is(err, ErrCorruption) {
			t.Fatalf("corrupt manifest: %v, want ErrCorruption", err)
		}
	})
	t.Run("missing manifest", func(t *testing.T) {
		fs := closedStoreWithK(t)
		fs.Remove(manifestFile(t, fs))
		if _, err := Open("/db", memOpts(fs)); !errors.Is(err, ErrCorruption) {
			t.Fatalf("missing manifest: %v, want ErrCorruption", err)
		}
	})
	t.Run("CURRENT naming nothing", func(t *testing.T) {
		fs := closedStoreWithK(t)
		c, _ := fs.Create("/db/CURRENT")
		c.Write([]byte("garbage\n"))
		c.Close()
		if _, err := Open("/db", memOpts(fs)); !errors.Is(err, ErrCorruption) {
			t.Fatalf("bad CURRENT: %v, want ErrCorruption", err)
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
