package bloomkv

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"testing"
)

// Benchmarks of part 1's write and read paths, on the operating system's
// file system in a temporary directory:
//
//	go test -run '^$' -bench . -benchmem .

func benchDB(b *testing.B) *DB {
	d, err := Open(b.TempDir(), &Options{Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { d.Close() })
	return d
}

func benchKey(i int) []byte { return []byte(fmt.Sprintf("key%012d", i)) }

var benchValue = make([]byte, 100)

// BenchmarkSetNoSync measures a NoSync Set of random 16-byte keys; the
// keys are made in place, so allocations per op are the store's own.
func BenchmarkSetNoSync(b *testing.B) {
	d := benchDB(b)
	b.ReportAllocs()
	b.SetBytes(int64(16 + len(benchValue)))
	key := make([]byte, 16)
	rng := rand.New(rand.NewPCG(1, 2))
	for range b.N {
		binary.BigEndian.PutUint64(key, rng.Uint64())
		binary.BigEndian.PutUint64(key[8:], rng.Uint64())
		if err := d.Set(key, benchValue, NoSync); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSetSync measures Sync writes from 1 and from 8 goroutines: with
// group commit, 8 writers share fsyncs, so throughput (ns/op per write)
// improves.
func BenchmarkSetSync(b *testing.B) {
	for _, writers := range []int{1, 8} {
		b.Run(fmt.Sprintf("goroutines=%d", writers), func(b *testing.B) {
			d := benchDB(b)
			var next atomic.Int64
			b.SetParallelism(max(writers/runtime.GOMAXPROCS(0), 1)) // RunParallel starts this × GOMAXPROCS goroutines
			if writers == 1 {
				for range b.N {
					if err := d.Set(benchKey(int(next.Add(1))), benchValue, Sync); err != nil {
						b.Fatal(err)
					}
				}
				return
			}
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := d.Set(benchKey(int(next.Add(1))), benchValue, Sync); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

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

// levelsDB builds a store of n keys (100-byte values), written in random
// order and spread over several overlapping levels by automatic compaction,
// on the operating system's file system.
func levelsDB(b *testing.B, n int) *DB {
	d, err := Open(b.TempDir(), &Options{Logger: quietLogger(), LBaseMaxBytes: 4 << 20, TargetFileSize: 1 << 20, CacheSize: 64 << 20})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { d.Close() })
	fillKeysOrder(b, d, n, 100, true)
	if err := d.Flush(); err != nil {
		b.Fatal(err)
	}
	waitForCompactions(b, d)
	return d
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
