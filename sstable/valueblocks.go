package sstable

// Pebble's value blocks (TableFormatPebblev3 and up): in data blocks every
// SET value starts with a prefix byte, whose two high bits say whether the
// value follows in place (0) or is in a value block (0b10: a handle follows,
// varints of the value's length, the value block's number and the offset in
// it). The pebble.value_index meta block, whose metaindex handle is followed
// by three bytes (the widths of its fields), lists the value blocks: for
// each, its number, offset and length, little-endian in those widths.
// Pebblev4 also sets a bit in the kind of keys that a newer key of the
// table makes obsolete; readers clear it.

import (
	"encoding/binary"
	"fmt"

	"github.com/bloomkv/bloomkv/internal/base"
)

const (
	metaValueIndexName = "pebble.value_index"

	valueKindMask   = 0xc0
	valueKindHandle = 0x80
	valueKindBlob   = 0x40 // a value in a blob file (Pebblev6 on)

	// The kinds of the blocks that hold bytes, not entries, in errors.
	kindValue      = "value"
	kindValueIndex = "value-index"

	// obsoleteBit marks, in Pebblev4, the kind of a key a newer key of the
	// table makes obsolete.
	obsoleteBit = 0x40
)

// decodeValueIndexHandle decodes the metaindex value of the value index: a
// handle and the widths of its entries' block number, offset and length.
func decodeValueIndexHandle(v []byte) (BlockHandle, [3]int, bool) {
	bh, n := decodeHandle(v)
	if n == 0 || n+3 != len(v) {
		return BlockHandle{}, [3]int{}, false
	}
	w := [3]int{int(v[n]), int(v[n+1]), int(v[n+2])}
	for _, x := range w {
		if x < 1 || x > 8 {
			return BlockHandle{}, [3]int{}, false
		}
	}
	return bh, w, true
}

// readValueIndex reads the value index, when the table has one, into the
// handles of its value blocks.
func (t *Reader) readValueIndex() error {
	if !t.valueIndexed {
		return nil
	}
	b, err := t.readBlockRaw(t.valueIndexBH, kindValueIndex)
	if err != nil {
		return err
	}
	w := t.valueIndexWidths
	row := w[0] + w[1] + w[2]
	if len(b)%row != 0 {
		return corruptionf("%s: value index block %s: %d bytes are not rows of %d", t.opts.FileName, t.valueIndexBH, len(b), row)
	}
	le := func(p []byte) uint64 {
		var x uint64
		for i := len(p) - 1; i >= 0; i-- {
			x = x<<8 | uint64(p[i])
		}
		return x
	}
	for i := 0; i < len(b); i += row {
		num, off, length := le(b[i:i+w[0]]), le(b[i+w[0]:i+w[0]+w[1]]), le(b[i+w[0]+w[1]:i+row])
		bh := BlockHandle{off, length}
		if num != uint64(i/row) || off > t.size || length+blockTrailerLen > t.size-off {
			return corruptionf("%s: value index block %s: entry %d at offset %d in block: block %d at %s", t.opts.FileName, t.valueIndexBH, i/row, i, num, bh)
		}
		t.valueBlocks = append(t.valueBlocks, bh)
	}
	return nil
}

// readBlockRaw reads, verifies and decompresses a block that holds bytes,
// not entries (value blocks and their index).
func (t *Reader) readBlockRaw(bh BlockHandle, kind string) ([]byte, error) {
	return t.readBlock(bh, kind)
}

// IsBlobReference reports whether the current entry's value is held in a
// blob file (Pebble from Pebblev6). Value then returns the reference as the
// table stores it: a value-prefix byte whose two high bits are 0b01
// (0x40), followed by Pebble's inline blob handle (uvarints of the blob
// reference's number in the table, the value's length, the blob block's
// number and the value's number in it); BlobHandle returns the handle
// alone. Resolving it is the blob-file reader's business.
func (it *Iter) IsBlobReference() bool {
	_, ok := it.BlobHandle()
	return ok
}

// BlobHandle returns the inline blob handle of the current entry's value,
// without its prefix byte, when the value is held in a blob file (see
// IsBlobReference). It aliases a block and must not be modified.
func (it *Iter) BlobHandle() ([]byte, bool) {
	if !it.valid || !it.t.columnar {
		return nil, false
	}
	v := it.data.value
	if len(v) < 2 || v[0]&valueKindMask != valueKindBlob {
		return nil, false
	}
	return v[1:], true
}

