package filterblock

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
)

// MaxStandardProbes bounds k for standard and counting filters.
const MaxStandardProbes = 32

// ErrIncompatible is returned when two filters combined by Union, Intersect or
// EstimateIntersection differ in size or in k.
var ErrIncompatible = errors.New("filterblock: filters differ in size or probe count")

// Bloom is a standard Bloom filter of m bits and k probes per key over the
// package's Hash (see hash.go), the form that supports union, intersection,
// size estimates, halving and the compressed wire encoding. It is not safe for
// concurrent mutation.
type Bloom struct {
	words []uint64 // bit i is bit i%64 of words[i/64]; bits ≥ m are zero
	m     uint64
	k     int
}

// NewBloom returns an empty filter of m bits (m ≥ 1) and k probes
// (1 ≤ k ≤ MaxStandardProbes).
func NewBloom(m uint64, k int) (*Bloom, error) {
	if err := checkStandardParams(m, k); err != nil {
		return nil, err
	}
	return &Bloom{words: make([]uint64, (m+63)/64), m: m, k: k}, nil
}

// NewBloomForKeys returns an empty filter sized for n keys at bitsPerKey bits
// each, with the k that minimises the false-positive rate (ln 2 · bits/key).
func NewBloomForKeys(n int, bitsPerKey float64) (*Bloom, error) {
	if n < 1 || !(bitsPerKey > 0) || bitsPerKey > 64 {
		return nil, fmt.Errorf("filterblock: cannot size a filter for %d keys at %v bits/key", n, bitsPerKey)
	}
	m := uint64(math.Ceil(float64(n) * bitsPerKey))
	k := min(max(int(math.Round(bitsPerKey*math.Ln2)), 1), MaxStandardProbes)
	return NewBloom(m, k)
}

func checkStandardParams(m uint64, k int) error {
	if m < 1 || m > 1<<40 {
		return fmt.Errorf("filterblock: filter size %d bits out of range [1, 2^40]", m)
	}
	if k < 1 || k > MaxStandardProbes {
		return fmt.Errorf("filterblock: probe count %d out of range [1, %d]", k, MaxStandardProbes)
	}
	return nil
}

// M returns the number of bits.
func (b *Bloom) M() uint64 { return b.m }

// K returns the number of probes per key.
func (b *Bloom) K() int { return b.k }

// Add adds key.
func (b *Bloom) Add(key []byte) { b.AddHash(Hash(key)) }

// AddHash adds a key given by its Hash.
func (b *Bloom) AddHash(h uint64) {
	d := doubleHashStep(h)
	for i := 0; i < b.k; i++ {
		pos := b.reduce(h)
		b.words[pos>>6] |= 1 << (pos & 63)
		h += d
	}
}

// MayContain reports whether key may have been added. False is certain.
func (b *Bloom) MayContain(key []byte) bool { return b.MayContainHash(Hash(key)) }

// MayContainHash is MayContain for a key given by its Hash.
func (b *Bloom) MayContainHash(h uint64) bool {
	d := doubleHashStep(h)
	for i := 0; i < b.k; i++ {
		pos := b.reduce(h)
		if b.words[pos>>6]&(1<<(pos&63)) == 0 {
			return false
		}
		h += d
	}
	return true
}

// MayContainHashes sets may[i] to MayContainHash(hs[i]) for every i (may
// must be as long as hs). It tests every hash's first bit before any
// second one, so that the memory reads of a filter larger than the CPU's
// caches overlap instead of following one another: for a caller with many
// keys to probe at once, such as a scan against a filter.
func (b *Bloom) MayContainHashes(hs []uint64, may []bool) {
	may = may[:len(hs)]
	for i, h := range hs {
		pos := b.reduce(h)
		may[i] = b.words[pos>>6]&(1<<(pos&63)) != 0
	}
	for i, h := range hs {
		if !may[i] {
			continue
		}
		d := doubleHashStep(h)
		for j := 1; j < b.k; j++ {
			h += d
			if pos := b.reduce(h); b.words[pos>>6]&(1<<(pos&63)) == 0 {
				may[i] = false
				break
			}
		}
	}
}

// reduce maps a probe value to a bit position: x mod m, a mask when m is a
// power of two. Taking the value mod m (rather than by multiply-shift) is what
// makes Halve exact: (x mod m) mod m/2 = x mod m/2.
func (b *Bloom) reduce(x uint64) uint64 {
	if b.m&(b.m-1) == 0 {
		return x & (b.m - 1)
	}
	return x % b.m
}

