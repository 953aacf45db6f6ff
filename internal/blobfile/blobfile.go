// Package blobfile reads Pebble's blob files (NNNNNN.blob): the files into
// which Pebble, from format major version 024 (FormatValueSeparation, table
// formats Pebblev6 and v7), moves large values out of its tables. A table
// keeps, in place of such a value, an inline handle (DecodeInlineHandle):
// which of the table's blob references holds the value, the value's length,
// and where it lies in the blob file (a block number and the value's number
// within that block).
//
// A blob file is a run of value blocks, an index block, and a 38-byte
// footer. The footer holds, little-endian: a masked CRC32C of the 34 bytes
// after it, the index block's offset and length (8 bytes each), the blocks'
// checksum type and the file's format version (1 byte each), the number of
// the file the values were first written to (8 bytes), and the magic bytes.
// Every block is followed by a 5-byte trailer: its compression (none,
// Snappy, zstd with its decoded length as a uvarint before the frame, or
// MinLZ) and a checksum of the stored block and that byte (masked CRC32C,
// or the low 32 bits of xxhash64).
//
// Blocks are Pebble's columnar blocks, which internal/colblk decodes (its
// package comment gives the layout). A value block has one column of byte
// strings. The index block begins with a 4-byte count of virtual blocks and
// has two integer columns: the virtual blocks, which only a rewritten file
// has (for each block number of the original file, the physical block
// holding its values in the low 32 bits, all ones when none, and in the high
// 32 bits a number to add to a value's number within the block), and the
// offsets at which the physical blocks begin, one more than there are
// blocks.
package blobfile

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"sync"

	"github.com/cespare/xxhash/v2"

	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/colblk"
	"github.com/bloomkv/bloomkv/internal/compress"
)

// FooterLen is the length of a blob file's footer.
const FooterLen = 38

// Magic is the last 8 bytes of every blob file.
const Magic = "\xf0\x9f\xaa\xb3\xf0\x9f\xa6\x80"

// FormatV1 is the one blob-file format version Pebble writes and this
// package reads.
const FormatV1 = 1

// TrailerLen is the length of the trailer after every block.
const TrailerLen = 5

// NoBlock is the physical block of a virtual block whose values a rewrite
// dropped.
const NoBlock = 1<<32 - 1

// maxBlockLen bounds a block's decompressed length.
const maxBlockLen = 1 << 30

// ChecksumType is the checksum the footer names for every block.
type ChecksumType uint8

// The checksum types of Pebble's files.
const (
	ChecksumNone     ChecksumType = 0
	ChecksumCRC32C   ChecksumType = 1
	ChecksumXXHash   ChecksumType = 2
	ChecksumXXHash64 ChecksumType = 3
)

// String names the checksum type.
func (c ChecksumType) String() string {
	return nameOf(c, "checksum", "none", "crc32c", "xxhash", "xxhash64")
}

// nameOf returns names[v], or kind(v) for a v past them.
func nameOf[T ~uint8](v T, kind string, names ...string) string {
	if int(v) < len(names) {
		return names[v]
	}
	return fmt.Sprintf("%s(%d)", kind, uint8(v))
}

// Compression is the compression a block's trailer names; its String
// names it as Pebble does ("zstd").
type Compression = compress.Type

// The compressions Pebble's blob files use. The numbers between Snappy and
// Zstd are RocksDB's other algorithms, which Pebble never writes.
const (
	NoCompression     = compress.None
	SnappyCompression = compress.Snappy
	ZstdCompression   = compress.Zstd
	MinLZCompression  = compress.MinLZ
)

// BlockHandle is where a block lies: its offset and its stored length,
// without the trailer.
type BlockHandle struct {
	Offset, Length uint64
}

// String prints the handle as (offset, length).
func (h BlockHandle) String() string { return fmt.Sprintf("(%d, %d)", h.Offset, h.Length) }

