package sstable

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"unsafe"

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
	parts     *partitions
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

// readFilter reads bloomkv's filter block, if the table has one, and pins it
// or hands it to the cache.
func (t *Reader) readFilter() error {
	bh, ok := t.meta[metaFilterName]
	if !ok {
		return nil
	}
	if t.opts.DeferFilter && !t.opts.CacheIndexAndFilterBlocks {
		t.hasFilter, t.filterBH = true, bh
		return nil
	}
	b, err := t.readBlock(bh, "filter")
	if err != nil {
		return err
	}
	if t.filter, err = filterblock.Decode(b); err != nil {
		return fmt.Errorf("sstable: %s: filter block %s: %w", t.opts.FileName, bh, err)
	}
	t.hasFilter, t.filterBH = true, bh
	if t.opts.CacheIndexAndFilterBlocks {
		t.handToCache(bh, b)
		t.filter = filterblock.Filter{}
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

// MayContainHash probes the table's filter with a key's filterblock.Hash: false
// means the table certainly lacks the key. A table without a filter (or
// whose deferred filter is not loaded yet) answers true.
func (t *Reader) MayContainHash(hash uint64) (bool, error) {
	if !t.hasFilter {
		return true, nil
	}
	return t.mayContain(hash)
}

// HasFilter reports whether the table has a bloomkv filter that probes
// consult: false until LoadFilter has read a deferred one.
func (t *Reader) HasFilter() bool {
	return t.hasFilter && (!t.deferFilter() || t.deferred.Load() != nil)
}

// deferFilter reports whether the filter is read by LoadFilter.
func (t *Reader) deferFilter() bool {
	return t.opts.DeferFilter && !t.opts.CacheIndexAndFilterBlocks
}

// LoadFilter reads the table's filter when the reader was opened with
// DeferFilter and has not read it yet; from then on probes consult it. It
// is safe to call concurrently with reads, and more than once. A damaged
// filter block is an error wrapping ErrCorruption, and the table goes on
// answering "maybe".
func (t *Reader) LoadFilter() error {
	if !t.hasFilter || !t.deferFilter() || t.deferred.Load() != nil {
		return nil
	}
	t.filterMu.Lock()
	defer t.filterMu.Unlock()
	if t.deferred.Load() != nil {
		return nil
	}
	b, err := t.readBlock(t.filterBH, "filter")
	if err != nil {
		return err
	}
	f, err := filterblock.Decode(b)
	if err != nil {
		return fmt.Errorf("sstable: %s: filter block %s: %w", t.opts.FileName, t.filterBH, err)
	}
	t.deferred.Store(&f)
	return nil
}

// mayContain probes the table's filter with a key's hash: the pinned filter,
// the deferred one once loaded, or the filter block through the cache.
func (t *Reader) mayContain(hash uint64) (bool, error) {
	if !t.opts.CacheIndexAndFilterBlocks {
		if t.opts.DeferFilter {
			if f := t.deferred.Load(); f != nil {
				return f.MayContainHash(hash), nil
			}
			return true, nil
		}
		return t.filter.MayContainHash(hash), nil
	}
	b, err := t.cachedBlock(t.filterBH, "filter", nil)
	if err != nil {
		return false, err
	}
	f, err := filterblock.Decode(b)
	if err != nil {
		return false, fmt.Errorf("sstable: %s: filter block %s: %w", t.opts.FileName, t.filterBH, err)
	}
	return f.MayContainHash(hash), nil
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

func (t *Reader) where(kind string, bh BlockHandle) blockWhere {
	return blockWhere{file: t.opts.FileName, kind: kind, bh: bh}
}

func (t *Reader) readAt(buf []byte, off uint64) error {
	n, err := t.r.ReadAt(buf, int64(off))
	if n == len(buf) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		return corruptionf("%s: short read of %d bytes at offset %d: got %d", t.opts.FileName, len(buf), off, n)
	}
	return fmt.Errorf("sstable: %s: read of %d bytes at offset %d: %w", t.opts.FileName, len(buf), off, err)
}

// readBlock reads, verifies and decompresses the block at bh into new memory.
func (t *Reader) readBlock(bh BlockHandle, kind string) ([]byte, error) {
	return t.readBlockInto(bh, kind, nil)
}

// blockBufs are an iterator's buffers for blocks it reads without a cache;
// a block read into them lasts until the next read.
type blockBufs struct{ raw, dec []byte }

// grow returns b resized to n bytes, reusing its memory when it can.
func grow(b []byte, n int) []byte {
	if cap(b) >= n {
		return b[:n]
	}
	return make([]byte, n)
}

// maxPooledRaw bounds the buffers kept in Buffers.raw.
const maxPooledRaw = 256 << 10

// readBlockInto reads, verifies and decompresses the block at bh, into bufs
// when given (reused) or into new memory.
func (t *Reader) readBlockInto(bh BlockHandle, kind string, bufs *blockBufs) ([]byte, error) {
	if bh.Length > maxBlockLen || bh.Offset > t.size || bh.Length+blockTrailerLen > t.size-bh.Offset {
		return nil, corruptionf("%s: %s block %s lies outside the file of %d bytes", t.opts.FileName, kind, bh, t.size)
	}
	n := int(bh.Length + blockTrailerLen)
	switch {
	case bufs != nil:
		if out, ok, err := t.readMapped(bh, kind, bufs, nil); ok {
			return out, err
		}
		bufs.raw = grow(bufs.raw, n)
		return t.decodeBlock(bh, kind, bufs.raw, bufs, nil)
	case kind == "filter":
		return t.decodeBlock(bh, kind, alignedBytes(n), nil, newBytes) // probes touch one cache line
	}
	return t.readBlockAlloc(bh, kind, newBytes)
}

func newBytes(n int) []byte { return make([]byte, n) }

// readBlockAlloc reads, verifies and decompresses the block at bh into memory
// from alloc.
func (t *Reader) readBlockAlloc(bh BlockHandle, kind string, alloc func(int) []byte) ([]byte, error) {
	if bh.Length > maxBlockLen || bh.Offset > t.size || bh.Length+blockTrailerLen > t.size-bh.Offset {
		return nil, corruptionf("%s: %s block %s lies outside the file of %d bytes", t.opts.FileName, kind, bh, t.size)
	}
	if out, ok, err := t.readMapped(bh, kind, nil, alloc); ok {
		return out, err
	}
	pooled := getBuf(&t.opts.Buffers.raw)
	*pooled = grow(*pooled, int(bh.Length+blockTrailerLen))
	out, err := t.decodeBlock(bh, kind, *pooled, nil, alloc)
	if err == nil && len(out) > 0 && &out[0] == &(*pooled)[0] {
		// Stored uncompressed: the block is the buffer itself.
		b := alloc(len(out))
		copy(b, out)
		out = b
	}
	if cap(*pooled) <= maxPooledRaw {
		t.opts.Buffers.raw.Put(pooled)
	}
	return out, err
}

// mappedFile is a file whose bytes are mapped into memory (a
// vfs.MappedFile): MappedBytes returns them (ok false once the file is
// closed), to use until ReleaseMapped.
type mappedFile interface {
	MappedBytes() (data []byte, ok bool)
	ReleaseMapped()
}

// readMapped verifies and decompresses the block at bh where it lies in the
// table's mapped bytes, as checkDecode does, copying a block stored
// uncompressed out of them. ok is false, and the block must be read instead,
// when the table is not mapped (or no longer: its file was closed) or the
// block lies past the mapping. A fault while touching the bytes (the file was
// cut short under the mapping) is an error wrapping ErrCorruption, as a
// short read is.
func (t *Reader) readMapped(bh BlockHandle, kind string, bufs *blockBufs, alloc func(int) []byte) (out []byte, ok bool, err error) {
	if t.mapped == nil {
		return nil, false, nil
	}
	data, ok := t.mapped.MappedBytes()
	if !ok {
		return nil, false, nil
	}
	defer t.mapped.ReleaseMapped()
	end := bh.Offset + bh.Length + blockTrailerLen
	if end > uint64(len(data)) || end < bh.Offset {
		return nil, false, nil
	}
	defer func() {
		if r := recover(); r != nil {
			fault, isFault := r.(interface{ Addr() uintptr })
			if start := uintptr(unsafe.Pointer(unsafe.SliceData(data))); !isFault || fault.Addr() < start || fault.Addr()-start >= uintptr(len(data)) {
				panic(r) // not a fault on the mapping: a bug, not the file
			}
			out, err = nil, corruptionf("%s: %s block %s: fault reading the mapped file at offset %d (cut short since it was opened?): %v", t.opts.FileName, kind, bh, bh.Offset, fault)
		}
	}()
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	raw := data[bh.Offset:end:end]
	out, err = t.checkDecode(bh, kind, raw, bufs, alloc)
	if err == nil && len(out) > 0 && &out[0] == &raw[0] {
		// Stored uncompressed: copy the block out of the mapping.
		var b []byte
		if bufs != nil {
			bufs.dec = grow(bufs.dec, len(out))
			b = bufs.dec
		} else {
			b = alloc(len(out))
		}
		copy(b, out)
		out = b
	}
	return out, true, err
}

// decodeBlock reads the block at bh into buf (its stored length plus the
// trailer), verifies it and decompresses it, into bufs.dec when bufs is given
// or else into memory from alloc. A block stored uncompressed is returned in
// buf.
func (t *Reader) decodeBlock(bh BlockHandle, kind string, buf []byte, bufs *blockBufs, alloc func(int) []byte) ([]byte, error) {
	if err := t.readAt(buf, bh.Offset); err != nil {
		return nil, fmt.Errorf("%s block %s: %w", kind, bh, err)
	}
	return t.checkDecode(bh, kind, buf, bufs, alloc)
}

// checkDecode checks the stored block at bh, in buf (its stored length plus
// the trailer), and decompresses it as decodeBlock does.
func (t *Reader) checkDecode(bh BlockHandle, kind string, buf []byte, bufs *blockBufs, alloc func(int) []byte) ([]byte, error) {
	body, typ := buf[:bh.Length], buf[bh.Length]
	stored := uint32(buf[bh.Length+1]) | uint32(buf[bh.Length+2])<<8 | uint32(buf[bh.Length+3])<<16 | uint32(buf[bh.Length+4])<<24
	if got := blockChecksum(t.footer.checksum, buf[:bh.Length+1]); got != stored {
		return nil, corruptionf("%s: %s block %s: checksum mismatch at offset %d: stored %#x, computed %#x", t.opts.FileName, kind, bh, bh.Offset+bh.Length+1, stored, got)
	}
	dst := func(n int) []byte {
		if bufs != nil {
			bufs.dec = grow(bufs.dec, n)
			return bufs.dec
		}
		return alloc(n)
	}
	ck := t.columnarKind(kind)
	dec := dst
	if ck > colRaw {
		dec = newBytes // the columnar block is dead once turned into a row block in dst
	}
	var out []byte
	switch c := compressionOf(typ); c {
	case NoCompression:
		out = body
	case SnappyCompression, ZstdCompression, MinLZCompression:
		n, err := compress.DecodedLen(c.code(), body, maxBlockLen)
		if err == nil {
			out, err = compress.Decode(c.code(), dec(n), body, &t.zstd)
		}
		if err != nil {
			return nil, corruptionf("%s: %s block %s: %v data at offset %d: %v", t.opts.FileName, kind, bh, c, bh.Offset, err)
		}
	default:
		return nil, corruptionf("%s: %s block %s: unknown compression type %d at offset %d", t.opts.FileName, kind, bh, typ, bh.Offset+bh.Length)
	}
	switch ck {
	case colNone:
	case colRaw:
		return out, nil // bytes bloomkv does not interpret
	default:
		return t.rowBlock(ck, t.where(kind, bh), out, dst)
	}
	if kind != "filter" && kind != kindValue && kind != kindValueIndex {
		if err := checkBlock(out, t.where(kind, bh)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// The index types of RocksDB's properties that the reader supports.
const (
	indexTypeBinarySearch = 0
	indexTypeTwoLevel     = 2
)

// cachedBlock returns the block at bh (a data block or an index partition),
// through the cache when there is one. A block read from the file is
// checked by chk, when not nil (IngestChecks), before it is returned or
// cached.
func (t *Reader) cachedBlock(bh BlockHandle, kind string, chk *Iter) ([]byte, error) {
	if t.opts.Cache == nil {
		return t.readChecked(bh, kind, chk)
	}
	if b, ok := t.opts.Cache.Get(t.opts.FileNum, bh.Offset); ok {
		return b, nil
	}
	return t.opts.Cache.Load(t.opts.FileNum, bh.Offset, func() ([]byte, error) {
		return t.readChecked(bh, kind, chk)
	})
}

// readChecked is readBlock, the block then checked by chk when not nil.
func (t *Reader) readChecked(bh BlockHandle, kind string, chk *Iter) ([]byte, error) {
	b, err := t.readBlock(bh, kind)
	if err == nil && chk != nil {
		err = chk.checkIngested(bh, b)
	}
	return b, err
}

// countedBlock returns the data block at bh through bloomkv's cache, with a
// reference the caller must release; a block read on a miss goes into memory
// from the cache's Alloc, and is checked by chk when not nil (IngestChecks)
// before it is cached. ra, when given, is the caller's read-ahead: misses of
// a sequential walk are served from file bytes read ahead in one go.
func (t *Reader) countedBlock(bh BlockHandle, ra *readahead, chk *Iter) ([]byte, cache.Handle, error) {
	if ra != nil {
		ra.saw(bh)
	}
	if h, ok := t.cc.GetRef(t.opts.FileNum, bh.Offset); ok {
		return h.Value(), h, nil
	}
	h, err := t.cc.LoadRef(t.opts.FileNum, bh.Offset, func() (b []byte, err error) {
		var raw []byte
		if ra != nil {
			raw = ra.stored(t, bh)
		}
		if raw != nil {
			b, err = t.verifyAlloc(bh, "data", raw, t.cc.Alloc)
		} else {
			b, err = t.readBlockAlloc(bh, "data", t.cc.Alloc)
		}
		if err == nil && chk != nil {
			err = chk.checkIngested(bh, b)
		}
		return b, err
	})
	return h.Value(), h, err
}

// verifyAlloc verifies and decompresses the stored block raw (read into
// memory the caller reuses) into memory from alloc.
func (t *Reader) verifyAlloc(bh BlockHandle, kind string, raw []byte, alloc func(int) []byte) ([]byte, error) {
	out, err := t.checkDecode(bh, kind, raw, nil, alloc)
	if err == nil && len(out) > 0 && &out[0] == &raw[0] {
		// Stored uncompressed: the block is in raw itself.
		b := alloc(len(out))
		copy(b, out)
		out = b
	}
	return out, err
}

// Read-ahead: once an iterator has loaded blocks that follow one another in
// the file raStart times in a row, a miss reads raMin bytes from the block on
// in one read, and each further read-ahead twice as many, up to raMax; the
// misses that follow are decoded from those bytes instead of a read each.
const (
	raStart = 2
	raMin   = 16 << 10
	raMax   = 256 << 10
)

// readahead is an iterator's read-ahead state for one table.
type readahead struct {
	buf  *[]byte    // up to raMax bytes; nil until the first read-ahead
	pool *sync.Pool // where buf came from and goes back
	off  uint64     // file offset of (*buf)[0]
	n    int        // bytes of buf read
	next uint64     // where the last block loaded ends
	seq  int        // blocks loaded in a row that each followed the last
	size int        // the next read-ahead's size
}

// saw records a block the iterator loads, hit or miss.
func (ra *readahead) saw(bh BlockHandle) {
	if bh.Offset == ra.next {
		ra.seq++
	} else {
		ra.seq, ra.size = 0, 0
	}
	ra.next = bh.Offset + bh.Length + blockTrailerLen
}

// stored returns the stored bytes (with the trailer) of the block at bh from
// the read-ahead, reading ahead first when the walk is sequential and bh lies
// past what was read; nil when the block should be read on its own (as it is
// when the read-ahead fails: its error is the block's own read's to report).
func (ra *readahead) stored(t *Reader, bh BlockHandle) []byte {
	raw, err := ra.read(t, bh)
	if err != nil {
		// Let the block's own read succeed or fail as it would have,
		// and start over.
		ra.n, ra.seq, ra.size = 0, 0, 0
		return nil
	}
	return raw
}

// read is stored, but for a read-ahead that fails, whose error it returns.
func (ra *readahead) read(t *Reader, bh BlockHandle) ([]byte, error) {
	n := bh.Length + blockTrailerLen
	if bh.Length > maxBlockLen || bh.Offset > t.size || n > t.size-bh.Offset {
		return nil, nil // the block's own read reports it
	}
	if ra.buf != nil && bh.Offset >= ra.off && bh.Offset+n <= ra.off+uint64(ra.n) {
		return (*ra.buf)[bh.Offset-ra.off:][:n], nil
	}
	if ra.seq < raStart {
		return nil, nil
	}
	ra.size = min(max(2*ra.size, raMin), raMax)
	end := min(bh.Offset+uint64(ra.size), max(t.dataEnd, bh.Offset+n), t.size)
	if end-bh.Offset <= n {
		return nil, nil // nothing to read beyond the block
	}
	if ra.buf == nil {
		ra.pool = &t.opts.Buffers.readahead
		ra.buf = getBuf(ra.pool)
	}
	if cap(*ra.buf) < ra.size {
		*ra.buf = make([]byte, ra.size)
	}
	ra.off, ra.n = bh.Offset, int(end-bh.Offset)
	if err := t.readAt((*ra.buf)[:ra.n], ra.off); err != nil {
		ra.n = 0
		return nil, err
	}
	return (*ra.buf)[:n], nil
}

// reset forgets the read-ahead, keeping its buffer, for another table.
func (ra *readahead) reset() {
	buf, pool := ra.buf, ra.pool
	*ra = readahead{buf: buf, pool: pool}
}

// release forgets the read-ahead and returns its buffer.
func (ra *readahead) release() {
	if ra.buf != nil {
		ra.pool.Put(ra.buf)
	}
	*ra = readahead{}
}

// Properties returns the table's properties.
func (t *Reader) Properties() *Properties { return &t.props }

// RangeDeletions returns the table's range deletions, fragmented (no two
// overlap unless equal) and sorted by start key, then sequence number
// descending. The caller must not modify them.
func (t *Reader) RangeDeletions() []RangeDeletion { return t.rangeDels }

// Filter returns the table's blocked filter and whether it has one.
func (t *Reader) Filter() (filterblock.Filter, bool, error) {
	if t.hasFilter && t.deferFilter() {
		if err := t.LoadFilter(); err != nil {
			return filterblock.Filter{}, true, err
		}
		return *t.deferred.Load(), true, nil
	}
	if !t.hasFilter || !t.opts.CacheIndexAndFilterBlocks {
		return t.filter, t.hasFilter, nil
	}
	b, err := t.cachedBlock(t.filterBH, "filter", nil)
	if err != nil {
		return filterblock.Filter{}, true, err
	}
	f, err := filterblock.Decode(b)
	return f, true, err
}

// PinnedBytes is the memory the Reader holds outside the block cache: its
// index and filter blocks, unless the cache holds them (of a two-level
// index, the top level and the partitions read so far).
func (t *Reader) PinnedBytes() uint64 {
	n := uint64(len(t.index))
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

// LookupCopy returns the newest point entry for userKey written before seq (a
// read at seq sees sequence numbers below it): its trailer (sequence number
// and kind: KindSet or KindDelete in tables bloomkv writes; a table from
// another engine may hold other kinds) and, for a set, its value copied into
// new memory, as the block it lay in may be reused once the call returns (a
// value held in a blob file as its reference: see Iter.IsBlobReference).
// found is false when the table holds no such entry. It does not consult the
// filter: the caller probes it first (MayContainHash) and counts its answers.
// Range deletions are the caller's to apply (RangeDeletions).
func (t *Reader) LookupCopy(userKey []byte, seq base.SeqNum) (value []byte, trailer base.Trailer, found bool, err error) {
	it := t.getIter()
	if it.seekUserKey(userKey, seq) {
		trailer, found = it.Key().Trailer, true
		if trailer.Kind() == base.KindSet {
			v := it.Value()
			value = make([]byte, len(v))
			copy(value, v)
		}
	}
	err = it.err
	it.release()
	t.iters.Put(it)
	return value, trailer, found, err
}

// getIter returns an iterator from the pool for a point lookup. It holds
// counted references to blocks of bloomkv's cache.
func (t *Reader) getIter() *Iter {
	it, _ := t.iters.Get().(*Iter)
	if it == nil {
		it = &Iter{}
	}
	it.reset(t, false)
	it.counted = t.cc != nil
	return it
}

// seekUserKey positions it at the newest entry for userKey written before seq,
// reporting whether there is one.
func (it *Iter) seekUserKey(userKey []byte, seq base.SeqNum) bool {
	if seq == 0 || seq <= it.override {
		return false // a read at seq sees no key of the table
	}
	seq = min(seq, base.SeqNumMax+1) // above it every entry is visible
	kind := base.KindMax
	if it.t.obsoleteBits {
		kind |= obsoleteBit // first among the keys at seq-1 with Pebble's bit too
	}
	it.seek = base.MakeInternalKey(userKey, seq-1, kind).Append(it.seek[:0])
	if !it.seekGEEncoded(it.seek) {
		return false
	}
	k := it.Key().UserKey
	// Distinct keys of a foreign order may compare equal (CockroachDB's
	// timestamps with and without a zero logical time).
	return bytes.Equal(k, userKey) || (it.t.order != orderBytewise && it.t.order.compare(k, userKey) == 0)
}

// ErrIterClosed is returned by an iterator used after Close.
var ErrIterClosed = errors.New("sstable: iterator is closed")

// alignedBytes returns n bytes starting at a 64-byte boundary.
func alignedBytes(n int) []byte {
	b := make([]byte, n+filterblock.LineBytes)
	off := 0
	if r := uintptr(unsafe.Pointer(&b[0])) % filterblock.LineBytes; r != 0 {
		off = int(filterblock.LineBytes - r)
	}
	return b[off : off+n : off+n]
}
