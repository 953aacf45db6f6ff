package sstable

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/klauspost/compress/s2"

	"github.com/bloomkv/bloomkv/filterblock"
	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/rangedel"
)

// FilterPolicyName is the name bloomkv's filter is stored under: the metaindex
// holds it as "fullfilter.<FilterPolicyName>" and the properties block as
// rocksdb.filter.policy. Readers that do not know it (Pebble, RocksDB) ignore
// the filter.
const FilterPolicyName = "bloomkv.BlockedBloom.v1"

// The metaindex names of the blocks a table may hold.
const (
	metaFilterName     = "fullfilter." + FilterPolicyName
	metaPropertiesName = "rocksdb.properties"
	// metaRangeDelName holds fragmented range deletions, under the name
	// Pebble reads them from (it rejects tables with a rocksdb.range_del
	// block, RocksDB's older unfragmented form).
	metaRangeDelName   = "rocksdb.range_del2"
	metaRangeDelV1Name = "rocksdb.range_del"
)

// The defaults of WriterOptions' BlockSize and BloomBitsPerKey, which the
// store's Options share: 4 KiB data blocks, and 10 bits a key in the filter.
const (
	DefaultBlockSize       = 4096
	DefaultBloomBitsPerKey = 10
)

// WriterOptions configure a Writer. The zero value means the defaults.
type WriterOptions struct {
	// BlockSize is the target uncompressed size of a data block
	// (DefaultBlockSize).
	BlockSize int
	// BlockRestartInterval is the number of keys between restart points in
	// a data block (16).
	BlockRestartInterval int
	// BloomBitsPerKey sizes the table's blocked Bloom filter
	// (DefaultBloomBitsPerKey; 1 to 32).
	// A negative value writes no filter.
	BloomBitsPerKey int
	// Compression of data and index blocks: DefaultCompression (the zero
	// value) is Snappy; NoCompression stores them as they are.
	Compression Compression
	// TableFormat is the footer to write (TableFormatRocksDBv2). The LevelDB
	// format cannot hold range deletions; TableFormatPebblev1 makes a table
	// Pebble's Ingest takes (keys at sequence number 0: Set, Delete,
	// DeleteRange at 0).
	TableFormat TableFormat
	// IndexPartitionThreshold is the size of an index past which the Writer
	// writes it in two levels, as RocksDB's partitioned index and Pebble's
	// two-level index: partitions of about BlockSize bytes, and a top-level
	// block of one entry per partition. Opening the table then reads the
	// top level alone, and a read loads the one partition it needs through
	// the block cache, where a one-level index is read whole at open and
	// kept. The default, 128 KiB, is the index of about 30 MiB of 4 KiB
	// blocks: larger than a compaction writes, as large as bulk loads for
	// ingestion make them. A negative value keeps every index one level.
	IndexPartitionThreshold int
	// Parallel compresses and writes the data blocks on a second goroutine,
	// so that a table is built faster when a core is free. The Writer is
	// still for one goroutine at a time, and Size is then an estimate (it
	// counts the blocks not yet written uncompressed) until Close.
	Parallel bool
	// DataBlockWritten, when set, is called for each data block once it is
	// written, with its offset in the table and its uncompressed bytes, as
	// a Reader decodes the block (for a block cache to hold it). The bytes
	// are valid only during the call. With Parallel, it is called from the
	// Writer's second goroutine.
	DataBlockWritten func(offset uint64, block []byte)
}

func (o WriterOptions) withDefaults() (WriterOptions, error) {
	if o.BlockSize == 0 {
		o.BlockSize = DefaultBlockSize
	}
	if o.BlockRestartInterval == 0 {
		o.BlockRestartInterval = 16
	}
	if o.BloomBitsPerKey == 0 {
		o.BloomBitsPerKey = DefaultBloomBitsPerKey
	}
	if o.Compression == DefaultCompression {
		o.Compression = SnappyCompression
	}
	if o.TableFormat == 0 {
		o.TableFormat = TableFormatRocksDBv2
	}
	if o.IndexPartitionThreshold == 0 {
		o.IndexPartitionThreshold = 128 << 10
	}
	switch {
	case o.BlockSize < 1 || o.BlockSize > 1<<28:
		return o, fmt.Errorf("sstable: block size %d out of range [1, 2^28]", o.BlockSize)
	case o.BlockRestartInterval < 1:
		return o, fmt.Errorf("sstable: block restart interval %d must be positive", o.BlockRestartInterval)
	case o.Compression != NoCompression && o.Compression != SnappyCompression:
		return o, fmt.Errorf("sstable: unsupported compression %v", o.Compression)
	case o.TableFormat != TableFormatLevelDB && o.TableFormat != TableFormatRocksDBv2 && o.TableFormat != TableFormatPebblev1:
		return o, fmt.Errorf("sstable: unknown table format %v", o.TableFormat)
	}
	if o.BloomBitsPerKey > 0 {
		if err := filterblock.ValidateBitsPerKey(o.BloomBitsPerKey); err != nil {
			return o, err
		}
	}
	return o, nil
}

