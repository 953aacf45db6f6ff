package riblt

import (
	"cmp"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// diffCase is a pair of sets and the difference between them.
type diffCase struct {
	a, b           []Item // the sender's and the receiver's sets
	onlyA, onlyB   []Item // what the receiver should decode as Remote and Local
	common, change int
}

// makeCase builds sets sharing common items, with nA items only in a, nB only
// in b and nChange keys whose value differs between them.
func makeCase(r *rand.Rand, common, nA, nB, nChange int) diffCase {
	c := diffCase{common: common, change: nChange}
	c.a = make([]Item, 0, common+nA+nChange)
	c.b = make([]Item, 0, common+nB+nChange)
	for range common {
		x := Item{r.Uint64(), r.Uint64()}
		c.a = append(c.a, x)
		c.b = append(c.b, x)
	}
	for range nA {
		x := Item{r.Uint64(), r.Uint64()}
		c.a = append(c.a, x)
		c.onlyA = append(c.onlyA, x)
	}
	for range nB {
		x := Item{r.Uint64(), r.Uint64()}
		c.b = append(c.b, x)
		c.onlyB = append(c.onlyB, x)
	}
	for range nChange {
		k := r.Uint64()
		xa, xb := Item{k, r.Uint64()}, Item{k, r.Uint64()}
		c.a = append(c.a, xa)
		c.b = append(c.b, xb)
		c.onlyA = append(c.onlyA, xa)
		c.onlyB = append(c.onlyB, xb)
	}
	// The order items are added in must not matter.
	r.Shuffle(len(c.a), func(i, j int) { c.a[i], c.a[j] = c.a[j], c.a[i] })
	r.Shuffle(len(c.b), func(i, j int) { c.b[i], c.b[j] = c.b[j], c.b[i] })
	return c
}

func (c diffCase) d() int { return len(c.onlyA) + len(c.onlyB) }

// reconcile streams the encoding of c.a into a decoder holding c.b until it
// decodes or fails. It returns the decoder, the symbols it consumed and the
// error that stopped it, if any.
func reconcile(c diffCase, seed uint64, limit int) (*Decoder, []CodedSymbol, error) {
	enc := NewSeededEncoder(seed)
	for _, x := range c.a {
		enc.Add(x)
	}
	dec := NewSeededDecoder(seed)
	if limit > 0 {
		dec.SetLimit(limit)
	}
	for _, x := range c.b {
		dec.AddLocal(x)
	}
	var syms []CodedSymbol
	for !dec.Decoded() {
		s := enc.ProduceNext()
		if err := dec.AddCodedSymbol(s); err != nil {
			return dec, syms, err
		}
		syms = append(syms, s)
	}
	return dec, syms, nil
}

func compareItems(x, y Item) int {
	if c := cmp.Compare(x.Key, y.Key); c != 0 {
		return c
	}
	return cmp.Compare(x.Val, y.Val)
}

func sameItems(x, y []Item) bool {
	x, y = slices.Clone(x), slices.Clone(y)
	slices.SortFunc(x, compareItems)
	slices.SortFunc(y, compareItems)
	return slices.Equal(x, y)
}

// checkDecoded fails t unless dec decoded exactly c's difference.
func checkDecoded(t *testing.T, what string, c diffCase, dec *Decoder) {
	t.Helper()
	if !dec.Decoded() {
		t.Fatalf("%s: not decoded after %d symbols", what, dec.Received())
	}
	if !sameItems(dec.Remote(), c.onlyA) {
		t.Fatalf("%s: Remote has %d items, want the %d only the sender has", what, len(dec.Remote()), len(c.onlyA))
	}
	if !sameItems(dec.Local(), c.onlyB) {
		t.Fatalf("%s: Local has %d items, want the %d only the receiver has", what, len(dec.Local()), len(c.onlyB))
	}
}

func TestRandomTrials(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	trials := 300
	if testing.Short() {
		trials = 60
	}
	for trial := range trials {
		d := r.IntN(301)
		nChange := r.IntN(d/2 + 1) // each changed key is two items
		rest := d - 2*nChange
		nA := r.IntN(rest + 1)
		c := makeCase(r, r.IntN(5001), nA, rest-nA, nChange)
		seed := r.Uint64()
		dec, syms, err := reconcile(c, seed, 0)
		if err != nil {
			t.Fatalf("trial %d (common %d, d %d, seed %#x): %v", trial, c.common, c.d(), seed, err)
		}
		checkDecoded(t, "trial", c, dec)
		if c.d() == 0 && len(syms) != 1 {
			t.Fatalf("trial %d: no difference took %d symbols, want 1", trial, len(syms))
		}
	}
}

func TestEdgeCases(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 2))
	for _, tc := range []struct {
		name                    string
		common, nA, nB, nChange int
		maxSymbols              int
	}{
		{"both empty", 0, 0, 0, 0, 1},
		{"no difference", 1000, 0, 0, 0, 1},
		{"one remote item", 1000, 1, 0, 0, 3},
		{"one local item", 1000, 0, 1, 0, 3},
		{"one changed value", 1000, 0, 0, 1, 10},
		{"receiver empty", 0, 100, 0, 0, 400},
		{"sender empty", 0, 0, 100, 0, 400},
		{"one item, receiver empty", 0, 1, 0, 0, 1},
		{"one item, sender empty", 0, 0, 1, 0, 1},
		{"disjoint", 0, 300, 300, 0, 2000},
	} {
		c := makeCase(r, tc.common, tc.nA, tc.nB, tc.nChange)
		dec, syms, err := reconcile(c, 7, 0)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		checkDecoded(t, tc.name, c, dec)
		if len(syms) > tc.maxSymbols {
			t.Errorf("%s: took %d symbols, want at most %d", tc.name, len(syms), tc.maxSymbols)
		}
		t.Logf("%s: %d symbols", tc.name, len(syms))
	}
}

