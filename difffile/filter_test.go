package difffile

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/bits"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/bloomkv/bloomkv/filterblock"
)

// testKeys returns n distinct keys; keys of different tags never collide.
func testKeys(tag byte, n int) [][]byte {
	keys := make([][]byte, n)
	for i := range keys {
		k := make([]byte, 9)
		k[0] = tag
		binary.BigEndian.PutUint64(k[1:], uint64(i))
		keys[i] = k
	}
	return keys
}

func mustNew(t testing.TB, capacity, countersPerKey int) *Filter {
	t.Helper()
	f, err := New(capacity, countersPerKey)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestProbeTableMinimisesFPRate recomputes the k table: for each density,
// the k of least expected false-positive rate at design load.
func TestProbeTableMinimisesFPRate(t *testing.T) {
	for c := MinCountersPerKey; c <= MaxCountersPerKey; c++ {
		best, bestK := 2.0, 0
		for k := 1; k <= maxProbes; k++ {
			if r := lineRate(CountersPerLine, CountersPerLine/float64(c), k); r < best {
				best, bestK = r, k
			}
		}
		if got := int(probesForCountersPerKey[c]); got != bestK {
			t.Errorf("%d counters/key: table says k=%d, but k=%d minimises the rate (%.5f%% against %.5f%%)",
				c, got, bestK, 100*best, 100*lineRate(CountersPerLine, CountersPerLine/float64(c), got))
		}
	}
}

// TestLineRateMatchesFilterblock checks the closed form against
// filterblock.ExpectedFPRate, which sums the same Poisson mixture over line
// loads term by term for 512-cell lines.
func TestLineRateMatchesFilterblock(t *testing.T) {
	for _, bpk := range []int{1, 2, 3, 4, 6, 8, 10, 12, 16, 20, 24, 32} {
		for k := 1; k <= 14; k++ {
			want := filterblock.ExpectedFPRate(float64(bpk), k)
			got := lineRate(512, 512/float64(bpk), k)
			if math.Abs(got-want) > 1e-6*want {
				t.Errorf("bits/key %d, k %d: closed form %.12g, filterblock %.12g", bpk, k, got, want)
			}
		}
	}
}

func TestLineRateEdges(t *testing.T) {
	for _, c := range []struct {
		lambda float64
		k      int
		want   float64
	}{{0, 5, 0}, {math.NaN(), 5, 1}, {-1, 5, 1}, {math.Inf(1), 5, 1}, {10, 0, 1}, {10, 129, 1}} {
		if got := lineRate(CountersPerLine, c.lambda, c.k); got != c.want {
			t.Errorf("lineRate(%v, %d) = %v, want %v", c.lambda, c.k, got, c.want)
		}
	}
}

func TestDefaultDesign(t *testing.T) {
	const capacity = 1 << 20
	f := mustNew(t, capacity, 0)
	if f.CountersPerKey() != DefaultCountersPerKey || f.K() != 5 || f.Capacity() != capacity {
		t.Fatalf("counters/key %d, k %d, capacity %d", f.CountersPerKey(), f.K(), f.Capacity())
	}
	if got := float64(f.SizeBytes()) / capacity; got != 4 {
		t.Fatalf("%v bytes a key at capacity, want 4", got)
	}
	if got := f.DesignFPRate(); math.Abs(got-0.027389) > 1e-6 {
		t.Fatalf("design rate %.6f%%", 100*got)
	}
	if got := f.ExpectedFPRate(f.growthLoad); math.Abs(got/f.DesignFPRate()-growthFactor) > 1e-6 {
		t.Fatalf("rate at the growth load is %.4f times the design rate", got/f.DesignFPRate())
	}
	// Grown at the growth load to twice its capacity, it costs under 8
	// bytes a key.
	g := mustNew(t, 2*capacity, f.CountersPerKey())
	if got := float64(g.SizeBytes()) / f.growthLoad; got > 8 {
		t.Fatalf("%v bytes a key after growing", got)
	}
}

func TestNewRejectsBadParameters(t *testing.T) {
	for _, c := range [][2]int{{-1, 8}, {10, -1}, {10, MaxCountersPerKey + 1}, {math.MaxInt, 8}, {maxLines*CountersPerLine + 1, 1}} {
		if f, err := New(c[0], c[1]); err == nil {
			t.Errorf("New(%d, %d) = %d lines, want an error", c[0], c[1], f.Lines())
		}
	}
	f := mustNew(t, 0, 0)
	if f.Lines() != 1 || f.MayContain([]byte("x")) {
		t.Fatalf("empty filter: %d lines", f.Lines())
	}
	if f.NeedsGrowth() {
		t.Fatal("empty filter of capacity 0 needs growth")
	}
	f.Add([]byte("x"))
	if !f.NeedsGrowth() || !f.MayContain([]byte("x")) {
		t.Fatal("filter of capacity 0 holding a key")
	}
}

func TestLinesAreCacheAligned(t *testing.T) {
	for _, capacity := range []int{0, 1, 16, 17, 100, 1000, 4096, 100000} {
		f := mustNew(t, capacity, 0)
		if p := uintptr(unsafe.Pointer(&f.words[0])); p%LineBytes != 0 {
			t.Errorf("capacity %d: counters at %#x", capacity, p)
		}
		if len(f.words) != f.Lines()*wordsPerLine || f.SizeBytes() != f.Lines()*LineBytes {
			t.Errorf("capacity %d: %d words for %d lines", capacity, len(f.words), f.Lines())
		}
	}
}

// TestNoFalseNegatives runs random adds and removes of a small key set in a
// small filter, so that lines are crowded and counters saturate, and checks
// after every step that every key with outstanding adds passes.
func TestNoFalseNegatives(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, 0))
		f := mustNew(t, 1+rng.IntN(60), 1+rng.IntN(12))
		keys := testKeys(byte(seed), 40+rng.IntN(200))
		model := make(map[int]int) // key index → outstanding adds
		var total int64
		check := func(step int, what string) {
			t.Helper()
			for i, n := range model {
				if n > 0 && !f.MayContain(keys[i]) {
					t.Fatalf("seed %d step %d (%s): key %d with %d adds outstanding fails MayContain", seed, step, what, i, n)
				}
			}
			if f.Count() != total {
				t.Fatalf("seed %d step %d (%s): Count %d, want %d", seed, step, what, f.Count(), total)
			}
			if f.Saturated() == 0 && f.EstimateCount() != float64(total) {
				t.Fatalf("seed %d step %d: EstimateCount %v with no saturation, want %d", seed, step, f.EstimateCount(), total)
			}
		}
		for step := 0; step < 3000; step++ {
			i := rng.IntN(len(keys))
			switch op := rng.IntN(10); {
			case op < 4:
				f.Add(keys[i])
				model[i]++
				total++
				check(step, "add")
			case op == 4:
				// A burst, to push the key's counters to saturation.
				for range 10 + rng.IntN(20) {
					f.Add(keys[i])
					model[i]++
					total++
				}
				check(step, "burst")
			default:
				if model[i] > 0 {
					if !f.Remove(keys[i]) {
						t.Fatalf("seed %d step %d: Remove of key %d with %d adds outstanding failed", seed, step, i, model[i])
					}
					model[i]--
					total--
				} else if !f.MayContain(keys[i]) && f.Remove(keys[i]) {
					t.Fatalf("seed %d step %d: Remove of certainly absent key %d succeeded", seed, step, i)
				}
				check(step, "remove")
			}
		}
		if f.Saturated() == 0 {
			t.Fatalf("seed %d: no counter saturated; the test does not exercise saturation", seed)
		}
		for i, n := range model {
			for range n {
				if !f.Remove(keys[i]) {
					t.Fatalf("seed %d: final Remove of key %d failed", seed, i)
				}
				total--
			}
			model[i] = 0
		}
		check(-1, "drained")
		// Only saturated counters remain in use.
		var left uint64
		for _, w := range f.words {
			left += uint64(bits.OnesCount64(w &^ (fullCounters(w) * 0xf)))
		}
		if left != 0 {
			t.Fatalf("seed %d: %d bits of unsaturated counters remain after removing everything", seed, left)
		}
	}
}