// ErrWriterClosed is returned by a Writer used after Close or after an error.
var ErrWriterClosed = errors.New("sstable: writer is closed")

// Writer writes one table. Point keys go in with Add in strictly increasing
// internal-key order; range deletions, in any order, with DeleteRange. Close
// writes the rest of the table. A Writer is not safe for concurrent use.
type Writer struct {
	w      io.Writer
	opts   WriterOptions
	offset uint64
	err    error
	closed bool
	// blockLimit bounds a data block's length (maxBlockLen; tests lower
	// it).
	blockLimit int

	data       blockWriter
	index      blockWriter
	filter     *filterblock.Builder
	lastKey    []byte // encoded internal key of the last Add
	hasLast    bool
	pending    bool        // a data block was written and awaits its index entry
	pendingBH  BlockHandle // that block
	compressed []byte
	scratch    []byte

	// pipe is the worker compressing and writing data blocks
	// (WriterOptions.Parallel), from the first data block to Close.
	pipe *pipeline

	tombstones []rangedel.Tombstone
	props      Properties
	// comparerName is recorded in the properties; tests change it.
	comparerName string
	// legacyRangeDels writes range deletions unfragmented under RocksDB's
	// old block name, as older tables hold them; for tests of the reader.
	legacyRangeDels bool
	// indexPartitionEntries, when positive, writes a two-level index, as
	// Pebble writes large ones: partitions of that many index entries and
	// a top-level index over them; for tests of the reader.
	indexPartitionEntries int
}

// NewWriter returns a Writer that writes a table to w with opts.
func NewWriter(w io.Writer, opts WriterOptions) (*Writer, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	tw := &Writer{w: w, opts: o, comparerName: base.ComparerName}
	tw.data.restartInterval = o.BlockRestartInterval
	tw.index.restartInterval = 1
	if o.BloomBitsPerKey > 0 {
		tw.filter = filterblock.NewBuilder(o.BloomBitsPerKey)
	}
	tw.props.SmallestSeqNum = base.SeqNumMax
	tw.blockLimit = maxBlockLen
	return tw, nil
}

// Add appends a point key: a Set with its value, or a Delete (value empty).
// Keys must arrive in strictly increasing internal-key order. Sequence numbers
// are at most SeqNumMax (a larger one cannot be represented in a key).
func (w *Writer) Add(key base.InternalKey, value []byte) error {
	if err := w.usable(); err != nil {
		return err
	}
	switch key.Kind() {
	case base.KindSet:
	case base.KindDelete:
		if len(value) != 0 {
			return fmt.Errorf("sstable: delete of %s carries a %d-byte value", key, len(value))
		}
	default:
		return fmt.Errorf("sstable: Add of %s: kind %v is not a point key (range deletions go through DeleteRange)", key, key.Kind())
	}
	w.scratch = key.Append(w.scratch[:0])
	if w.hasLast && base.CompareEncoded(w.lastKey, w.scratch) >= 0 {
		prev, _ := base.DecodeInternalKey(w.lastKey)
		return fmt.Errorf("sstable: keys out of order: %s after %s", key, prev)
	}
	// No block may outgrow what a reader takes (maxBlockLen): an entry
	// that would take this one past it starts the next, and one that
	// cannot fit in a block alone is refused, so that a table written is
	// always one that reads (a value beyond the store's limits can only
	// come from an ingested table).
	entry := len(w.scratch) + len(value) + 3*binary.MaxVarintLen32 + maxBlockSlack
	if entry > w.blockLimit {
		return fmt.Errorf("sstable: entry %s with a %d-byte value does not fit in a block (at most %d bytes)", key, len(value), w.blockLimit)
	}
	if w.data.estimatedSize() > 0 && w.data.estimatedSize()+entry > w.blockLimit {
		if err := w.flushDataBlock(); err != nil {
			return w.fail(err)
		}
	}
	if w.pending {
		// The index entry of the previous block separates its last key
		// from this one.
		w.addIndexEntry(separator(w.lastKey, w.scratch))
	}
	if w.filter != nil && (!w.hasLast || !bytes.Equal(key.UserKey, w.lastKey[:len(w.lastKey)-base.TrailerLen])) {
		w.filter.Add(key.UserKey)
	}
	if key.Kind() == base.KindDelete {
		w.props.NumDeletions++
	}
	w.lastKey = append(w.lastKey[:0], w.scratch...)
	w.hasLast = true
	w.data.add(w.scratch, value)
	w.props.NumEntries++
	w.props.RawKeySize += uint64(key.Size())
	w.props.RawValueSize += uint64(len(value))
	w.noteSeq(key.SeqNum())
	if w.data.estimatedSize() >= w.opts.BlockSize {
		if err := w.flushDataBlock(); err != nil {
			return w.fail(err)
		}
	}
	return nil
}

