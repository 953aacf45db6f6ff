// Package colblk decodes Pebble's columnar blocks (table formats Pebblev5
// and up): the generic block header and its four column types, and the
// block schemas built on them (data blocks with Pebble's default key schema,
// index blocks, keyspan blocks and key-value blocks).
//
// Every decoder is a pure function over a byte slice. It checks the whole
// structure when it decodes (column bounds, offsets in order and inside the
// block), so that the accessors of what it returns never index out of
// range; bad input is an error wrapping base.ErrCorruption that names the
// offset in the block, never a panic.
//
// # Layout
//
// A block starts with a custom header whose size its schema fixes, then
// the generic header: a version byte (1), the column count (uint16) and the
// row count (uint32), then per column a data-type byte and the offset
// (uint32) of the column's data. Columns follow in order, each ending where
// the next starts; the last ends one byte before the block's end, at a
// padding byte. All integers are little-endian; a column's alignment is
// relative to the start of the block.
//
// Column types:
//   - bool (1): a bitmap. An encoding byte: 1 when every bit is zero (no
//     data follows); 0 for words: aligned to 8 bytes, ceil(rows/64) uint64
//     words, bit i of the column in bit i%64 of word i/64, then a summary
//     of ceil(words/64) words (which words are non-zero).
//   - uint (2): no bytes at all for zero rows; otherwise an encoding byte
//     whose low 7 bits are the width (0, 1, 2, 4 or 8 bytes) and whose high
//     bit says an 8-byte base follows, added to every value; then, aligned
//     to the width, rows values of that width. Width 0 means every value
//     is the base (or zero).
//   - bytes (3): no bytes for zero rows; otherwise a uint column of rows+1
//     offsets (the first 0) followed by the data: slice i is data[off[i],
//     off[i+1]).
//   - prefix bytes (4): sorted keys in bundles of 2^s keys. A byte s, then
//     a bytes column (whose first offset need not be 0) of 1+bundles+rows
//     slices: the prefix all keys share (data[0, off[0])), and per bundle
//     its prefix (after the shared one) and then its rows' suffixes (after
//     both prefixes). An empty suffix after a bundle's first row repeats the
//     previous row's suffix.
package colblk

import (
	"encoding/binary"
	"fmt"

	"github.com/bloomkv/bloomkv/internal/base"
)

// DataType is a column's type, as its header byte gives it.
type DataType uint8

// The column types.
const (
	DataTypeBool        DataType = 1
	DataTypeUint        DataType = 2
	DataTypeBytes       DataType = 3
	DataTypePrefixBytes DataType = 4
)

// dataTypeNames names the column types.
var dataTypeNames = [...]string{DataTypeBool: "bool", DataTypeUint: "uint", DataTypeBytes: "bytes", DataTypePrefixBytes: "prefixbytes"}

func (t DataType) String() string {
	if int(t) < len(dataTypeNames) && dataTypeNames[t] != "" {
		return dataTypeNames[t]
	}
	return fmt.Sprintf("DataType(%d)", uint8(t))
}

const (
	version1       = 1
	baseHeaderLen  = 7 // version, columns, rows
	columnEntryLen = 5 // type, offset
)

func corrupt(off int, format string, args ...any) error {
	return base.CorruptionErrorf("colblk: offset %d in block: %s", off, fmt.Sprintf(format, args...))
}

// Block is a columnar block's generic header, checked.
type Block struct {
	data    []byte
	custom  int // the custom header's length
	rows    int
	columns int
}

// DecodeBlock decodes the generic header of the block data, which starts
// with a custom header of custom bytes: it checks that the column offsets
// are in order and inside the block.
func DecodeBlock(data []byte, custom int) (Block, error) {
	if len(data) < custom+baseHeaderLen+1 {
		return Block{}, corrupt(0, "block of %d bytes is too short for its header", len(data))
	}
	h := data[custom:]
	if h[0] != version1 {
		return Block{}, corrupt(custom, "unknown columnar block version %d", h[0])
	}
	b := Block{
		data:    data,
		custom:  custom,
		columns: int(binary.LittleEndian.Uint16(h[1:])),
		rows:    int(binary.LittleEndian.Uint32(h[3:])),
	}
	end := custom + baseHeaderLen + b.columns*columnEntryLen
	if end > len(data)-1 {
		return Block{}, corrupt(custom+1, "%d columns do not fit a block of %d bytes", b.columns, len(data))
	}
	if b.rows > len(data)*8 {
		// Every row costs at least a bit of some column... unless every
		// column is constant; bound rows anyway so that no caller
		// allocates by a corrupt count.
		return Block{}, corrupt(custom+3, "%d rows in a block of %d bytes", b.rows, len(data))
	}
	prev := end
	for i := 0; i < b.columns; i++ {
		s := b.start(i)
		if s < prev || s > len(data)-1 {
			return Block{}, corrupt(custom+baseHeaderLen+i*columnEntryLen+1, "column %d starts at %d, outside [%d, %d]", i, s, prev, len(data)-1)
		}
		prev = s
	}
	return b, nil
}

