// Package riblt is a rateless invertible Bloom lookup table (Yang, Gilad and
// Alizadeh, "Practical Rateless Set Reconciliation", SIGCOMM 2024) over
// fixed-size items. It lets a receiver learn the symmetric difference between
// its set and a sender's set from a stream of coded symbols whose length is
// proportional to the size d of the difference, not of the sets: on average
// about 1.4 symbols per differing item once d is in the hundreds or more (1.33
// to 1.38 at d = 1,000), and 1.6 to 1.8 for d from 2 to 20, where the number
// also varies more from one pair of sets to another.
//
// The sender adds its items to an Encoder and streams the symbols
// ProduceNext returns, in order, from index 0. The receiver adds its own items
// to a Decoder with AddLocal and feeds it the symbols with AddCodedSymbol until
// Decoded reports true; Remote then holds the items only the sender has and
// Local those only the receiver has. Neither side needs to know d in advance:
// the sender keeps producing symbols until the receiver says stop.
//
// Coded symbol i is the XOR of the items mapped to it, the XOR of their
// checksums and their count. Every item is mapped to symbol 0 and then to an
// increasing pseudo-random sequence of indices drawn from its checksum, in
// which index i appears with probability 2/(i+2). Early symbols thus mix many
// items and later ones few, which is what makes any prefix of the stream
// decodable by peeling once it is a small multiple of d long: the receiver
// subtracts its own items, leaving symbols that hold only the difference, and
// repeatedly takes a symbol holding a single item (count ±1 and a checksum
// that matches the hash of its sum), records the item and removes it from
// every other symbol it is mapped to.
//
// Both sides must use the same seed (NewSeededEncoder, NewSeededDecoder): it
// keys the checksum and therefore the mapping, so a party that does not know
// it cannot choose items that collide. Items in a set must be distinct.
//
// The 64-bit checksum is what stands between a symbol holding several items
// and a wrongly decoded item: the chance that a given symbol passes for one
// holding a single item it does not hold is 2^-64. The stream itself carries
// no checksum: a symbol altered in transit leaves a residual the decoder can
// never explain, so it does not report a wrong difference but never finishes,
// failing at its symbol limit instead.
//
// AppendSymbols and DecodeSymbols carry batches of symbols on the wire; see
// AppendSymbols for the layout. A symbol takes 25–26 bytes there in practice.
package riblt

import (
	"encoding/binary"
	"errors"
	"math"

	"github.com/zeebo/xxh3"
)

// Item is one element of a reconciled set: 16 bytes compared as a whole.
// Callers reconciling key-value records put a hash of the key in Key and a hash
// of the value in Val, so that a key whose value differs shows up as one item
// on each side with the same Key.
type Item struct {
	Key, Val uint64
}

// CodedSymbol is one symbol of the coded stream: the XOR of the items mapped to
// it, the XOR of their checksums, and how many items were added minus how many
// were removed.
type CodedSymbol struct {
	Sum   Item
	Check uint64
	Count int64
}

// MaxSymbols bounds the index of a coded symbol: no stream is longer.
const MaxSymbols = 1 << 31

// noIndex marks a mapping that has run past MaxSymbols. It is larger than any
// symbol index, so loops of the form "while next < end" stop at it.
const noIndex = math.MaxUint32

// ErrCorrupt is wrapped by the errors DecodeSymbols returns for malformed
// input.
var ErrCorrupt = errors.New("riblt: corrupt symbol batch")

// ErrLimit is wrapped by the error AddCodedSymbol returns once the decoder has
// consumed as many symbols as its limit allows.
var ErrLimit = errors.New("riblt: symbol limit reached")

// mix adds (count = +1) or removes (count = -1) an item with the given checksum
// to or from s. XOR is its own inverse, so only the count tells the two apart.
func (s *CodedSymbol) mix(x Item, check uint64, count int64) {
	s.Sum.Key ^= x.Key
	s.Sum.Val ^= x.Val
	s.Check ^= check
	s.Count += count
}

// empty reports whether s holds no item at all, as a residual symbol does once
// every item mapped to it has been peeled off. A nonempty set of items adds up
// to an empty-looking symbol only if their checksums XOR to zero, which a
// 64-bit keyed hash makes negligible.
func (s *CodedSymbol) empty() bool {
	return s.Count == 0 && s.Check == 0 && s.Sum == Item{}
}

