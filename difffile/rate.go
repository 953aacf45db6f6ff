package difffile

import "math"

// probesForCountersPerKey[c] is the k that minimises the false-positive rate
// of a filter at c counters per key (lineRate at 128/c keys a line); a test
// recomputes it.
var probesForCountersPerKey = [MaxCountersPerKey + 1]uint8{
	0, 1, 1, 2, 3, 3, 4, 4, 5, 5, 5, 6, 6, 6, 7, 7, 7,
	7, 8, 8, 8, 8, 8, 8, 9, 9, 9, 9, 9, 9, 9, 9, 10,
}

// lineRate returns the false-positive rate of a blocked filter whose lines
// hold cells cells, when each key takes k distinct cells of one line and a
// line's load is Poisson with mean lambda keys: the probability that all k
// cells of an absent key are in use. It is the Poisson mixture over line
// loads that filterblock.ExpectedFPRate sums term by term, in closed form:
// a key avoids j given cells of its line with probability
// a_j = C(cells-j, k)/C(cells, k), so by inclusion-exclusion a line holding i
// keys passes an absent key with probability Σ_j (-1)^j C(k,j) a_j^i, and the
// Poisson mixture of a_j^i is exp(-lambda(1-a_j)).
func lineRate(cells int, lambda float64, k int) float64 {
	if !(lambda >= 0) || k < 1 || k > cells {
		return 1
	}
	if math.IsInf(lambda, 1) {
		return 1
	}
	var sum float64
	binom := 1.0 // C(k, j)
	for j := 0; j <= k; j++ {
		a := 1.0
		for t := 0; t < k; t++ {
			a *= float64(cells-j-t) / float64(cells-t)
		}
		term := binom * math.Exp(-lambda*(1-a))
		if j%2 == 1 {
			term = -term
		}
		sum += term
		binom = binom * float64(k-j) / float64(j+1)
	}
	// The alternating sum loses about 1e-13 to rounding; keep it a rate.
	return min(max(sum, 0), 1)
}

// ExpectedFPRate returns the expected false-positive rate of f when it holds
// n distinct keys (and no counter is stuck at saturation): the probability
// that MayContain answers true for a key that is not in the set.
func (f *Filter) ExpectedFPRate(n float64) float64 {
	return lineRate(CountersPerLine, n/float64(f.lines), int(f.k))
}

// DesignFPRate returns the expected false-positive rate of f at its design
// capacity, ExpectedFPRate(Capacity()).
func (f *Filter) DesignFPRate() float64 {
	return f.ExpectedFPRate(float64(f.capacity))
}

// findGrowthLoad returns the number of keys at which f's expected
// false-positive rate reaches growthFactor times its design rate, by
// bisection (the rate grows with the load). The densest design rate, 63% at
// one counter a key, leaves 1.5 times it below 1, so the doubling ends.
func (f *Filter) findGrowthLoad() float64 {
	target := growthFactor * f.DesignFPRate()
	lo, hi := float64(f.capacity), 2*float64(f.capacity)+CountersPerLine*float64(f.lines)
	for i := 0; i < 64 && f.ExpectedFPRate(hi) <= target; i++ {
		lo, hi = hi, 2*hi
	}
	for i := 0; i < 60 && hi-lo > 0.5; i++ {
		mid := (lo + hi) / 2
		if f.ExpectedFPRate(mid) <= target {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}
