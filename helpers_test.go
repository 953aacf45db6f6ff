package bloomkv

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bloomkv/bloomkv/internal/manifest"
	"github.com/bloomkv/bloomkv/internal/record"
	"github.com/bloomkv/bloomkv/vfs"
)

// The helpers the tests of several files share.

// Opening stores.

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

func (o *Options) withDefaultsMust(t *testing.T) *Options {
	c, err := o.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	return c
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

// Filling stores, and waiting for their compactions.

func levelKey(i int) []byte { return fmt.Appendf(nil, "key%013d", i) }

// fillKeys writes keys 2i for i in [0, n) (random values of valueSize
// bytes, which do not compress) in batches, so that the odd keys in between
// are absent.
func fillKeys(tb testing.TB, d *DB, n, valueSize int) { fillKeysOrder(tb, d, n, valueSize, false) }

// fillKeysOrder is fillKeys writing in random order when shuffle, so that
// the levels' key ranges overlap.
func fillKeysOrder(tb testing.TB, d *DB, n, valueSize int, shuffle bool) {
	tb.Helper()
	b := d.NewBatch()
	v := make([]byte, valueSize)
	r := rand.New(rand.NewPCG(uint64(n), 1))
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	if shuffle {
		r.Shuffle(n, func(i, j int) { order[i], order[j] = order[j], order[i] })
	}
	for i, k := range order {
		for j := range v {
			v[j] = byte(r.Uint32())
		}
		if err := b.Set(levelKey(2*k), v); err != nil {
			tb.Fatal(err)
		}
		if b.Count() == 1000 || i == n-1 {
			if err := d.Apply(b, NoSync); err != nil {
				tb.Fatal(err)
			}
			b = d.NewBatch()
		}
	}
}

// waitForCompactions waits until no level is due for compaction and none
// runs, no build of the differential-file filter is asked for or runs, and
// no obsolete file awaits removal; or until the store fails or closes.
func waitForCompactions(t testing.TB, d *DB) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for {
		s := d.levelScoresLocked(d.mu.version)
		due := len(d.mu.running) > 0 || len(d.mu.imm) > 0 || d.mu.diff.wantBuild || d.mu.diff.buildRunning || d.mu.removed < d.mu.queued
		for l := range manifest.NumLevels - 1 { // the last level never scores
			due = due || s[l] >= 1
		}
		if !due || d.mu.bgErr != nil || d.mu.closed {
			return
		}
		d.mu.cond.Wait()
	}
}

func levelFiles(m *Metrics) []int {
	var out []int
	for _, l := range m.Levels {
		out = append(out, l.Files)
	}
	return out
}

// A store's files.

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

// manifestFile returns the name of the store's current manifest.
func manifestFile(t *testing.T, fs vfs.FS) string {
	t.Helper()
	num, err := readCurrent(fs, "/db")
	if err != nil {
		t.Fatal(err)
	}
	return "/db/" + manifestName(num)
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

// A file system that holds flushes back.

// closeAtCleanup closes d when the test ends, after the cleanups registered
// later, such as holdCompactions' and newSlowFS's releases, have run:
// a deferred Close would run before them and wait forever for the work
// they hold when the test fails midway.
func closeAtCleanup(t testing.TB, d *DB) {
	t.Cleanup(func() { d.Close() })
}

// waitFor waits until cond holds, which background work makes true; past a
// minute, far beyond what it takes, the test fails naming what it waited
// for rather than hanging.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// holdCompactions makes d's compactions wait, each before it starts, until
// the returned release is called. The test's cleanup releases them too, so
// that a failing test does not leave Close waiting at the gate, provided the
// test closes d with closeAtCleanup rather than defer.
func holdCompactions(t testing.TB, d *DB) (release func()) {
	gate := make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(gate) }) }
	t.Cleanup(release)
	d.mu.Lock()
	d.mu.compactionGate = gate
	d.mu.Unlock()
	return release
}

