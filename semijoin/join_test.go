package semijoin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/bloomkv/bloomkv"
	"github.com/bloomkv/bloomkv/vfs"
)

// openStore opens an empty store in memory, closed at the end of the test.
func openStore(t testing.TB) *bloomkv.DB {
	t.Helper()
	d, err := bloomkv.Open("/db", &bloomkv.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil && !errors.Is(err, bloomkv.ErrClosed) {
			t.Error(err)
		}
	})
	return d
}

// fill writes the pairs of m to d in one batch.
func fill(t testing.TB, d *bloomkv.DB, m map[string]string) {
	t.Helper()
	b := d.NewBatch()
	for k, v := range m {
		b.Set([]byte(k), []byte(v))
	}
	if err := d.Apply(b, bloomkv.NoSync); err != nil {
		t.Fatal(err)
	}
}

// keyShapes make keys of different lengths and prefixes.
var keyShapes = []func(r *rand.Rand, i int) string{
	func(_ *rand.Rand, i int) string { return fmt.Sprintf("k%08d", i) },
	func(_ *rand.Rand, i int) string { return fmt.Sprint(i) },
	func(r *rand.Rand, i int) string {
		return fmt.Sprintf("%s/%d", []string{"", "a", "orders", "\x00\xff"}[r.IntN(4)], i)
	},
	func(r *rand.Rand, i int) string { return string(bytes.Repeat([]byte{byte(i)}, 1+i%300)) },
}

// sides makes the maps of two sides: sizes, overlap and values at random,
// some values differing between the sides.
func sides(r *rand.Rand) (a, b map[string]string) {
	shape := keyShapes[r.IntN(len(keyShapes))]
	sizes := []int{0, 1, 2, 10, 100, 1000, 3000}
	nA, nB := sizes[r.IntN(len(sizes))], sizes[r.IntN(len(sizes))]
	overlap := 0
	if m := min(nA, nB); m > 0 {
		overlap = r.IntN(m + 1)
	}
	a, b = map[string]string{}, map[string]string{}
	for i := range nA {
		a[shape(r, i)] = fmt.Sprintf("a%d", r.IntN(100))
	}
	for i := range nB {
		k := shape(r, nA-overlap+i)
		b[k] = fmt.Sprintf("b%d-%s", i, bytes.Repeat([]byte("v"), r.IntN(50)))
	}
	return a, b
}

// modelJoin is the exact join of two maps in r, in key order.
func modelJoin(a, b map[string]string, r KeyRange, semi bool) []Match {
	var out []Match
	for k, va := range a {
		if vb, ok := b[k]; ok && r.contains([]byte(k)) {
			m := Match{Key: []byte(k), A: []byte(va), B: []byte(vb)}
			if semi {
				m.B = nil
			}
			out = append(out, m)
		}
	}
	slices.SortFunc(out, func(x, y Match) int { return bytes.Compare(x.Key, y.Key) })
	return out
}

func collect(t testing.TB, a, b Store, o *Options) ([]Match, Report) {
	t.Helper()
	var got []Match
	rep, err := Join(context.Background(), a, b, o, func(m Match) error {
		got = append(got, Match{Key: bytes.Clone(m.Key), A: bytes.Clone(m.A), B: bytes.Clone(m.B)})
		return nil
	})
	if err != nil {
		t.Fatalf("%v: %v", o.Strategy, err)
	}
	return got, rep
}

func sameMatches(x, y []Match) bool {
	return slices.EqualFunc(x, y, func(p, q Match) bool {
		return bytes.Equal(p.Key, q.Key) && bytes.Equal(p.A, q.A) && bytes.Equal(p.B, q.B) && (p.B == nil) == (q.B == nil)
	})
}

// TestJoinExact: over 1,000 random pairs of stores (random sizes, overlaps
// and key shapes, empty and one-key sides), every strategy returns exactly
// the join a model computes, in key order, as a join and as a semi-join,
// over the whole key space or a range.
func TestJoinExact(t *testing.T) {
	trials := 1000
	if testing.Short() {
		trials = 100
	}
	r := rand.New(rand.NewPCG(1, 2))
	for trial := range trials {
		ma, mb := sides(r)
		da, db := openStore(t), openStore(t)
		fill(t, da, ma)
		fill(t, db, mb)
		if trial%3 == 0 { // some sides on disk, some in the memtable
			for _, d := range []*bloomkv.DB{da, db} {
				if err := d.Flush(); err != nil {
					t.Fatal(err)
				}
			}
		}
		var kr KeyRange
		if trial%4 == 1 {
			kr = KeyRange{Start: []byte("2"), End: []byte("k0000500")}
		}
		semi := trial%5 == 2
		want := modelJoin(ma, mb, kr, semi)
		for s := Auto; s <= TwoWay; s++ {
			o := &Options{Range: kr, Strategy: s, SemiJoin: semi, BatchKeys: 1 + r.IntN(300)}
			got, rep := collect(t, Local(da, Limits{}), Local(db, Limits{}), o)
			if !sameMatches(got, want) {
				t.Fatalf("trial %d, %v (|A| %d, |B| %d, range %q, semi %v): %d matches, want %d",
					trial, s, len(ma), len(mb), kr, semi, len(got), len(want))
			}
			if rep.Matches != int64(len(want)) || rep.Candidates != rep.Matches+rep.FalsePositives {
				t.Fatalf("trial %d, %v: report %+v, want %d matches", trial, s, rep, len(want))
			}
		}
		// Stores closed at cleanup pile up: close these now.
		da.Close()
		db.Close()
	}
}

