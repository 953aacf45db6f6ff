package filterblock

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

func bloomOf(t testing.TB, m uint64, k int, keys [][]byte) *Bloom {
	t.Helper()
	b, err := NewBloom(m, k)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range keys {
		b.Add(key)
	}
	return b
}

func TestBloomNoFalseNegativesAndFPRate(t *testing.T) {
	const n = 200_000
	keys := randomKeys(70, n, 0)
	absent := randomKeys(71, 1_000_000, 1)
	for _, m := range []uint64{n * 10, 1 << 21} { // arbitrary m and a power of two
		b := bloomOf(t, m, 7, keys)
		for _, k := range keys {
			if !b.MayContain(k) {
				t.Fatalf("m=%d: false negative", m)
			}
		}
		fp := 0
		for _, k := range absent {
			if b.MayContain(k) {
				fp++
			}
		}
		got, want := float64(fp)/float64(len(absent)), FPRate(m, 7, n)
		sigma := math.Sqrt(want / float64(len(absent)))
		if math.Abs(got-want) > 4.5*sigma+0.03*want {
			t.Errorf("m=%d: FP rate %.4f%%, theory %.4f%%", m, 100*got, 100*want)
		}
	}
}

func TestBloomUnionEqualsFilterOfUnion(t *testing.T) {
	a, b := randomKeys(72, 30_000, 0), randomKeys(73, 20_000, 0)
	for _, m := range []uint64{300_007, 1 << 19} {
		fa, fb := bloomOf(t, m, 6, a), bloomOf(t, m, 6, b)
		want := bloomOf(t, m, 6, append(append([][]byte(nil), a...), b...))
		if err := fa.Union(fb); err != nil {
			t.Fatal(err)
		}
		if !fa.Equal(want) {
			t.Fatalf("m=%d: union differs from the filter built from the union", m)
		}
	}
}

func TestBloomIntersect(t *testing.T) {
	common := randomKeys(74, 5000, 0)
	a := append(randomKeys(75, 10_000, 0), common...)
	b := append(randomKeys(76, 10_000, 0), common...)
	fa, fb := bloomOf(t, 1<<18, 6, a), bloomOf(t, 1<<18, 6, b)
	if err := fa.Intersect(fb); err != nil {
		t.Fatal(err)
	}
	for _, k := range common {
		if !fa.MayContain(k) {
			t.Fatal("intersection lost a common key")
		}
	}
	// The AND holds every bit of the filter built from the intersection, and
	// (keys outside it set bits in only one input) far fewer than either input.
	exact := bloomOf(t, 1<<18, 6, common)
	for i, w := range exact.words {
		if fa.words[i]&w != w {
			t.Fatalf("word %d: the intersection lacks bits of the filter of the common keys", i)
		}
	}
	if got, in := fa.BitsSet(), fb.BitsSet(); got > in*6/10 {
		t.Fatalf("intersection has %d bits set, an input %d: the AND removed too little", got, in)
	}
}

func TestEstimateIntersectionOfFullUnion(t *testing.T) {
	a, _ := NewBloom(128, 1)
	b, _ := NewBloom(128, 1)
	a.words[0], b.words[1] = math.MaxUint64, math.MaxUint64 // disjoint halves
	got, err := EstimateIntersection(a, b)
	if err != nil {
		t.Fatal(err)
	}
	if want := a.EstimateCount(); got != want || math.IsInf(got, 0) {
		t.Fatalf("full union: estimate %v, want the bound min(n(a), n(b)) = %v", got, want)
	}
}

