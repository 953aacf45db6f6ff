// Package rangedel holds range deletions (tombstones) and the operations the
// store's readers and compactions need on them: fragmenting overlapping
// tombstones into disjoint spans, and finding the newest one covering a key.
package rangedel

import (
	"bytes"
	"cmp"
	"slices"

	"github.com/bloomkv/bloomkv/internal/base"
)

// Tombstone deletes the user keys in [Start, End) written before SeqNum (with
// a lower sequence number).
type Tombstone struct {
	Start, End []byte
	SeqNum     base.SeqNum
}

// Covers reports whether t's span holds key.
func (t Tombstone) Covers(key []byte) bool {
	return bytes.Compare(t.Start, key) <= 0 && bytes.Compare(key, t.End) < 0
}

// Fragment splits possibly overlapping tombstones into fragments that either
// share a span exactly or do not overlap: every distinct [Start, End) span
// between boundaries, once for each sequence number covering it, sorted by
// Start and then by sequence number, newest first. The fragments alias the
// tombstones' keys.
func Fragment(ts []Tombstone) []Tombstone {
	if len(ts) == 0 {
		return nil
	}
	bounds := make([][]byte, 0, 2*len(ts))
	for _, t := range ts {
		bounds = append(bounds, t.Start, t.End)
	}
	slices.SortFunc(bounds, bytes.Compare)
	bounds = slices.CompactFunc(bounds, bytes.Equal)
	var out []Tombstone
	for _, t := range ts {
		i, _ := slices.BinarySearchFunc(bounds, t.Start, bytes.Compare)
		for ; i+1 < len(bounds) && bytes.Compare(bounds[i], t.End) < 0; i++ {
			out = append(out, Tombstone{Start: bounds[i], End: bounds[i+1], SeqNum: t.SeqNum})
		}
	}
	slices.SortFunc(out, func(a, b Tombstone) int {
		if c := bytes.Compare(a.Start, b.Start); c != 0 {
			return c
		}
		return cmp.Compare(b.SeqNum, a.SeqNum)
	})
	return slices.CompactFunc(out, func(a, b Tombstone) bool {
		return a.SeqNum == b.SeqNum && bytes.Equal(a.Start, b.Start)
	})
}

// Cover returns the highest sequence number below readSeq of the fragments
// covering key, or 0 when none does. frags must be fragmented (Fragment's
// order).
func Cover(frags []Tombstone, key []byte, readSeq base.SeqNum) base.SeqNum {
	if len(frags) == 0 {
		return 0
	}
	// The last fragment starting at or before key; its span is shared by
	// the run of fragments with the same start, newest first.
	i, found := slices.BinarySearchFunc(frags, key, func(t Tombstone, k []byte) int {
		return bytes.Compare(t.Start, k)
	})
	if !found {
		if i == 0 {
			return 0
		}
		i--
		start := frags[i].Start
		for i > 0 && bytes.Equal(frags[i-1].Start, start) {
			i--
		}
	}
	if bytes.Compare(key, frags[i].End) >= 0 {
		return 0
	}
	for j := i; j < len(frags) && bytes.Equal(frags[j].Start, frags[i].Start); j++ {
		if frags[j].SeqNum < readSeq {
			return frags[j].SeqNum
		}
	}
	return 0
}

// Clip returns the parts of frags inside [lo, hi), with hi nil meaning no
// upper limit and lo nil no lower limit.
func Clip(frags []Tombstone, lo, hi []byte) []Tombstone {
	var out []Tombstone
	for _, t := range frags {
		if lo != nil && bytes.Compare(t.End, lo) <= 0 {
			continue
		}
		if hi != nil && bytes.Compare(t.Start, hi) >= 0 {
			continue
		}
		if lo != nil && bytes.Compare(t.Start, lo) < 0 {
			t.Start = lo
		}
		if hi != nil && bytes.Compare(t.End, hi) > 0 {
			t.End = hi
		}
		out = append(out, t)
	}
	return out
}
