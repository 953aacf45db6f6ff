package blobfile

// Reading a block (checksum, decompression) and decoding the columnar
// blocks: the index block and value blocks. Offsets in the decoders' errors
// are within the decompressed block.

import (
	"encoding/binary"
	"fmt"

	"github.com/golang/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/minio/minlz"

	"github.com/bloomkv/bloomkv/internal/base"
)

// readBlock reads the block at h, which with its trailer must end by limit,
// verifies its checksum and decompresses it.
func (r *Reader) readBlock(h BlockHandle, limit uint64, what string) ([]byte, Compression, error) {
	if !fits(h, limit) {
		return nil, 0, base.CorruptionErrorf("blobfile: %s %s runs past offset %d", what, h, limit)
	}
	buf := make([]byte, h.Length+TrailerLen)
	if err := r.readAt(buf, h.Offset, what); err != nil {
		return nil, 0, err
	}
	n := h.Length
	c := Compression(buf[n])
	stored := binary.LittleEndian.Uint32(buf[n+1:])
	if got := checksum(r.footer.ChecksumType, buf[:n+1]); got != stored {
		return nil, c, base.CorruptionErrorf("blobfile: %s at offset %d (length %d): %s checksum mismatch at offset %d: stored %#x, computed %#x",
			what, h.Offset, h.Length, r.footer.ChecksumType, h.Offset+n+1, stored, got)
	}
	out, err := r.decompress(c, buf[:n])
	if err != nil {
		return nil, c, fmt.Errorf("blobfile: %s at offset %d (length %d): %w", what, h.Offset, h.Length, err)
	}
	return out, c, nil
}

// decompress returns the block src stored with compression c.
func (r *Reader) decompress(c Compression, src []byte) ([]byte, error) {
	var n int
	switch c {
	case NoCompression:
		return src, nil
	case SnappyCompression:
		var err error
		if n, err = snappy.DecodedLen(src); err != nil {
			return nil, base.CorruptionErrorf("bad Snappy header: %v", err)
		}
	case ZstdCompression:
		x, k := binary.Uvarint(src)
		if k <= 0 {
			return nil, base.CorruptionErrorf("bad zstd length prefix %x", src[:min(len(src), binary.MaxVarintLen64)])
		}
		if x > maxBlockLen {
			return nil, base.UnsupportedErrorf("zstd block of %d bytes decompressed, over this reader's limit of %d", x, maxBlockLen)
		}
		n = int(x)
	case MinLZCompression:
		var err error
		if n, err = minlz.DecodedLen(src); err != nil {
			return nil, base.CorruptionErrorf("bad MinLZ header: %v", err)
		}
	case 2, 3, 4, 5, 6:
		return nil, base.UnsupportedErrorf("compression %s", c)
	default:
		return nil, base.CorruptionErrorf("unknown compression %d", uint8(c))
	}
	if n < 0 || n > maxBlockLen {
		return nil, base.UnsupportedErrorf("%s block of %d bytes decompressed, over this reader's limit of %d", c, n, maxBlockLen)
	}
	dst := make([]byte, n)
	var out []byte
	var err error
	switch c {
	case SnappyCompression:
		out, err = snappy.Decode(dst, src)
	case MinLZCompression:
		out, err = minlz.Decode(dst, src)
	default:
		_, k := binary.Uvarint(src)
		var d *zstd.Decoder
		if d, err = r.zstdDecoder(); err == nil {
			out, err = d.DecodeAll(src[k:], dst[:0])
		}
	}
	if err != nil {
		return nil, base.CorruptionErrorf("bad %s data: %v", c, err)
	}
	if len(out) != n {
		return nil, base.CorruptionErrorf("%s data decompressed to %d bytes, its header says %d", c, len(out), n)
	}
	return out, nil
}

// zstdDecoder returns the reader's zstd decoder, made on first use.
func (r *Reader) zstdDecoder() (*zstd.Decoder, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.zstd == nil {
		d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecodeAllCapLimit(true), zstd.WithDecoderMaxMemory(maxBlockLen))
		if err != nil {
			return nil, err
		}
		r.zstd = d
	}
	return r.zstd, nil
}

// The column types of Pebble's columnar blocks that blob files use.
const (
	columnUint  = 2
	columnBytes = 3
)

// columnarVersion is the one version of the columnar block header.
const columnarVersion = 1

// columnar is a columnar block's header: its rows and where each column's
// data begins, with one more entry for where the last one must end (before
// the padding byte).
type columnar struct {
	rows  uint32
	pages []uint64
}

