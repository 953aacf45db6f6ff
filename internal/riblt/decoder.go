package riblt

import (
	"fmt"
	"slices"
)

// DefaultLimit is the number of coded symbols a new Decoder accepts before
// AddCodedSymbol fails with ErrLimit. It suffices for differences of about
// 700,000 items. Besides 32 bytes per local item, a decoder holds up to 96
// bytes per symbol it has consumed.
const DefaultLimit = 1 << 20

// Decoder recovers the difference between a set it holds (the local items) and
// the set a remote Encoder encodes, from that encoder's symbols.
type Decoder struct {
	// local encodes the local items, to be subtracted from each symbol that
	// arrives.
	local Encoder
	// cs holds the residual of every symbol received so far: the remote symbol
	// minus the local items and minus the items decoded so far. Remote-only
	// items count +1 in a residual, local-only items -1.
	cs []CodedSymbol
	// nonEmpty is how many residuals in cs are not empty. The difference is
	// decoded when none is.
	nonEmpty int
	// pending holds indices of residuals whose count is ±1 since they last
	// changed: candidates for peeling. It may hold stale or repeated indices;
	// each is checked again when taken.
	pending []uint32
	// window is a min-heap, on next index, of the decoded items, to be peeled
	// off the symbols still to come.
	window []decodedEntry
	// remote and localOnly are the decoded items.
	remote, localOnly []Item
	// late records that AddLocal was called after symbols arrived. An item
	// may then have been decoded as remote before it was added locally, and
	// be decoded again as local afterwards: it is in both lists and in
	// neither set difference.
	late  bool
	limit int
}

// decodedEntry is a decoded item and the count it has in the residuals: +1
// for a remote item, -1 for a local one.
type decodedEntry struct {
	entry
	count int64
}

// NewDecoder returns a Decoder with no local items, seed 0 and DefaultLimit.
func NewDecoder() *Decoder {
	return NewSeededDecoder(0)
}

// NewSeededDecoder returns a Decoder with no local items and DefaultLimit for
// the symbols of an encoder made with NewSeededEncoder(seed).
func NewSeededDecoder(seed uint64) *Decoder {
	return &Decoder{local: Encoder{seed: seed}, limit: DefaultLimit}
}

// SetLimit sets how many coded symbols the decoder accepts in all, clamped to
// [1, MaxSymbols]. Decoding a difference of d items took 1.4·d symbols on
// average and at most 1.6·d in 300 trials at d = 300; for d from 2 to 20 it
// took 1.6–1.8·d on average in 2,000 trials each, but as many as 22 symbols
// at d = 2 and 77 at d = 20. A limit of 2·d + 100 leaves room to spare.
func (d *Decoder) SetLimit(n int) {
	d.limit = min(max(n, 1), MaxSymbols)
}

// AddLocal adds x to the local set. It is best called before the first
// AddCodedSymbol, but is correct at any time: an item already decoded as
// remote then leaves Remote, as the difference no longer holds it.
func (d *Decoder) AddLocal(x Item) {
	// The local encoder covers the symbols still to come. The residuals already
	// received were computed without x: relative to the new local set they
	// hold x as if it were a remote item, counting +1, and must lose it.
	d.local.Add(x)
	if len(d.cs) > 0 {
		d.late = true
		en := newEntry(x, itemHash(x, d.local.seed))
		d.walk(&en, 1)
		d.peel()
	}
}

// AddCodedSymbol consumes the next coded symbol of the remote stream: the
// first call takes symbol 0, the next symbol 1, and so on. It decodes as much
// of the difference as the symbols so far allow. It fails, wrapping ErrLimit,
// once the decoder has consumed as many symbols as its limit allows; the
// symbol is then ignored.
//
// A corrupted symbol does not make the decoder report a wrong difference
// (short of a 64-bit checksum coincidence): the corruption stays in a residual
// that never becomes empty, so Decoded stays false until the limit is reached.
func (d *Decoder) AddCodedSymbol(c CodedSymbol) error {
	i := len(d.cs)
	if i >= d.limit {
		return fmt.Errorf("%w: symbol %d is past the limit of %d", ErrLimit, i, d.limit)
	}
	l := d.local.symbol(i)
	c.mix(l.Sum, l.Check, -l.Count)
	// Peel the items already decoded that map here.
	for len(d.window) > 0 && int(d.window[0].next) == i {
		en := &d.window[0]
		c.mix(en.item, en.check, -en.count)
		en.advance()
		d.fixWindowTop()
	}
	d.cs = append(d.cs, c)
	if !c.empty() {
		d.nonEmpty++
	}
	if c.Count == 1 || c.Count == -1 {
		d.pending = append(d.pending, uint32(i))
	}
	d.peel()
	return nil
}