// maxBlockSlack bounds what a data block holds besides its entries: its
// restart points and their count.
const maxBlockSlack = 64 << 10

// Set appends a Set of key to value at sequence number 0, the form of the
// tables a store's Ingest takes; keys must arrive in increasing order, each
// once: a Set or Delete of the key just written is refused (the two
// entries' kinds would order them, but a table of a key twice at one
// sequence number is one Ingest refuses).
func (w *Writer) Set(key, value []byte) error {
	if err := w.checkOnce(key); err != nil {
		return err
	}
	return w.Add(base.MakeInternalKey(key, 0, base.KindSet), value)
}

// Delete appends a Delete of key at sequence number 0, as Set does.
func (w *Writer) Delete(key []byte) error {
	if err := w.checkOnce(key); err != nil {
		return err
	}
	return w.Add(base.MakeInternalKey(key, 0, base.KindDelete), nil)
}

// checkOnce refuses a Set or Delete of the user key of the last entry.
func (w *Writer) checkOnce(key []byte) error {
	if w.hasLast && bytes.Equal(w.lastKey[:len(w.lastKey)-base.TrailerLen], key) {
		return fmt.Errorf("sstable: %q written twice: a table for Ingest holds each key once", key)
	}
	return nil
}

// DeleteRange records a range deletion of the user keys in [start, end) at
// seq (0 in a table for DB.Ingest). Overlapping deletions are fragmented when the table is written.
func (w *Writer) DeleteRange(start, end []byte, seq base.SeqNum) error {
	if err := w.usable(); err != nil {
		return err
	}
	if w.opts.TableFormat == TableFormatLevelDB {
		return fmt.Errorf("sstable: the LevelDB table format cannot hold range deletions")
	}
	if bytes.Compare(start, end) >= 0 {
		return fmt.Errorf("sstable: empty or inverted range deletion [%q, %q)", start, end)
	}
	if seq > base.SeqNumMax {
		return fmt.Errorf("sstable: sequence number %d exceeds 2^56-1", seq)
	}
	w.tombstones = append(w.tombstones, rangedel.Tombstone{
		Start:  append([]byte(nil), start...),
		End:    append([]byte(nil), end...),
		SeqNum: seq,
	})
	w.noteSeq(seq)
	return nil
}

func (w *Writer) noteSeq(seq base.SeqNum) {
	w.props.SmallestSeqNum = min(w.props.SmallestSeqNum, seq)
	w.props.LargestSeqNum = max(w.props.LargestSeqNum, seq)
}

func (w *Writer) usable() error {
	if w.closed {
		return ErrWriterClosed
	}
	return w.err
}

// fail records err so that every later call returns it.
func (w *Writer) fail(err error) error {
	if w.err == nil {
		w.err = err
	}
	return err
}

func (w *Writer) addIndexEntry(sep []byte) {
	if w.pipe != nil {
		w.pipe.addSeparator(sep)
	} else {
		w.index.add(sep, w.pendingBH.append(nil))
	}
	w.pending = false
}

func (w *Writer) flushDataBlock() error {
	if w.data.entries == 0 {
		return nil
	}
	if w.opts.Parallel {
		if w.pipe == nil {
			w.startPipeline()
		}
		if err := w.sendDataBlock(); err != nil {
			return err
		}
		w.props.NumDataBlocks++
		w.data.reset()
		w.pending = true
		return nil
	}
	raw := w.data.finish()
	bh, err := w.writeBlock(raw, w.opts.Compression)
	if err != nil {
		return err
	}
	if f := w.opts.DataBlockWritten; f != nil {
		f(bh.Offset, raw)
	}
	w.props.DataSize += bh.Length + blockTrailerLen
	w.props.NumDataBlocks++
	w.data.reset()
	w.pending, w.pendingBH = true, bh
	return nil
}

