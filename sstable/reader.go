package sstable

// Opening a table: the reader's options, its footer, metaindex,
// properties, range deletions and index.

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/bloomkv/bloomkv/filterblock"
	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/cache"
	"github.com/bloomkv/bloomkv/internal/colblk"
	"github.com/bloomkv/bloomkv/internal/compress"
	"github.com/bloomkv/bloomkv/internal/rangedel"
)

// maxBlockLen bounds a block's stored and decompressed length, so that a
// corrupt handle or Snappy header cannot make a reader allocate without bound.
const maxBlockLen = 1 << 28

// BlockCache holds decoded blocks shared by readers; *cache.Cache from
// internal/cache implements it. Get returns the block cached under (file,
// offset); after a miss, Load returns it, calling load once however many
// callers ask concurrently.
type BlockCache interface {
	Get(file, offset uint64) ([]byte, bool)
	Load(file, offset uint64, load func() ([]byte, error)) ([]byte, error)
}

// ReaderOptions configure a Reader.
type ReaderOptions struct {
	// Cache, when set, holds the table's data blocks; FileNum names the
	// table in it, must be non-zero, and must be unique among the tables
	// sharing the cache (file numbers are never reused).
	Cache   BlockCache
	FileNum uint64
	// FileName names the table in errors.
	FileName string
	// CacheIndexAndFilterBlocks keeps the table's index and filter blocks
	// in Cache, charged to its capacity and evictable, instead of pinning
	// them in the Reader (RocksDB's cache_index_and_filter_blocks). A lookup
	// then fetches them through the cache; a filter "no" still reads no
	// data block.
	CacheIndexAndFilterBlocks bool
	// Buffers, when set, are scratch buffers this reader shares with
	// others (a store's tables share one); without it the reader keeps
	// its own.
	Buffers *Buffers
	// SeqNumOverride, when not 0, is the sequence number of every key the
	// reader returns, point entries (Iter.Key, LookupCopy) and range
	// deletions alike, whatever the table stores (0, in a table written
	// for ingestion: the store assigns the number when it ingests it).
	// Check reports the stored numbers.
	SeqNumOverride base.SeqNum
	// IngestChecks, when not nil, has each data block checked as it is
	// read for what a table written for ingestion holds (IngestChecks).
	IngestChecks *IngestChecks
	// DeferFilter leaves the filter block unread when the table opens, to
	// be read by LoadFilter (a store's Ingest loads them after it returns):
	// until then the table answers "maybe" to every probe and HasFilter is
	// false. Opening a table of a large filter (500 KiB for 400,000 keys)
	// then reads little. Ignored with CacheIndexAndFilterBlocks.
	DeferFilter bool
	// ForeignComparers accepts a table ordered by a comparer other than
	// bloomkv's that the reader knows: CockroachDB's
	// ("cockroach_comparator", with its columnar key schema "crdb1"), for
	// inspection. Without it such a table is refused; the store never
	// sets it, and never opens or ingests such a table as its own.
	ForeignComparers bool
}

// Buffers are scratch buffers that table readers share: for the stored
// bytes of blocks read into new memory (a compressed block's are dead once
// decompressed) and for iterators' read-ahead. The zero Buffers is ready to
// use, and it is safe for concurrent use.
type Buffers struct {
	raw, readahead sync.Pool // of *[]byte
	// row holds row blocks read to be flattened (*[]byte); flat, the
	// scratch of flattenBlock (*flatScratch).
	row, flat sync.Pool
}

// getBuf returns a buffer from p, or a new empty one.
func getBuf(p *sync.Pool) *[]byte {
	if b, ok := p.Get().(*[]byte); ok {
		return b
	}
	return new([]byte)
}

// RangeDeletion is one fragment of a range deletion: the user keys in
// [Start, End) written before SeqNum are deleted.
type RangeDeletion = rangedel.Tombstone

