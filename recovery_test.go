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
	f, err := fs.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, _ := io.ReadAll(f)
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
