package bloomkv

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bloomkv/bloomkv/internal/vfs"
)

// walFile returns the name of the store's (single) WAL.
func walFile(t *testing.T, fs *vfs.MemFS) string {
	t.Helper()
	names, _ := fs.List("/db")
	for _, n := range names {
		if k, _ := parseName(n); k == kindLog {
			return "/db/" + n
		}
	}
	t.Fatal("no WAL")
	return ""
}

func readFile(t *testing.T, fs vfs.FS, name string) []byte {
	t.Helper()
	f, err := fs.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatalf("reading %s: %v", name, err)
	}
	return b
}

func rewrite(t *testing.T, fs vfs.FS, name string, data []byte) {
	f, err := fs.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(data)
	f.Sync()
	f.Close()
}

// storeWithWAL leaves a store whose writes are only in its WAL: the process
// "dies" (a crash image) without Close.
func storeWithWAL(t *testing.T, n int) *vfs.MemFS {
	fs := vfs.NewMem()
	d := mustOpen(t, "/db", memOpts(fs))
	for i := range n {
		if err := d.Set([]byte(fmt.Sprintf("k%03d", i)), bytes.Repeat([]byte{'v'}, 200), Sync); err != nil {
			t.Fatal(err)
		}
	}
	image := fs.CrashClone()
	d.Close()
	return image
}

func TestTornWALTailIsDroppedWithALogLine(t *testing.T) {
	fs := storeWithWAL(t, 20)
	name := walFile(t, fs)
	data := readFile(t, fs, name)
	rewrite(t, fs, name, data[:len(data)-50]) // the last record is cut short
	var logs bytes.Buffer
	o := memOpts(fs)
	o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	d := mustOpen(t, "/db", o)
	defer d.Close()
	for i := range 19 {
		expect(t, d, fmt.Sprintf("k%03d", i), strings.Repeat("v", 200))
	}
	expect(t, d, "k019", "")
	if !strings.Contains(logs.String(), "torn") || !strings.Contains(logs.String(), name) {
		t.Fatalf("no log line names the torn WAL: %q", logs.String())
	}
}

func TestWALCorruptionInTheMiddle(t *testing.T) {
	fs := storeWithWAL(t, 20)
	name := walFile(t, fs)
	data := readFile(t, fs, name)
	data[30] ^= 0x55 // inside the first record; valid records follow
	rewrite(t, fs, name, data)
	_, err := Open("/db", memOpts(fs))
	if !errors.Is(err, ErrCorruption) || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "offset") {
		t.Fatalf("corrupt WAL: %v, want ErrCorruption naming %s and an offset", err, name)
	}
}

// slowFS holds table syncs until released, so flushes back up.
type slowFS struct {
	*vfs.MemFS
	gate chan struct{}
	once sync.Once
}

// newSlowFS returns a slowFS whose gate the test's cleanup opens, so that a
// failing test does not leave Close waiting on a held flush.
func newSlowFS(t *testing.T) *slowFS {
	s := &slowFS{MemFS: vfs.NewMem(), gate: make(chan struct{})}
	t.Cleanup(s.open)
	return s
}

func (s *slowFS) open() { s.once.Do(func() { close(s.gate) }) }

func (s *slowFS) Create(name string) (vfs.File, error) {
	f, err := s.MemFS.Create(name)
	if err != nil || !strings.HasSuffix(name, ".sst") {
		return f, err
	}
	return &slowFile{File: f, gate: s.gate}, nil
}

type slowFile struct {
	vfs.File
	gate chan struct{}
}

func (f *slowFile) Sync() error {
	<-f.gate
	return f.File.Sync()
}