// TestJoinStrategiesMoveWhatTheySay: with a small A and a large B of
// which 10 % overlap, shipping a filter sends fewer bytes than shipping
// keys, Auto picks the cheapest expected strategy, and the bytes each
// strategy moved are within a few percent of what it expected.
func TestJoinStrategiesMoveWhatTheySay(t *testing.T) {
	ma, mb := map[string]string{}, map[string]string{}
	const nA, nB = 5000, 50000
	for i := range nA {
		ma[fmt.Sprintf("user%08d", i*10)] = "a"
	}
	for i := range nB {
		mb[fmt.Sprintf("user%08d", i)] = fmt.Sprintf("order-%d-%s", i, bytes.Repeat([]byte("x"), 40))
	}
	da, db := openStore(t), openStore(t)
	fill(t, da, ma)
	fill(t, db, mb)
	a, b := Local(da, Limits{}), Local(db, Limits{})
	bytesOf := map[Strategy]int64{}
	var expected map[Strategy]float64
	var auto Strategy
	for s := Auto; s <= TwoWay; s++ {
		got, rep := collect(t, a, b, &Options{Strategy: s})
		if len(got) != nB/10 {
			t.Fatalf("%v: %d matches, want %d", s, len(got), nB/10)
		}
		bytesOf[s] = rep.BytesAToB + rep.BytesBToA
		expected = rep.Expected
		if s == Auto {
			auto = rep.Strategy
		}
		t.Logf("%-10v %7d bytes (A→B %d, B→A %d; filter %d at FP %.4f; %d false positives); expected %.0f + matches",
			rep.Strategy, bytesOf[s], rep.BytesAToB, rep.BytesBToA, rep.FilterBytes, rep.FilterFPRate, rep.FalsePositives, rep.Expected[rep.Strategy])
	}
	if bytesOf[ShipFilter] >= bytesOf[ShipKeys] || bytesOf[ShipCompressed] >= bytesOf[ShipKeys] {
		t.Errorf("a filter moved %d or %d bytes, shipping keys %d", bytesOf[ShipFilter], bytesOf[ShipCompressed], bytesOf[ShipKeys])
	}
	for s := ShipKeys; s <= TwoWay; s++ {
		if expected[s] < expected[auto] {
			t.Errorf("Auto picked %v (expected %.0f bytes), but %v expected %.0f", auto, expected[auto], s, expected[s])
		}
	}
}

// TestJoinStopsAtTheCallersError: an error from fn ends the join and is
// returned.
func TestJoinStopsAtTheCallersError(t *testing.T) {
	da, db := openStore(t), openStore(t)
	m := map[string]string{"a": "1", "b": "2", "c": "3"}
	fill(t, da, m)
	fill(t, db, m)
	stop := errors.New("enough")
	for s := Auto; s <= TwoWay; s++ {
		n := 0
		_, err := Join(context.Background(), Local(da, Limits{}), Local(db, Limits{}), &Options{Strategy: s}, func(Match) error {
			n++
			return stop
		})
		if !errors.Is(err, stop) || n != 1 {
			t.Errorf("%v: %d calls, error %v; want 1 call and the callback's error", s, n, err)
		}
	}
}

