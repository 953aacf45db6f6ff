package bloomkv

// The table cache: one open reader per table, opened on first use and
// checked against the manifest.

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/cache"
	"github.com/bloomkv/bloomkv/internal/manifest"
	"github.com/bloomkv/bloomkv/sstable"
	"github.com/bloomkv/bloomkv/vfs"
)

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
	// closedFlag is closed, for the gets that find their reader kept with
	// the table's metadata.
	closedFlag atomic.Bool
	// mmap maps tables into memory (see Options.DisableMmapReads).
	mmap bool
	// ingestChecks are made of each data block of an ingested table
	// (one with a sequence-number override) as it is read: Ingest does
	// not read a table whole (Options.VerifyIngestedTables).
	ingestChecks sstable.IngestChecks
}

// readerOptions returns the options of the reader of the table numbered
// num, at name, with the sequence-number override an ingested table has.
func (tc *tableCache) readerOptions(num uint64, name string, override base.SeqNum) sstable.ReaderOptions {
	o := sstable.ReaderOptions{Cache: tc.cache, FileNum: num, FileName: name, Buffers: &tc.buffers, SeqNumOverride: override}
	if override != 0 {
		o.IngestChecks = &tc.ingestChecks
	}
	return o
}

type openTable struct {
	once sync.Once
	r    *sstable.Reader
	f    vfs.File
	err  error
	// open is set once r and f are, for pinnedBytes, which reads r without
	// waiting for the open.
	open atomic.Bool
}

// pinnedBytes sums the memory the open tables hold outside the cache: what
// each reader holds now (an ingested table's filter and a large index's
// partitions are read after it opens).
func (tc *tableCache) pinnedBytes() uint64 {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	var n uint64
	for _, t := range tc.tables {
		if t.open.Load() {
			n += t.r.PinnedBytes()
		}
	}
	return n
}

// keptReader is a reader kept with a table's metadata, and the cache it
// belongs to (metadata read from one store's manifest is that store's, but
// a test may hand it to another cache).
type keptReader struct {
	tc *tableCache
	r  *sstable.Reader
}

// get returns the open table f, opening it if need be, with its
// sequence-number override (an ingested table's). A failed open is not
// kept: a later call tries again (the error may be transient), and a call
// that found another caller's open failed tries once itself, so that only
// the calls that met the failure report it.
//
// The reader is kept with f (FileMetadata.SetOpened), where the next get
// finds it without the cache's lock: a table is closed only once no version
// holds it (evict), or with the cache.
func (tc *tableCache) get(f *manifest.FileMetadata) (*sstable.Reader, error) {
	if k, ok := f.Opened().(*keptReader); ok && k.tc == tc {
		if tc.closedFlag.Load() {
			return nil, ErrClosed
		}
		return k.r, nil
	}
	for attempt := 0; ; attempt++ {
		r, opened, err := tc.getOnce(f.FileNum, f.SeqNumOverride, f.Size)
		if err == nil {
			f.SetOpened(&keptReader{tc: tc, r: r})
		}
		if err == nil || opened || attempt > 0 || errors.Is(err, ErrClosed) {
			return r, err
		}
	}
}

// getOnce is one attempt of get; opened says whether this call made the
// open attempt whose result it returns. A file whose size differs from
// the size the manifest records (recorded; 0: unknown) is damaged, and
// reported so.
func (tc *tableCache) getOnce(num uint64, override base.SeqNum, recorded uint64) (r *sstable.Reader, opened bool, err error) {
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
		if err == nil && recorded != 0 && uint64(size) != recorded {
			err = base.CorruptionErrorf("bloomkv: table %s %s", name, base.SizeMismatch(uint64(size), recorded))
		}
		if err == nil && tc.mmap {
			f = vfs.MapForReading(f, size)
		}
		if err == nil {
			t.r, err = sstable.NewReader(f, size, tc.readerOptions(num, name, override))
		}
		if errors.Is(err, sstable.ErrUnsupportedFormat) {
			// The store wrote every table it lists: one in a format
			// the reader does not know (a flipped magic number, a cut
			// file) is damaged.
			err = base.CorruptionErrorf("%w (a table of the store)", err)
		}
		if err != nil {
			f.Close()
			t.err = err
			return
		}
		t.f = f
		t.open.Store(true)
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

// adopt makes r, reading the open file f, the open reader of table num, as
// if get had opened it (Ingest opens its tables before they are the
// store's); on a closed cache, or if num is open already, it closes f.
func (tc *tableCache) adopt(num uint64, r *sstable.Reader, f vfs.File) {
	t := &openTable{r: r, f: f}
	t.once.Do(func() {})
	t.open.Store(true)
	tc.mu.Lock()
	if _, open := tc.tables[num]; tc.closed || open {
		tc.mu.Unlock()
		f.Close()
		return
	}
	tc.tables[num] = t
	tc.mu.Unlock()
}

// evict closes and forgets a table that was deleted.
func (tc *tableCache) evict(num uint64) {
	tc.mu.Lock()
	t, ok := tc.tables[num]
	delete(tc.tables, num)
	tc.mu.Unlock()
	if ok && t.f != nil {
		t.f.Close()
	}
}

func (tc *tableCache) close() error {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	tc.closed = true
	tc.closedFlag.Store(true)
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
