package difffile

import (
	"fmt"
	"math"
	"math/bits"
	"sync/atomic"
	"unsafe"

	"github.com/bloomkv/bloomkv/filterblock"
)

const (
	// LineBytes is the size of one line of counters: one CPU cache line.
	LineBytes = 64
	// CountersPerLine is the number of 4-bit counters in a line.
	CountersPerLine = LineBytes * 2

	// CounterMax is the value at which a counter saturates. A saturated
	// counter is never decremented again.
	CounterMax = 15

	// DefaultCountersPerKey is the density New uses when asked for 0: 8
	// counters (4 bytes) a key, so that a filter rebuilt at twice its
	// capacity when it fills still costs at most 8 bytes a key. At design
	// capacity it answers "maybe" for 2.74% of absent keys (k = 5).
	DefaultCountersPerKey = 8
	// MinCountersPerKey and MaxCountersPerKey bound the density New accepts.
	MinCountersPerKey = 1
	MaxCountersPerKey = 32

	// maxProbes bounds k in an encoded filter; the k table never exceeds 10.
	maxProbes = 24

	// growthFactor is how far above its design rate NeedsGrowth lets the
	// expected false-positive rate climb.
	growthFactor = 1.5

	wordsPerLine    = LineBytes / 8
	countersPerWord = 16

	// maxLines bounds the line count: the line choice needs it below 2^32, and the
	// words must be addressable by an int on 32-bit platforms.
	maxLines = min(math.MaxUint32, math.MaxInt/LineBytes-1)

	// probeMultiplier is the odd 32-bit golden-ratio constant.
	probeMultiplier = 0x9e3779b9

	// nibbleLows has the low bit of every 4-bit counter of a word set.
	nibbleLows = 0x1111111111111111
)

// Filter is a blocked counting Bloom filter of 4-bit counters. The zero value
// is not usable; call New or Decode. A Filter is safe for concurrent use by
// any number of goroutines calling any of its methods, and must not be copied.
type Filter struct {
	words []uint64 // lines*wordsPerLine words, 64-byte aligned; line l is words[l*8 : l*8+8]
	lines uint64
	k     uint8

	countersPerKey uint8
	capacity       int
	growthLoad     float64 // the load at which NeedsGrowth turns true

	count     atomic.Int64
	saturated atomic.Uint64
}

// New returns an empty filter designed to hold capacity keys at
// countersPerKey 4-bit counters a key (DefaultCountersPerKey when 0), with the
// k that minimises the false-positive rate at that density. It returns an
// error for a negative capacity, a density outside
// MinCountersPerKey..MaxCountersPerKey, or a filter too large to address.
//
// To grow a filter, make a larger one with New(newCapacity,
// f.CountersPerKey()) and add the keys of the set to it.
func New(capacity, countersPerKey int) (*Filter, error) {
	if countersPerKey == 0 {
		countersPerKey = DefaultCountersPerKey
	}
	if countersPerKey < MinCountersPerKey || countersPerKey > MaxCountersPerKey {
		return nil, fmt.Errorf("difffile: counters per key %d out of range [%d, %d]", countersPerKey, MinCountersPerKey, MaxCountersPerKey)
	}
	if capacity < 0 {
		return nil, fmt.Errorf("difffile: negative capacity %d", capacity)
	}
	lines, ok := linesFor(uint64(capacity), countersPerKey)
	if !ok {
		return nil, fmt.Errorf("difffile: capacity %d at %d counters per key needs more than %d lines", capacity, countersPerKey, uint64(maxLines))
	}
	return newFilter(lines, probesForCountersPerKey[countersPerKey], uint8(countersPerKey), capacity), nil
}

