package filterblock

// Side-by-side benchmarks of this package's blocked filter against Pebble's
// (github.com/cockroachdb/pebble/v2/bloom) on the same keys at the same
// bits/key:
//
//	go test -run '^$' -bench Compare -benchmem ./filterblock/
//
// BenchmarkCompareFPRate reports the false-positive rate as fp%,
// BenchmarkCompareBuild the build cost as ns/key, BenchmarkCompareMayContain
// the probe cost with a filter in L2 (hot) and with one far larger than the
// last-level cache (cold; -filterblock.coldmib sets its size, 128 MiB by
// default).

import (
	"encoding/binary"
	"flag"
	"fmt"
	"sync"
	"testing"

	pebblebloom "github.com/cockroachdb/pebble/v2/bloom"
	pebblesstable "github.com/cockroachdb/pebble/v2/sstable"
)

func pebbleBuild(bitsPerKey int, n int, key func(i int) []byte) []byte {
	w := pebblebloom.FilterPolicy(bitsPerKey).NewWriter(pebblesstable.TableFilter)
	for i := 0; i < n; i++ {
		w.AddKey(key(i))
	}
	return w.Finish(nil)
}

func ourBuild(bitsPerKey int, n int, key func(i int) []byte) []byte {
	b := NewBuilder(bitsPerKey)
	for i := 0; i < n; i++ {
		b.Add(key(i))
	}
	return b.Finish()
}

// generatedKey writes the i-th key of a reproducible stream of random 16-byte
// keys into buf (tag in the last byte, as randomKeys does).
func generatedKey(buf []byte, seed uint64, i int, tag byte) []byte {
	binary.LittleEndian.PutUint64(buf, splitmix(seed+2*uint64(i)))
	binary.LittleEndian.PutUint64(buf[8:], splitmix(seed+2*uint64(i)+1))
	buf[15] = tag
	return buf[:16]
}

func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

func BenchmarkCompareFPRate(b *testing.B) {
	const n, probes = 1_000_000, 2_000_000
	present := randomKeys(21, n, 0)
	absent := randomKeys(22, probes, 1)
	for _, bpk := range []int{10, 16, 20} {
		ours := ourBuild(bpk, n, func(i int) []byte { return present[i] })
		theirs := pebbleBuild(bpk, n, func(i int) []byte { return present[i] })
		f, err := Decode(ours)
		if err != nil {
			b.Fatal(err)
		}
		policy := pebblebloom.FilterPolicy(bpk)
		b.Run(fmt.Sprintf("bloomkv/bits=%d", bpk), func(b *testing.B) {
			fp := 0
			for i := 0; i < b.N; i++ {
				if f.MayContain(absent[i%probes]) {
					fp++
				}
			}
			b.ReportMetric(100*float64(fp)/float64(b.N), "fp%")
			b.ReportMetric(float64(len(ours))*8/n, "bits/key")
		})
		b.Run(fmt.Sprintf("pebble/bits=%d", bpk), func(b *testing.B) {
			fp := 0
			for i := 0; i < b.N; i++ {
				if policy.MayContain(pebblesstable.TableFilter, theirs, absent[i%probes]) {
					fp++
				}
			}
			b.ReportMetric(100*float64(fp)/float64(b.N), "fp%")
			b.ReportMetric(float64(len(theirs))*8/n, "bits/key")
		})
	}
}

func BenchmarkCompareBuild(b *testing.B) {
	const n = 100_000
	keys := randomKeys(23, n, 0)
	for _, bpk := range []int{10, 16} {
		b.Run(fmt.Sprintf("bloomkv/bits=%d", bpk), func(b *testing.B) {
			builder := NewBuilder(bpk)
			for i := 0; i < b.N; i++ {
				for _, k := range keys {
					builder.Add(k)
				}
				builder.Finish()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/key")
		})
		b.Run(fmt.Sprintf("pebble/bits=%d", bpk), func(b *testing.B) {
			w := pebblebloom.FilterPolicy(bpk).NewWriter(pebblesstable.TableFilter)
			for i := 0; i < b.N; i++ {
				for _, k := range keys {
					w.AddKey(k)
				}
				w.Finish(nil)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/key")
		})
	}
}

// probeSet holds one filter of each kind over the same keys.
type probeSet struct {
	ours    Filter
	theirs  []byte
	present [][]byte
	absent  [][]byte
}

var coldMiB = flag.Int("filterblock.coldmib", 128, "size in MiB of the filters of the cold probe benchmark")

// coldSets builds the large filters once per test binary: they take seconds.
var coldSets = sync.OnceValues(func() (*probeSet, error) {
	const bpk = 10
	n := *coldMiB << 20 * 8 / bpk
	var buf [16]byte
	key := func(i int) []byte { return generatedKey(buf[:], 31, i, 0) }
	ours, err := Decode(ourBuild(bpk, n, key))
	if err != nil {
		return nil, err
	}
	s := &probeSet{ours: ours, theirs: pebbleBuild(bpk, n, key)}
	for i := 0; i < 1<<20; i++ {
		s.present = append(s.present, append([]byte(nil), generatedKey(buf[:], 31, (i*7919)%n, 0)...))
		s.absent = append(s.absent, append([]byte(nil), generatedKey(buf[:], 32, i, 1)...))
	}
	return s, nil
})

func hotSet(b *testing.B) *probeSet {
	const bpk, n = 10, 100_000 // 122 KiB: fits in L2
	keys := randomKeys(33, n, 0)
	ours, err := Decode(ourBuild(bpk, n, func(i int) []byte { return keys[i] }))
	if err != nil {
		b.Fatal(err)
	}
	// 4096 probe keys (160 KiB with their slice headers) keep the keys
	// themselves in cache, so the benchmark measures the filter.
	return &probeSet{
		ours:    ours,
		theirs:  pebbleBuild(bpk, n, func(i int) []byte { return keys[i] }),
		present: keys[:4096],
		absent:  randomKeys(34, 4096, 1),
	}
}

func BenchmarkCompareMayContain(b *testing.B) {
	policy := pebblebloom.FilterPolicy(10)
	run := func(b *testing.B, s *probeSet) {
		for _, which := range []string{"absent", "present"} {
			keys := s.absent
			if which == "present" {
				keys = s.present
			}
			mask := len(keys) - 1 // a power of two
			b.Run("bloomkv/"+which, func(b *testing.B) {
				hits := 0
				for i := 0; i < b.N; i++ {
					if s.ours.MayContain(keys[i&mask]) {
						hits++
					}
				}
				b.ReportMetric(float64(hits)/float64(b.N), "maybe/op")
			})
			b.Run("pebble/"+which, func(b *testing.B) {
				hits := 0
				for i := 0; i < b.N; i++ {
					if policy.MayContain(pebblesstable.TableFilter, s.theirs, keys[i&mask]) {
						hits++
					}
				}
				b.ReportMetric(float64(hits)/float64(b.N), "maybe/op")
			})
		}
	}
	b.Run("hot", func(b *testing.B) { run(b, hotSet(b)) })
	b.Run("cold", func(b *testing.B) {
		s, err := coldSets()
		if err != nil {
			b.Fatal(err)
		}
		run(b, s)
	})
}