// Footer is a blob file's decoded footer.
type Footer struct {
	// Offset is where the footer begins in the file.
	Offset uint64
	// Checksum is the footer's stored masked CRC32C.
	Checksum     uint32
	Index        BlockHandle
	ChecksumType ChecksumType
	Format       uint8
	// OriginalFileNum is the number of the file the values were first
	// written to: the file's own number, unless it is a rewrite.
	OriginalFileNum uint64
}

// Handle locates a value in a blob file: the number of its block as the
// file was first written (a virtual block number in a rewritten file), its
// number within that block, and its length.
type Handle struct {
	BlockID, ValueID, ValueLen uint32
}

// String prints the handle as blk/id/len.
func (h Handle) String() string {
	return fmt.Sprintf("(blk%d, id%d, len%d)", h.BlockID, h.ValueID, h.ValueLen)
}

// VirtualBlock maps a block number of the original file to the block of a
// rewritten file that holds its values (NoBlock when none), and the number
// to add to a value's number to find it in that block.
type VirtualBlock struct {
	Physical, ValueIDOffset uint32
}

// Reader reads a blob file. Its methods but Close may be called
// concurrently.
type Reader struct {
	r      io.ReaderAt
	size   uint64
	footer Footer
	index  indexBlock
	// indexCompression is how the index block was stored.
	indexCompression Compression

	zstd compress.ZstdDecoder

	mu       sync.Mutex
	memo     *Block // the block last read
	memoNum  int
	memoUsed bool
}

// Open reads a blob file's footer and index block from r, which holds size
// bytes. Damage is an error wrapping base.ErrCorruption that names the
// offset; a format version other than FormatV1, a checksum type or a
// compression Pebble does not use, base.ErrUnsupportedFormat.
func Open(r io.ReaderAt, size int64) (*Reader, error) {
	if size < FooterLen {
		return nil, base.CorruptionErrorf("blobfile: file of %d bytes (ending at offset %d) is too short for the %d-byte footer", size, size, FooterLen)
	}
	br := &Reader{r: r, size: uint64(size)}
	buf := make([]byte, FooterLen)
	off := br.size - FooterLen
	if err := br.readAt(buf, off, "footer"); err != nil {
		return nil, err
	}
	var err error
	if br.footer, err = decodeFooter(buf, off); err != nil {
		return nil, err
	}
	ib, c, err := br.readBlock(br.footer.Index, off, "index block")
	if err != nil {
		return nil, err
	}
	br.indexCompression = c
	if br.index, err = decodeIndexBlock(ib); err != nil {
		return nil, fmt.Errorf("blobfile: index block at offset %d: %w", br.footer.Index.Offset, err)
	}
	if err := br.index.check(br.footer.Index.Offset); err != nil {
		return nil, fmt.Errorf("blobfile: index block at offset %d: %w", br.footer.Index.Offset, err)
	}
	return br, nil
}

// decodeFooter decodes the footer in b, which begins at offset off.
func decodeFooter(b []byte, off uint64) (Footer, error) {
	if string(b[FooterLen-len(Magic):]) != Magic {
		return Footer{}, base.CorruptionErrorf("blobfile: no blob-file magic at offset %d (found %x)", off+FooterLen-uint64(len(Magic)), b[FooterLen-len(Magic):])
	}
	f := Footer{
		Offset:          off,
		Checksum:        binary.LittleEndian.Uint32(b),
		Index:           BlockHandle{binary.LittleEndian.Uint64(b[4:]), binary.LittleEndian.Uint64(b[12:])},
		ChecksumType:    ChecksumType(b[20]),
		Format:          b[21],
		OriginalFileNum: binary.LittleEndian.Uint64(b[22:]),
	}
	if got := maskedCRC(b[4:]); got != f.Checksum {
		return Footer{}, base.CorruptionErrorf("blobfile: footer at offset %d: checksum mismatch: stored %#x, computed %#x", off, f.Checksum, got)
	}
	if f.Format != FormatV1 {
		return Footer{}, base.UnsupportedErrorf("blobfile: footer at offset %d: blob-file format version %d (this reader reads %d)", off, f.Format, FormatV1)
	}
	switch f.ChecksumType {
	case ChecksumCRC32C, ChecksumXXHash64:
	case ChecksumNone, ChecksumXXHash:
		return Footer{}, base.UnsupportedErrorf("blobfile: footer at offset %d: checksum type %s", off, f.ChecksumType)
	default:
		return Footer{}, base.CorruptionErrorf("blobfile: footer at offset %d: unknown checksum type %d", off, uint8(f.ChecksumType))
	}
	if !fits(f.Index, off) {
		return Footer{}, base.CorruptionErrorf("blobfile: footer at offset %d: index block %s runs past the footer", off, f.Index)
	}
	return f, nil
}

