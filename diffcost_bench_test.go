package bloomkv

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/bloomkv/bloomkv/internal/benchutil"
)

// BenchmarkDiffFilterCost measures what the differential-file filter costs
// the workloads that write, and what it saves those that read, to within a
// few percent: ./bench's medians of separate runs cannot resolve that on a
// noisy two-core machine. Two stores, the filter on and off
// (DisableDiffFilter), are loaded alike (readsKeys keys in random order,
// 100-byte values, ./bench's settings otherwise), then take the same
// operations from the same random streams in alternating chunks of a few
// milliseconds, the first store to go swapping every chunk, so that both see
// the same load from the rest of the machine and from each other's
// background work. Each reports its time per operation, and their ratio
// (off over on: below 0.97, the filter made the workload more than 3 %
// slower), of the sums (off/on) and the median of the chunks' own ratios
// (off/on-chunks, which a stall in one chunk moves less):
//
//	go test -run '^$' -bench DiffFilterCost -benchtime 20x -count 6 .
//
// An op of -benchtime is one chunk per store.
func BenchmarkDiffFilterCost(b *testing.B) {
	for _, w := range diffCostWorkloads {
		b.Run(w.name, func(b *testing.B) {
			var stores [2]*DB
			var ops [2]func(int)
			for i, disable := range []bool{false, true} {
				d := diffCostStore(b, disable)
				defer d.Close()
				stores[i] = d
				ops[i] = w.start(b, d, rand.New(rand.NewPCG(3, 4)))
			}
			runPaired(b, w.chunk, func(side int) { ops[side](w.chunk) })
			if m := stores[0].Metrics().DiffFilter; m.Skips+m.Maybes > 0 {
				b.ReportMetric(float64(m.Skips)/float64(m.Skips+m.Maybes), "skip-rate")
			}
		})
	}
}

// runPaired runs b.N pairs of chunks of ops, run(side) running one chunk
// of side 0 ("on") or 1 ("off"), the side to go first swapping every pair,
// and reports each side's time per op, their ratio (off/on) and the median
// of the pairs' own ratios (off/on-chunks).
func runPaired(b *testing.B, ops int, run func(side int)) {
	var took [2]time.Duration
	logRatios := make([]float64, 0, b.N)
	b.ResetTimer()
	for n := range b.N {
		var chunk [2]time.Duration
		for j := range 2 {
			i := (n + j) % 2
			t := time.Now()
			run(i)
			chunk[i] = time.Since(t)
			took[i] += chunk[i]
		}
		logRatios = append(logRatios, math.Log(float64(chunk[1])/float64(chunk[0])))
	}
	b.StopTimer()
	total := float64(b.N * ops)
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(float64(took[0])/total, "on-ns/op")
	b.ReportMetric(float64(took[1])/total, "off-ns/op")
	b.ReportMetric(float64(took[1])/float64(took[0]), "off/on")
	// The median of the chunks' own ratios: a chunk that met a
	// compaction's or the machine's stall on one side moves it no more
	// than any other chunk, where it moves the ratio of the sums by its
	// whole length.
	slices.Sort(logRatios)
	b.ReportMetric(math.Exp(logRatios[len(logRatios)/2]), "off/on-chunks")
}

// diffCostStore opens a store in a new directory, with the filter on or
// off, and loads readsKeys keys (even ids) into it in random order.
func diffCostStore(b *testing.B, disable bool) *DB {
	b.Helper()
	d, err := Open(b.TempDir(), &Options{Logger: quietLogger(), DisableDiffFilter: disable})
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 1))
	values := benchutil.NewValueSource(100, r)
	key := make([]byte, benchutil.KeyLen)
	for _, i := range r.Perm(readsKeys) {
		if err := d.Set(benchutil.MakeKey(key, 2*uint64(i)), values.Next(r), NoSync); err != nil {
			b.Fatal(err)
		}
	}
	return d
}

// diffCostWorkloads: ./bench's workloads that write, and readrandom.
var diffCostWorkloads = []struct {
	name  string
	chunk int
	start func(b *testing.B, d *DB, r *rand.Rand) func(ops int)
}{
	// Sets of uniformly random loaded keys (./bench overwrite).
	{"overwrite", 2000, func(b *testing.B, d *DB, r *rand.Rand) func(int) {
		key, values := make([]byte, benchutil.KeyLen), benchutil.NewValueSource(100, r)
		return func(ops int) {
			for range ops {
				diffCostSet(b, d, benchutil.MakeKey(key, 2*r.Uint64N(readsKeys)), values.Next(r))
			}
		}
	}},
	// Sets of new keys, uniformly random (./bench fillrandom's writes).
	{"fillrandom", 2000, func(b *testing.B, d *DB, r *rand.Rand) func(int) {
		key, values := make([]byte, benchutil.KeyLen), benchutil.NewValueSource(100, r)
		return func(ops int) {
			for range ops {
				diffCostSet(b, d, benchutil.MakeKey(key, 2*r.Uint64N(1<<40)+1), values.Next(r))
			}
		}
	}},
	// Zipfian keys, half gets and half sets (YCSB A).
	{"ycsb-a", 2000, func(b *testing.B, d *DB, r *rand.Rand) func(int) {
		key, values, z := make([]byte, benchutil.KeyLen), benchutil.NewValueSource(100, r), readsZipfKeys()
		return func(ops int) {
			for range ops {
				k := benchutil.MakeKey(key, 2*benchutil.Scatter(z.Next(r), readsKeys))
				if r.IntN(2) == 0 {
					diffCostGet(b, d, k)
				} else {
					diffCostSet(b, d, k, values.Next(r))
				}
			}
		}
	}},
	// Zipfian keys, half gets and half read-modify-writes (YCSB F).
	{"ycsb-f", 2000, func(b *testing.B, d *DB, r *rand.Rand) func(int) {
		key, values, z := make([]byte, benchutil.KeyLen), benchutil.NewValueSource(100, r), readsZipfKeys()
		return func(ops int) {
			for range ops {
				k := benchutil.MakeKey(key, 2*benchutil.Scatter(z.Next(r), readsKeys))
				diffCostGet(b, d, k)
				if r.IntN(2) == 0 {
					diffCostSet(b, d, k, values.Next(r))
				}
			}
		}
	}},
	// Deletes of uniformly random loaded keys (./bench deleterandom).
	{"deleterandom", 2000, func(b *testing.B, d *DB, r *rand.Rand) func(int) {
		key := make([]byte, benchutil.KeyLen)
		return func(ops int) {
			for range ops {
				if err := d.Delete(benchutil.MakeKey(key, 2*r.Uint64N(readsKeys)), NoSync); err != nil {
					b.Fatal(err)
				}
			}
		}
	}},
	// Gets of uniformly random loaded keys (./bench readrandom).
	{"readrandom", 2000, func(b *testing.B, d *DB, r *rand.Rand) func(int) {
		key := make([]byte, benchutil.KeyLen)
		return func(ops int) {
			for range ops {
				diffCostGet(b, d, benchutil.MakeKey(key, 2*r.Uint64N(readsKeys)))
			}
		}
	}},
}

func diffCostSet(b *testing.B, d *DB, k, v []byte) {
	if err := d.Set(k, v, NoSync); err != nil {
		b.Fatal(fmt.Errorf("set %s: %w", k, err))
	}
}

func diffCostGet(b *testing.B, d *DB, k []byte) {
	if _, err := d.Get(k); err != nil && !errors.Is(err, ErrNotFound) {
		b.Fatal(fmt.Errorf("get %s: %w", k, err))
	}
}