// TestJoinBadInput: an empty range, a cancelled context, an unknown
// strategy and a filter over the limit are errors.
func TestJoinBadInput(t *testing.T) {
	da, db := openStore(t), openStore(t)
	fill(t, da, map[string]string{"a": "1"})
	fill(t, db, map[string]string{"a": "2"})
	a, b := Local(da, Limits{}), Local(db, Limits{MaxFilterBits: 64})
	noop := func(Match) error { return nil }
	if _, err := Join(context.Background(), a, b, &Options{Range: KeyRange{Start: []byte("b"), End: []byte("a")}}, noop); !errors.Is(err, ErrBadRequest) {
		t.Errorf("empty range: %v", err)
	}
	if _, err := Join(context.Background(), a, b, &Options{Strategy: Strategy(9)}, noop); !errors.Is(err, ErrBadRequest) {
		t.Errorf("unknown strategy: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Join(ctx, a, b, nil, noop); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: %v", err)
	}
	if _, err := b.Filter(context.Background(), KeyRange{}, FilterSpec{M: 1 << 20, K: 3}); !errors.Is(err, ErrBadRequest) {
		t.Errorf("filter over the limit: %v", err)
	}
	if err := b.Probe(context.Background(), KeyRange{}, []byte("not a filter"), true, func(k, v []byte) error { return nil }); !errors.Is(err, ErrCorrupt) {
		t.Errorf("damaged filter: %v", err)
	}
	if err := a.Lookup(context.Background(), KeyRange{}, [][]byte{[]byte("b"), []byte("a")}, true, func(k, v []byte) error { return nil }); !errors.Is(err, ErrBadRequest) {
		t.Errorf("unsorted lookup: %v", err)
	}
	if _, err := ParseStrategy("bogus"); err == nil {
		t.Error("ParseStrategy accepted bogus")
	}
	for s := Auto; s <= TwoWay; s++ {
		if p, err := ParseStrategy(s.String()); err != nil || p != s {
			t.Errorf("ParseStrategy(%q) = %v, %v", s, p, err)
		}
	}
}

// TestEstimate: with 16 bits a key, the intersection estimate of a 100k
// and a 1M side (the benchmark's; a tenth of that with -short) is within 10 %
// of the truth for overlaps of 1 % of the smaller side and more (30 % with
// -short), and within its error bound, which is as narrow.
func TestEstimate(t *testing.T) {
	// At a tenth of the size the binomial error of the false positives
	// weighs three times as much on an overlap of 1 %.
	nA, nB, tolerance := 100_000, 1_000_000, 0.10
	if testing.Short() {
		nA, nB, tolerance = 10_000, 100_000, 0.30
	}
	for _, pct := range []int{1, 10, 50, 100} {
		overlap := nA * pct / 100
		da, db := openStore(t), openStore(t)
		b := da.NewBatch()
		for i := range nA {
			b.Set(fmt.Appendf(nil, "k%08d", i), nil)
		}
		if err := da.Apply(b, bloomkv.NoSync); err != nil {
			t.Fatal(err)
		}
		b = db.NewBatch()
		for i := range nB {
			b.Set(fmt.Appendf(nil, "k%08d", nA-overlap+i), nil)
			if b.Len() > 1<<20 {
				if err := db.Apply(b, bloomkv.NoSync); err != nil {
					t.Fatal(err)
				}
				b = db.NewBatch()
			}
		}
		if err := db.Apply(b, bloomkv.NoSync); err != nil {
			t.Fatal(err)
		}
		e, err := Estimate(context.Background(), Local(da, Limits{}), Local(db, Limits{}), KeyRange{}, 0)
		if err != nil {
			t.Fatal(err)
		}
		relErr := (e.Intersection - float64(overlap)) / float64(overlap)
		t.Logf("overlap %7d: estimate %8.0f (%+.2f%%) ± %.0f; |A| %d, |B| %d; %d passed a filter of %d bytes, FP %.5f",
			overlap, e.Intersection, 100*relErr, e.ErrorBound, e.A, e.B, e.Passed, e.FilterBytes, e.FPRate)
		if relErr > tolerance || relErr < -tolerance {
			t.Errorf("overlap %d: estimate %.0f off by %.1f%%", overlap, e.Intersection, 100*relErr)
		}
		if d := e.Intersection - float64(overlap); d > e.ErrorBound || -d > e.ErrorBound {
			t.Errorf("overlap %d: estimate %.0f outside its bound ± %.0f", overlap, e.Intersection, e.ErrorBound)
		}
		if e.ErrorBound > tolerance*float64(overlap)+10 {
			t.Errorf("overlap %d: error bound %.0f is wider than %.0f %%", overlap, e.ErrorBound, 100*tolerance)
		}
		if e.A != int64(nA) || e.B != int64(nB) {
			t.Errorf("counts %d and %d, want %d and %d", e.A, e.B, nA, nB)
		}
		da.Close()
		db.Close()
	}
}

// TestAutoShipsKeysWhenATiny: a handful of keys costs less than any
// filter's header, so Auto sends the keys.
func TestAutoShipsKeysWhenATiny(t *testing.T) {
	da, db := openStore(t), openStore(t)
	fill(t, da, map[string]string{"k1": "a", "k2": "a", "k3": "a"})
	mb := map[string]string{}
	for i := range 10_000 {
		mb[fmt.Sprintf("k%d", i)] = "b"
	}
	fill(t, db, mb)
	got, rep := collect(t, Local(da, Limits{}), Local(db, Limits{}), nil)
	if rep.Strategy != ShipKeys || len(got) != 3 {
		t.Fatalf("Auto chose %v (expected bytes %v) and found %d matches; want keys and 3", rep.Strategy, rep.Expected, len(got))
	}
}