// writeBlock writes a block and its trailer, compressed with c when that
// saves at least 12.5%.
func (w *Writer) writeBlock(raw []byte, c Compression) (BlockHandle, error) {
	typ, body := byte(NoCompression.code()), raw
	if c == SnappyCompression {
		// s2's Snappy-compatible encoder: the Snappy format, decoded by any
		// Snappy decoder, in less time than golang/snappy's encoder.
		w.compressed = s2.EncodeSnappy(w.compressed[:cap(w.compressed)], raw)
		if len(w.compressed) < len(raw)-len(raw)/8 {
			typ, body = byte(SnappyCompression.code()), w.compressed
		}
	}
	var trailer [blockTrailerLen]byte
	trailer[0] = typ
	crc := maskedCRC(body, typ)
	trailer[1], trailer[2], trailer[3], trailer[4] = byte(crc), byte(crc>>8), byte(crc>>16), byte(crc>>24)
	bh := BlockHandle{Offset: w.offset, Length: uint64(len(body))}
	if err := w.write(body); err != nil {
		return BlockHandle{}, err
	}
	if err := w.write(trailer[:]); err != nil {
		return BlockHandle{}, err
	}
	return bh, nil
}

func (w *Writer) write(b []byte) error {
	n, err := w.w.Write(b)
	w.offset += uint64(n)
	if err == nil && n != len(b) {
		err = io.ErrShortWrite
	}
	if err != nil {
		return fmt.Errorf("sstable: write at offset %d: %w", w.offset, err)
	}
	return nil
}

// Close finishes the table: the last data block, the filter, the range
// deletions, the properties, the metaindex, the index and the footer. It does
// not close the underlying writer.
func (w *Writer) Close() error {
	if err := w.usable(); err != nil {
		w.drain() // a Parallel Writer's worker stops even so
		return err
	}
	w.closed = true
	if err := w.finish(); err != nil {
		w.drain() // a failure before finish drained: stop the worker
		w.err = err
		return err
	}
	return nil
}

func (w *Writer) finish() error {
	if err := w.flushDataBlock(); err != nil {
		return err
	}
	if w.pending {
		w.addIndexEntry(successor(w.lastKey))
	}
	if err := w.drain(); err != nil {
		return err
	}
	partition := w.indexPartitionEntries > 0
	if t := w.opts.IndexPartitionThreshold; t > 0 && w.index.estimatedSize() > t && w.opts.TableFormat != TableFormatLevelDB {
		partition = true
	}
	indexBlock := w.index.finish()
	if partition {
		var err error
		if indexBlock, err = w.writeIndexPartitions(indexBlock); err != nil {
			return err
		}
	}
	var meta []metaEntry
	if w.filter != nil {
		bh, err := w.writeBlock(w.filter.Finish(), NoCompression)
		if err != nil {
			return err
		}
		w.props.FilterSize = bh.Length
		w.props.FilterPolicy = FilterPolicyName
		meta = append(meta, metaEntry{metaFilterName, bh})
	}
	if len(w.tombstones) > 0 {
		frags, name := rangedel.Fragment(w.tombstones), metaRangeDelName
		if w.legacyRangeDels {
			frags, name = slices.Clone(w.tombstones), metaRangeDelV1Name
			slices.SortFunc(frags, func(a, b rangedel.Tombstone) int {
				return base.CompareInternal(base.MakeInternalKey(a.Start, a.SeqNum, base.KindRangeDelete), base.MakeInternalKey(b.Start, b.SeqNum, base.KindRangeDelete))
			})
		}
		var b blockWriter
		b.restartInterval = 1
		for _, f := range frags {
			b.add(base.MakeInternalKey(f.Start, f.SeqNum, base.KindRangeDelete).Append(nil), f.End)
		}
		w.props.NumRangeDeletions = uint64(len(frags))
		w.props.NumEntries += uint64(len(frags))
		w.props.NumDeletions += uint64(len(frags))
		bh, err := w.writeBlock(b.finish(), NoCompression)
		if err != nil {
			return err
		}
		meta = append(meta, metaEntry{name, bh})
	}
	if w.props.NumEntries == 0 && len(w.tombstones) == 0 {
		w.props.SmallestSeqNum = 0
	}
	w.props.IndexSize += uint64(len(indexBlock)) + blockTrailerLen // and the partitions
	w.props.ComparerName = w.comparerName
	w.props.CompressionName = w.opts.Compression.String()
	w.props.Format = w.opts.TableFormat
	bh, err := w.writeBlock(w.props.encode(), NoCompression)
	if err != nil {
		return err
	}
	meta = append(meta, metaEntry{metaPropertiesName, bh})
	slices.SortFunc(meta, func(a, b metaEntry) int { return cmp.Compare(a.name, b.name) })
	var mb blockWriter
	mb.restartInterval = 1
	for _, m := range meta {
		mb.add([]byte(m.name), m.bh.append(nil))
	}
	metaBH, err := w.writeBlock(mb.finish(), NoCompression)
	if err != nil {
		return err
	}
	indexBH, err := w.writeBlock(indexBlock, w.opts.Compression)
	if err != nil {
		return err
	}
	return w.write(footer{format: w.opts.TableFormat, metaindex: metaBH, index: indexBH}.encode())
}