func TestRemoveAbsentChangesNothing(t *testing.T) {
	f := mustNew(t, 1000, 0)
	if f.Remove([]byte("anything")) {
		t.Fatal("Remove from an empty filter succeeded")
	}
	for _, k := range testKeys(1, 1000) {
		f.Add(k)
	}
	for range 20 {
		f.Add([]byte("hot")) // saturate some counters
	}
	before := f.Encode()
	refused := 0
	for _, k := range testKeys(2, 5000) {
		if f.MayContain(k) {
			continue
		}
		if f.Remove(k) {
			t.Fatalf("Remove of certainly absent %x succeeded", k)
		}
		refused++
	}
	if refused < 4000 {
		t.Fatalf("only %d of 5000 absent keys were certainly absent", refused)
	}
	if !bytes.Equal(before, f.Encode()) {
		t.Fatal("refused removes changed the filter")
	}
}

// TestDecrementAllRestores covers the path a concurrent wrong Remove can
// take: a counter of the key is zero by the time its word is reached, and the
// words already decremented are put back.
func TestDecrementAllRestores(t *testing.T) {
	f := mustNew(t, 16, 8)
	line := (*[wordsPerLine]uint64)(f.words)
	line[0] = 0x3 | 0xf<<4 // counter 0 holds 3, counter 1 is saturated
	line[1] = 0x2          // counter 16 holds 2, counter 17 is zero
	line[2] = 0x1
	before := *line
	m := [wordsPerLine]uint64{0x11, 0x11, 0x1}
	if f.decrementAll(line, &m) {
		t.Fatal("decrementAll succeeded over a zero counter")
	}
	if *line != before {
		t.Fatalf("line %x after a refused decrement, want %x", *line, before)
	}
	m = [wordsPerLine]uint64{0x11, 0x1, 0x1}
	if !f.decrementAll(line, &m) {
		t.Fatal("decrementAll failed over non-zero counters")
	}
	if want := [wordsPerLine]uint64{0x2 | 0xf<<4, 0x1}; *line != want {
		t.Fatalf("line %x, want %x", *line, want)
	}
}