// linesFor returns the line count of a filter of capacity keys at
// countersPerKey: ⌈capacity·countersPerKey/128⌉, at least one line. It
// reports false when that exceeds maxLines or capacity exceeds an int.
func linesFor(capacity uint64, countersPerKey int) (uint64, bool) {
	if capacity > maxLines*CountersPerLine || capacity > math.MaxInt {
		return 0, false
	}
	lines := max(1, (capacity*uint64(countersPerKey)+CountersPerLine-1)/CountersPerLine)
	return lines, lines <= maxLines
}

func newFilter(lines uint64, k, countersPerKey uint8, capacity int) *Filter {
	f := &Filter{
		words:          alignedWords(int(lines) * wordsPerLine),
		lines:          lines,
		k:              k,
		countersPerKey: countersPerKey,
		capacity:       capacity,
	}
	f.growthLoad = f.findGrowthLoad()
	return f
}

// alignedWords returns n zero words, the first of them 64-byte aligned so
// that each line is one cache line.
func alignedWords(n int) []uint64 {
	buf := make([]uint64, n+wordsPerLine-1)
	off := 0
	if r := uintptr(unsafe.Pointer(&buf[0])) % LineBytes; r != 0 {
		off = int(LineBytes-r) / 8
	}
	return buf[off : off+n : off+n]
}

// line returns the line of a key's counters: multiply-shift of the high half
// of its hash, as filterblock picks a line.
func (f *Filter) line(h uint64) *[wordsPerLine]uint64 {
	i := ((h >> 32) * f.lines) >> 32
	return (*[wordsPerLine]uint64)(f.words[i*wordsPerLine:])
}

// probeSeq yields a key's k distinct counters within its line, from the low
// half p of its hash: the j-th candidate is the top 7 bits of p·c^j (mod
// 2^32), c = probeMultiplier, and a candidate the key has already taken moves
// to the next counter (cyclically) it has not, as filterblock's probe bits do
// within a 512-bit line.
type probeSeq struct {
	p    uint32
	seen [CountersPerLine / 64]uint64
}

func (s *probeSeq) next() uint32 {
	s.p *= probeMultiplier
	c := s.p >> (32 - 7)
	for s.seen[c>>6]&(1<<(c&63)) != 0 {
		c = (c + 1) & (CountersPerLine - 1)
	}
	s.seen[c>>6] |= 1 << (c & 63)
	return c
}

// masks returns, for each word of the key's line, the low bits of the
// counters the key takes in it.
func (f *Filter) masks(h uint64) (m [wordsPerLine]uint64) {
	s := probeSeq{p: uint32(h)}
	for j := f.k; j > 0; j-- {
		c := s.next()
		m[c/countersPerWord] |= 1 << (4 * (c % countersPerWord))
	}
	return m
}

// fullCounters returns the low bit of every counter of w that is saturated.
func fullCounters(w uint64) uint64 {
	return w & (w >> 1) & (w >> 2) & (w >> 3) & nibbleLows
}

// zeroCounters returns the low bit of every counter of w that is zero.
func zeroCounters(w uint64) uint64 {
	return ^(w | w>>1 | w>>2 | w>>3) & nibbleLows
}

// increment adds one to each counter of *w in m that is not saturated, and
// returns how many counters it saturated.
func increment(w *uint64, m uint64) int {
	for {
		old := atomic.LoadUint64(w)
		inc := m &^ fullCounters(old)
		if inc == 0 {
			return 0
		}
		// Every counter in inc is below CounterMax: no carry crosses counters.
		if nw := old + inc; atomic.CompareAndSwapUint64(w, old, nw) {
			return bits.OnesCount64(fullCounters(nw) & inc)
		}
	}
}

// decrement takes one from each counter of *w in m that is not saturated, and
// returns the counters it decremented. It changes nothing and reports false
// when a counter in m is zero.
func decrement(w *uint64, m uint64) (uint64, bool) {
	for {
		old := atomic.LoadUint64(w)
		if zeroCounters(old)&m != 0 {
			return 0, false
		}
		// Every counter in dec is at least one: no borrow crosses counters.
		dec := m &^ fullCounters(old)
		if dec == 0 || atomic.CompareAndSwapUint64(w, old, old-dec) {
			return dec, true
		}
	}
}

