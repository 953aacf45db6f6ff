package bloomkv

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/bloomkv/bloomkv/internal/benchutil"
)

// BenchmarkMultiGet reads batches of keys of a 200k-key store on several
// levels (levelsDB) by one MultiGet ("multiget") and by a Get each ("gets"):
// present keys, absent keys between them, and present keys drawn by a Zipf
// law (YCSB's, scattered), in batches of 16 and 100. An op is a batch;
// ns/key and cpu-ns/key (the process's CPU time) are per key.
func BenchmarkMultiGet(b *testing.B) {
	const n = 200_000
	d := levelsDB(b, n)
	pickers := []struct {
		name string
		new  func(r *rand.Rand) func() []byte
	}{
		{"present", func(r *rand.Rand) func() []byte { return func() []byte { return levelKey(2 * r.IntN(n)) } }},
		{"absent", func(r *rand.Rand) func() []byte { return func() []byte { return levelKey(2*r.IntN(n) + 1) } }},
		{"zipf", func(r *rand.Rand) func() []byte {
			z := benchutil.NewZipf(n, 0.99)
			return func() []byte { return levelKey(2 * int(benchutil.Scatter(z.Next(r), n))) }
		}},
	}
	for _, p := range pickers {
		for _, size := range []int{16, 100} {
			r := rand.New(rand.NewPCG(1, uint64(size)))
			next := p.new(r)
			batches := make([][][]byte, 256)
			for i := range batches {
				batches[i] = make([][]byte, size)
				for j := range size {
					batches[i][j] = next()
				}
			}
			present := p.name != "absent"
			b.Run(fmt.Sprintf("%s/batch=%d/multiget", p.name, size), func(b *testing.B) {
				b.ReportAllocs()
				start, cpu := time.Now(), benchutil.CPUTime()
				for i := range b.N {
					keys := batches[i%len(batches)]
					vals, errs := d.MultiGet(keys)
					if present != (errs[0] == nil) || present != (vals[len(keys)-1] != nil) {
						b.Fatal(errs[0])
					}
				}
				perKey(b, b.N*size, start, cpu)
			})
			b.Run(fmt.Sprintf("%s/batch=%d/gets", p.name, size), func(b *testing.B) {
				b.ReportAllocs()
				start, cpu := time.Now(), benchutil.CPUTime()
				for i := range b.N {
					keys := batches[i%len(batches)]
					for _, k := range keys {
						if _, err := d.Get(k); present != (err == nil) {
							b.Fatal(err)
						}
					}
				}
				perKey(b, b.N*size, start, cpu)
			})
		}
	}
}

// perKey reports the wall-clock and CPU time per key of a benchmark that
// read keys keys since start and cpu.
func perKey(b *testing.B, keys int, start time.Time, cpu time.Duration) {
	b.ReportMetric(float64(time.Since(start).Nanoseconds())/float64(keys), "ns/key")
	if cpu != 0 {
		b.ReportMetric(float64(benchutil.CPUTime()-cpu)/float64(keys), "cpu-ns/key")
	}
}

// BenchmarkMultiGetAfterLargeBatch reads batches of 16 absent keys by
// MultiGet after one batch of 10,000 keys, whose scratch memory the batch's
// reused state keeps: a small batch must not pay for clearing all of it.
func BenchmarkMultiGetAfterLargeBatch(b *testing.B) {
	const n = 200_000
	d := levelsDB(b, n)
	r := rand.New(rand.NewPCG(2, 16))
	large := make([][]byte, 10_000)
	for i := range large {
		large[i] = levelKey(2 * r.IntN(n))
	}
	batches := make([][][]byte, 256)
	for i := range batches {
		batches[i] = make([][]byte, 16)
		for j := range batches[i] {
			batches[i][j] = levelKey(2*r.IntN(n) + 1)
		}
	}
	d.MultiGet(large)
	b.ReportAllocs()
	b.ResetTimer()
	start, cpu := time.Now(), benchutil.CPUTime()
	for i := range b.N {
		if _, errs := d.MultiGet(batches[i%len(batches)]); errs[0] == nil {
			b.Fatal("an absent key was found")
		}
	}
	perKey(b, b.N*16, start, cpu)
}