func TestWritesStallWhileFlushesBackUp(t *testing.T) {
	fs := newSlowFS(t)
	var mu sync.Mutex
	var began, ended int
	o := memOpts(fs)
	o.MaxImmutableMemTables = 1
	o.EventListener.WriteStallBegin = func(string) { mu.Lock(); began++; mu.Unlock() }
	o.EventListener.WriteStallEnd = func() { mu.Lock(); ended++; mu.Unlock() }
	d := mustOpen(t, "/db", o)
	defer d.Close()
	done := make(chan error)
	go func() {
		for i := range 3000 { // ~3 memtables of 64 KiB
			if err := d.Set([]byte(fmt.Sprintf("k%05d", i)), make([]byte, 100), NoSync); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	// The writer fills a memtable, freezes it (the flush blocks on the
	// gate), fills another, and must then stall.
	stalled := false
	for range 200 {
		mu.Lock()
		stalled = began > 0
		mu.Unlock()
		if stalled {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !stalled {
		t.Fatal("writes did not stall with a flush held")
	}
	select {
	case err := <-done:
		t.Fatalf("writer finished during the stall: %v", err)
	default:
	}
	fs.open() // let flushes through
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if ended != began || d.Metrics().WriteStalls == 0 {
		t.Fatalf("stall events: %d began, %d ended; metrics %d", began, ended, d.Metrics().WriteStalls)
	}
}

// manifestFile returns the name of the store's current manifest.
func manifestFile(t *testing.T, fs vfs.FS) string {
	t.Helper()
	num, err := readCurrent(fs, "/db")
	if err != nil {
		t.Fatal(err)
	}
	return "/db/" + manifestName(num)
}

// TestManifestThatLostEditsIsRefused: a manifest cut back to an earlier
// state (here: before a flush, whose log was then deleted) or naming a table
// that is gone must fail Open with ErrCorruption, not open a store that
// silently lacks writes or answers with old values.
func TestManifestThatLostEditsIsRefused(t *testing.T) {
	fs := vfs.NewMem()
	d := mustOpen(t, "/db", memOpts(fs))
	d.Set([]byte("a"), []byte("1"), Sync)
	name := manifestFile(t, fs)
	before := readFile(t, fs, name)
	if err := d.Flush(); err != nil {
		t.Fatal(err)
	}
	d.Set([]byte("b"), []byte("2"), Sync)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	fs.SyncDir("/db") // the flushed log's removal reaches the disk

	t.Run("manifest cut back before a flush", func(t *testing.T) {
		lost := fs.CrashClone()
		rewrite(t, lost, name, before)
		_, err := Open("/db", memOpts(lost))
		if !errors.Is(err, ErrCorruption) || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "lost edits") {
			t.Fatalf("manifest cut back before a flush: %v, want ErrCorruption naming %s", err, name)
		}
	})
	t.Run("a table deleted", func(t *testing.T) {
		gone := fs.CrashClone()
		tables, _ := gone.List("/db")
		removed := ""
		for _, n := range tables {
			if k, _ := parseName(n); k == kindTable {
				removed = "/db/" + n
				gone.Remove(removed)
			}
		}
		_, err := Open("/db", memOpts(gone))
		if !errors.Is(err, ErrCorruption) || !strings.Contains(err.Error(), removed) || !strings.Contains(err.Error(), "missing") {
			t.Fatalf("a table deleted: %v, want ErrCorruption naming %s", err, removed)
		}
	})
	t.Run("the store itself is sound", func(t *testing.T) {
		d := mustOpen(t, "/db", memOpts(fs))
		expect(t, d, "a", "1")
		expect(t, d, "b", "2")
		d.Close()
	})
}

// TestCleanlyClosedWALCutShortIsRefused: a store closed cleanly records its
// WAL's size in the manifest, so that a WAL later cut short, even at a record
// boundary, or with its last record damaged, fails Open with ErrCorruption
// instead of passing for a crash's torn tail and losing synced writes.
func TestCleanlyClosedWALCutShortIsRefused(t *testing.T) {
	fs := vfs.NewMem()
	d := mustOpen(t, "/db", memOpts(fs))
	for i := range 10 {
		d.Set([]byte(fmt.Sprintf("k%d", i)), []byte("v"), Sync)
	}
	boundary := d.walW.Size() // the WAL's size before the last write
	d.Set([]byte("last"), []byte("v"), Sync)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	name := walFile(t, fs)
	data := readFile(t, fs, name)

	t.Run("cut at a record boundary", func(t *testing.T) {
		cut := fs.CrashClone()
		rewrite(t, cut, name, data[:boundary])
		_, err := Open("/db", memOpts(cut))
		if !errors.Is(err, ErrCorruption) || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "last closed") {
			t.Fatalf("WAL cut at a record boundary: %v, want ErrCorruption naming %s", err, name)
		}
	})
	t.Run("last record damaged", func(t *testing.T) {
		flipped := fs.CrashClone()
		bad := bytes.Clone(data)
		bad[len(bad)-2] ^= 1 // inside the last record
		rewrite(t, flipped, name, bad)
		_, err := Open("/db", memOpts(flipped))
		if !errors.Is(err, ErrCorruption) || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "closed cleanly") {
			t.Fatalf("last WAL record damaged: %v, want ErrCorruption naming %s", err, name)
		}
	})
	// (Without a clean close, a cut WAL reads as a crash's torn tail:
	// TestTornWALTailIsDroppedWithALogLine.)
	t.Run("the store itself is sound", func(t *testing.T) {
		d := mustOpen(t, "/db", memOpts(fs))
		expect(t, d, "last", "v")
		d.Close()
	})
}