// TestSmallDifferences logs what a small difference costs, to back the
// figures in the documentation.
func TestSmallDifferences(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	for _, d := range []int{1, 2, 5, 10, 20, 50, 100, 300} {
		const trials = 100
		total, worst := 0, 0
		for range trials {
			c := makeCase(r, 200, d, 0, 0)
			_, syms, err := reconcile(c, r.Uint64(), 0)
			if err != nil {
				t.Fatal(err)
			}
			total += len(syms)
			worst = max(worst, len(syms))
		}
		t.Logf("d=%d: %.2f symbols per item on average, worst %d symbols", d, float64(total)/float64(trials*d), worst)
	}
}

func TestOverhead(t *testing.T) {
	const n, d = 100_000, 1000
	seeds := 5
	if testing.Short() {
		seeds = 2
	}
	r := rand.New(rand.NewPCG(4, 4))
	sum, wire := 0.0, 0
	for s := range seeds {
		c := makeCase(r, n-d/2, d/2, d/2, 0)
		dec, syms, err := reconcile(c, uint64(s), 0)
		if err != nil {
			t.Fatal(err)
		}
		checkDecoded(t, "overhead", c, dec)
		sum += float64(len(syms)) / d
		wire += len(AppendSymbols(nil, 0, syms))
		t.Logf("seed %d: %d symbols for d=%d (%.3f per item), %d bytes", s, len(syms), d, float64(len(syms))/d, len(AppendSymbols(nil, 0, syms)))
	}
	avg := sum / float64(seeds)
	t.Logf("%d-item sets, d=%d: %.3f symbols per differing item on average, %.1f wire bytes per item", n, d, avg, float64(wire)/float64(seeds*d))
	if avg > 1.7 {
		t.Errorf("%.3f symbols per differing item, want at most 1.7", avg)
	}
}

// TestCorruptedSymbol flips one bit of one symbol of the stream. The decoder
// must not report a wrong difference: it may only fail at its limit.
func TestCorruptedSymbol(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	trials := 200
	if testing.Short() {
		trials = 50
	}
	failed := 0
	for trial := range trials {
		d := 1 + r.IntN(60)
		nChange := r.IntN(d/2 + 1)
		rest := d - 2*nChange
		nA := r.IntN(rest + 1)
		c := makeCase(r, r.IntN(500), nA, rest-nA, nChange)
		// The clean stream, to learn where it ends.
		_, clean, err := reconcile(c, 9, 0)
		if err != nil {
			t.Fatal(err)
		}
		at := r.IntN(len(clean))
		bit := r.IntN(24*8 + 64)

		enc := NewSeededEncoder(9)
		for _, x := range c.a {
			enc.Add(x)
		}
		dec := NewSeededDecoder(9)
		limit := 4*len(clean) + 50
		dec.SetLimit(limit)
		for _, x := range c.b {
			dec.AddLocal(x)
		}
		for i := 0; !dec.Decoded(); i++ {
			s := enc.ProduceNext()
			if i == at {
				s = flipBit(s, bit)
			}
			if err = dec.AddCodedSymbol(s); err != nil {
				break
			}
		}
		switch {
		case err == nil:
			checkDecoded(t, "corrupted stream", c, dec)
		case errors.Is(err, ErrLimit):
			if dec.Received() != limit {
				t.Fatalf("trial %d: failed after %d symbols, limit %d", trial, dec.Received(), limit)
			}
			failed++
		default:
			t.Fatalf("trial %d: %v", trial, err)
		}
	}
	t.Logf("%d of %d corrupted streams failed at the limit, the rest decoded correctly", failed, trials)
}

