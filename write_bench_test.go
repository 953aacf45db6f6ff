package bloomkv

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

// Benchmarks of the write path, on the operating system's file system in a
// temporary directory (those of Get and of a scan are in get_bench_test.go
// and iterator_bench_test.go):
//
//	go test -run '^$' -bench . -benchmem .

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

// BenchmarkSetBetweenReads measures NoSync Sets that follow a pause, as the
// updates of a read-write mix follow reads (ycsb-a): between two Sets the
// loop spins for a few microseconds. It reports the 99th percentile of the
// Sets' latency (p99-ns), which a commit that wakes a sleeping goroutine
// (a futex system call) raises.
func BenchmarkSetBetweenReads(b *testing.B) {
	d := benchDB(b)
	key := make([]byte, 16)
	rng := rand.New(rand.NewPCG(1, 2))
	lat := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	for range b.N {
		binary.BigEndian.PutUint64(key, rng.Uint64())
		binary.BigEndian.PutUint64(key[8:], rng.Uint64())
		start := time.Now()
		if err := d.Set(key, benchValue, NoSync); err != nil {
			b.Fatal(err)
		}
		now := time.Now()
		lat = append(lat, now.Sub(start))
		for time.Since(now) < 5*time.Microsecond { // a read's worth of other work
		}
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)*99/100]), "p99-ns")
}