// visibleKey clears Pebble's obsolete bit from a key's kind.
func (t *Reader) visibleKey(k base.InternalKey) base.InternalKey {
	if t.obsoleteBits && k.Trailer.Kind()&obsoleteBit != 0 {
		k.Trailer &^= obsoleteBit
	}
	return k
}

// pebbleValue returns the value of a SET stored as v in a Pebblev3+ data
// block: after its prefix byte, or from the value block its handle names.
func (t *Reader) pebbleValue(v []byte) ([]byte, error) {
	return t.pebbleValueFrom(v, t.cachedRawBlock)
}

// valueBlockMemo keeps the value blocks a walk over the table (Check) has
// read, so that each is read once.
type valueBlockMemo struct {
	t      *Reader
	blocks map[uint64][]byte
}

func (m *valueBlockMemo) get(bh BlockHandle) ([]byte, error) {
	if b, ok := m.blocks[bh.Offset]; ok {
		return b, nil
	}
	b, err := m.t.readBlockRaw(bh, kindValue)
	if err == nil {
		if m.blocks == nil {
			m.blocks = map[uint64][]byte{}
		}
		m.blocks[bh.Offset] = b
	}
	return b, err
}

// pebbleValueFrom is pebbleValue with value blocks from get.
func (t *Reader) pebbleValueFrom(v []byte, get func(BlockHandle) ([]byte, error)) ([]byte, error) {
	if len(v) == 0 {
		if t.columnar {
			return v, nil // an empty value has no prefix byte (columnar.go)
		}
		return nil, corruptionf("%s: a SET value without its prefix byte", t.opts.FileName)
	}
	switch v[0] & valueKindMask {
	case 0:
		return v[1:], nil
	case valueKindHandle:
	case valueKindBlob:
		if !t.columnar || t.footer.format < TableFormatPebblev6 {
			return nil, corruptionf("%s: value prefix %#x (a value in a blob file) in a %s table", t.opts.FileName, v[0], t.footer.format)
		}
		if len(v) < 2 {
			return nil, corruptionf("%s: blob value handle %x is empty", t.opts.FileName, v)
		}
		return v, nil // a reference to a value in a blob file, as stored
	default:
		return nil, corruptionf("%s: bad value prefix %#x", t.opts.FileName, v[0])
	}
	h := v[1:]
	var f [3]uint64
	for i := range f {
		x, n := binary.Uvarint(h)
		if n <= 0 || x > 1<<32-1 {
			return nil, corruptionf("%s: bad value handle %x", t.opts.FileName, v)
		}
		f[i], h = x, h[n:]
	}
	length, num, off := f[0], f[1], f[2]
	if num >= uint64(len(t.valueBlocks)) {
		return nil, corruptionf("%s: value handle names value block %d of %d", t.opts.FileName, num, len(t.valueBlocks))
	}
	bh := t.valueBlocks[num]
	b, err := get(bh)
	if err != nil {
		return nil, err
	}
	if off > uint64(len(b)) || length > uint64(len(b))-off {
		return nil, corruptionf("%s: value block %s: value of %d bytes at offset %d overruns its %d bytes", t.opts.FileName, bh, length, off, len(b))
	}
	return b[off : off+length], nil
}

// cachedRawBlock returns a value block, through the cache when there is
// one and it is not bloomkv's own (whose blocks' memory is reused once
// they leave it, unless held by counted references, which a value handed
// out of Value cannot keep).
func (t *Reader) cachedRawBlock(bh BlockHandle) ([]byte, error) {
	if t.opts.Cache == nil || t.cc != nil {
		return t.readBlockRaw(bh, kindValue)
	}
	if b, ok := t.opts.Cache.Get(t.opts.FileNum, bh.Offset); ok {
		return b, nil
	}
	return t.opts.Cache.Load(t.opts.FileNum, bh.Offset, func() ([]byte, error) { return t.readBlockRaw(bh, kindValue) })
}

// iterValue returns the value of the iterator's entry, resolving Pebble's
// value prefix; an error is the iterator's.
func (it *Iter) iterValue() []byte {
	k := it.data.key
	if !it.t.columnar && (len(k) < base.TrailerLen || base.Kind(k[len(k)-base.TrailerLen])&^obsoleteBit != base.KindSet) {
		return it.data.value
	}
	v, err := it.t.pebbleValue(it.data.value)
	if err != nil {
		if it.err == nil {
			it.err = fmt.Errorf("%w (key %s)", err, it.Key())
		}
		return nil
	}
	return v
}