func TestBloomIncompatible(t *testing.T) {
	a := bloomOf(t, 1024, 6, nil)
	for _, o := range []*Bloom{bloomOf(t, 2048, 6, nil), bloomOf(t, 1024, 7, nil)} {
		if err := a.Union(o); !errors.Is(err, ErrIncompatible) {
			t.Errorf("Union: %v, want ErrIncompatible", err)
		}
		if err := a.Intersect(o); !errors.Is(err, ErrIncompatible) {
			t.Errorf("Intersect: %v, want ErrIncompatible", err)
		}
		if _, err := EstimateIntersection(a, o); !errors.Is(err, ErrIncompatible) {
			t.Errorf("EstimateIntersection: %v, want ErrIncompatible", err)
		}
	}
}

func TestBloomParams(t *testing.T) {
	for _, c := range []struct {
		m  uint64
		k  int
		ok bool
	}{{1, 1, true}, {0, 1, false}, {64, 0, false}, {64, 33, false}, {1 << 41, 3, false}, {1000, 32, true}} {
		if _, err := NewBloom(c.m, c.k); (err == nil) != c.ok {
			t.Errorf("NewBloom(%d, %d): %v", c.m, c.k, err)
		}
		if _, err := NewCounting(c.m, c.k); (err == nil) != c.ok {
			t.Errorf("NewCounting(%d, %d): %v", c.m, c.k, err)
		}
	}
	b, err := NewBloomForKeys(1000, 10)
	if err != nil || b.M() != 10_000 || b.K() != 7 {
		t.Fatalf("NewBloomForKeys(1000, 10) = m=%d k=%d, %v", b.M(), b.K(), err)
	}
	for _, bad := range []float64{0, -1, math.NaN(), 65} {
		if _, err := NewBloomForKeys(1000, bad); err == nil {
			t.Errorf("NewBloomForKeys accepted %v bits/key", bad)
		}
	}
}

// TestBloomEstimates checks EstimateCount within 3% and EstimateIntersection
// within 5% of the larger set (at 10 bits/key over the union, the regime the
// semi-join uses), on several set sizes.
func TestBloomEstimates(t *testing.T) {
	for _, c := range []struct{ a, b, common int }{
		{1000, 1000, 500}, {10_000, 5000, 1000}, {50_000, 50_000, 0}, {40_000, 40_000, 40_000}, {100_000, 20_000, 10_000},
	} {
		common := randomKeys(uint64(80+c.a), c.common, 2)
		a := append(randomKeys(uint64(81+c.a), c.a-c.common, 0), common...)
		b := append(randomKeys(uint64(82+c.b), c.b-c.common, 1), common...)
		m := uint64(10 * (c.a + c.b - c.common))
		fa, fb := bloomOf(t, m, 7, a), bloomOf(t, m, 7, b)
		for _, e := range []struct {
			f    *Bloom
			want int
		}{{fa, c.a}, {fb, c.b}} {
			if got := e.f.EstimateCount(); math.Abs(got-float64(e.want)) > 0.03*float64(e.want) {
				t.Errorf("%+v: EstimateCount %.0f, want %d ± 3%%", c, got, e.want)
			}
		}
		got, err := EstimateIntersection(fa, fb)
		if err != nil {
			t.Fatal(err)
		}
		if tol := 0.05 * float64(max(c.a, c.b)); math.Abs(got-float64(c.common)) > tol {
			t.Errorf("%+v: EstimateIntersection %.0f, want %d ± %.0f", c, got, c.common, tol)
		}
	}
	full := bloomOf(t, 64, 1, nil)
	for i := range full.words {
		full.words[i] = math.MaxUint64
	}
	if !math.IsInf(full.EstimateCount(), 1) {
		t.Fatal("a full filter's count should be +Inf")
	}
}