// decodeColumnar decodes the header of a columnar block b at offset hdr,
// whose columns must have the given types.
func decodeColumnar(b []byte, hdr int, types ...byte) (columnar, error) {
	end := hdr + 7 + 5*len(types)
	if len(b) < end+1 {
		return columnar{}, base.CorruptionErrorf("block of %d bytes is too short for its header and padding (%d bytes)", len(b), end+1)
	}
	if v := b[hdr]; v != columnarVersion {
		return columnar{}, base.CorruptionErrorf("unknown columnar block version %d at block offset %d", v, hdr)
	}
	if n := binary.LittleEndian.Uint16(b[hdr+1:]); int(n) != len(types) {
		return columnar{}, base.CorruptionErrorf("%d columns at block offset %d, want %d", n, hdr+1, len(types))
	}
	c := columnar{rows: binary.LittleEndian.Uint32(b[hdr+3:])}
	last := uint64(end)
	for i, t := range types {
		at := hdr + 7 + 5*i
		if b[at] != t {
			return columnar{}, base.CorruptionErrorf("column %d of type %d at block offset %d, want %d", i, b[at], at, t)
		}
		page := uint64(binary.LittleEndian.Uint32(b[at+1:]))
		if page < last || page > uint64(len(b)-1) {
			return columnar{}, base.CorruptionErrorf("column %d data offset %d at block offset %d outside [%d, %d]", i, page, at+1, last, len(b)-1)
		}
		c.pages = append(c.pages, page)
		last = page
	}
	c.pages = append(c.pages, uint64(len(b)-1))
	return c, nil
}

// uints is a decoded column of unsigned integers.
type uints struct {
	base  uint64
	width int
	data  []byte
	rows  uint64
}

// decodeUints decodes a column of rows integers at offset off of b, and
// returns the offset after it.
func decodeUints(b []byte, off, rows uint64) (uints, uint64, error) {
	if rows == 0 {
		return uints{}, off, nil
	}
	if off >= uint64(len(b)) {
		return uints{}, 0, base.CorruptionErrorf("integer column at block offset %d beyond the block's %d bytes", off, len(b))
	}
	enc := b[off]
	u := uints{width: int(enc &^ 0x80), rows: rows}
	delta := enc&0x80 != 0
	switch {
	case u.width == 8 && delta, u.width != 0 && u.width != 1 && u.width != 2 && u.width != 4 && u.width != 8:
		return uints{}, 0, base.CorruptionErrorf("bad integer encoding %#x at block offset %d", enc, off)
	}
	off++
	if delta {
		if off+8 > uint64(len(b)) {
			return uints{}, 0, base.CorruptionErrorf("integer column base at block offset %d beyond the block's %d bytes", off, len(b))
		}
		u.base = binary.LittleEndian.Uint64(b[off:])
		off += 8
	}
	if u.width == 0 {
		if rows > uint64(len(b)) {
			return uints{}, 0, base.CorruptionErrorf("%d integers of 0 bytes at block offset %d, more than the block's %d bytes", rows, off, len(b))
		}
		return u, off, nil
	}
	w := uint64(u.width)
	off = (off + w - 1) &^ (w - 1)
	if off > uint64(len(b)) || rows > (uint64(len(b))-off)/w {
		return uints{}, 0, base.CorruptionErrorf("%d integers of %d bytes at block offset %d overrun the block's %d bytes", rows, w, off, len(b))
	}
	u.data = b[off : off+rows*w]
	return u, off + rows*w, nil
}

// at returns the i'th integer, i < u.rows.
func (u uints) at(i uint64) uint64 {
	switch u.width {
	case 1:
		return u.base + uint64(u.data[i])
	case 2:
		return u.base + uint64(binary.LittleEndian.Uint16(u.data[2*i:]))
	case 4:
		return u.base + uint64(binary.LittleEndian.Uint32(u.data[4*i:]))
	case 8:
		return u.base + binary.LittleEndian.Uint64(u.data[8*i:])
	}
	return u.base
}

// indexBlock is a decoded index block.
type indexBlock struct {
	blocks  uint32
	virtual uints
	offsets uints // blocks+1
}

