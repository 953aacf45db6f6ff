package blobfile

// Reading a block (checksum, decompression with internal/compress) and
// decoding the columnar blocks with internal/colblk: the index block and
// value blocks. Offsets in the decoders' errors are within the decompressed
// block; the callers add the block's offset in the file.

import (
	"encoding/binary"
	"fmt"

	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/colblk"
	"github.com/bloomkv/bloomkv/internal/compress"
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
	if c == NoCompression {
		return src, nil
	}
	n, err := compress.DecodedLen(c, src, maxBlockLen)
	if err != nil {
		return nil, err
	}
	return compress.Decode(c, make([]byte, n), src, &r.zstd)
}

// The columns of the index block, whose custom header is the count of
// virtual blocks (uint32).
const (
	indexHeaderLen  = 4
	indexColVirtual = 0
	indexColOffsets = 1
	indexColumns    = 2
)

// indexBlock is a decoded index block.
type indexBlock struct {
	blocks   uint32
	nvirtual int
	virtual  colblk.Uints // nvirtual
	offsets  colblk.Uints // blocks+1
}

// decodeIndexBlock decodes an index block.
func decodeIndexBlock(b []byte) (indexBlock, error) {
	cb, err := colblk.DecodeBlock(b, indexHeaderLen)
	if err != nil {
		return indexBlock{}, err
	}
	if cb.Columns() != indexColumns {
		return indexBlock{}, base.CorruptionErrorf("%d columns at block offset %d, want %d", cb.Columns(), indexHeaderLen+1, indexColumns)
	}
	nv := uint64(binary.LittleEndian.Uint32(cb.Custom()))
	if nv > uint64(len(b)) {
		return indexBlock{}, base.CorruptionErrorf("%d virtual blocks (at block offset 0) in an index block of %d bytes", nv, len(b))
	}
	ix := indexBlock{blocks: uint32(cb.Rows()), nvirtual: int(nv)}
	if ix.virtual, err = cb.Uints(indexColVirtual, ix.nvirtual); err != nil {
		return indexBlock{}, fmt.Errorf("virtual blocks: %w", err)
	}
	if ix.offsets, err = cb.Uints(indexColOffsets, cb.Rows()+1); err != nil {
		return indexBlock{}, fmt.Errorf("block offsets: %w", err)
	}
	return ix, nil
}

// check verifies that the blocks lie, each with its trailer, one after
// another before limit (the index block's offset), and that every virtual
// block names a block.
func (ix *indexBlock) check(limit uint64) error {
	prev := ix.offsets.At(0)
	for i := 1; i <= int(ix.blocks); i++ {
		o := ix.offsets.At(i)
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
	o := ix.offsets.At(i)
	return BlockHandle{o, ix.offsets.At(i+1) - o - TrailerLen}
}

func (ix *indexBlock) virtualCount() int { return ix.nvirtual }

func (ix *indexBlock) virtualAt(i int) VirtualBlock {
	v := ix.virtual.At(i)
	return VirtualBlock{Physical: uint32(v), ValueIDOffset: uint32(v >> 32)}
}

// decodeValueBlock decodes a value block: one column of byte strings.
func decodeValueBlock(b []byte) (colblk.RawBytes, error) {
	return colblk.DecodeBytesBlock(b)
}