// BitsSet returns the number of set bits.
func (b *Bloom) BitsSet() uint64 {
	var n int
	for _, w := range b.words {
		n += bits.OnesCount64(w)
	}
	return uint64(n)
}

// FillRatio returns the fraction of bits set.
func (b *Bloom) FillRatio() float64 { return float64(b.BitsSet()) / float64(b.m) }

// Clone returns a deep copy.
func (b *Bloom) Clone() *Bloom {
	return &Bloom{words: append([]uint64(nil), b.words...), m: b.m, k: b.k}
}

// Equal reports whether b and o have the same size, k and bits.
func (b *Bloom) Equal(o *Bloom) bool {
	if b.m != o.m || b.k != o.k {
		return false
	}
	for i, w := range b.words {
		if o.words[i] != w {
			return false
		}
	}
	return true
}

func (b *Bloom) compatible(o *Bloom) error {
	if b.m != o.m || b.k != o.k {
		return fmt.Errorf("%w: m=%d k=%d and m=%d k=%d", ErrIncompatible, b.m, b.k, o.m, o.k)
	}
	return nil
}

// Union makes b the filter of the union of its set and o's (bitwise OR): the
// result equals the filter built from the union. It returns an error wrapping
// ErrIncompatible, and leaves b unchanged, when the sizes or k differ.
func (b *Bloom) Union(o *Bloom) error {
	if err := b.compatible(o); err != nil {
		return err
	}
	for i, w := range o.words {
		b.words[i] |= w
	}
	return nil
}

// Intersect makes b the bitwise AND of b and o, a filter that answers "maybe"
// for every key of the intersection of their sets. Its false-positive rate is
// at most that of either input, but may exceed that of the filter built from
// the intersection. Errors as Union.
func (b *Bloom) Intersect(o *Bloom) error {
	if err := b.compatible(o); err != nil {
		return err
	}
	for i, w := range o.words {
		b.words[i] &= w
	}
	return nil
}

// EstimateCount estimates how many distinct keys were added from the number
// X of bits set: n ≈ -(m/k)·ln(1 - X/m) (Swamidass and Baldi). It returns
// +Inf for a filter with every bit set.
func (b *Bloom) EstimateCount() float64 {
	return estimateCount(b.BitsSet(), b.m, b.k)
}

func estimateCount(set, m uint64, k int) float64 {
	if set >= m {
		return math.Inf(1)
	}
	return -float64(m) / float64(k) * math.Log1p(-float64(set)/float64(m))
}

// EstimateIntersection estimates the number of keys two filters' sets have in
// common, as n(a) + n(b) - n(a OR b) with each n estimated from its bits set
// (Broder and Mitzenmacher §2.4). The result is clamped to [0, min(n(a),
// n(b))]; when a OR b has every bit set the union cannot be estimated and the
// result is min(n(a), n(b)), an upper bound (+Inf when a filter is itself
// full). It returns an error wrapping ErrIncompatible when the sizes or k
// differ.
func EstimateIntersection(a, b *Bloom) (float64, error) {
	if err := a.compatible(b); err != nil {
		return 0, err
	}
	var setA, setB, setU int
	for i, wa := range a.words {
		wb := b.words[i]
		setA += bits.OnesCount64(wa)
		setB += bits.OnesCount64(wb)
		setU += bits.OnesCount64(wa | wb)
	}
	na := estimateCount(uint64(setA), a.m, a.k)
	nb := estimateCount(uint64(setB), a.m, a.k)
	nu := estimateCount(uint64(setU), a.m, a.k)
	upper := min(na, nb)
	if math.IsInf(nu, 1) {
		return upper, nil
	}
	return min(max(na+nb-nu, 0), upper), nil
}

// Halve folds the filter to half its size by OR-ing its two halves, keeping
// every key it holds (survey §2.4). It needs m to be a power of two of at
// least 128 bits, and returns an error otherwise.
func (b *Bloom) Halve() error {
	if b.m&(b.m-1) != 0 || b.m < 128 {
		return fmt.Errorf("filterblock: cannot halve a filter of %d bits: the size must be a power of two of at least 128", b.m)
	}
	half := len(b.words) / 2
	for i := 0; i < half; i++ {
		b.words[i] |= b.words[half+i]
	}
	b.words = b.words[:half:half]
	b.m /= 2
	return nil
}

// FPRate returns the expected false-positive rate of a standard Bloom filter of
// m bits and k probes holding n keys: (1 - e^(-kn/m))^k.
func FPRate(m uint64, k int, n float64) float64 {
	return math.Pow(-math.Expm1(-float64(k)*n/float64(m)), float64(k))
}