// flipBit flips bit b of s: bits 0–191 are Sum and Check, 192 and up the
// count.
func flipBit(s CodedSymbol, b int) CodedSymbol {
	switch {
	case b < 64:
		s.Sum.Key ^= 1 << b
	case b < 128:
		s.Sum.Val ^= 1 << (b - 64)
	case b < 192:
		s.Check ^= 1 << (b - 128)
	default:
		s.Count ^= 1 << (b - 192)
	}
	return s
}

func TestLimit(t *testing.T) {
	r := rand.New(rand.NewPCG(6, 6))
	c := makeCase(r, 100, 100, 100, 0)
	dec, syms, err := reconcile(c, 0, 20)
	if !errors.Is(err, ErrLimit) {
		t.Fatalf("d=200 with a limit of 20 symbols: %v, want ErrLimit", err)
	}
	if len(syms) != 20 || dec.Received() != 20 || dec.Decoded() {
		t.Fatalf("consumed %d symbols (Received %d, Decoded %v), want 20 and not decoded", len(syms), dec.Received(), dec.Decoded())
	}
	// The limit is a total: raising it lets decoding go on where it stopped.
	dec.SetLimit(1000)
	enc := NewEncoder()
	for _, x := range c.a {
		enc.Add(x)
	}
	for i := 0; !dec.Decoded(); i++ {
		s := enc.ProduceNext()
		if i < 20 {
			continue
		}
		if err := dec.AddCodedSymbol(s); err != nil {
			t.Fatal(err)
		}
	}
	checkDecoded(t, "after raising the limit", c, dec)
}

func TestSeedsMustMatch(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	c := makeCase(r, 100, 3, 3, 0)
	enc := NewSeededEncoder(1)
	for _, x := range c.a {
		enc.Add(x)
	}
	dec := NewSeededDecoder(2)
	dec.SetLimit(500)
	for _, x := range c.b {
		dec.AddLocal(x)
	}
	for !dec.Decoded() {
		if err := dec.AddCodedSymbol(enc.ProduceNext()); err != nil {
			if !errors.Is(err, ErrLimit) {
				t.Fatal(err)
			}
			return
		}
	}
	t.Fatalf("decoded with the wrong seed: %d remote, %d local items", len(dec.Remote()), len(dec.Local()))
}

// TestAddLocalLate adds some local items after symbols have arrived.
func TestAddLocalLate(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 8))
	for trial := range 20 {
		c := makeCase(r, 2000, 40, 40, 20)
		enc := NewEncoder()
		for _, x := range c.a {
			enc.Add(x)
		}
		dec := NewDecoder()
		split := r.IntN(len(c.b) + 1)
		for _, x := range c.b[:split] {
			dec.AddLocal(x)
		}
		early := r.IntN(300)
		for range early {
			if err := dec.AddCodedSymbol(enc.ProduceNext()); err != nil {
				t.Fatal(err)
			}
		}
		for _, x := range c.b[split:] {
			dec.AddLocal(x)
		}
		for !dec.Decoded() {
			if err := dec.AddCodedSymbol(enc.ProduceNext()); err != nil {
				t.Fatalf("trial %d: %v", trial, err)
			}
		}
		checkDecoded(t, "late local items", c, dec)
	}
}

