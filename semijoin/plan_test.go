package semijoin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	mathrand "math/rand"
	"math/rand/v2"
	"strings"
	"testing"
	"testing/quick"

	"github.com/bloomkv/bloomkv/filterblock"
)

// tryJoin runs Join and returns its matches, copied, its report and its
// error.
func tryJoin(a, b Store, o *Options) ([]Match, Report, error) {
	var got []Match
	rep, err := Join(context.Background(), a, b, o, func(m Match) error {
		got = append(got, Match{Key: bytes.Clone(m.Key), A: bytes.Clone(m.A), B: bytes.Clone(m.B)})
		return nil
	})
	return got, rep, err
}

// overlapping makes two sides of nA and nB keys of which overlap are in
// both, keys and values of varied lengths.
func overlapping(nA, nB, overlap int) (a, b map[string]string) {
	a, b = map[string]string{}, map[string]string{}
	key := func(i int) string { return fmt.Sprintf("key%07d%s", i, strings.Repeat("k", i%23)) }
	for i := range nA {
		a[key(i)] = fmt.Sprintf("a%d", i)
	}
	for i := range nB {
		b[key(nA-overlap+i)] = fmt.Sprintf("b%d%s", i, strings.Repeat("v", i%61))
	}
	return a, b
}

// TestAutoWithinFilterLimit: with MaxFilterBits too small for any filter of
// A's keys (a caller matching a server's limit, A large), Auto still
// answers, by a strategy that needs no such filter; a strategy asked for
// that needs one is refused before any data moves.
func TestAutoWithinFilterLimit(t *testing.T) {
	const limit = 256
	ma, mb := overlapping(2000, 10, 5)
	da, db := openStore(t), openStore(t)
	fill(t, da, ma)
	fill(t, db, mb)
	a, b := Local(da, Limits{MaxFilterBits: limit}), Local(db, Limits{MaxFilterBits: limit})
	got, rep, err := tryJoin(a, b, &Options{MaxFilterBits: limit})
	if err != nil {
		t.Fatalf("Auto within %d bits: %v (expected bytes %v)", limit, err, rep.Expected)
	}
	if want := modelJoin(ma, mb, KeyRange{}, false); !sameMatches(got, want) {
		t.Fatalf("Auto chose %v and found %d matches, want %d", rep.Strategy, len(got), len(want))
	}
	if rep.Strategy != ShipKeys {
		t.Errorf("Auto chose %v, which needs a filter of A's 2,000 keys in %d bits", rep.Strategy, limit)
	}
	for _, s := range []Strategy{ShipFilter, ShipCompressed, TwoWay} {
		if c, ok := rep.Expected[s]; ok {
			t.Errorf("expected bytes of %v reported (%v) though it cannot run within %d bits", s, c, limit)
		}
		_, rep, err := tryJoin(a, b, &Options{Strategy: s, MaxFilterBits: limit})
		if !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), "MaxFilterBits") {
			t.Errorf("%v within %d bits: %v; want a refusal naming MaxFilterBits", s, limit, err)
		}
		if rep.FilterBytes != 0 || rep.BytesAToB != requestBytes {
			t.Errorf("%v refused after moving %d bytes A to B (%d of filters)", s, rep.BytesAToB, rep.FilterBytes)
		}
	}
}

// checkAutoAgainstEach runs Join with Auto and with each strategy over a and
// b, whose exact join is want, within maxBits, and checks that Auto answers
// exactly, by a strategy that runs, expected to cost no more than any
// strategy that runs; that each strategy that runs answers exactly and is
// reported in Expected; and that each that does not is absent from it and
// refused as a bad request.
func checkAutoAgainstEach(t *testing.T, what string, a, b Store, want []Match, o Options) {
	t.Helper()
	o.Strategy = Auto
	got, auto, err := tryJoin(a, b, &o)
	if err != nil {
		t.Fatalf("%s: Auto: %v (expected bytes %v)", what, err, auto.Expected)
	}
	if !sameMatches(got, want) {
		t.Fatalf("%s: Auto chose %v and found %d matches, want %d", what, auto.Strategy, len(got), len(want))
	}
	chosen, ok := auto.Expected[auto.Strategy]
	if !ok || math.IsInf(chosen, 0) || math.IsNaN(chosen) {
		t.Fatalf("%s: Auto chose %v, expected to cost %v (reported: %v)", what, auto.Strategy, chosen, ok)
	}
	for s := ShipKeys; s <= TwoWay; s++ {
		o.Strategy = s
		got, rep, err := tryJoin(a, b, &o)
		cost, reported := auto.Expected[s]
		switch {
		case err != nil && !errors.Is(err, ErrBadRequest):
			t.Fatalf("%s: %v failed: %v", what, s, err)
		case err != nil && reported:
			t.Fatalf("%s: %v refused (%v) yet reported feasible at %.0f bytes", what, s, err, cost)
		case err != nil:
			continue
		case !sameMatches(got, want):
			t.Fatalf("%s: %v found %d matches, want %d", what, s, len(got), len(want))
		case !reported:
			t.Fatalf("%s: %v ran but is absent from Auto's expected bytes %v", what, s, auto.Expected)
		case cost < chosen:
			t.Fatalf("%s: Auto chose %v expected at %.1f bytes; %v runs and was expected at %.1f", what, auto.Strategy, chosen, s, cost)
		case rep.Expected[s] != cost:
			t.Fatalf("%s: %v expected at %.1f bytes alone, %.1f under Auto", what, s, rep.Expected[s], cost)
		}
	}
}