// fillInBackground writes keys k00000, k00001, ... (n of them, 100-byte
// values, NoSync) from a goroutine, and sends the first error, or nil once
// all are written. With 64 KiB memtables, 6000 keys fill several.
func fillInBackground(d *DB, n int) <-chan error {
	done := make(chan error, 1)
	go func() {
		for i := range n {
			if err := d.Set([]byte(fmt.Sprintf("k%05d", i)), make([]byte, 100), NoSync); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	return done
}

// slowFS holds table syncs until released, so flushes back up.
type slowFS struct {
	*vfs.MemFS
	gate chan struct{}
	once sync.Once
}

// newSlowFS returns a slowFS whose gate the test's cleanup opens, so that a
// failing test does not leave Close waiting on a held flush, provided the
// test closes its store with closeAtCleanup rather than defer.
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

// Benchmarks' stores.

func benchDB(b *testing.B) *DB {
	d, err := Open(b.TempDir(), &Options{Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { d.Close() })
	return d
}

func benchKey(i int) []byte { return []byte(fmt.Sprintf("key%012d", i)) }

var benchValue = make([]byte, 100)

// levelsDB builds a store of n keys (100-byte values), written in random
// order and spread over several overlapping levels by automatic compaction,
// on the operating system's file system.
func levelsDB(b *testing.B, n int) *DB {
	d, err := Open(b.TempDir(), &Options{Logger: quietLogger(), LBaseMaxBytes: 4 << 20, TargetFileSize: 1 << 20, CacheSize: 64 << 20})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { d.Close() })
	fillKeysOrder(b, d, n, 100, true)
	if err := d.Flush(); err != nil {
		b.Fatal(err)
	}
	waitForCompactions(b, d)
	return d
}

// moveTables moves the tables of level from that pick chooses (by their
// index in the level) to level to, by a manifest edit: a shape the picker
// would not make on its own, such as a store of static level targets left.
// The caller keeps the LSM order: nothing of the tables' keys between.
func moveTables(t testing.TB, d *DB, from, to int, pick func(i int) bool) {
	t.Helper()
	d.mu.Lock()
	edit := &manifest.VersionEdit{}
	for i, f := range d.mu.version.Files(from) {
		if pick(i) {
			edit.DeletedFiles = append(edit.DeletedFiles, manifest.DeletedFile{Level: from, FileNum: f.FileNum})
			edit.NewFiles = append(edit.NewFiles, manifest.NewFile{Level: to, Meta: f})
		}
	}
	err := d.logAndApplyLocked(edit)
	if err == nil {
		d.publishLocked()
	}
	d.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
}

// newestTable returns the table holding the newest data, the last flush's
// output wherever it went (a table overlapping nothing moves down).
func newestTable(d *DB) *manifest.FileMetadata {
	d.mu.Lock()
	defer d.mu.Unlock()
	var newest *manifest.FileMetadata
	for _, f := range d.mu.version.All() {
		if newest == nil || f.LargestSeq > newest.LargestSeq {
			newest = f
		}
	}
	return newest
}

// holdsTable reports whether the store's current version holds the table
// file name (a base name, as 000123.sst).
func (d *DB) holdsTable(name string) bool {
	s := d.acquire()
	defer d.release(s)
	for _, f := range s.version.All() {
		if tableName(f.FileNum) == name {
			return true
		}
	}
	return false
}

// walLog is a WAL as read to its end: its records, their offsets, and the
// reader (where and how the log ended).
type walLog struct {
	recs [][]byte
	offs []int64
	r    *record.Reader
}

// readWAL reads data, a WAL, to its end with the reader o configures; an
// error other than its end fails the test.
func readWAL(t *testing.T, data []byte, o record.Options) walLog {
	t.Helper()
	r, err := record.NewReaderOptions(bytes.NewReader(data), "wal", o)
	if err != nil {
		t.Fatal(err)
	}
	l := walLog{r: r}
	for {
		rec, err := r.Next()
		if err == io.EOF {
			return l
		} else if err != nil {
			t.Fatal(err)
		}
		l.recs = append(l.recs, bytes.Clone(rec))
		l.offs = append(l.offs, r.Offset())
	}
}

// walRecords returns the records part of WAL name: its contents up to where
// its records end, without the zeros a synced log writes ahead.
func walRecords(t *testing.T, fs vfs.FS, name string) []byte {
	t.Helper()
	data := readFile(t, fs, name)
	return data[:readWAL(t, data, record.Options{Pebble: true}).r.End()]
}