// Add adds one occurrence of key. A key added n times takes n Removes to
// leave the filter (or stays for good once a counter saturates).
func (f *Filter) Add(key []byte) { f.AddHash(filterblock.Hash(key)) }

// AddHash is Add for a key given by its filterblock.Hash.
func (f *Filter) AddHash(h uint64) {
	line, m := f.line(h), f.masks(h)
	sat := 0
	for i, mi := range m {
		if mi != 0 {
			sat += increment(&line[i], mi)
		}
	}
	if sat > 0 {
		f.saturated.Add(uint64(sat))
	}
	f.count.Add(1)
}

// Remove takes out one occurrence of key and reports true, or reports false
// and changes nothing when the filter certainly does not hold key (a counter
// of key is zero, or Count is zero). Removing a key that was never added but
// passes MayContain is the caller's error: it can cause false negatives for
// other keys.
func (f *Filter) Remove(key []byte) bool { return f.RemoveHash(filterblock.Hash(key)) }

// RemoveHash is Remove for a key given by its filterblock.Hash.
func (f *Filter) RemoveHash(h uint64) bool {
	if f.count.Load() <= 0 {
		return false
	}
	line, m := f.line(h), f.masks(h)
	for i, mi := range m {
		if mi != 0 && zeroCounters(atomic.LoadUint64(&line[i]))&mi != 0 {
			return false
		}
	}
	if !f.decrementAll(line, &m) {
		return false
	}
	f.count.Add(-1)
	return true
}

// decrementAll decrements the counters of m in line, word by word. If a
// counter is zero by the time its word is reached (possible only when another
// goroutine removed a key that was not added), it restores the words already
// decremented and reports false.
func (f *Filter) decrementAll(line *[wordsPerLine]uint64, m *[wordsPerLine]uint64) bool {
	var done [wordsPerLine]uint64
	for i, mi := range m {
		if mi == 0 {
			continue
		}
		dec, ok := decrement(&line[i], mi)
		if !ok {
			sat := 0
			for j, dj := range done[:i] {
				if dj != 0 {
					sat += increment(&line[j], dj)
				}
			}
			if sat > 0 {
				f.saturated.Add(uint64(sat))
			}
			return false
		}
		done[i] = dec
	}
	return true
}

// MayContain reports whether key may have an occurrence in the filter. False
// is certain: a key added more often than removed always passes. True is
// wrong for an absent key with about ExpectedFPRate(Count()). It reads one
// cache line and does not allocate.
func (f *Filter) MayContain(key []byte) bool { return f.MayContainHash(filterblock.Hash(key)) }

// MayContainHash is MayContain for a key given by its filterblock.Hash, for
// callers that probe several filters with one key.
func (f *Filter) MayContainHash(h uint64) bool { return f.mayContainLine(f.line(h), h) }

// mayContainLine tests the counters of the key hashed to h in line, its line.
func (f *Filter) mayContainLine(line *[wordsPerLine]uint64, h uint64) bool {
	s := probeSeq{p: uint32(h)}
	for j := f.k; j > 0; j-- {
		c := s.next()
		if atomic.LoadUint64(&line[c/countersPerWord])>>(4*(c%countersPerWord))&0xf == 0 {
			return false
		}
	}
	return true
}

// probeGroup is how many keys MayContainHashes loads lines for before it
// tests any: the loads are independent of each other, so their cache misses
// overlap.
const probeGroup = 16