// TestAutoPicksAFeasiblePlan: over a sweep of MaxFilterBits, from a single
// bit to the default, and of sizes of both sides, the strategy Auto picks
// runs and returns the exact join, and is expected to cost no more than any
// strategy that runs (each run too, its answer checked).
func TestAutoPicksAFeasiblePlan(t *testing.T) {
	sizes := []int{0, 1, 30, 300}
	bounds := []uint64{1, 2, 9, 50, 100, 256, 1000, 1 << 16, 0}
	if testing.Short() {
		bounds = []uint64{1, 9, 50, 256, 0}
	}
	for _, nA := range sizes {
		for _, nB := range sizes {
			ma, mb := overlapping(nA, nB, min(nA, nB)/2)
			da, db := openStore(t), openStore(t)
			fill(t, da, ma)
			fill(t, db, mb)
			a, b := Local(da, Limits{}), Local(db, Limits{})
			want := modelJoin(ma, mb, KeyRange{}, false)
			for _, bits := range bounds {
				what := fmt.Sprintf("|A| %d, |B| %d, MaxFilterBits %d", nA, nB, bits)
				checkAutoAgainstEach(t, what, a, b, want, Options{MaxFilterBits: bits})
			}
			da.Close()
			db.Close()
		}
	}
}

// TestAutoPicksAFeasiblePlanRandom: the same over random sides (sizes,
// overlaps, key and value lengths), bounds (log-uniform up to 2^20 bits),
// semi-joins and overlap hints, from a fixed seed.
func TestAutoPicksAFeasiblePlanRandom(t *testing.T) {
	trials := 40
	if testing.Short() {
		trials = 10
	}
	r := rand.New(rand.NewPCG(40, 4))
	for trial := range trials {
		nA, nB := r.IntN(1000), r.IntN(1000)
		overlap := r.IntN(min(nA, nB) + 1)
		ma, mb := overlapping(nA, nB, overlap)
		da, db := openStore(t), openStore(t)
		fill(t, da, ma)
		fill(t, db, mb)
		o := Options{
			MaxFilterBits: uint64(math.Exp2(20 * r.Float64())),
			SemiJoin:      r.IntN(2) == 0,
			BatchKeys:     1 + r.IntN(500),
		}
		if r.IntN(2) == 0 {
			o.Overlap = float64(r.IntN(min(nA, nB) + 2))
		}
		what := fmt.Sprintf("trial %d: |A| %d, |B| %d, overlap %d, options %+v", trial, nA, nB, overlap, o)
		checkAutoAgainstEach(t, what, Local(da, Limits{}), Local(db, Limits{}), modelJoin(ma, mb, KeyRange{}, o.SemiJoin), o)
		da.Close()
		db.Close()
	}
}

// TestPlanFeasibleAtAnyScale: for any sizes of the sides (up to billions of
// keys), key and record lengths, bound on filters and overlap hint, the
// plan Auto picks asks only for filters of 1 to MaxFilterBits bits and 1 to
// filterblock.MaxStandardProbes probes, and no plan that does is expected
// to cost less.
func TestPlanFeasibleAtAnyScale(t *testing.T) {
	valid := func(s Strategy, p plan, maxBits uint64) bool {
		ok := func(m uint64, k int) bool {
			return m >= 1 && m <= maxBits && k >= 1 && k <= filterblock.MaxStandardProbes
		}
		switch s {
		case ShipFilter, ShipCompressed:
			return ok(p.m, p.k)
		case TwoWay:
			return ok(p.m, p.k) && ok(p.m2, p.k2)
		}
		return true
	}
	// Sizes and bounds spread over orders of magnitude: x >> (x % n).
	spread := func(x uint32, n uint32) int64 { return int64(x >> (x % n)) }
	f := func(a, b, keyLen, valLen, bits, overlap uint32, semi bool) bool {
		nA, nB := spread(a, 32)%2_000_000_000, spread(b, 32)%2_000_000_000
		kl, vl := 1+spread(keyLen, 32)%(1<<20), spread(valLen, 32)%(1<<26)
		o := Options{MaxFilterBits: 1 + uint64(spread(bits, 32)), SemiJoin: semi, Overlap: float64(spread(overlap, 32))}
		j := &joiner{o: o, rep: Report{
			StatsA: Stats{Keys: nA, KeyBytes: nA * kl, ValueBytes: nA * vl, Scanned: nA},
			StatsB: Stats{Keys: nB, KeyBytes: nB * kl, ValueBytes: nB * vl, Scanned: nB},
		}}
		plans := j.plan()
		s := cheapest(plans, o.MaxFilterBits)
		if !valid(s, plans[s], o.MaxFilterBits) || math.IsNaN(plans[s].cost) || math.IsInf(plans[s].cost, 0) {
			t.Logf("|A| %d, |B| %d, keys %d, values %d, %+v: Auto picks %v, %+v", nA, nB, kl, vl, o, s, plans[s])
			return false
		}
		for c, p := range plans {
			if valid(c, p, o.MaxFilterBits) && p.cost < plans[s].cost {
				t.Logf("|A| %d, |B| %d, keys %d, values %d, %+v: Auto picks %v at %.0f, %v runs at %.0f", nA, nB, kl, vl, o, s, plans[s].cost, c, p.cost)
				return false
			}
		}
		return true
	}
	n := 300
	if testing.Short() {
		n = 100
	}
	if err := quick.Check(f, &quick.Config{MaxCount: n, Rand: mathrand.New(mathrand.NewSource(40))}); err != nil {
		t.Error(err)
	}
}
