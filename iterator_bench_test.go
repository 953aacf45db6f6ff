package bloomkv

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/benchutil"
)

// BenchmarkScan iterates the whole multi-level store forward.
func BenchmarkScan(b *testing.B) {
	const n = 200_000
	d := levelsDB(b, n)
	b.ReportAllocs()
	b.ResetTimer()
	cpu := benchutil.CPUTime()
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
	benchutil.ReportCPU(b, keys, cpu) // per key
}

// BenchmarkSeekManyTables opens an iterator bounded to one key's span in a
// version of 100k tables (manyTablesState), which picks each level's tables
// in the bounds, and seeks to its first key.
func BenchmarkSeekManyTables(b *testing.B) {
	d, s := manyTablesState(b)
	seq := base.SeqNum(d.visibleSeq.Load()) + 1
	r := rand.New(rand.NewPCG(1, 2))
	bounds := make([]IterOptions, 4096)
	for i := range bounds {
		k := manyKeysStep * r.IntN(manyKeys)
		bounds[i] = IterOptions{LowerBound: levelKey(k), UpperBound: levelKey(k + manyKeysStep)}
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu := benchutil.CPUTime()
	for i := range b.N {
		o := &bounds[i%len(bounds)]
		it := d.newIter(s, seq, o)
		if !it.First() || !bytes.Equal(it.Key(), o.LowerBound) {
			b.Fatalf("at %q, want %q: %v", it.Key(), o.LowerBound, it.Error())
		}
		if err := it.Close(); err != nil {
			b.Fatal(err)
		}
	}
	benchutil.ReportCPU(b, b.N, cpu)
}

// BenchmarkSeekNext10 opens an iterator per op on the multi-level store,
// seeks to a random key, reads ten more, and closes it: a short range query.
func BenchmarkSeekNext10(b *testing.B) {
	const n = 200_000
	d := levelsDB(b, n)
	r := rand.New(rand.NewPCG(1, 2))
	keys := make([][]byte, 4096)
	for i := range keys {
		keys[i] = levelKey(2 * r.IntN(n))
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu := benchutil.CPUTime()
	for i := range b.N {
		it, err := d.NewIter(nil)
		if err != nil {
			b.Fatal(err)
		}
		ok := it.SeekGE(keys[i%len(keys)])
		for j := 0; ok && j < 10; j++ {
			ok = it.Next()
		}
		if err := it.Close(); err != nil {
			b.Fatal(err)
		}
	}
	benchutil.ReportCPU(b, b.N, cpu)
}
