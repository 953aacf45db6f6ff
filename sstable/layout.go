package sstable

// Inspection: the blocks a table is made of, their entries and its filter.
// These serve tools (tools/bloomkv) and Check (check.go), not the read path;
// they read blocks without the cache.

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/bloomkv/bloomkv/filterblock"
	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/rocksbloom"
)

// BlockKind says what a block of a table holds.
type BlockKind uint8

// The kinds of block.
const (
	BlockData BlockKind = iota + 1
	BlockIndex
	BlockIndexPartition
	BlockMetaindex
	BlockProperties
	BlockFilter
	BlockRangeDel
	// BlockMeta is a meta block bloomkv does not interpret.
	BlockMeta
	// BlockRangeKey holds a Pebble table's range keys.
	BlockRangeKey
	// BlockValueIndex lists a Pebble table's value blocks.
	BlockValueIndex
	// BlockValue holds values of older versions of a Pebble table's keys,
	// which data blocks refer to by handles.
	BlockValue
	// BlockBlobRefIndex says, per blob file a Pebblev6+ table refers to,
	// which of its values the table uses (Reader.BlobReferences).
	BlockBlobRefIndex
)

func (k BlockKind) String() string {
	switch k {
	case BlockData:
		return "data"
	case BlockIndex:
		return "index"
	case BlockIndexPartition:
		return "index-partition"
	case BlockMetaindex:
		return "metaindex"
	case BlockProperties:
		return "properties"
	case BlockFilter:
		return "filter"
	case BlockRangeDel:
		return "range-del"
	case BlockMeta:
		return "meta"
	case BlockRangeKey:
		return "range-key"
	case BlockValueIndex:
		return "value-index"
	case BlockValue:
		return "value"
	case BlockBlobRefIndex:
		return "blob-ref-index"
	}
	return fmt.Sprintf("BlockKind(%d)", uint8(k))
}

// BlockInfo describes one block of a table.
type BlockInfo struct {
	Kind BlockKind
	// Name is the block's name in the metaindex, for meta blocks.
	Name   string
	Handle BlockHandle
	// Compression is the block's trailer type byte.
	Compression Compression
	// Err says why the block is unsound (checksum mismatch, bad
	// compression, malformed entries or filter); nil when it is sound.
	Err error
}

// Layout is the block structure of a table.
type Layout struct {
	Format TableFormat
	// FormatVersion is the RocksDB format version (0 for LevelDB tables).
	FormatVersion uint32
	// Blocks are the table's blocks in file order.
	Blocks []BlockInfo
	// FooterOffset and FooterLength place the footer, which ends the file.
	FooterOffset, FooterLength uint64
	// Attributes is the bitset of features a Pebblev7 footer records
	// (Pebble's sstable.Attributes); 0 in other formats.
	Attributes uint32
}

// rocksFilterName is the metaindex name of the RocksDB built-in Bloom filter
// that Pebble writes.
const rocksFilterName = "fullfilter." + rocksbloom.PolicyName

// Layout reads every block of the table, verifying each, and returns where
// they lie. A block that fails verification is listed with its Err; data
// blocks behind an unsound index partition cannot be found and are missing.
func (t *Reader) Layout() *Layout { return t.layout(true) }

// Blocks returns where the table's blocks lie without reading them, beyond
// the index partitions that locate the data blocks: Compression is not
// filled in, and Err only for a partition that cannot be read.
func (t *Reader) Blocks() *Layout { return t.layout(false) }

