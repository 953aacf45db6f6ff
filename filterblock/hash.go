package filterblock

import (
	"encoding/binary"
	"math/bits"

	"github.com/zeebo/xxh3"
)

// Hash version 1, which every filter in this package shares:
//
//   - a key's hash is XXH3-64 of its bytes with seed 0;
//   - a blocked filter picks line ((h>>32) * numLines) >> 32 (multiply-shift:
//     no division, any number of lines), and sets or tests k distinct bits of
//     it: the j-th candidate is the top 9 bits of p·c^j (mod 2^32), where p
//     is the low 32 bits of h and c = probeMultiplier, and a candidate equal
//     to an earlier bit of the same key moves to the next bit (cyclically)
//     the key has not taken (nextProbe);
//   - a standard or counting filter of m cells uses positions
//     (h + i·d) mod m for i < k, where d is h rotated by 32 bits, forced odd
//     (double hashing after Kirsch and Mitzenmacher).
//
// These definitions are part of the on-disk and wire formats: changing them
// needs a new hash version.

// probeMultiplier is the odd 32-bit golden-ratio constant.
const probeMultiplier = 0x9e3779b9

// Hash returns the 64-bit hash that every filter of this package derives its
// bits from. Callers that probe several filters with one key hash it once.
func Hash(key []byte) uint64 {
	return xxh3.Hash(key)
}

// nextProbe returns the next of a key's k distinct probe bits within a
// 512-bit line and the next probe state. p starts as the low 32 bits of the
// key's hash, seen as zero; seen records the bits the key has taken. The
// candidate is the top 9 bits of p·c; one the key has already taken is
// replaced by the next bit (cyclically) it has not, which ends within k steps.
// Distinct bits lower the false-positive rate below that of k independent
// draws (at 10 bits/key, 0.955% against 0.966% at the best k).
func nextProbe(p uint32, seen *[lineBits / 64]uint64) (bit, nextP uint32) {
	p *= probeMultiplier
	bit = p >> (32 - 9)
	for seen[bit>>6&7]&(1<<(bit&63)) != 0 {
		bit = (bit + 1) & (lineBits - 1)
	}
	seen[bit>>6&7] |= 1 << (bit & 63)
	return bit, p
}

// lineIndex maps h to a line in [0, numLines) by multiply-shift of its high
// 32 bits; numLines must be below 2^32.
func lineIndex(h, numLines uint64) uint64 {
	return ((h >> 32) * numLines) >> 32
}

// doubleHashStep returns the step d of the double-hashing sequence h + i·d.
func doubleHashStep(h uint64) uint64 {
	return bits.RotateLeft64(h, 32) | 1
}

// popcountBytes counts the set bits of b.
func popcountBytes(b []byte) uint64 {
	var n int
	for len(b) >= 8 {
		n += bits.OnesCount64(binary.LittleEndian.Uint64(b))
		b = b[8:]
	}
	for _, c := range b {
		n += bits.OnesCount8(c)
	}
	return uint64(n)
}