// TestBloomHalve checks that halving equals building at half the size: the
// positions are taken mod m, so folding the halves is exact.
func TestBloomHalve(t *testing.T) {
	keys := randomKeys(90, 5000, 0)
	b := bloomOf(t, 1<<16, 5, keys)
	for m := uint64(1 << 15); m >= 128; m /= 2 {
		if err := b.Halve(); err != nil {
			t.Fatal(err)
		}
		if want := bloomOf(t, m, 5, keys); !b.Equal(want) {
			t.Fatalf("halved to %d bits: differs from the filter built at that size", m)
		}
	}
	for _, k := range keys {
		if !b.MayContain(k) {
			t.Fatal("halving lost a key")
		}
	}
	if err := b.Halve(); err != nil || b.M() != 64 {
		t.Fatalf("halving 128 bits: m=%d, %v", b.M(), err)
	}
	if err := b.Halve(); err == nil {
		t.Fatal("halved a 64-bit filter")
	}
	if err := bloomOf(t, 1000, 3, nil).Halve(); err == nil {
		t.Fatal("halved a filter whose size is not a power of two")
	}
}

func TestCountingAgainstMultiset(t *testing.T) {
	// A small filter that saturates, and a roomy one that does not.
	for _, c := range []struct {
		m         uint64
		k         int
		universe  int
		maxCopies int // of one key held at once
	}{{256, 4, 400, 1000}, {1 << 14, 6, 2000, 2}} {
		keys := randomKeys(uint64(c.m), c.universe, 0)
		cf, err := NewCounting(c.m, c.k)
		if err != nil {
			t.Fatal(err)
		}
		count := make(map[int]int)
		r := uint64(c.m)
		for step := 0; step < 50_000; step++ {
			r = splitmix(r)
			i := int(r % uint64(len(keys)))
			if (r>>63 == 0 && count[i] < c.maxCopies) || count[i] == 0 {
				cf.Add(keys[i])
				count[i]++
			} else {
				if !cf.Remove(keys[i]) {
					t.Fatalf("step %d: Remove of a held key reported it absent", step)
				}
				count[i]--
			}
			if step%97 == 0 {
				for j, n := range count {
					if n > 0 && !cf.MayContain(keys[j]) {
						t.Fatalf("m=%d step %d: false negative (saturated counters: %d)", c.m, step, cf.Saturated())
					}
				}
			}
		}
		if c.m == 256 && cf.Saturated() == 0 {
			t.Fatal("the small filter never saturated: the test does not exercise saturation")
		}
		if c.m == 1<<14 {
			if cf.Saturated() != 0 {
				t.Fatalf("the roomy filter saturated %d counters", cf.Saturated())
			}
			// Without saturation the counters are exact, so the standard
			// filter they give is the one built from the held keys.
			var held [][]byte
			for j, n := range count {
				if n > 0 {
					held = append(held, keys[j])
				}
			}
			if !cf.ToBloom().Equal(bloomOf(t, c.m, c.k, held)) {
				t.Fatal("ToBloom differs from the filter of the held keys")
			}
		}
	}
	cf, _ := NewCounting(1<<12, 4)
	if cf.Remove([]byte("never added")) {
		t.Fatal("Remove of a key the filter certainly lacks reported success")
	}
}

// TestMayContainHashes: the batch test answers as MayContainHash does, for
// members and non-members, at several probe counts.
func TestMayContainHashes(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, k := range []int{1, 2, 7, 11} {
		b, err := NewBloom(1<<16, k)
		if err != nil {
			t.Fatal(err)
		}
		for range 3000 {
			b.AddHash(r.Uint64())
		}
		hs := make([]uint64, 0, 5000)
		for range 5000 {
			hs = append(hs, r.Uint64())
		}
		for i := 0; i < len(hs); i += 10 {
			b.AddHash(hs[i]) // some members
		}
		may := make([]bool, len(hs))
		b.MayContainHashes(hs, may)
		yes := 0
		for i, h := range hs {
			if may[i] != b.MayContainHash(h) {
				t.Fatalf("k=%d: hash %d: batch says %v", k, i, may[i])
			}
			if may[i] {
				yes++
			}
		}
		if yes < len(hs)/10 || yes == len(hs) {
			t.Fatalf("k=%d: %d of %d pass", k, yes, len(hs))
		}
	}
}