// Reader reads a table. It keeps the index, the filter and the range
// deletions in memory and reads data blocks through the cache. It is safe for
// concurrent use.
type Reader struct {
	r io.ReaderAt
	// mapped is r when r's bytes are mapped into memory: blocks are then
	// verified and decoded where they lie, without a read system call.
	mapped mappedFile
	size   uint64
	opts   ReaderOptions
	footer footer

	index []byte // pinned, unless the cache holds it
	// parts holds a pinned two-level index's partitions, read as first
	// used; nil otherwise (they are then read through the cache).
	parts *partitions
	// windows speed up point lookups' seeks in a pinned single-level
	// index (reader_lookup.go); nil when the index has none.
	windows   *indexWindows
	filter    filterblock.Filter
	filterBH  BlockHandle
	hasFilter bool
	// deferred: with DeferFilter, the filter once LoadFilter has read it
	// (nil until then), and filterMu serializing LoadFilter.
	deferred  atomic.Pointer[filterblock.Filter]
	filterMu  sync.Mutex
	rangeDels []RangeDeletion
	// storedDels are the range deletions as stored, for Check: rangeDels
	// itself but with a sequence-number override.
	storedDels []RangeDeletion
	props      Properties
	meta       map[string]BlockHandle // the metaindex: meta blocks by name
	iters      sync.Pool              // *Iter for LookupCopy
	// cc is opts.Cache when it is bloomkv's own cache, whose blocks
	// iterators hold by counted references, so that a data block's memory
	// is reused once it has left the cache and no iterator is on it.
	cc *cache.Cache
	// dataEnd bounds the data blocks: the lowest offset of the other
	// blocks, which follow them. Read-ahead stops there.
	dataEnd uint64
	// Pebble's tables from Pebblev3: SET values carry a prefix byte
	// (valueblocks.go); the value index lists the value blocks. From
	// Pebblev4 keys' kinds may carry the obsolete bit.
	valuePrefix, obsoleteBits bool
	valueIndexed              bool
	valueIndexBH              BlockHandle
	valueIndexWidths          [3]int
	valueBlocks               []BlockHandle
	// columnar: Pebble's tables from Pebblev5, whose blocks are turned
	// into row blocks as they are read (columnar.go).
	columnar bool
	// rowBlockLimit bounds a columnar block's row block (maxBlockLen when
	// 0; tests lower it).
	rowBlockLimit int
	// zstd decodes zstd blocks; made on the first.
	zstd compress.ZstdDecoder
	// order is the order of the table's user keys: bytewise (the zero
	// value) but for a foreign comparer's table (keyorder.go).
	order keyOrder
	// keySchema is the key schema of a columnar table's data blocks.
	keySchema colblk.KeySchema
}