// itemHash is the keyed checksum of x. It also seeds x's mapping, so equal
// items map alike on both sides. xxh3 with a 16-byte input is a 128-bit
// multiply and an avalanche step: cheap, and not linear in the bits of x, so
// the checksum of a XOR of several items does not match the XOR of their
// checksums except by chance (1 in 2^64), which is what lets a decoder tell a
// symbol holding one item from a symbol holding several.
func itemHash(x Item, seed uint64) uint64 {
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], x.Key)
	binary.LittleEndian.PutUint64(b[8:], x.Val)
	return xxh3.HashSeed(b[:], seed)
}

// entry is an item together with where its mapping stands: the next symbol
// index it is mapped to, and how many steps along the mapping that is, which
// gives the state of the generator that draws the indices after it. Encoders
// keep one per item added, decoders one per item decoded. It is 32 bytes, since
// an encoder over a million items holds a million of them; whether the item
// counts +1 or -1 is kept by whoever holds the entry.
type entry struct {
	item  Item
	check uint64
	next  uint32 // next symbol index the item is mapped to, or noIndex
	steps uint32 // how many indices of the mapping precede next
}

func newEntry(x Item, check uint64) entry {
	// Every item is mapped to symbol 0 (probability 2/(0+2) = 1).
	return entry{item: x, check: check}
}

// advance moves e to the next index of its mapping.
func (e *entry) advance() {
	e.steps++
	e.next = nextIndex(e.next, rngOutput(e.check+uint64(e.steps)*rngStep))
}

// A mapping's random words come from SplitMix64 seeded with the item's
// checksum: the k-th word is rngOutput(check + k·rngStep), a Weyl sequence
// through a bijective finalizer. It is statistically good, and its state is
// the step count alone, which keeps entries small. A mapping has fewer than
// MaxSymbols = 2^31 steps, so the count fits 32 bits.
const rngStep = 0x9e3779b97f4a7c15

func rngOutput(z uint64) uint64 {
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// nextIndex draws the index that follows i in a mapping, from the uniformly
// random word r.
//
// The paper asks that index k be in the mapping with probability
// ρ(k) = 2/(k+2), independently of the others. Given that i is, the chance of
// skipping every index in (i, j) is
//
//	∏_{k=i+1}^{j-1} (1 - 2/(k+2)) = ∏_{k=i+1}^{j-1} k/(k+2) = (i+1)(i+2) / (j(j+1)),
//
// a telescoping product. So with u uniform in (0, 1] the inverse-transform
// draw is the largest j with (i+1)(i+2)/(j(j+1)) ≥ u, i.e. with
// j(j+1) ≤ X = (i+1)(i+2)/u, which is j = ⌊√(X + 1/4) - 1/2⌋. One draw per
// index in the mapping, rather than one coin per index passed over, is what
// keeps an item's cost logarithmic in the stream length (the expected number
// of indices below m is Σ ρ(k) ≈ 2 ln m).
//
// Encoder and decoder must agree on every index, including across machines,
// so the arithmetic is ordered to be deterministic under IEEE 754: the scaling
// by 2^53 is exact, division and square root are correctly rounded, and the
// explicit conversions stop the compiler from fusing a multiply with an add.
func nextIndex(i uint32, r uint64) uint32 {
	// u = m / 2^53 with m in [1, 2^53], so X = a·(2^53/m). The division does
	// not depend on i, so it need not wait for the previous index: computing
	// it first takes it off the chain of dependent steps along a mapping.
	inv := 0x1p53 / float64(r>>11+1)
	// i < MaxSymbols = 2^31, so (i+1)(i+2) < 2^63 does not overflow, and
	// neither does i+2 in 32 bits.
	a := float64(int64(i+1) * int64(i+2))
	x := float64(a * inv)
	j := math.Sqrt(float64(x+0.25)) - 0.5
	if !(j < MaxSymbols) { // also catches NaN, which cannot happen but costs nothing
		return noIndex
	}
	n := uint32(j) // j > 0, so truncation is the floor
	if n <= i {
		// Only rounding at u = 1 can land here; the next index is at least i+1.
		n = i + 1
	}
	return n
}