// decodeIndexBlock decodes an index block.
func decodeIndexBlock(b []byte) (indexBlock, error) {
	if len(b) < 4 {
		return indexBlock{}, base.CorruptionErrorf("index block of %d bytes", len(b))
	}
	nv := uint64(binary.LittleEndian.Uint32(b))
	c, err := decodeColumnar(b, 4, columnUint, columnUint)
	if err != nil {
		return indexBlock{}, err
	}
	if nv > uint64(len(b)) {
		return indexBlock{}, base.CorruptionErrorf("%d virtual blocks (at block offset 0) in an index block of %d bytes", nv, len(b))
	}
	ix := indexBlock{blocks: c.rows}
	var end uint64
	if ix.virtual, end, err = decodeUints(b, c.pages[0], nv); err != nil {
		return indexBlock{}, fmt.Errorf("virtual blocks: %w", err)
	}
	if end != c.pages[1] {
		return indexBlock{}, base.CorruptionErrorf("virtual blocks end at block offset %d, the offsets begin at %d", end, c.pages[1])
	}
	if ix.offsets, end, err = decodeUints(b, c.pages[1], uint64(c.rows)+1); err != nil {
		return indexBlock{}, fmt.Errorf("block offsets: %w", err)
	}
	if end != c.pages[2] {
		return indexBlock{}, base.CorruptionErrorf("block offsets end at block offset %d, the padding is at %d", end, c.pages[2])
	}
	return ix, nil
}

// check verifies that the blocks lie, each with its trailer, one after
// another before limit (the index block's offset), and that every virtual
// block names a block.
func (ix *indexBlock) check(limit uint64) error {
	prev := ix.offsets.at(0)
	for i := uint64(1); i <= uint64(ix.blocks); i++ {
		o := ix.offsets.at(i)
		if o < prev || o-prev < TrailerLen || o > limit {
			return base.CorruptionErrorf("value block %d runs from offset %d to %d, not within [0, %d] with its %d-byte trailer", i-1, prev, o, limit, TrailerLen)
		}
		prev = o
	}
	for i := range ix.virtualCount() {
		if v := ix.virtualAt(i); v.Physical != NoBlock && v.Physical >= ix.blocks {
			return base.CorruptionErrorf("virtual block %d names block %d of %d", i, v.Physical, ix.blocks)
		}
	}
	return nil
}

// handle returns where the i'th value block lies.
func (ix *indexBlock) handle(i int) BlockHandle {
	o := ix.offsets.at(uint64(i))
	return BlockHandle{o, ix.offsets.at(uint64(i)+1) - o - TrailerLen}
}

func (ix *indexBlock) virtualCount() int { return int(ix.virtual.rows) }

func (ix *indexBlock) virtualAt(i int) VirtualBlock {
	v := ix.virtual.at(uint64(i))
	return VirtualBlock{Physical: uint32(v), ValueIDOffset: uint32(v >> 32)}
}

// bytesColumn is a decoded column of byte strings.
type bytesColumn struct {
	offsets uints // n+1
	data    []byte
}

func (c bytesColumn) len() int {
	if c.offsets.rows == 0 {
		return 0
	}
	return int(c.offsets.rows - 1)
}

func (c bytesColumn) at(i int) []byte {
	return c.data[c.offsets.at(uint64(i)):c.offsets.at(uint64(i)+1)]
}

// decodeValueBlock decodes a value block.
func decodeValueBlock(b []byte) (bytesColumn, error) {
	c, err := decodeColumnar(b, 0, columnBytes)
	if err != nil {
		return bytesColumn{}, err
	}
	if c.rows == 0 {
		if c.pages[0] != c.pages[1] {
			return bytesColumn{}, base.CorruptionErrorf("a block of no values has %d bytes of them at block offset %d", c.pages[1]-c.pages[0], c.pages[0])
		}
		return bytesColumn{}, nil
	}
	offs, dataOff, err := decodeUints(b, c.pages[0], uint64(c.rows)+1)
	if err != nil {
		return bytesColumn{}, fmt.Errorf("value offsets: %w", err)
	}
	end := c.pages[1]
	if dataOff > end {
		return bytesColumn{}, base.CorruptionErrorf("value offsets end at block offset %d, past the padding at %d", dataOff, end)
	}
	col := bytesColumn{offsets: offs, data: b[dataOff:end]}
	if last := offs.at(uint64(c.rows)); last != end-dataOff {
		return bytesColumn{}, base.CorruptionErrorf("values at block offset %d end after %d bytes, the padding is %d bytes on", dataOff, last, end-dataOff)
	}
	prev := offs.at(0)
	if prev != 0 {
		return bytesColumn{}, base.CorruptionErrorf("first value offset %d at block offset %d, not 0", prev, c.pages[0])
	}
	for i := uint64(1); i <= uint64(c.rows); i++ {
		o := offs.at(i)
		if o < prev {
			return bytesColumn{}, base.CorruptionErrorf("value %d runs from %d back to %d (values at block offset %d)", i-1, prev, o, dataOff)
		}
		prev = o
	}
	return col, nil
}