// MayContainHashes sets may[i] to MayContainHash(hs[i]) for every i (may is
// at least as long as hs) and returns how many answered true. It reads the
// first counter of each of a group of keys before testing any of them, so
// that the group's cache misses are in flight together. It does not
// allocate.
func (f *Filter) MayContainHashes(hs []uint64, may []bool) int {
	may = may[:len(hs)]
	n := 0
	var lines [probeGroup]*[wordsPerLine]uint64
	var first [probeGroup]uint64
	for len(hs) > 0 {
		g := min(len(hs), probeGroup)
		// Load: each key's line, and the counter of its first probe.
		for j, h := range hs[:g] {
			line := f.line(h)
			c := (uint32(h) * probeMultiplier) >> (32 - 7) // probeSeq's first
			lines[j] = line
			first[j] = atomic.LoadUint64(&line[c/countersPerWord]) >> (4 * (c % countersPerWord)) & 0xf
		}
		// Test, the lines now in cache.
		for j, h := range hs[:g] {
			ok := first[j] != 0 && f.mayContainLine(lines[j], h)
			may[j] = ok
			if ok {
				n++
			}
		}
		hs, may = hs[g:], may[g:]
	}
	return n
}

// Count returns the number of Adds minus the number of Removes that reported
// true. It is exact; while every Remove is of an added key it is the number
// of occurrences the filter holds.
func (f *Filter) Count() int64 { return f.count.Load() }

// EstimateCount estimates Count from the counters: their sum divided by k.
// It equals Count while no counter has saturated (and no Remove raced with
// another), and falls below it once counters saturate.
func (f *Filter) EstimateCount() float64 {
	var sum uint64
	for i := range f.words {
		w := atomic.LoadUint64(&f.words[i])
		// Add counter pairs into bytes (at most 30 each), then the bytes.
		b := w&0x0f0f0f0f0f0f0f0f + w>>4&0x0f0f0f0f0f0f0f0f
		sum += (b * 0x0101010101010101) >> 56
	}
	return float64(sum) / float64(f.k)
}

// Saturated returns how many counters have reached CounterMax. They stay
// there, so their keys can never be removed completely; a filter with many
// saturated counters answers "maybe" more often and should be rebuilt.
func (f *Filter) Saturated() uint64 { return f.saturated.Load() }

// Capacity returns the number of keys the filter was designed for.
func (f *Filter) Capacity() int { return f.capacity }

// CountersPerKey returns the density the filter was designed at: counters
// per key at Capacity keys (before rounding up to whole lines).
func (f *Filter) CountersPerKey() int { return int(f.countersPerKey) }

// K returns the number of counters each key takes, all in one line.
func (f *Filter) K() int { return int(f.k) }

// Lines returns the number of 64-byte lines.
func (f *Filter) Lines() int { return int(f.lines) }

// SizeBytes returns the memory the counters take: Lines()·LineBytes.
func (f *Filter) SizeBytes() int { return int(f.lines) * LineBytes }

// NeedsGrowth reports whether the filter should be rebuilt larger: whether
// its load is one at which ExpectedFPRate exceeds 1.5 times DesignFPRate. The
// load is Count plus the saturated counters weighed as keys: a saturated
// counter stays in use after its keys are removed, and s of them occupy as
// much of the filter as the keys that would leave s counters in use, about
// Lines·ln(1-s/(128·Lines))/ln(1-k/128) (more than s/k, as keys share
// counters). Count counts occurrences rather than distinct keys, and a
// present key's saturated counters count twice, so the test errs towards
// growing early. Rebuilt at twice its capacity from the set's keys (which
// also clears saturation), a filter that outgrew its capacity costs under
// CountersPerKey bytes a key: 8 at the default density.
func (f *Filter) NeedsGrowth() bool {
	return f.load() > f.growthLoad
}

// load returns Count plus the number of keys that would keep as many
// counters in use as are saturated.
func (f *Filter) load() float64 {
	inUse := float64(f.saturated.Load()) / float64(CountersPerLine*f.lines)
	pinned := float64(f.lines) * math.Log1p(-inUse) / math.Log1p(-float64(f.k)/CountersPerLine)
	return float64(f.count.Load()) + pinned
}