// Rows returns the block's row count.
func (b Block) Rows() int { return b.rows }

// Columns returns the block's column count.
func (b Block) Columns() int { return b.columns }

// Custom returns the block's custom header.
func (b Block) Custom() []byte { return b.data[:b.custom] }

func (b Block) start(col int) int {
	if col >= b.columns {
		return len(b.data) - 1
	}
	return int(binary.LittleEndian.Uint32(b.data[b.custom+baseHeaderLen+col*columnEntryLen+1:]))
}

// column checks that column col exists and has type want, returning its
// bounds.
func (b Block) column(col int, want DataType) (start, end int, err error) {
	if col >= b.columns {
		return 0, 0, corrupt(b.custom+1, "block has %d columns, want at least %d", b.columns, col+1)
	}
	if t := DataType(b.data[b.custom+baseHeaderLen+col*columnEntryLen]); t != want {
		return 0, 0, corrupt(b.custom+baseHeaderLen+col*columnEntryLen, "column %d has type %s, want %s", col, t, want)
	}
	return b.start(col), b.start(col + 1), nil
}

// decodeColumn decodes column col, which must have type want, with dec,
// checking that it ends where the next column starts.
func decodeColumn[T any](b Block, col int, want DataType, dec func(b []byte, off int) (T, int, error)) (T, error) {
	var zero T
	s, e, err := b.column(col, want)
	if err != nil {
		return zero, err
	}
	v, end, err := dec(b.data[:e], s)
	if err != nil {
		return zero, err
	}
	if end != e {
		return zero, corrupt(end, "column %d decodes to offset %d, but the next column starts at %d", col, end, e)
	}
	return v, nil
}

// Uints returns column col, of type uint, with rows values.
func (b Block) Uints(col, rows int) (Uints, error) {
	return decodeColumn(b, col, DataTypeUint, func(d []byte, off int) (Uints, int, error) { return decodeUints(d, off, rows) })
}

// RawBytes returns column col, of type bytes, with rows slices.
func (b Block) RawBytes(col, rows int) (RawBytes, error) {
	return decodeColumn(b, col, DataTypeBytes, func(d []byte, off int) (RawBytes, int, error) { return decodeRawBytes(d, off, rows, true) })
}

// PrefixBytes returns column col, of type prefix bytes, with rows keys.
func (b Block) PrefixBytes(col, rows int) (PrefixBytes, error) {
	return decodeColumn(b, col, DataTypePrefixBytes, func(d []byte, off int) (PrefixBytes, int, error) { return decodePrefixBytes(d, off, rows) })
}

// Bitmap returns column col, of type bool, with rows bits.
func (b Block) Bitmap(col, rows int) (Bitmap, error) {
	return decodeColumn(b, col, DataTypeBool, func(d []byte, off int) (Bitmap, int, error) { return decodeBitmap(d, off, rows) })
}

// align rounds off up to a multiple of n, a power of two.
func align(off, n int) int { return (off + n - 1) &^ (n - 1) }

// Uints is a decoded uint column.
type Uints struct {
	base  uint64
	width int
	data  []byte
}

// decodeUints decodes a uint column of rows values at off in b, returning
// where it ends.
func decodeUints(b []byte, off, rows int) (Uints, int, error) {
	if rows == 0 {
		return Uints{}, off, nil
	}
	if off >= len(b) {
		return Uints{}, 0, corrupt(off, "uint column runs past its end")
	}
	enc := b[off]
	delta, w := enc&0x80 != 0, int(enc&0x7f)
	switch {
	case w == 0 || w == 1 || w == 2 || w == 4:
	case w == 8 && !delta:
	default:
		return Uints{}, 0, corrupt(off, "bad uint encoding %#x", enc)
	}
	p := off + 1
	var u Uints
	if delta {
		if p+8 > len(b) {
			return Uints{}, 0, corrupt(p, "uint column's base runs past its end")
		}
		u.base = binary.LittleEndian.Uint64(b[p:])
		p += 8
	}
	u.width = w
	if w > 0 {
		p = align(p, w)
		if p > len(b) || rows > (len(b)-p)/w {
			return Uints{}, 0, corrupt(off, "%d uints of %d bytes run past the column's end", rows, w)
		}
		u.data = b[p : p+rows*w]
		p += rows * w
	}
	return u, p, nil
}