// fits reports whether a block at h, with its trailer, ends by limit.
func fits(h BlockHandle, limit uint64) bool {
	return h.Offset <= limit && h.Length <= limit-h.Offset && limit-h.Offset-h.Length >= TrailerLen
}

// maskedCRC is the masked CRC32C Pebble stores.
func maskedCRC(b []byte) uint32 {
	c := crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)) // the table is made once
	return (c>>15 | c<<17) + 0xa282ead8
}

// checksum is the checksum of a stored block and its compression byte.
func checksum(t ChecksumType, b []byte) uint32 {
	if t == ChecksumXXHash64 {
		return uint32(xxhash.Sum64(b))
	}
	return maskedCRC(b)
}

// Close releases the reader's decompressor. It does not close the
// io.ReaderAt.
func (r *Reader) Close() error {
	r.zstd.Close()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.memo = nil
	return nil
}

// Footer returns the file's footer.
func (r *Reader) Footer() Footer { return r.footer }

// Size returns the file's size.
func (r *Reader) Size() uint64 { return r.size }

// IndexCompression returns how the index block is stored.
func (r *Reader) IndexCompression() Compression { return r.indexCompression }

// NumBlocks returns the number of value blocks the file holds.
func (r *Reader) NumBlocks() int { return int(r.index.blocks) }

// BlockHandle returns where the file's i'th value block lies.
func (r *Reader) BlockHandle(i int) BlockHandle { return r.index.handle(i) }

// Virtual returns the virtual blocks of a rewritten file, by original block
// number; nil for a file that was not rewritten.
func (r *Reader) Virtual() []VirtualBlock {
	var out []VirtualBlock
	for i := range r.index.virtualCount() {
		out = append(out, r.index.virtualAt(i))
	}
	return out
}

// Locate returns the value block and the row in it that hold the value h
// names. A handle the file cannot hold is an error wrapping
// base.ErrCorruption.
func (r *Reader) Locate(h Handle) (block, row int, err error) {
	phys, id := uint64(h.BlockID), uint64(h.ValueID)
	if n := r.index.virtualCount(); n > 0 {
		if phys >= uint64(n) {
			return 0, 0, base.CorruptionErrorf("blobfile: handle %s names block %d of a rewritten file of %d blocks", h, h.BlockID, n)
		}
		v := r.index.virtualAt(int(phys))
		if v.Physical == NoBlock {
			return 0, 0, base.CorruptionErrorf("blobfile: handle %s names block %d, whose values the rewrite dropped", h, h.BlockID)
		}
		phys, id = uint64(v.Physical), id+uint64(v.ValueIDOffset)
	}
	if phys >= uint64(r.index.blocks) {
		return 0, 0, base.CorruptionErrorf("blobfile: handle %s names block %d of %d", h, phys, r.index.blocks)
	}
	return int(phys), int(id), nil
}

// Value returns the value h names. The value is valid until the reader is
// closed. A handle the file does not hold a value for (its block or row
// missing, or the value of another length) is an error wrapping
// base.ErrCorruption, as is damage, naming the offset.
func (r *Reader) Value(h Handle) ([]byte, error) {
	blk, row, err := r.Locate(h)
	if err != nil {
		return nil, err
	}
	b, err := r.Block(blk)
	if err != nil {
		return nil, err
	}
	if row >= b.Len() {
		return nil, base.CorruptionErrorf("blobfile: handle %s names value %d of block %d at offset %d, which holds %d", h, row, blk, b.Handle.Offset, b.Len())
	}
	v := b.Value(row)
	if uint64(len(v)) != uint64(h.ValueLen) {
		return nil, base.CorruptionErrorf("blobfile: handle %s: value %d of block %d at offset %d has %d bytes", h, row, blk, b.Handle.Offset, len(v))
	}
	return v, nil
}