// writeIndexPartitions writes the entries of index, a finished one-level
// index block, as partitions of w.indexPartitionEntries entries (when set,
// for tests) or of about BlockSize bytes, and returns the top-level index:
// each partition's last separator mapping to its handle.
func (w *Writer) writeIndexPartitions(index []byte) ([]byte, error) {
	var it blockIter
	if err := it.init(index, false, blockWhere{kind: "index"}); err != nil {
		return nil, err
	}
	var part, top blockWriter
	part.restartInterval, top.restartInterval = 1, 1
	flush := func() error {
		last := bytes.Clone(part.prevKey)
		raw := part.finish()
		w.props.IndexSize += uint64(len(raw)) + blockTrailerLen
		bh, err := w.writeBlock(raw, w.opts.Compression)
		if err != nil {
			return err
		}
		top.add(last, bh.append(nil))
		part.reset()
		return nil
	}
	for ok := it.first(); ok; ok = it.next() {
		part.add(it.key, it.value)
		if part.entries == w.indexPartitionEntries || w.indexPartitionEntries <= 0 && part.estimatedSize() >= w.opts.BlockSize {
			if err := flush(); err != nil {
				return nil, err
			}
		}
	}
	if part.entries > 0 {
		if err := flush(); err != nil {
			return nil, err
		}
	}
	w.props.IndexType = indexTypeTwoLevel
	return top.finish(), it.err
}

type metaEntry struct {
	name string
	bh   BlockHandle
}

// Size returns the number of bytes written so far; after Close, the table's
// size.
func (w *Writer) Size() uint64 {
	if w.pipe != nil {
		return w.pipe.size()
	}
	return w.offset
}

// Abort abandons a table that will not be closed, stopping the goroutine
// a Parallel Writer runs. The Writer is unusable after it; the bytes
// written so far are left to the caller to remove.
func (w *Writer) Abort() {
	if w.pipe != nil {
		w.drain()
	}
	w.closed = true
}

// Properties returns the table's properties; complete after Close.
func (w *Writer) Properties() *Properties { return &w.props }

// separatorTrailer is the trailer of shortened index keys: the largest
// sequence number, so that a separator sorts before every real version of its
// user key.
var separatorTrailer = base.MakeTrailer(base.SeqNumMax, base.KindSeparator)

// separator returns an encoded internal key k with a ≤ k < b, shorter than a
// where the user keys allow.
func separator(a, b []byte) []byte {
	ua, ub := a[:len(a)-base.TrailerLen], b[:len(b)-base.TrailerLen]
	n := min(len(ua), len(ub))
	i := 0
	for i < n && ua[i] == ub[i] {
		i++
	}
	if i < n && ua[i] < 0xff && ua[i]+1 < ub[i] {
		sep := append([]byte(nil), ua[:i+1]...)
		sep[i]++
		return base.InternalKey{UserKey: sep, Trailer: separatorTrailer}.Append(nil)
	}
	return append([]byte(nil), a...)
}

// successor returns an encoded internal key k ≥ a, shorter where possible.
func successor(a []byte) []byte {
	ua := a[:len(a)-base.TrailerLen]
	for i, c := range ua {
		if c != 0xff {
			sep := append([]byte(nil), ua[:i+1]...)
			sep[i]++
			return base.InternalKey{UserKey: sep, Trailer: separatorTrailer}.Append(nil)
		}
	}
	return append([]byte(nil), a...)
}