// Decoded reports whether the symbols consumed so far determine the whole
// difference: at least one has been consumed and none is left unexplained.
func (d *Decoder) Decoded() bool {
	return len(d.cs) > 0 && d.nonEmpty == 0
}

// Received returns how many coded symbols the decoder has consumed, which is
// the index of the symbol it expects next.
func (d *Decoder) Received() int {
	return len(d.cs)
}

// Remote returns the items decoded so far that only the remote set holds, in
// the order they were decoded. The list is complete once Decoded reports true.
func (d *Decoder) Remote() []Item {
	if d.late {
		return without(d.remote, d.localOnly)
	}
	return slices.Clone(d.remote)
}

// Local returns the items decoded so far that only the local set holds, in the
// order they were decoded. The list is complete once Decoded reports true.
func (d *Decoder) Local() []Item {
	if d.late {
		return without(d.localOnly, d.remote)
	}
	return slices.Clone(d.localOnly)
}

// without returns the items of xs that are not in ys.
func without(xs, ys []Item) []Item {
	drop := make(map[Item]bool, len(ys))
	for _, y := range ys {
		drop[y] = true
	}
	var out []Item
	for _, x := range xs {
		if !drop[x] {
			out = append(out, x)
		}
	}
	return out
}

// peel decodes every residual that holds a single item, and the ones that
// removing those items leaves holding a single item, and so on.
func (d *Decoder) peel() {
	for len(d.pending) > 0 {
		j := d.pending[len(d.pending)-1]
		d.pending = d.pending[:len(d.pending)-1]
		s := d.cs[j]
		if s.Count != 1 && s.Count != -1 {
			continue
		}
		// A residual holding several items has count ±1 as often as not; the
		// checksum is what says it holds exactly one.
		if itemHash(s.Sum, d.local.seed) != s.Check {
			continue
		}
		if s.Count == 1 {
			d.remote = append(d.remote, s.Sum)
		} else {
			d.localOnly = append(d.localOnly, s.Sum)
		}
		en := newEntry(s.Sum, s.Check)
		d.walk(&en, s.Count)
		if en.next != noIndex {
			d.pushWindow(decodedEntry{en, s.Count})
		}
	}
}

// walk removes en's item, which counts count in the residuals it maps to, from
// every residual received so far, and leaves en at its first index not yet
// received.
func (d *Decoder) walk(en *entry, count int64) {
	n := uint32(len(d.cs))
	for en.next < n {
		s := &d.cs[en.next]
		if !s.empty() {
			d.nonEmpty--
		}
		s.mix(en.item, en.check, -count)
		if !s.empty() {
			d.nonEmpty++
		}
		if s.Count == 1 || s.Count == -1 {
			d.pending = append(d.pending, en.next)
		}
		en.advance()
	}
}

// pushWindow adds en to the window heap.
func (d *Decoder) pushWindow(en decodedEntry) {
	d.window = append(d.window, en)
	h := d.window
	k := len(h) - 1
	for k > 0 {
		p := (k - 1) / 2
		if h[p].next <= h[k].next {
			break
		}
		h[p], h[k] = h[k], h[p]
		k = p
	}
}

// fixWindowTop restores the heap after the top entry's next index grew,
// dropping the entry if its mapping has run out.
func (d *Decoder) fixWindowTop() {
	h := d.window
	if h[0].next == noIndex {
		last := len(h) - 1
		h[0] = h[last]
		h = h[:last]
		d.window = h
	}
	k := 0
	for {
		c := 2*k + 1
		if c >= len(h) {
			return
		}
		if c+1 < len(h) && h[c+1].next < h[c].next {
			c++
		}
		if h[k].next <= h[c].next {
			return
		}
		h[k], h[c] = h[c], h[k]
		k = c
	}
}