// At returns value i, which must be below the count the column was decoded
// with.
func (u Uints) At(i int) uint64 {
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

// RawBytes is a decoded bytes column.
type RawBytes struct {
	n    int
	offs Uints
	data []byte
}

// decodeRawBytes decodes a bytes column of n slices at off in b. With
// zeroFirst the first offset must be 0 (plain bytes columns); a prefix-bytes
// column's first offset is its shared prefix's length.
func decodeRawBytes(b []byte, off, n int, zeroFirst bool) (RawBytes, int, error) {
	if n == 0 {
		return RawBytes{}, off, nil
	}
	offs, dataOff, err := decodeUints(b, off, n+1)
	if err != nil {
		return RawBytes{}, 0, err
	}
	if zeroFirst && offs.At(0) != 0 {
		return RawBytes{}, 0, corrupt(off, "bytes column's first offset is %d, not 0", offs.At(0))
	}
	prev := uint64(0)
	for i := 0; i <= n; i++ {
		o := offs.At(i)
		if o < prev {
			return RawBytes{}, 0, corrupt(off, "bytes column's offset %d (%d) is below the one before it (%d)", i, o, prev)
		}
		prev = o
	}
	if prev > uint64(len(b)-dataOff) {
		return RawBytes{}, 0, corrupt(dataOff, "bytes column's %d bytes of data run past its end", prev)
	}
	return RawBytes{n: n, offs: offs, data: b[dataOff : dataOff+int(prev)]}, dataOff + int(prev), nil
}

// Len returns the number of slices.
func (r RawBytes) Len() int { return r.n }

// At returns slice i; it aliases the block.
func (r RawBytes) At(i int) []byte {
	lo, hi := r.offs.At(i), r.offs.At(i+1)
	return r.data[lo:hi:hi]
}

// PrefixBytes is a decoded prefix-bytes column of sorted keys.
type PrefixBytes struct {
	rows  int
	shift uint
	raw   RawBytes // slices: shared prefix, then per bundle its prefix and rows
}

func decodePrefixBytes(b []byte, off, rows int) (PrefixBytes, int, error) {
	if rows == 0 {
		return PrefixBytes{}, 0, corrupt(off, "prefix-bytes column of no rows")
	}
	if off >= len(b) {
		return PrefixBytes{}, 0, corrupt(off, "prefix-bytes column runs past its end")
	}
	shift := uint(b[off])
	if shift > 16 {
		return PrefixBytes{}, 0, corrupt(off, "bundle size 2^%d is too large", shift)
	}
	bundles := 1 + (rows-1)>>shift
	// The bytes column's offsets list 1+bundles+rows slices' ends.
	raw, end, err := decodeRawBytes(b, off+1, bundles+rows, false)
	if err != nil {
		return PrefixBytes{}, 0, err
	}
	return PrefixBytes{rows: rows, shift: shift, raw: raw}, end, nil
}

// slice returns the bytes between offsets i and j of the column.
func (p PrefixBytes) slice(i, j int) []byte {
	return p.raw.data[p.raw.offs.At(i):p.raw.offs.At(j)]
}

// AppendKey appends key i to dst.
func (p PrefixBytes) AppendKey(dst []byte, i int) []byte {
	dst = append(dst, p.raw.data[:p.raw.offs.At(0)]...)
	bundle := i >> p.shift
	bo := bundle<<p.shift + bundle // offset index of the bundle's prefix
	dst = append(dst, p.slice(bo, bo+1)...)
	// Row i's suffix ends at offset index si+1; an empty one repeats the
	// row before it in the bundle.
	si := bo + 1 + (i - bundle<<p.shift)
	for si > bo+1 && p.raw.offs.At(si) == p.raw.offs.At(si+1) {
		si--
	}
	return append(dst, p.slice(si, si+1)...)
}

// Bitmap is a decoded bool column.
type Bitmap struct {
	words []byte // nil when every bit is zero
}

func decodeBitmap(b []byte, off, rows int) (Bitmap, int, error) {
	if off >= len(b) {
		return Bitmap{}, 0, corrupt(off, "bitmap runs past its end")
	}
	switch b[off] {
	case 1:
		return Bitmap{}, off + 1, nil
	case 0:
	default:
		return Bitmap{}, 0, corrupt(off, "unknown bitmap encoding %d", b[off])
	}
	p := align(off+1, 8)
	words := (rows + 63) >> 6
	size := (words + (words+63)>>6) * 8
	if p > len(b) || size > len(b)-p {
		return Bitmap{}, 0, corrupt(off, "bitmap of %d bits runs past its end", rows)
	}
	return Bitmap{words: b[p : p+words*8]}, p + size, nil
}

// At returns bit i.
func (m Bitmap) At(i int) bool {
	if m.words == nil {
		return false
	}
	return m.words[i>>3]&(1<<(i&7)) != 0
}