func (t *Reader) layout(verify bool) *Layout {
	l := &Layout{Format: t.footer.format, FormatVersion: t.footer.version, Attributes: t.footer.attributes}
	l.FooterLength = t.footer.format.footerLen()
	l.FooterOffset = t.size - l.FooterLength
	type at struct {
		off  uint64
		kind BlockKind
	}
	listed := map[at]int{}
	add := func(kind BlockKind, name string, bh BlockHandle, err error) {
		if i, ok := listed[at{bh.Offset, kind}]; ok {
			// Listed already: an error found reading its entries.
			if l.Blocks[i].Err == nil {
				l.Blocks[i].Err = err
			}
			return
		}
		b := BlockInfo{Kind: kind, Name: name, Handle: bh, Err: err}
		if verify && err == nil {
			b = t.inspect(kind, name, bh)
		}
		listed[at{bh.Offset, kind}] = len(l.Blocks)
		l.Blocks = append(l.Blocks, b)
	}
	add(BlockMetaindex, "", t.footer.metaindex, nil)
	for name, bh := range t.meta {
		kind := BlockMeta
		switch {
		case name == metaPropertiesName:
			kind = BlockProperties
		case name == metaRangeDelName || name == metaRangeDelV1Name:
			kind = BlockRangeDel
		case name == metaRangeKeyName:
			kind = BlockRangeKey
		case name == metaValueIndexName && t.valueIndexed:
			kind = BlockValueIndex
		case name == metaBlobRefIndexName && t.columnar:
			kind = BlockBlobRefIndex
		case strings.HasPrefix(name, "fullfilter.") || strings.HasPrefix(name, "filter.") || strings.HasPrefix(name, "partitionedfilter."):
			kind = BlockFilter
		}
		add(kind, name, bh, nil)
	}
	add(BlockIndex, "", t.footer.index, nil)
	for _, bh := range t.valueBlocks {
		add(BlockValue, "", bh, nil)
	}
	t.eachDataHandle(func(kind BlockKind, bh BlockHandle, _ []byte, err error) bool {
		add(kind, "", bh, err)
		return true
	})
	slices.SortFunc(l.Blocks, func(a, b BlockInfo) int {
		if a.Handle.Offset != b.Handle.Offset {
			return cmp.Compare(a.Handle.Offset, b.Handle.Offset)
		}
		return int(a.Kind) - int(b.Kind)
	})
	return l
}

// inspect reads and verifies one block.
func (t *Reader) inspect(kind BlockKind, name string, bh BlockHandle) BlockInfo {
	info := BlockInfo{Kind: kind, Name: name, Handle: bh}
	var typ [1]byte
	if bh.Offset <= t.size && bh.Length < t.size-bh.Offset {
		if err := t.readAt(typ[:], bh.Offset+bh.Length); err == nil {
			info.Compression = compressionOf(typ[0])
		}
	}
	info.Err = t.verifyBlock(kind, name, bh)
	return info
}

// verifyBlock reads the block at bh, checks its checksum, and decodes it as
// a block of kind: a filter as its filter format, others entry by entry.
func (t *Reader) verifyBlock(kind BlockKind, name string, bh BlockHandle) error {
	switch kind {
	case BlockValue:
		_, err := t.readBlockRaw(bh, kindValue)
		return err
	case BlockValueIndex:
		_, err := t.readBlockRaw(bh, kindValueIndex) // its entries were checked at open
		return err
	case BlockMeta:
		if t.columnar {
			_, err := t.readBlockRaw(bh, kind.String()) // a columnar block bloomkv does not interpret
			return err
		}
	}
	b, err := t.readBlock(bh, kind.String())
	if err != nil {
		return err
	}
	if kind == BlockFilter {
		// A filter format bloomkv does not read has its checksum checked only.
		_, err := t.decodeTableFilter(name, bh, b)
		return err
	}
	if kind == BlockRangeKey {
		_, err := decodeRangeKeys(b, t.where(kind.String(), bh), t.order)
		return err
	}
	var it blockIter
	if err := it.init(b, true, t.where(kind.String(), bh)); err != nil {
		return err
	}
	for ok := it.first(); ok; ok = it.next() {
	}
	return it.err
}

