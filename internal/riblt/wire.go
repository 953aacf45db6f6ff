package riblt

import (
	"encoding/binary"
	"fmt"
)

// fixedSymbolSize is the part of an encoded symbol that does not depend on its
// count; minSymbolSize adds the shortest count.
const (
	fixedSymbolSize = 24
	minSymbolSize   = fixedSymbolSize + 1
)

// AppendSymbols appends to dst the encoding of a batch of consecutive coded
// symbols, the first of which has index start, and returns the extended
// slice. It panics if start is negative or start+len(syms) exceeds MaxSymbols.
//
// The layout is the index of the first symbol and the number of symbols, both
// as unsigned varints, then for each symbol its Sum.Key, Sum.Val and Check as
// 8-byte little-endian words and its count as a zigzag varint of the
// difference from a prediction. The prediction for the first symbol of a batch
// is 0. For symbol i after it, it is c - c/(i+2), c being the count of symbol
// i-1: an item is in symbol i with probability 2/(i+2), so an encoder's counts
// fall off as 1/(i+2) and the difference from the prediction is the noise
// alone, about the square root of the count, which mostly fits in one or two
// bytes: the symbols an encoder of a million items produces for a difference
// of 1,000 take 25.4 bytes each on average. The first symbol of a batch, whose
// count is sent whole, takes a byte or two more, and a batch has 2–10 bytes of
// header. Reconciling d items thus takes about 1.4·d symbols and 35·d bytes.
func AppendSymbols(dst []byte, start int, syms []CodedSymbol) []byte {
	if start < 0 || start > MaxSymbols-len(syms) {
		panic(fmt.Sprintf("riblt: batch of %d symbols at index %d is out of range", len(syms), start))
	}
	dst = binary.AppendUvarint(dst, uint64(start))
	dst = binary.AppendUvarint(dst, uint64(len(syms)))
	var prev int64
	for k, s := range syms {
		dst = binary.LittleEndian.AppendUint64(dst, s.Sum.Key)
		dst = binary.LittleEndian.AppendUint64(dst, s.Sum.Val)
		dst = binary.LittleEndian.AppendUint64(dst, s.Check)
		// Wrapping arithmetic: the difference round-trips whatever the counts.
		delta := s.Count - predictCount(k, start+k, prev)
		dst = binary.AppendUvarint(dst, uint64(delta<<1)^uint64(delta>>63))
		prev = s.Count
	}
	return dst
}

// predictCount predicts the count of symbol i, the k-th of its batch, from
// the count prev of symbol i-1. It computes prev·(i+1)/(i+2) without
// overflow: the quotient has the sign of prev and at most half its magnitude.
func predictCount(k, i int, prev int64) int64 {
	if k == 0 {
		return 0
	}
	return prev - prev/int64(i+2)
}

// DecodeSymbols decodes a batch that AppendSymbols encoded, returning the index
// of its first symbol and the symbols. Input that AppendSymbols could not have
// produced, including truncated input, trailing bytes and varints longer than
// necessary, yields an error wrapping ErrCorrupt that names the offset.
func DecodeSymbols(data []byte) (start int, syms []CodedSymbol, err error) {
	off := 0
	first, bad := readUvarint(data, &off)
	if bad != "" {
		return 0, nil, fmt.Errorf("%w: first index at offset 0 %s", ErrCorrupt, bad)
	}
	if first > MaxSymbols {
		return 0, nil, fmt.Errorf("%w: first index %d at offset 0 exceeds %d", ErrCorrupt, first, MaxSymbols)
	}
	countOff := off
	n, bad := readUvarint(data, &off)
	if bad != "" {
		return 0, nil, fmt.Errorf("%w: symbol count at offset %d %s", ErrCorrupt, countOff, bad)
	}
	// Bound n by the bytes present before allocating anything for it.
	if rest := uint64(len(data) - off); n > rest/minSymbolSize {
		return 0, nil, fmt.Errorf("%w: %d symbols at offset %d cannot fit in the %d bytes that follow", ErrCorrupt, n, countOff, rest)
	}
	if first+n > MaxSymbols {
		return 0, nil, fmt.Errorf("%w: %d symbols from index %d at offset %d run past %d", ErrCorrupt, n, first, countOff, MaxSymbols)
	}
	start = int(first)
	syms = make([]CodedSymbol, n)
	var prev int64
	for k := range syms {
		if len(data)-off < fixedSymbolSize {
			return 0, nil, fmt.Errorf("%w: symbol %d truncated at offset %d", ErrCorrupt, start+k, off)
		}
		s := &syms[k]
		s.Sum.Key = binary.LittleEndian.Uint64(data[off:])
		s.Sum.Val = binary.LittleEndian.Uint64(data[off+8:])
		s.Check = binary.LittleEndian.Uint64(data[off+16:])
		off += fixedSymbolSize
		z, bad := readUvarint(data, &off)
		if bad != "" {
			return 0, nil, fmt.Errorf("%w: count of symbol %d at offset %d %s", ErrCorrupt, start+k, off, bad)
		}
		delta := int64(z>>1) ^ -int64(z&1)
		s.Count = predictCount(k, start+k, prev) + delta
		prev = s.Count
	}
	if off != len(data) {
		return 0, nil, fmt.Errorf("%w: %d trailing bytes at offset %d", ErrCorrupt, len(data)-off, off)
	}
	return start, syms, nil
}

// readUvarint reads the canonical unsigned varint at data[*off:] and advances
// *off past it. If there is none, it leaves *off alone and says what is wrong.
func readUvarint(data []byte, off *int) (v uint64, bad string) {
	v, n := binary.Uvarint(data[*off:])
	switch {
	case n == 0:
		return 0, "is truncated"
	case n < 0:
		return 0, "overflows 64 bits"
	case n > 1 && data[*off+n-1] == 0:
		// A final zero byte adds nothing: AppendUvarint never writes one.
		return 0, "is not minimally encoded"
	}
	*off += n
	return v, ""
}
