package bloomkv

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/cache"
	"github.com/bloomkv/bloomkv/internal/vfs"
	"github.com/bloomkv/bloomkv/sstable"
)

// The files of a store: NNNNNN.log (WAL), NNNNNN.sst (table),
// MANIFEST-NNNNNN, CURRENT (names the live manifest) and LOCK.
const (
	currentName = "CURRENT"
	lockName    = "LOCK"
)

type fileKind int

const (
	kindUnknown fileKind = iota
	kindLog
	kindTable
	kindManifest
)

func logName(num uint64) string      { return fmt.Sprintf("%06d.log", num) }
func tableName(num uint64) string    { return fmt.Sprintf("%06d.sst", num) }
func manifestName(num uint64) string { return fmt.Sprintf("MANIFEST-%06d", num) }

// parseName returns the kind and number of a store file's name.
func parseName(name string) (fileKind, uint64) {
	var kind fileKind
	var digits string
	switch {
	case strings.HasSuffix(name, ".log"):
		kind, digits = kindLog, strings.TrimSuffix(name, ".log")
	case strings.HasSuffix(name, ".sst"):
		kind, digits = kindTable, strings.TrimSuffix(name, ".sst")
	case strings.HasPrefix(name, "MANIFEST-"):
		kind, digits = kindManifest, strings.TrimPrefix(name, "MANIFEST-")
	default:
		return kindUnknown, 0
	}
	n, err := strconv.ParseUint(digits, 10, 64)
	if err != nil || len(digits) < 6 {
		return kindUnknown, 0
	}
	return kind, n
}

// setCurrent points CURRENT at manifest num atomically: write a temporary
// file, sync it, rename it over CURRENT, sync the directory.
func setCurrent(fs vfs.FS, dir string, num uint64) error {
	tmp := vfs.Join(dir, fmt.Sprintf("CURRENT.%06d.dbtmp", num))
	f, err := fs.Create(tmp)
	if err != nil {
		return err
	}
	_, err = io.WriteString(f, manifestName(num)+"\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fs.Rename(tmp, vfs.Join(dir, currentName))
	}
	if err == nil {
		err = fs.SyncDir(dir)
	}
	if err != nil {
		fs.Remove(tmp)
		return fmt.Errorf("bloomkv: setting CURRENT to %s: %w", manifestName(num), err)
	}
	return nil
}

// readCurrent returns the manifest number CURRENT names.
func readCurrent(fs vfs.FS, dir string) (uint64, error) {
	f, err := fs.Open(vfs.Join(dir, currentName))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 256))
	if err != nil {
		return 0, fmt.Errorf("bloomkv: reading %s: %w", currentName, err)
	}
	s := string(b)
	if !strings.HasSuffix(s, "\n") {
		return 0, base.CorruptionErrorf("bloomkv: %s: %q does not end in a newline", vfs.Join(dir, currentName), s)
	}
	kind, num := parseName(strings.TrimSuffix(s, "\n"))
	if kind != kindManifest {
		return 0, base.CorruptionErrorf("bloomkv: %s: %q names no manifest", vfs.Join(dir, currentName), s)
	}
	return num, nil
}

// tableCache keeps an open Reader per table.
type tableCache struct {
	fs    vfs.FS
	dir   string
	cache *cache.Cache
	// buffers are the tables' shared scratch buffers.
	buffers sstable.Buffers
	mu      sync.Mutex
	tables  map[uint64]*openTable
	closed  bool
	// pinned sums the memory the open tables hold outside the cache.
	pinned atomic.Int64
}

type openTable struct {
	once sync.Once
	r    *sstable.Reader
	f    vfs.File
	err  error
}

// get returns the open table num, opening it if need be. A failed open is
// not kept: a later call tries again (the error may be transient), and a
// call that found another caller's open failed tries once itself, so that
// only the calls that met the failure report it.
func (tc *tableCache) get(num uint64) (*sstable.Reader, error) {
	for attempt := 0; ; attempt++ {
		r, opened, err := tc.getOnce(num)
		if err == nil || opened || attempt > 0 || errors.Is(err, ErrClosed) {
			return r, err
		}
	}
}

// getOnce is one attempt of get; opened says whether this call made the
// open attempt whose result it returns.
func (tc *tableCache) getOnce(num uint64) (r *sstable.Reader, opened bool, err error) {
	tc.mu.Lock()
	if tc.closed {
		tc.mu.Unlock()
		return nil, false, ErrClosed
	}
	t, ok := tc.tables[num]
	if !ok {
		t = &openTable{}
		tc.tables[num] = t
	}
	tc.mu.Unlock()
	t.once.Do(func() {
		opened = true
		name := vfs.Join(tc.dir, tableName(num))
		f, err := tc.fs.Open(name)
		if err != nil {
			t.err = fmt.Errorf("bloomkv: opening table: %w", err)
			return
		}
		size, err := f.Size()
		if err == nil {
			t.r, err = sstable.NewReader(f, size, sstable.ReaderOptions{Cache: tc.cache, FileNum: num, FileName: name, Buffers: &tc.buffers})
		}
		if err != nil {
			f.Close()
			t.err = err
			return
		}
		t.f = f
		tc.pinned.Add(int64(t.r.PinnedBytes()))
	})
	if t.err != nil {
		tc.mu.Lock()
		if tc.tables[num] == t { // not a newer entry another call made
			delete(tc.tables, num) // let a later call retry
		}
		tc.mu.Unlock()
	}
	return t.r, opened, t.err
}

// evict closes and forgets a table that was deleted.
func (tc *tableCache) evict(num uint64) {
	tc.mu.Lock()
	t, ok := tc.tables[num]
	delete(tc.tables, num)
	tc.mu.Unlock()
	if ok && t.f != nil {
		tc.pinned.Add(-int64(t.r.PinnedBytes()))
		t.f.Close()
	}
}

func (tc *tableCache) close() error {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	tc.closed = true
	var first error
	for num, t := range tc.tables {
		if t.f != nil {
			if err := t.f.Close(); err != nil && first == nil {
				first = err
			}
		}
		delete(tc.tables, num)
	}
	return first
}