// eachDataHandle calls fn with the handle of every data block in index order,
// with the index entry's key (the block's separator), or with the handle of
// an index partition that cannot be read and the error, until fn returns
// false.
func (t *Reader) eachDataHandle(fn func(kind BlockKind, bh BlockHandle, sep []byte, err error) bool) {
	index, err := t.indexBlock()
	if err != nil {
		fn(BlockIndex, t.footer.index, nil, err)
		return
	}
	var top blockIter
	if err := top.init(index, false, t.where("index", t.footer.index)); err != nil {
		fn(BlockIndex, t.footer.index, nil, err)
		return
	}
	twoLevel := t.props.IndexType == indexTypeTwoLevel
	for ok := top.first(); ok; ok = top.next() {
		bh, n := decodeHandle(top.value)
		if n == 0 {
			fn(BlockIndex, t.footer.index, nil, top.corrupt(top.offset, fmt.Sprintf("bad block handle %x", top.value)))
			return
		}
		if !twoLevel {
			if !fn(BlockData, bh, top.key, nil) {
				return
			}
			continue
		}
		if !fn(BlockIndexPartition, bh, top.key, nil) {
			return
		}
		b, err := t.readBlock(bh, BlockIndexPartition.String())
		var part blockIter
		if err == nil {
			err = part.init(b, false, t.where(BlockIndexPartition.String(), bh))
		}
		if err != nil {
			if !fn(BlockIndexPartition, bh, nil, err) {
				return
			}
			continue
		}
		for ok := part.first(); ok; ok = part.next() {
			dh, n := decodeHandle(part.value)
			if n == 0 {
				part.corrupt(part.offset, fmt.Sprintf("bad block handle %x", part.value))
				break
			}
			if !fn(BlockData, dh, part.key, nil) {
				return
			}
		}
		if part.err != nil && !fn(BlockIndexPartition, bh, nil, part.err) {
			return
		}
	}
	if top.err != nil {
		fn(BlockIndex, t.footer.index, nil, top.err)
	}
}

// BlockRecords calls fn with each entry of block b, keys as stored (internal
// keys in data, index and range-deletion blocks; names in the metaindex and
// properties) and values as stored (block handles in index blocks and the
// metaindex), until fn returns false. Filter blocks hold bits, not entries:
// for them it returns an error; value blocks and their index hold bytes: for
// them fn is not called. Keys and values are valid only during fn.
func (t *Reader) BlockRecords(b BlockInfo, fn func(key, value []byte) bool) error {
	switch b.Kind {
	case BlockFilter:
		return fmt.Errorf("sstable: %s: filter block %s holds no entries", t.opts.FileName, b.Handle)
	case BlockValue, BlockValueIndex:
		// Bytes, not entries: none to list once the block reads.
		_, err := t.readBlockRaw(b.Handle, b.Kind.String())
		return err
	case BlockMeta:
		if t.columnar {
			_, err := t.readBlockRaw(b.Handle, b.Kind.String())
			return err
		}
	}
	data, err := t.readBlock(b.Handle, b.Kind.String())
	if err != nil {
		return err
	}
	var it blockIter
	if err := it.init(data, true, t.where(b.Kind.String(), b.Handle)); err != nil {
		return err
	}
	for ok := it.first(); ok; ok = it.next() {
		if !fn(it.key, it.value) {
			return nil
		}
	}
	return it.err
}

// BlockTrailerLen is the length of the trailer after every block: the
// compression type and the masked CRC32C.
const BlockTrailerLen = blockTrailerLen

// KeyRange returns the smallest and largest keys of the table, of its points
// and its range deletions both (a range deletion's end as an exclusive
// sentinel), as the store records a table's bounds; nil when it holds none.
func (t *Reader) KeyRange() (lo, hi *base.InternalKey, err error) {
	it := t.NewIter()
	if it.First() {
		k := it.Key().Clone()
		lo = &k
	}
	if it.Last() {
		k := it.Key().Clone()
		hi = &k
	}
	if err := it.Close(); err != nil {
		return nil, nil, err
	}
	for _, d := range t.rangeDels {
		s := base.MakeInternalKey(d.Start, d.SeqNum, base.KindRangeDelete)
		if lo == nil || t.order.compareInternal(s, *lo) < 0 {
			lo = &s
		}
		end := base.MakeRangeDeleteSentinel(d.End)
		if hi == nil || t.order.compareInternal(end, *hi) > 0 {
			hi = &end
		}
	}
	return lo, hi, nil
}

// DecodeBlockHandle decodes the block handle at the start of b (an index or
// metaindex value), returning it and its encoded length, or n = 0 when b
// does not start with one. Bytes after the handle (Pebble stores block
// properties there) are not its concern.
func DecodeBlockHandle(b []byte) (h BlockHandle, n int) { return decodeHandle(b) }

