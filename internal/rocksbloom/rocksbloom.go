// Package rocksbloom reads the whole-table Bloom filter that Pebble, RocksDB
// (format versions below 5) and LevelDB-format tables written by Pebble store
// under "fullfilter.rocksdb.BuiltinBloomFilter", so that bloomkv's tools can
// check and measure other engines' filters next to its own.
//
// The filter is numLines cache lines of bits, then one byte k (probes per
// key) and numLines as a uint32 LE. A key's 32-bit hash h (LevelDB's
// Murmur-like hash, tail bytes sign-extended as RocksDB does) picks line
// h mod numLines; probe j tests bit (h + j·δ) mod lineBits of that line,
// with δ = h rotated right by 17 bits (additions modulo 2^32). Probes may
// repeat a bit.
package rocksbloom

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"

	"github.com/bloomkv/bloomkv/internal/base"
)

// PolicyName is the name of the filter policy, as tables store it.
const PolicyName = "rocksdb.BuiltinBloomFilter"

// trailerLen is the probe-count byte and the line count.
const trailerLen = 5

// Filter is a decoded filter. It refers to the bytes it was decoded from.
type Filter struct {
	bits      []byte
	lines     uint32
	lineBytes uint32
	probes    int
}

// ErrUnsupported is wrapped by the error Decode returns for a filter of a
// newer RocksDB format (format_version 5 and up: FastLocalBloom, Ribbon),
// which shares the policy name but not this layout.
var ErrUnsupported = errors.New("rocksbloom: a newer RocksDB filter format")

// Decode parses a filter block. It returns an error wrapping
// base.ErrCorruption for a block that cannot be such a filter, or one
// wrapping ErrUnsupported for a newer format's; it never panics. A block of
// at most the trailer's five bytes (Pebble writes an empty block for a table
// without point keys) or of no lines is an empty filter that answers "no".
func Decode(data []byte) (Filter, error) {
	if len(data) <= trailerLen {
		return Filter{}, nil
	}
	n := len(data) - trailerLen
	f := Filter{bits: data[:n:n], probes: int(data[n]), lines: binary.LittleEndian.Uint32(data[n+1:])}
	if data[n] >= 0x80 {
		// Newer formats mark their 5-byte trailer with a negative first
		// byte (-1: FastLocalBloom and friends, -2: Ribbon).
		return Filter{}, fmt.Errorf("%w (trailer marker %#x)", ErrUnsupported, data[n])
	}
	if f.lines == 0 {
		return Filter{}, base.CorruptionErrorf("rocksbloom: filter states no lines but holds %d bytes of bits", n)
	}
	if uint64(n)%uint64(f.lines) != 0 {
		return Filter{}, base.CorruptionErrorf("rocksbloom: %d bytes of bits do not divide into %d lines", n, f.lines)
	}
	f.lineBytes = uint32(uint64(n) / uint64(f.lines))
	if f.probes < 1 {
		return Filter{}, base.CorruptionErrorf("rocksbloom: filter states %d probes per key", f.probes)
	}
	return f, nil
}

// Hash returns the 32-bit hash the filter derives a key's bits from.
func Hash(key []byte) uint32 {
	const seed, m = 0xbc9f1d34, 0xc6a4a793
	h := uint32(seed) ^ uint32(len(key))*m
	for ; len(key) >= 4; key = key[4:] {
		h += binary.LittleEndian.Uint32(key)
		h *= m
		h ^= h >> 16
	}
	if len(key) == 0 {
		return h
	}
	// The last one to three bytes, each read as a signed char (RocksDB).
	for i := len(key) - 1; i >= 0; i-- {
		h += uint32(int32(int8(key[i]))) << (8 * i)
	}
	h *= m
	h ^= h >> 24
	return h
}

// MayContain reports whether key may be in the table: false is certain.
func (f *Filter) MayContain(key []byte) bool {
	if f.lines == 0 {
		return false
	}
	h := Hash(key)
	lineBits := f.lineBytes * 8
	delta := bits.RotateLeft32(h, -17)
	line := (h % f.lines) * lineBits
	for range f.probes {
		pos := line + h%lineBits
		if f.bits[pos/8]&(1<<(pos%8)) == 0 {
			return false
		}
		h += delta
	}
	return true
}

// Lines returns the number of lines.
func (f *Filter) Lines() int { return int(f.lines) }

// LineBits returns the size of a line in bits (512 in the tables Pebble and
// RocksDB write).
func (f *Filter) LineBits() int { return int(f.lineBytes) * 8 }

// Probes returns k, the number of probes per key.
func (f *Filter) Probes() int { return f.probes }

// BitsSet returns the number of bits set.
func (f *Filter) BitsSet() uint64 {
	var n uint64
	b := f.bits
	for ; len(b) >= 8; b = b[8:] {
		n += uint64(bits.OnesCount64(binary.LittleEndian.Uint64(b)))
	}
	for _, c := range b {
		n += uint64(bits.OnesCount8(c))
	}
	return n
}

// EstimateKeys estimates how many distinct keys were added, line by line,
// from the bits each has set: a line that x keys hit has each bit clear with
// probability (1-1/L)^(k·x), so x ≈ ln(1 - set/L) / (k · ln(1 - 1/L)).
// A line with every bit set counts as if one bit were clear.
func (f *Filter) EstimateKeys() float64 {
	if f.lines == 0 {
		return 0
	}
	lineBits := float64(f.lineBytes * 8)
	per := float64(f.probes) * math.Log1p(-1/lineBits)
	var total float64
	for l := uint32(0); l < f.lines; l++ {
		line := f.bits[l*f.lineBytes : (l+1)*f.lineBytes]
		set := 0
		for _, c := range line {
			set += bits.OnesCount8(c)
		}
		total += math.Log1p(-min(float64(set), lineBits-1)/lineBits) / per
	}
	return total
}