// Block reads, verifies, decompresses and decodes the i'th value block.
func (r *Reader) Block(i int) (*Block, error) {
	if i < 0 || i >= r.NumBlocks() {
		return nil, fmt.Errorf("blobfile: block %d of %d", i, r.NumBlocks())
	}
	r.mu.Lock()
	if r.memoUsed && r.memoNum == i {
		b := r.memo
		r.mu.Unlock()
		return b, nil
	}
	r.mu.Unlock()
	h := r.index.handle(i)
	what := fmt.Sprintf("value block %d", i)
	data, c, err := r.readBlock(h, r.footer.Index.Offset, what)
	if err != nil {
		return nil, err
	}
	vals, err := decodeValueBlock(data)
	if err != nil {
		return nil, fmt.Errorf("blobfile: %s at offset %d: %w", what, h.Offset, err)
	}
	b := &Block{Handle: h, Compression: c, DecodedLen: len(data), values: vals}
	r.mu.Lock()
	r.memo, r.memoNum, r.memoUsed = b, i, true
	r.mu.Unlock()
	return b, nil
}

// Block is a decoded value block.
type Block struct {
	// Handle is where the block lies, Compression how it is stored,
	// DecodedLen its length decompressed.
	Handle      BlockHandle
	Compression Compression
	DecodedLen  int
	values      colblk.RawBytes
}

// Len returns the number of values the block holds, empty ones (which a
// rewrite leaves for dropped values) included.
func (b *Block) Len() int { return b.values.Len() }

// Value returns the block's i'th value, 0 <= i < Len().
func (b *Block) Value(i int) []byte { return b.values.At(i) }

// Each calls fn with every value of the file, block by block, with its
// physical block and row, until fn returns false. A block that cannot be
// read ends the walk with its error.
func (r *Reader) Each(fn func(block, row int, value []byte) bool) error {
	for i := range r.NumBlocks() {
		b, err := r.Block(i)
		if err != nil {
			return err
		}
		for j := range b.Len() {
			if !fn(i, j, b.Value(j)) {
				return nil
			}
		}
	}
	return nil
}

// BlockInfo describes a value block for Layout.
type BlockInfo struct {
	Handle      BlockHandle
	Compression Compression
	DecodedLen  int
	// Values counts the block's values; Err is why the block could not be
	// read (then Compression and Values are unknown).
	Values int
	Err    error
}

// Layout is where everything in a blob file lies.
type Layout struct {
	Footer           Footer
	IndexCompression Compression
	Blocks           []BlockInfo
	Virtual          []VirtualBlock
}

// Layout reads every value block and describes the file. A block that
// cannot be read is described with its error; Layout's own error is nil.
func (r *Reader) Layout() Layout {
	l := Layout{Footer: r.footer, IndexCompression: r.indexCompression, Virtual: r.Virtual()}
	for i := range r.NumBlocks() {
		bi := BlockInfo{Handle: r.index.handle(i)}
		if b, err := r.Block(i); err != nil {
			bi.Err = err
		} else {
			bi.Compression, bi.DecodedLen, bi.Values = b.Compression, b.DecodedLen, b.Len()
		}
		l.Blocks = append(l.Blocks, bi)
	}
	return l
}

// readAt reads len(buf) bytes at off.
func (r *Reader) readAt(buf []byte, off uint64, what string) error {
	n, err := r.r.ReadAt(buf, int64(off))
	if n == len(buf) {
		return nil
	}
	if err == nil || err == io.EOF {
		return base.CorruptionErrorf("blobfile: %s: short read of %d bytes at offset %d: got %d", what, len(buf), off, n)
	}
	return fmt.Errorf("blobfile: %s: read of %d bytes at offset %d: %w", what, len(buf), off, err)
}