// TableFilter is a table's whole-table filter, bloomkv's blocked Bloom filter
// or the RocksDB built-in Bloom filter that Pebble writes, described for
// inspection.
type TableFilter struct {
	// Policy is the filter policy's name.
	Policy string
	// Lines, LineBits and Probes are the filter's geometry: Lines cache
	// lines of LineBits bits, Probes bits tested per key within one line.
	Lines, LineBits, Probes int
	// DistinctProbes is true when a key's probes are distinct bits
	// (bloomkv's); RocksDB's may repeat.
	DistinctProbes bool
	// StatedKeys is the key count the filter records (-1 when its format
	// records none) and BitsPerKey the bits/key it was built for (0 when
	// not recorded).
	StatedKeys int64
	BitsPerKey int
	// BitsSet is the number of bits set; EstimatedKeys the number of keys
	// estimated from them.
	BitsSet       uint64
	EstimatedKeys float64
	// Size is the filter block's length in bytes.
	Size int

	mayContain func(key []byte) bool
}

// MayContain probes the filter: false means the table lacks key. In a
// table of a foreign comparer, it probes the key's prefix (Reader.Split),
// which is what the filter holds.
func (f *TableFilter) MayContain(key []byte) bool { return f.mayContain(key) }

// ExpectedFPRate returns the false-positive rate the filter's geometry
// predicts when it holds keys keys, for an ideal hash.
func (f *TableFilter) ExpectedFPRate(keys uint64) float64 {
	if keys == 0 {
		return 0
	}
	bpk := float64(f.Lines) * float64(f.LineBits) / float64(keys)
	if f.DistinctProbes && f.LineBits == filterblock.LineBytes*8 {
		return filterblock.ExpectedFPRate(bpk, f.Probes)
	}
	return filterblock.TheoreticalFPRate(bpk, f.Probes)
}

// TableFilter returns the table's filter, bloomkv's or RocksDB's built-in
// Bloom filter, or nil when it has neither.
func (t *Reader) TableFilter() (*TableFilter, error) {
	for _, name := range []string{metaFilterName, rocksFilterName} {
		if bh, ok := t.meta[name]; ok {
			b, err := t.readBlock(bh, "filter")
			if err != nil {
				return nil, err
			}
			return t.decodeTableFilter(name, bh, b)
		}
	}
	return nil, nil
}

// decodeTableFilter decodes the filter block b stored under name in the
// metaindex; nil when bloomkv does not read that filter's format.
func (t *Reader) decodeTableFilter(name string, bh BlockHandle, b []byte) (*TableFilter, error) {
	var tf *TableFilter
	var err error
	switch name {
	case metaFilterName:
		var f filterblock.Filter
		if f, err = filterblock.Decode(b); err == nil {
			info := f.Stats()
			tf = &TableFilter{
				Policy: FilterPolicyName, Lines: info.Lines, LineBits: filterblock.LineBytes * 8, Probes: info.Probes,
				DistinctProbes: true, StatedKeys: int64(info.Keys), BitsPerKey: info.BitsPerKey,
				BitsSet: info.BitsSetInLines, EstimatedKeys: f.EstimateKeys(), Size: info.EncodedLength,
				mayContain: f.MayContain,
			}
		}
	case rocksFilterName:
		var f rocksbloom.Filter
		if f, err = rocksbloom.Decode(b); err == nil {
			tf = &TableFilter{
				Policy: rocksbloom.PolicyName, Lines: f.Lines(), LineBits: f.LineBits(), Probes: f.Probes(),
				StatedKeys: -1, BitsSet: f.BitsSet(), EstimatedKeys: f.EstimateKeys(), Size: len(b),
				mayContain: f.MayContain,
			}
		}
	}
	if errors.Is(err, rocksbloom.ErrUnsupported) {
		return nil, nil // a format bloomkv does not read, like any other
	}
	if err != nil {
		return nil, fmt.Errorf("sstable: %s: filter block %s: %w", t.opts.FileName, bh, err)
	}
	if t.order != orderBytewise {
		// The filter holds the keys' prefixes, as the comparer splits them.
		whole, o := tf.mayContain, t.order
		tf.mayContain = func(key []byte) bool { return whole(key[:o.split(key)]) }
	}
	return tf, nil
}
