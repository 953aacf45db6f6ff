package main

import "slices"

// medianRange is the median, the least and the greatest of the values,
// skipping nil ones; all nil when none is set. The median of an even count
// is the mean of the two middle values.
func medianRange(vals []*float64) (median, lo, hi *float64) {
	var set []float64
	for _, v := range vals {
		if v != nil {
			set = append(set, *v)
		}
	}
	if len(set) == 0 {
		return nil, nil, nil
	}
	slices.Sort(set)
	n := len(set)
	med := set[n/2]
	if n%2 == 0 {
		med = (set[n/2-1] + set[n/2]) / 2
	}
	return ptr(med), ptr(set[0]), ptr(set[n-1])
}