// TestEncoderMatchesDefinition checks the block-wise encoder, with removals
// and with items added after symbols were computed, against the definition:
// symbol i is the sum of the items whose mapping holds i.
func TestEncoderMatchesDefinition(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	const m = 700
	for trial := range 10 {
		seed := r.Uint64()
		enc := NewSeededEncoder(seed)
		want := make([]CodedSymbol, m)
		add := func(x Item, count int64) {
			if count > 0 {
				enc.Add(x)
			} else {
				enc.Remove(x)
			}
			en := newEntry(x, itemHash(x, seed))
			for en.next < m {
				want[en.next].mix(x, en.check, count)
				en.advance()
			}
		}
		for range r.IntN(3000) {
			add(Item{r.Uint64(), r.Uint64()}, 1-2*int64(r.IntN(4)/3))
		}
		got := make([]CodedSymbol, 0, m)
		for range r.IntN(m) {
			got = append(got, enc.ProduceNext())
		}
		if !slices.Equal(got, want[:len(got)]) {
			t.Fatalf("trial %d: ProduceNext differs from the definition", trial)
		}
		// Items added now change the encoder's symbols, not the copies
		// already returned.
		for range r.IntN(100) {
			add(Item{r.Uint64(), r.Uint64()}, 1)
		}
		for i := range m {
			if s := enc.symbol(i); s != want[i] {
				t.Fatalf("trial %d: symbol %d is %+v, want %+v", trial, i, s, want[i])
			}
		}
	}
}

func TestRemoveCancelsAdd(t *testing.T) {
	x, y := Item{1, 2}, Item{3, 4}
	e1, e2 := NewEncoder(), NewEncoder()
	e1.Add(x)
	e2.Add(x)
	e2.Add(y)
	e2.Remove(y)
	for i := range 100 {
		if s1, s2 := e1.ProduceNext(), e2.ProduceNext(); s1 != s2 {
			t.Fatalf("symbol %d: %+v after Add, Add, Remove; %+v after one Add", i, s2, s1)
		}
	}
}

// TestMappingDensity checks that index i is in a mapping with probability
// 2/(i+2), as the decoder's efficiency depends on.
func TestMappingDensity(t *testing.T) {
	const mappings, m = 200_000, 1024
	hits := make([]int, m)
	r := rand.New(rand.NewPCG(10, 10))
	total := 0
	for range mappings {
		en := newEntry(Item{}, r.Uint64())
		for en.next < m {
			hits[en.next]++
			total++
			en.advance()
		}
	}
	wantTotal := 0.0
	for i := range m {
		p := 2 / float64(i+2)
		wantTotal += p
		mean := mappings * p
		sd := math.Sqrt(mappings * p * (1 - p))
		if math.Abs(float64(hits[i])-mean) > 5*sd+1e-9 {
			t.Errorf("index %d in %d of %d mappings, want %.0f ± %.0f", i, hits[i], mappings, mean, sd)
		}
	}
	if got := float64(total) / mappings; math.Abs(got-wantTotal) > 0.05 {
		t.Errorf("%.3f indices below %d per mapping, want %.3f", got, m, wantTotal)
	}
}

// TestGolden pins the checksum and the mapping: encoders and decoders of
// different builds and machines must agree on them bit for bit.
func TestGolden(t *testing.T) {
	if h := itemHash(Item{1, 2}, 3); h != goldenHash {
		t.Errorf("itemHash({1, 2}, 3) = %#x, want %#x", h, goldenHash)
	}
	en := newEntry(Item{}, 0x0123456789abcdef)
	var got []uint32
	for range len(goldenMapping) {
		got = append(got, en.next)
		en.advance()
	}
	if !slices.Equal(got, goldenMapping) {
		t.Errorf("mapping of 0x0123456789abcdef = %v, want %v", got, goldenMapping)
	}
	// Far out, where the float arithmetic is least exact.
	// The largest random word means u = 1: the very next index.
	for _, i := range []uint32{0, 1, 1000, MaxSymbols - 2} {
		if n := nextIndex(i, math.MaxUint64); n != i+1 {
			t.Errorf("nextIndex(%d, max) = %d, want %d", i, n, i+1)
		}
	}
	if n := nextIndex(MaxSymbols-1, math.MaxUint64); n != noIndex {
		t.Errorf("nextIndex(MaxSymbols-1, max) = %d, want noIndex", n)
	}
	if n := nextIndex(1<<30, 0); n != noIndex {
		t.Errorf("nextIndex(2^30, 0) = %d, want noIndex", n)
	}
}

var (
	goldenHash    uint64 = 0x0dc8b45684f61ed8
	goldenMapping        = []uint32{0, 4, 5, 14, 18, 278, 981, 1155, 1579, 1600, 4129, 4607, 7146, 9571, 12423, 26550}
)

func TestItemHashDoesNotAllocate(t *testing.T) {
	x := Item{5, 6}
	if n := testing.AllocsPerRun(100, func() { itemHash(x, 1) }); n != 0 {
		t.Errorf("itemHash allocates %v times", n)
	}
}
