package bloomkv

import (
	"testing"
)

// BenchmarkScan iterates the whole multi-level store forward.
func BenchmarkScan(b *testing.B) {
	const n = 200_000
	d := levelsDB(b, n)
	b.ReportAllocs()
	b.ResetTimer()
	keys := 0
	for range b.N {
		it, err := d.NewIter(nil)
		if err != nil {
			b.Fatal(err)
		}
		for ok := it.First(); ok; ok = it.Next() {
			keys++
		}
		if err := it.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if keys != n*b.N {
		b.Fatalf("scanned %d keys, want %d", keys, n*b.N)
	}
	b.ReportMetric(float64(keys)/b.Elapsed().Seconds(), "keys/s")
}
