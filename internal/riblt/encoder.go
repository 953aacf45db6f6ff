package riblt

// Encoder produces the coded symbols of a set, in order from index 0.
//
// Add every item before the first call to ProduceNext: the symbols already
// returned are copies and do not change when an item is added later.
type Encoder struct {
	seed uint64
	// added and removed hold one entry per item added or removed, in chunks
	// of chunkLen so that adding a million items never copies the ones
	// already added.
	added, removed [][]entry
	// syms holds symbols 0..len(syms)-1 computed over every entry; each entry's
	// next index is at least len(syms).
	syms []CodedSymbol
	// produced is how many symbols ProduceNext has returned.
	produced int
}

// NewEncoder returns an empty Encoder with seed 0.
func NewEncoder() *Encoder {
	return NewSeededEncoder(0)
}

// NewSeededEncoder returns an empty Encoder whose checksums and mapping are
// keyed with seed. Its decoder must use the same seed.
func NewSeededEncoder(seed uint64) *Encoder {
	return &Encoder{seed: seed}
}

// Add adds x to the encoded set.
func (e *Encoder) Add(x Item) {
	e.add(x, +1)
}

// Remove removes x from the encoded set. It costs as much as Add, and removing
// an item that was never added leaves it in the set with a negative count,
// which the decoder reports as an item only the receiver has.
func (e *Encoder) Remove(x Item) {
	e.add(x, -1)
}

func (e *Encoder) add(x Item, count int64) {
	en := newEntry(x, itemHash(x, e.seed))
	// Keep the invariant that every entry is in all the computed symbols it
	// maps to.
	for int(en.next) < len(e.syms) {
		e.syms[en.next].mix(en.item, en.check, count)
		en.advance()
	}
	chunks := &e.added
	if count < 0 {
		chunks = &e.removed
	}
	if n := len(*chunks); n == 0 || len((*chunks)[n-1]) == chunkLen {
		// The first chunk grows as needed, so that a small set takes little
		// memory; once a set fills one, the next ones start full size.
		size := chunkLen
		if n == 0 {
			size = 0
		}
		*chunks = append(*chunks, make([]entry, 0, size))
	}
	last := &(*chunks)[len(*chunks)-1]
	*last = append(*last, en)
}

// chunkLen is the number of entries in a chunk: 256 KiB of them, which fit
// the L2 cache.
const chunkLen = 8192

// ProduceNext returns the next coded symbol: symbol 0 on the first call, then
// 1, 2 and so on. It panics after MaxSymbols symbols.
func (e *Encoder) ProduceNext() CodedSymbol {
	s := e.symbol(e.produced)
	e.produced++
	return s
}

// symbol returns symbol i, computing it if need be.
func (e *Encoder) symbol(i int) CodedSymbol {
	if i >= len(e.syms) {
		e.extend(i + 1)
	}
	return e.syms[i]
}

// extend computes symbols up to at least index want-1.
//
// Symbols are computed a block at a time: a pass over the entries adds each to
// the symbols of the block it maps to and leaves it at its first index past
// the block. The block ends at least twice as far as the previous one, so
// producing m symbols takes about log2(m) passes over the entries plus one
// step per (item, index) pair, about n·2·ln(m) steps for n items. Unlike a
// priority queue of the items' next indices (an O(log n) operation per step,
// on a heap too large for the cache), this reads the entries in order and
// writes into a block of symbols that stays in cache for the streams a
// difference of thousands of items needs (32 KiB at 1,024 symbols). The cost is
// that up to twice the symbols asked for are computed: the extra half costs
// about n·2·ln 2 steps, a tenth of the whole.
//
// Within a pass, a chunk of entries (small enough for the L2 cache) is done
// in rounds: each round takes one step along the mapping of every entry that
// still has an index in the block, and keeps those that still do for the next
// round. Following one entry's mapping to the end of the block instead would
// chain dependent square roots and divisions one after the other and end in a
// mispredicted branch for each entry; steps of different entries are
// independent, so the processor overlaps them, and the bookkeeping is
// branch-free. That makes a pass about twice as fast.
func (e *Encoder) extend(want int) {
	if want > MaxSymbols {
		panic("riblt: more than MaxSymbols coded symbols")
	}
	lo := len(e.syms)
	hi := min(max(want, 2*lo, 1), MaxSymbols)
	e.syms = append(e.syms, make([]CodedSymbol, hi-lo)...)
	syms := e.syms[:hi]
	var work [chunkLen]uint16
	for _, chunk := range e.added {
		extendChunk(chunk, syms, 1, &work)
	}
	for _, chunk := range e.removed {
		extendChunk(chunk, syms, -1, &work)
	}
}

// extendChunk adds the entries of chunk, which count count, to the symbols of
// syms they map to, in rounds as extend describes. work holds the positions in
// chunk of the entries still to step.
func extendChunk(chunk []entry, syms []CodedSymbol, count int64, work *[chunkLen]uint16) {
	end := uint32(len(syms))
	n := 0
	for k := range chunk {
		work[n] = uint16(k)
		n += b2i(chunk[k].next < end)
	}
	for n > 0 {
		// Compacting work in place is safe: an entry is written back
		// no further along than where it was read.
		m := 0
		for _, k := range work[:n] {
			en := &chunk[k]
			syms[en.next].mix(en.item, en.check, count)
			en.advance()
			work[m] = k
			m += b2i(en.next < end)
		}
		n = m
	}
}

// b2i is 1 for true and 0 for false; the compiler makes it a flag set, not a
// branch.
func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
