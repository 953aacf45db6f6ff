package base

import (
	"encoding/binary"
	"math/bits"
)

// KeyWindow returns the eight bytes of userKey from i on as a big-endian
// integer, padded with zeros past its end. Keys that share their first i
// bytes and whose windows differ sort as the windows do; equal windows say
// nothing.
func KeyWindow(userKey []byte, i int) uint64 {
	if rest := userKey[i:]; len(rest) >= 8 {
		return binary.BigEndian.Uint64(rest)
	}
	var b [8]byte
	copy(b[:], userKey[i:])
	return binary.BigEndian.Uint64(b[:])
}

// SearchWindows returns the first i in [lo, hi) with w[i] ≥ k, or hi, where
// w is sorted. It halves the range with no branch on the comparisons (the
// steps depend on the range's length alone): windows of random keys would
// mispredict every other branch, which costs more than a step.
func SearchWindows(w []uint64, lo, hi int, k uint64) int {
	n := hi - lo
	for n > 1 {
		half := n >> 1
		_, below := bits.Sub64(w[lo+half-1], k, 0) // 1 if below k
		lo += half & -int(below)
		n -= half
	}
	if n == 1 {
		_, below := bits.Sub64(w[lo], k, 0)
		lo += int(below)
	}
	return lo
}

// WindowRunEnd returns the end of the run of windows equal to k that begins
// at lo in w (sorted, w[lo] ≥ k unless lo is its end): the first i ≥ lo with
// w[i] ≠ k. Such runs are seldom longer than one, so it steps through eight
// before it searches.
func WindowRunEnd(w []uint64, lo int, k uint64) int {
	i := lo
	for i < len(w) && w[i] == k {
		if i-lo == 8 {
			if k == ^uint64(0) {
				return len(w)
			}
			return SearchWindows(w, i, len(w), k+1)
		}
		i++
	}
	return i
}
