package blobfile

import (
	"encoding/binary"
	"fmt"

	"github.com/bloomkv/bloomkv/internal/base"
)

// The value-prefix byte before a value in Pebble's tables (Pebblev3 on):
// its two high bits say where the value is, and for a value stored
// elsewhere its low three bits carry the user's short attribute.
const (
	prefixKindMask      = 0xc0
	prefixKindBlob      = 0x40
	prefixSamePrefixBit = 0x20
	prefixAttributeMask = 0x07
)

// MaxInlineHandleLen is the longest inline handle: the prefix byte and four
// 32-bit uvarints.
const MaxInlineHandleLen = 1 + 4*binary.MaxVarintLen32

// InlineHandle is what a table stores in place of a value that is in a blob
// file: the value-prefix byte, the index of the blob file among the table's
// blob references, and the value's Handle in that file.
type InlineHandle struct {
	Prefix         byte
	ReferenceIndex uint32
	Handle
}

// ShortAttribute returns the user-defined attribute (0 to 7) the prefix
// byte carries.
func (h InlineHandle) ShortAttribute() uint8 { return h.Prefix & prefixAttributeMask }

// SetHasSamePrefix reports whether the prefix byte marks the key as a SET
// with the same key prefix as the SET before it in its block.
func (h InlineHandle) SetHasSamePrefix() bool { return h.Prefix&prefixSamePrefixBit != 0 }

// String prints the handle as ref/blk/id/len.
func (h InlineHandle) String() string {
	return fmt.Sprintf("(ref%d, blk%d, id%d, len%d)", h.ReferenceIndex, h.BlockID, h.ValueID, h.ValueLen)
}

// IsBlobValue reports whether v, a value as a Pebblev3-or-later table
// stores it (prefix byte first), is an inline handle to a blob file.
func IsBlobValue(v []byte) bool { return len(v) > 0 && v[0]&prefixKindMask == prefixKindBlob }

// DecodeInlineHandle decodes b, a value as a table stores it: a prefix byte
// marking a value in a blob file, then the reference index, the value's
// length, its block and its number in the block as uvarints of at most 32
// bits (5 bytes), and nothing after. Bad input is an error wrapping
// base.ErrCorruption that names the offset within b.
func DecodeInlineHandle(b []byte) (InlineHandle, error) {
	if !IsBlobValue(b) {
		if len(b) == 0 {
			return InlineHandle{}, base.CorruptionErrorf("blobfile: inline handle: empty, no value prefix at offset 0")
		}
		return InlineHandle{}, base.CorruptionErrorf("blobfile: inline handle: value prefix %#x at offset 0 does not mark a blob value", b[0])
	}
	h := InlineHandle{Prefix: b[0]}
	names := [...]string{"reference index", "value length", "block number", "value number"}
	off := 1
	for i, f := range []*uint32{&h.ReferenceIndex, &h.ValueLen, &h.BlockID, &h.ValueID} {
		x, n := binary.Uvarint(b[off:])
		if n <= 0 || n > binary.MaxVarintLen32 || x > 1<<32-1 {
			return InlineHandle{}, base.CorruptionErrorf("blobfile: inline handle %x: bad %s at offset %d", b, names[i], off)
		}
		*f, off = uint32(x), off+n
	}
	if off != len(b) {
		return InlineHandle{}, base.CorruptionErrorf("blobfile: inline handle %x: %d bytes after it at offset %d", b, len(b)-off, off)
	}
	return h, nil
}

// AppendInlineHandle appends h as a table stores it to dst. The prefix
// byte is h.Prefix with its kind set to a blob value.
func AppendInlineHandle(dst []byte, h InlineHandle) []byte {
	dst = append(dst, h.Prefix&^prefixKindMask|prefixKindBlob)
	for _, x := range []uint32{h.ReferenceIndex, h.ValueLen, h.BlockID, h.ValueID} {
		dst = binary.AppendUvarint(dst, uint64(x))
	}
	return dst
}
