package cache

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// trace returns block accesses shaped like an LSM's: Zipf-distributed point
// reads over many blocks, interrupted by scans that touch a long run of
// blocks once each (a compaction or a full iteration).
func trace(n int, blocks uint64, seed uint64) []uint64 {
	r := rand.New(rand.NewPCG(seed, 3))
	z := rand.NewZipf(r, 1.1, 4, blocks-1)
	out := make([]uint64, 0, n)
	for len(out) < n {
		if r.IntN(1000) == 0 {
			start := r.Uint64N(blocks)
			for i := uint64(0); i < blocks/20 && len(out) < n; i++ {
				out = append(out, (start+i)%blocks)
			}
			continue
		}
		// Scatter the popular blocks so they do not sit in one file region.
		out = append(out, (z.Uint64()*0x9e3779b97f4a7c15)%blocks)
	}
	return out
}

// BenchmarkCache runs the cache on the trace: the hit rate (hit%) at a cache
// of 5% and 20% of the blocks, and the throughput of parallel readers
// (ns/op).
func BenchmarkCache(b *testing.B) {
	const blocks, blockSize = 100_000, 4096
	tr := trace(1_000_000, blocks, 1)
	for _, frac := range []int{5, 20} {
		b.Run(fmt.Sprintf("hitrate/cache=%d%%", frac), func(b *testing.B) {
			var hits, total uint64
			for range b.N {
				c := New(int64(blocks*frac/100)*(blockSize+entryOverhead), Options{})
				val := make([]byte, blockSize)
				for _, blk := range tr {
					if _, ok := c.Get(1, blk); ok {
						hits++
					} else {
						c.Set(1, blk, val)
					}
					total++
				}
			}
			b.ReportMetric(100*float64(hits)/float64(total), "hit%")
		})
	}
	b.Run("parallel", func(b *testing.B) {
		c := New(int64(blocks/5)*(blockSize+entryOverhead), Options{})
		val := make([]byte, blockSize)
		b.RunParallel(func(pb *testing.PB) {
			i := rand.IntN(len(tr))
			for pb.Next() {
				blk := tr[i%len(tr)]
				i++
				if _, err := c.GetOrLoad(1, blk, func() ([]byte, error) { return val, nil }); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}
