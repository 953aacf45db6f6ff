package bloomkv

import (
	"math/rand/v2"
	"testing"
)

func BenchmarkGetMemtable(b *testing.B) {
	d := benchDB(b)
	const n = 20_000 // 2.3 MB: stays in the 4 MiB memtable
	for i := range n {
		d.Set(benchKey(i), benchValue, NoSync)
	}
	if m := d.Metrics(); m.Levels[0].Files != 0 {
		b.Fatalf("memtable flushed: %+v", m.Levels[0])
	}
	present, absent := make([][]byte, n), make([][]byte, n)
	for i := range n {
		present[i], absent[i] = benchKey((i*7919)%n), benchKey(n+i)
	}
	// One allocation per present key: the value Get returns is the
	// caller's copy.
	b.Run("present", func(b *testing.B) {
		b.ReportAllocs()
		for i := range b.N {
			if _, err := d.Get(present[i%n]); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("absent", func(b *testing.B) {
		b.ReportAllocs()
		for i := range b.N {
			if _, err := d.Get(absent[i%n]); err == nil {
				b.Fatal("found an absent key")
			}
		}
	})
}

// BenchmarkGetLevels reads present and absent keys of a 200k-key store whose
// tables lie on several levels (L1 and L2, overlapping, with these targets).
func BenchmarkGetLevels(b *testing.B) {
	const n = 200_000
	d := levelsDB(b, n)
	for _, present := range []bool{true, false} {
		name := "absent"
		if present {
			name = "present"
		}
		b.Run(name, func(b *testing.B) {
			r := rand.New(rand.NewPCG(1, 2))
			keys := make([][]byte, 4096)
			for i := range keys {
				k := 2 * r.IntN(n)
				if !present {
					k++
				}
				keys[i] = levelKey(k)
			}
			before := d.Metrics()
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				_, err := d.Get(keys[i%len(keys)])
				if present != (err == nil) {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			after := d.Metrics()
			b.ReportMetric(float64(after.FilterProbes-before.FilterProbes)/float64(b.N), "probes/op")
			b.ReportMetric(float64(after.BlockCache.Hits+after.BlockCache.Misses-before.BlockCache.Hits-before.BlockCache.Misses)/float64(b.N), "blocks/op")
		})
	}
	b.Logf("\n%s", d.Metrics())
}
