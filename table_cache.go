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
	// evicted is set once the table is closed (evict, close): a get that
	// finds the entry kept with a table's metadata then goes to the map.
	evicted atomic.Bool
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

// keptReader is a table's open entry kept with its metadata, and the cache
// it belongs to (metadata read from one store's manifest is that store's,
// but a test may hand it to another cache).
type keptReader struct {
	tc *tableCache
	t  *openTable
}

// get returns the open table f, opening it if need be, with its
// sequence-number override (an ingested table's). A failed open is not
// kept: a later call tries again (the error may be transient), and a call
// that found another caller's open failed tries once itself, so that only
// the calls that met the failure report it.
//
// The open entry is kept with f (FileMetadata.SetOpened), where the next
// get finds it without the cache's lock and map, until evict or close
// marks it evicted: a get then goes to the map, as if nothing were kept.
func (tc *tableCache) get(f *manifest.FileMetadata) (*sstable.Reader, error) {
	if k, ok := f.Opened().(*keptReader); ok && k.tc == tc && !k.t.evicted.Load() {
		return k.t.r, nil
	}
	for attempt := 0; ; attempt++ {
		t, opened, err := tc.getOnce(f.FileNum, f.SeqNumOverride, f.Size)
		if err != nil {
			if opened || attempt > 0 || errors.Is(err, ErrClosed) {
				return nil, err
			}
			continue
		}
		f.SetOpened(&keptReader{tc: tc, t: t})
		return t.r, nil
	}
}

// getOnce is one attempt of get; opened says whether this call made the
// open attempt whose result it returns. A file whose size differs from
// the size the manifest records (recorded; 0: unknown) is damaged, and
// reported so.
func (tc *tableCache) getOnce(num uint64, override base.SeqNum, recorded uint64) (_ *openTable, opened bool, err error) {
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
	if t.err != nil {
		return nil, opened, t.err
	}
	return t, opened, nil
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
	if ok {
		t.evicted.Store(true)
		if t.f != nil {
			t.f.Close()
		}
	}
}

func (tc *tableCache) close() error {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	tc.closed = true
	var first error
	for num, t := range tc.tables {
		t.evicted.Store(true)
		if t.f != nil {
			if err := t.f.Close(); err != nil && first == nil {
				first = err
			}
		}
		delete(tc.tables, num)
	}
	return first
}