// measuredFPRate returns the fraction of n absent keys that pass f.
func measuredFPRate(f *Filter, n int) float64 {
	pass := 0
	for _, k := range testKeys(0xee, n) {
		if f.MayContain(k) {
			pass++
		}
	}
	return float64(pass) / float64(n)
}

func TestFPRate(t *testing.T) {
	const capacity, probes = 100_000, 400_000
	for _, c := range []struct {
		load float64
		tol  float64
	}{{0.5, 0.15}, {1, 0.08}, {1.5, 0.08}} {
		f := mustNew(t, capacity, 0)
		n := int(c.load * capacity)
		for _, k := range testKeys(1, n) {
			f.Add(k)
		}
		got, want := measuredFPRate(f, probes), f.ExpectedFPRate(float64(n))
		t.Logf("%.1f× capacity: measured %.4f%%, expected %.4f%%", c.load, 100*got, 100*want)
		if math.Abs(got/want-1) > c.tol {
			t.Errorf("%.1f× capacity: measured %.4f%%, expected %.4f%%", c.load, 100*got, 100*want)
		}
		if c.load == 1 {
			if got > 1.25*f.DesignFPRate() {
				t.Errorf("at capacity: measured %.4f%% above 1.25× the design rate %.4f%%", 100*got, 100*f.DesignFPRate())
			}
			if f.NeedsGrowth() {
				t.Error("NeedsGrowth at design capacity")
			}
		}
		if c.load == 1.5 && !f.NeedsGrowth() {
			t.Errorf("no NeedsGrowth at 1.5× capacity, rate %.2f× design", want/f.DesignFPRate())
		}
	}
}

func TestNeedsGrowthFlipsAtGrowthLoad(t *testing.T) {
	f := mustNew(t, 10_000, 0)
	keys := testKeys(3, 2*f.Capacity())
	flip := int(math.Floor(f.growthLoad)) + 1 // the first count above it
	for i, k := range keys {
		f.Add(k)
		if got, want := f.NeedsGrowth(), i+1 >= flip; got != want {
			t.Fatalf("NeedsGrowth %v at count %d (growth load %.1f, saturated %d)", got, i+1, f.growthLoad, f.Saturated())
		}
	}
	// Once the rate is back under 1.5× design it no longer asks.
	for _, k := range keys[f.Capacity():] {
		f.Remove(k)
	}
	if f.NeedsGrowth() {
		t.Fatal("NeedsGrowth after removing back to capacity")
	}
}

// TestNeedsGrowthCountsSaturation pins counters with keys added 15 times and
// removed again: Count returns to zero, but the pinned counters fill the
// filter, and NeedsGrowth turns true once they weigh more than the growth
// load, when they raise the measured rate to about 1.5 times the design rate.
func TestNeedsGrowthCountsSaturation(t *testing.T) {
	f := mustNew(t, 2000, 0)
	for i, k := range testKeys(4, 10_000) {
		before := f.load()
		for range CounterMax {
			f.Add(k)
		}
		for range CounterMax {
			f.Remove(k)
		}
		if f.Count() != 0 {
			t.Fatalf("Count %d", f.Count())
		}
		if !f.NeedsGrowth() {
			continue
		}
		if before > f.growthLoad || f.load() <= f.growthLoad {
			t.Fatalf("key %d: NeedsGrowth turned at load %.1f (before %.1f), growth load %.1f", i, f.load(), before, f.growthLoad)
		}
		got, design := measuredFPRate(f, 200_000), f.DesignFPRate()
		t.Logf("NeedsGrowth at %d saturated counters (%d keys pinned): measured rate %.3f%%, %.2f× design",
			f.Saturated(), i+1, 100*got, got/design)
		if got < design || got > 2*growthFactor*design {
			t.Fatalf("measured rate %.3f%% when NeedsGrowth turned, design %.3f%%", 100*got, 100*design)
		}
		return
	}
	t.Fatal("NeedsGrowth never turned true")
}