// NewReader opens the table of size bytes that r holds. It checks the footer
// and the checksum of every block it reads; any failure is an error wrapping
// ErrCorruption that names the file, the block and the offset.
func NewReader(r io.ReaderAt, size int64, opts ReaderOptions) (*Reader, error) {
	opts, err := opts.complete(size)
	if err != nil {
		return nil, err
	}
	t := &Reader{r: r, size: uint64(size), opts: opts}
	t.mapped, _ = r.(mappedFile)
	t.cc, _ = opts.Cache.(*cache.Cache)
	for _, step := range []func() error{
		t.readFooter,
		t.readMetaindex,
		t.readProperties,
		t.checkPebbleFormat,
		t.readFilter,
		t.readRangeDels,
		t.readIndex,
		t.readValueIndex,
	} {
		if err := step(); err != nil {
			return nil, err
		}
	}
	t.storedDels = t.rangeDels
	if err := t.setOverride(opts.SeqNumOverride); err != nil {
		return nil, err
	}
	if opts.IngestChecks != nil {
		if err := t.checkIngestIndex(); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// Reassign changes the name the reader's errors give the table and its
// sequence-number override (ReaderOptions.FileName and SeqNumOverride), for
// a table that changes hands: a store's Ingest opens a table at the
// caller's path, and keeps the reader for the table once it is the store's,
// under the store's name and the sequence number it assigned. It must be
// called before any other use of the reader starts after the change (no
// iterator opened before it is used after it).
func (t *Reader) Reassign(fileName string, override base.SeqNum) error {
	if err := t.setOverride(override); err != nil {
		return err
	}
	t.opts.FileName = fileName
	return nil
}

// setOverride sets the sequence-number override, and the range deletions as
// it makes them.
func (t *Reader) setOverride(o base.SeqNum) error {
	if o > base.SeqNumMax {
		return fmt.Errorf("sstable: %s: sequence-number override %d exceeds 2^56-1", t.opts.FileName, o)
	}
	t.opts.SeqNumOverride = o
	if o == 0 {
		t.rangeDels = t.storedDels
		return nil
	}
	// The stored fragments are ordered and disjoint but for equal spans of
	// distinct sequence numbers; overridden, such a span's fragments would
	// be one, so only the first is kept.
	var out []RangeDeletion
	for _, d := range t.storedDels {
		if n := len(out); n > 0 && bytes.Equal(out[n-1].Start, d.Start) {
			continue
		}
		d.SeqNum = o
		out = append(out, d)
	}
	t.rangeDels = out
	return nil
}

// complete checks options for a table of size bytes and fills in the
// defaults: a file name from the file number, and the reader's own Buffers.
func (opts ReaderOptions) complete(size int64) (ReaderOptions, error) {
	if opts.FileName == "" {
		opts.FileName = fmt.Sprintf("table %d", opts.FileNum)
	}
	if size < 0 {
		return opts, fmt.Errorf("sstable: %s: negative size %d", opts.FileName, size)
	}
	if opts.CacheIndexAndFilterBlocks && opts.Cache == nil {
		return opts, fmt.Errorf("sstable: %s: CacheIndexAndFilterBlocks needs a Cache", opts.FileName)
	}
	if opts.Cache != nil && opts.FileNum == 0 {
		return opts, fmt.Errorf("sstable: %s: a reader sharing a cache needs a non-zero FileNum", opts.FileName)
	}
	if opts.Buffers == nil {
		opts.Buffers = new(Buffers)
	}
	return opts, nil
}

// readFooter reads and checks the footer, which places the metaindex and
// index blocks and gives the table's format.
func (t *Reader) readFooter() error {
	tail := make([]byte, min(uint64(maxFooterLen), t.size))
	if err := t.readAt(tail, t.size-uint64(len(tail))); err != nil {
		return err
	}
	var err error
	if t.footer, err = decodeFooter(tail, t.size, t.opts.FileName); err != nil {
		return err
	}
	t.props.Format = t.footer.format
	t.valuePrefix = t.footer.format >= TableFormatPebblev3
	t.obsoleteBits = t.footer.format >= TableFormatPebblev4
	t.columnar = t.footer.format.columnar()
	return nil
}

// readMetaindex reads the metaindex, which names the meta blocks, and sets
// where the data blocks end: before the lowest of the other blocks.
func (t *Reader) readMetaindex() error {
	meta, err := t.readBlock(t.footer.metaindex, "metaindex")
	if err != nil {
		return err
	}
	handles := map[string]BlockHandle{}
	var mi blockIter
	if err := mi.init(meta, true, t.where("metaindex", t.footer.metaindex)); err != nil {
		return err
	}
	for ok := mi.first(); ok; ok = mi.next() {
		bh, n := decodeHandle(mi.value)
		if string(mi.key) == metaValueIndexName && t.footer.format >= TableFormatPebblev3 {
			var ok bool
			if bh, t.valueIndexWidths, ok = decodeValueIndexHandle(mi.value); !ok {
				return mi.corrupt(mi.offset, fmt.Sprintf("bad value index handle %x", mi.value))
			}
			t.valueIndexed, t.valueIndexBH, n = true, bh, len(mi.value)
		}
		if n == 0 || n != len(mi.value) {
			return mi.corrupt(mi.offset, fmt.Sprintf("bad handle for %q", mi.key))
		}
		handles[string(mi.key)] = bh
	}
	if mi.err != nil {
		return mi.err
	}
	t.meta = handles
	t.dataEnd = min(t.footer.metaindex.Offset, t.footer.index.Offset)
	for _, bh := range handles {
		t.dataEnd = min(t.dataEnd, bh.Offset)
	}
	return nil
}

// readProperties reads the properties block, if the table has one, and
// refuses a table ordered by another comparer.
func (t *Reader) readProperties() error {
	bh, ok := t.meta[metaPropertiesName]
	if !ok {
		return nil
	}
	b, err := t.readBlock(bh, "properties")
	if err != nil {
		return err
	}
	var it blockIter
	if err := it.init(b, true, t.where("properties", bh)); err != nil {
		return err
	}
	if err := t.props.decode(&it); err != nil {
		return err
	}
	var known bool
	if t.order, known = orderOf(t.props.ComparerName, t.opts.ForeignComparers); !known {
		return fmt.Errorf("sstable: %s: comparer %q is not bloomkv's %q", t.opts.FileName, t.props.ComparerName, base.ComparerName)
	}
	if err := t.checkKeySchema(); err != nil {
		return err
	}
	return t.checkAttributes()
}

// obsoleteKeyCollector names the block property collector Pebble adds to
// the row tables it writes from Pebblev4 on (unless a copy of a table's
// span leaves it out); its name is one of the table's user properties.
const obsoleteKeyCollector = "obsolete-key"

// checkPebbleFormat refuses a table whose metaindex or properties contradict
// the Pebble format its footer states. Before Pebblev6 the footer has no
// checksum, and a Pebblev4 table read as an older format would keep the
// obsolete bit in the kind of every key a newer one covers: kinds that do
// not exist, with no error.
func (t *Reader) checkPebbleFormat() error {
	f := t.footer.format
	if f < TableFormatPebblev1 || f >= TableFormatPebblev4 {
		return nil
	}
	if _, ok := t.meta[metaRangeKeyName]; ok && f < TableFormatPebblev2 {
		return corruptionf("%s: footer at offset %d states %s, but the metaindex names a range-key block, which Pebble writes from %s on",
			t.opts.FileName, t.size-f.footerLen(), f, TableFormatPebblev2)
	}
	if _, ok := t.props.User[obsoleteKeyCollector]; ok {
		return corruptionf("%s: footer at offset %d states %s, but the properties name the %q block property collector, which Pebble writes from %s on",
			t.opts.FileName, t.size-f.footerLen(), f, obsoleteKeyCollector, TableFormatPebblev4)
	}
	return nil
}

// readRangeDels reads the range deletions, from the fragmented block or else
// from RocksDB's older unfragmented one, if the table has either.
func (t *Reader) readRangeDels() error {
	if bh, ok := t.meta[metaRangeDelName]; ok {
		return t.loadRangeDels(bh, true)
	}
	if bh, ok := t.meta[metaRangeDelV1Name]; ok {
		return t.loadRangeDels(bh, false)
	}
	return nil
}

// readIndex reads the index block, refuses index formats this reader does not
// support, checks the block's structure, and pins it or hands it to the cache.
func (t *Reader) readIndex() error {
	var err error
	if t.index, err = t.readBlock(t.footer.index, "index"); err != nil {
		return err
	}
	if err := t.checkIndexFormat(); err != nil {
		return err
	}
	var ii blockIter
	if err := ii.init(t.index, false, t.where("index", t.footer.index)); err != nil {
		return err
	}
	if t.opts.CacheIndexAndFilterBlocks {
		t.handToCache(t.footer.index, t.index)
		t.index = nil
	} else if t.props.IndexType == indexTypeTwoLevel {
		t.parts = t.newPartitions(t.index)
	} else if t.order == orderBytewise && !t.columnar {
		t.windows = t.buildIndexWindows(t.index)
	}
	return nil
}

// checkIndexFormat refuses an index type, or a RocksDB index encoding, that
// this reader does not support, judging by the properties and the footer's
// format version.
func (t *Reader) checkIndexFormat() error {
	switch t.props.IndexType {
	case indexTypeBinarySearch, indexTypeTwoLevel:
	default:
		return unsupportedf("%s: unsupported index type %d", t.opts.FileName, t.props.IndexType)
	}
	if t.footer.format != TableFormatRocksDBv2 {
		return nil
	}
	// RocksDB format versions 3 and up may store index keys as user keys
	// and index values delta-encoded; reading those as this reader does
	// would miss keys silently, so they are refused.
	// RocksDB writes the first property from version 3 on, the second from
	// 4; a table that lacks one its version calls for has a damaged footer
	// (bloomkv and Pebble write 2).
	for i, name := range []string{"rocksdb.index.key.is.user.key", "rocksdb.index.value.is.delta.encoded"} {
		v, ok := t.props.User[name]
		if !ok && t.footer.version >= uint32(3+i) {
			return corruptionf("%s: footer at offset %d: RocksDB format version %d, but no %s property", t.opts.FileName, t.size-rocksDBFooterLen, t.footer.version, name)
		}
		if ok && t.footer.version >= 3 {
			if n, _ := binary.Uvarint(v); n != 0 {
				return unsupportedf("%s: unsupported RocksDB index encoding (format version %d, %s)", t.opts.FileName, t.footer.version, name)
			}
		}
	}
	return nil
}

// handToCache puts a block this reader has read and checked into the cache.
func (t *Reader) handToCache(bh BlockHandle, b []byte) {
	t.opts.Cache.Load(t.opts.FileNum, bh.Offset, func() ([]byte, error) { return b, nil })
}

// indexBlock returns the index block: pinned, or through the cache.
func (t *Reader) indexBlock() ([]byte, error) {
	if t.index != nil {
		return t.index, nil
	}
	return t.cachedBlock(t.footer.index, "index", nil)
}

// loadRangeDels reads the range deletions at bh: already fragmented (checked)
// in a rocksdb.range_del2 block, or, in RocksDB's older rocksdb.range_del
// block, as written, to be fragmented here.
func (t *Reader) loadRangeDels(bh BlockHandle, fragmented bool) error {
	b, err := t.readBlock(bh, "range deletion")
	if err != nil {
		return err
	}
	var it blockIter
	if err := it.init(b, false, t.where("range deletion", bh)); err != nil {
		return err
	}
	for ok := it.first(); ok; ok = it.next() {
		k, ok := base.DecodeInternalKey(it.key)
		if !ok || k.Kind() != base.KindRangeDelete || t.order.compare(k.UserKey, it.value) >= 0 {
			return it.corrupt(it.offset, fmt.Sprintf("bad range deletion %x -> %q", it.key, it.value))
		}
		t.rangeDels = append(t.rangeDels, RangeDeletion{
			Start:  append([]byte(nil), k.UserKey...),
			End:    append([]byte(nil), it.value...),
			SeqNum: k.SeqNum(),
		})
	}
	if it.err != nil {
		return it.err
	}
	if !fragmented {
		t.rangeDels = rangedel.Fragment(t.rangeDels)
		return nil
	}
	for i := 1; i < len(t.rangeDels); i++ {
		a, b := t.rangeDels[i-1], t.rangeDels[i]
		c := t.order.compare(a.Start, b.Start)
		if c > 0 || (c == 0 && (!bytes.Equal(a.End, b.End) || a.SeqNum <= b.SeqNum)) || (c < 0 && t.order.compare(a.End, b.Start) > 0) {
			return corruptionf("%s: range deletion block %s: fragments %d and %d overlap or are out of order", t.opts.FileName, bh, i-1, i)
		}
	}
	return nil
}

// The index types of RocksDB's properties that the reader supports.
const (
	indexTypeBinarySearch = 0
	indexTypeTwoLevel     = 2
)

// Properties returns the table's properties.
func (t *Reader) Properties() *Properties { return &t.props }

// RangeDeletions returns the table's range deletions, fragmented (no two
// overlap unless equal) and sorted by start key, then sequence number
// descending. The caller must not modify them.
func (t *Reader) RangeDeletions() []RangeDeletion { return t.rangeDels }

// PinnedBytes is the memory the Reader holds outside the block cache: its
// index and filter blocks, unless the cache holds them (of a two-level
// index, the top level and the partitions read so far), and what it keeps
// to search the index.
func (t *Reader) PinnedBytes() uint64 {
	n := uint64(len(t.index)) + t.windows.bytes()
	if t.parts != nil {
		n += t.parts.pinned.Load()
	}
	if t.HasFilter() && !t.opts.CacheIndexAndFilterBlocks {
		n += t.filterBH.Length
	}
	return n
}

// Size returns the table's size in bytes.
func (t *Reader) Size() uint64 { return t.size }
