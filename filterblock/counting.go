package filterblock

// counterMax is the value at which a 4-bit counter saturates.
const counterMax = 15

// Counting is a counting Bloom filter (Fan et al.; survey §2.5): m 4-bit
// counters and k probes per key, at the positions a Bloom of the same m and k
// uses, so ToBloom gives the standard filter of the same set. Add increments
// the k counters and Remove decrements them. A counter that reaches 15
// saturates and is never decremented again, so a removal can never turn a key
// still in the set into a "no": there are no false negatives. It is not safe
// for concurrent mutation.
type Counting struct {
	cells     []byte // two counters a byte; counter i is the low nibble of cells[i/2] when i is even
	m         uint64
	k         int
	saturated uint64 // counters that have reached counterMax
}

// NewCounting returns an empty counting filter of m counters (m ≥ 1) and k
// probes (1 ≤ k ≤ MaxStandardProbes).
func NewCounting(m uint64, k int) (*Counting, error) {
	if err := checkStandardParams(m, k); err != nil {
		return nil, err
	}
	return &Counting{cells: make([]byte, (m+1)/2), m: m, k: k}, nil
}

// M returns the number of counters.
func (c *Counting) M() uint64 { return c.m }

// K returns the number of probes per key.
func (c *Counting) K() int { return c.k }

// Saturated returns how many counters have saturated. Their keys can no longer
// be fully removed; a filter with many saturated counters should be rebuilt
// larger.
func (c *Counting) Saturated() uint64 { return c.saturated }

func (c *Counting) reduce(x uint64) uint64 {
	if c.m&(c.m-1) == 0 {
		return x & (c.m - 1)
	}
	return x % c.m
}

func (c *Counting) get(i uint64) byte {
	return (c.cells[i>>1] >> ((i & 1) * 4)) & 0xf
}

func (c *Counting) set(i uint64, v byte) {
	shift := (i & 1) * 4
	c.cells[i>>1] = c.cells[i>>1]&^(0xf<<shift) | v<<shift
}

// Add adds key once. Adding a key n times needs n Removes to take it out.
func (c *Counting) Add(key []byte) { c.AddHash(Hash(key)) }

// AddHash is Add for a key given by its Hash.
func (c *Counting) AddHash(h uint64) {
	d := doubleHashStep(h)
	for i := 0; i < c.k; i++ {
		pos := c.reduce(h)
		if v := c.get(pos); v < counterMax {
			c.set(pos, v+1)
			if v+1 == counterMax {
				c.saturated++
			}
		}
		h += d
	}
}

// Remove takes out one Add of key. It reports false, and changes nothing, when
// the filter certainly does not hold key (a counter is zero): removing a key
// that was never added would otherwise cause false negatives for others.
// Removing a key that was never added but passes MayContain is the caller's
// error and can cause false negatives.
func (c *Counting) Remove(key []byte) bool { return c.RemoveHash(Hash(key)) }

// RemoveHash is Remove for a key given by its Hash.
func (c *Counting) RemoveHash(h uint64) bool {
	if !c.MayContainHash(h) {
		return false
	}
	d := doubleHashStep(h)
	for i := 0; i < c.k; i++ {
		pos := c.reduce(h)
		// A probe may repeat a position; MayContainHash checked it is
		// non-zero, and a saturated counter stays at counterMax.
		if v := c.get(pos); v > 0 && v < counterMax {
			c.set(pos, v-1)
		}
		h += d
	}
	return true
}

// MayContain reports whether key may be in the set. False is certain.
func (c *Counting) MayContain(key []byte) bool { return c.MayContainHash(Hash(key)) }

// MayContainHash is MayContain for a key given by its Hash.
func (c *Counting) MayContainHash(h uint64) bool {
	d := doubleHashStep(h)
	for i := 0; i < c.k; i++ {
		if c.get(c.reduce(h)) == 0 {
			return false
		}
		h += d
	}
	return true
}

// ToBloom returns the standard Bloom filter of the same set: a bit is set
// where a counter is non-zero.
func (c *Counting) ToBloom() *Bloom {
	b := &Bloom{words: make([]uint64, (c.m+63)/64), m: c.m, k: c.k}
	for i := uint64(0); i < c.m; i++ {
		if c.get(i) != 0 {
			b.words[i>>6] |= 1 << (i & 63)
		}
	}
	return b
}