func TestEstimateCount(t *testing.T) {
	f := mustNew(t, 10_000, 0)
	keys := testKeys(5, 8000)
	for _, k := range keys {
		f.Add(k)
	}
	for _, k := range keys[:3000] {
		f.Remove(k)
	}
	if f.Saturated() != 0 || f.EstimateCount() != 5000 || f.Count() != 5000 {
		t.Fatalf("estimate %v, count %d, saturated %d", f.EstimateCount(), f.Count(), f.Saturated())
	}
	for range 100 {
		f.Add(keys[0])
	}
	if f.Saturated() == 0 || !(f.EstimateCount() < float64(f.Count())) {
		t.Fatalf("estimate %v, count %d, saturated %d", f.EstimateCount(), f.Count(), f.Saturated())
	}
}

func TestMayContainHashDoesNotAllocate(t *testing.T) {
	f := mustNew(t, 1000, 0)
	keys := testKeys(6, 1000)
	for _, k := range keys {
		f.Add(k)
	}
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		f.MayContainHash(filterblock.Hash(keys[i%len(keys)]))
		f.MayContain(keys[(i+7)%len(keys)])
		i++
	})
	if allocs != 0 {
		t.Fatalf("MayContainHash allocates %.1f times a call", allocs)
	}
}

// TestMayContainHashesMatchesMayContainHash checks the batched probe against
// the single one, key by key, over filters of every density's probe count,
// batches shorter and longer than a group, present, absent and removed keys.
func TestMayContainHashesMatchesMayContainHash(t *testing.T) {
	for _, cpk := range []int{MinCountersPerKey, 4, 10, MaxCountersPerKey} {
		f := mustNew(t, 2000, cpk)
		keys := testKeys(7, 4000)
		hs := make([]uint64, len(keys))
		for i, k := range keys {
			hs[i] = filterblock.Hash(k)
			if i%2 == 0 {
				f.AddHash(hs[i])
			}
		}
		for i := 0; i < len(hs); i += 8 {
			f.RemoveHash(hs[i]) // every fourth added key gone again
		}
		wantTrue, wantFalse := 0, 0
		for _, n := range []int{0, 1, probeGroup - 1, probeGroup, probeGroup + 1, 100, len(hs)} {
			may := make([]bool, n+3)
			for i := range may {
				may[i] = true // the tail past n must stay as it was
			}
			got := f.MayContainHashes(hs[:n], may)
			count := 0
			for i, h := range hs[:n] {
				if want := f.MayContainHash(h); may[i] != want {
					t.Fatalf("counters per key %d, batch %d: key %d: batched %v, single %v", cpk, n, i, may[i], want)
				}
				if may[i] {
					count++
					wantTrue++
				} else {
					wantFalse++
				}
			}
			if got != count {
				t.Fatalf("counters per key %d, batch %d: returned %d, %d answered true", cpk, n, got, count)
			}
			if !may[n] || !may[n+1] || !may[n+2] {
				t.Fatalf("counters per key %d, batch %d: wrote past the batch", cpk, n)
			}
		}
		if wantTrue == 0 || wantFalse == 0 {
			t.Fatalf("counters per key %d: %d true and %d false answers: the keys test one side only", cpk, wantTrue, wantFalse)
		}
	}
}

func TestMayContainHashesDoesNotAllocate(t *testing.T) {
	f := mustNew(t, 1000, 0)
	hs := make([]uint64, 100)
	for i, k := range testKeys(8, len(hs)) {
		hs[i] = filterblock.Hash(k)
		f.AddHash(hs[i])
	}
	may := make([]bool, len(hs))
	if allocs := testing.AllocsPerRun(100, func() { f.MayContainHashes(hs, may) }); allocs != 0 {
		t.Fatalf("MayContainHashes allocates %.1f times a call", allocs)
	}
}
