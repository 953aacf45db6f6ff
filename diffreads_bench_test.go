package bloomkv

import (
	"math/rand/v2"
	"testing"

	"github.com/bloomkv/bloomkv/internal/benchutil"
)

// BenchmarkDiffFilterReads measures what the differential-file filter
// gains the Gets of ./bench's read workloads on one store: the filter's
// reads switched on and off (SetDiffFilterReads) in alternating chunks of
// a few milliseconds, the side to go first swapping every pair of chunks,
// one key stream shared by both sides. The store, its compactions and the
// rest of the machine are then the same for both, which two stores, one
// with DisableDiffFilter, cannot give. It reports the time per Get of
// each side, their ratio (off/on: above 1 the filter makes the Gets
// faster; below 0.97 it costs them more than 3 %) and the median of the
// chunk pairs' own ratios (off/on-chunks):
//
//	go test -run '^$' -bench DiffFilterReads -benchtime 200x -count 3 .
//
// An op of -benchtime is one chunk per side.
func BenchmarkDiffFilterReads(b *testing.B) {
	for _, w := range diffReadsWorkloads {
		b.Run(w.name, func(b *testing.B) {
			d := diffReadsStore(b, w.prepare)
			defer d.Close()
			defer d.SetDiffFilterReads(true)
			r := rand.New(rand.NewPCG(3, 4))
			key := make([]byte, benchutil.KeyLen)
			var misses [2]uint64
			before := d.Metrics().DiffFilter
			runPaired(b, diffReadsChunk, func(side int) {
				d.SetDiffFilterReads(side == 0)
				m0 := d.cache.Metrics().Misses
				for range diffReadsChunk {
					diffCostGet(b, d, benchutil.MakeKey(key, w.key(r)))
				}
				misses[side] += d.cache.Metrics().Misses - m0
			})
			total := float64(b.N * diffReadsChunk)
			b.ReportMetric(float64(misses[0])/total, "on-misses/op")
			b.ReportMetric(float64(misses[1])/total, "off-misses/op")
			m := d.Metrics().DiffFilter
			if probes := m.Skips + m.Maybes - before.Skips - before.Maybes; probes > 0 {
				b.ReportMetric(float64(m.Skips-before.Skips)/float64(probes), "skip-rate")
			}
		})
	}
}

// diffReadsChunk is the Gets of one side's chunk: a few milliseconds.
const diffReadsChunk = 2000

// diffReadsStore opens a store with ./bench's settings in a new
// directory, loads readsKeys keys (even ids) into it in random order, and
// brings it to the shape a workload reads (prepare).
func diffReadsStore(b *testing.B, prepare func(b *testing.B, d *DB, r *rand.Rand)) *DB {
	b.Helper()
	d, err := Open(b.TempDir(), &Options{Logger: quietLogger(), CacheSize: 8 << 20, MemTableSize: 4 << 20, MaxConcurrentCompactions: 1})
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 1))
	values := benchutil.NewValueSource(100, r)
	key := make([]byte, benchutil.KeyLen)
	for _, i := range r.Perm(readsKeys) {
		diffCostSet(b, d, benchutil.MakeKey(key, 2*uint64(i)), values.Next(r))
	}
	if prepare != nil {
		prepare(b, d, r)
	}
	return d
}

// diffReadsWorkloads: ./bench's read workloads the filter serves, each
// as the store it reads and the keys of its Gets.
var diffReadsWorkloads = []struct {
	name    string
	prepare func(b *testing.B, d *DB, r *rand.Rand)
	key     func(r *rand.Rand) uint64
}{
	// Gets of uniformly random loaded keys, on the store as the load left
	// it (./bench readrandom).
	{"readrandom", nil, func(r *rand.Rand) uint64 { return 2 * r.Uint64N(readsKeys) }},
	// Gets of loaded keys after half of them, at random, were deleted
	// (./bench readrandom-deleted): a deleted key has a tombstone above
	// the base until a compaction into the base drops it.
	{"readrandom-deleted", deleteHalf, func(r *rand.Rand) uint64 { return 2 * r.Uint64N(readsKeys) }},
	// The same after a full compaction before the deletions, as in
	// ./bench's default run, where compact comes before deleterandom.
	{"readrandom-deleted-compacted", func(b *testing.B, d *DB, r *rand.Rand) {
		if err := d.Compact(nil, nil); err != nil {
			b.Fatal(err)
		}
		deleteHalf(b, d, r)
	}, func(r *rand.Rand) uint64 { return 2 * r.Uint64N(readsKeys) }},
	// Gets of absent keys between loaded ones, on the compacted store
	// with 1 % of the keys overwritten (./bench readbase-absent).
	{"readbase-absent", overwriteBase(readsKeys / 800), func(r *rand.Rand) uint64 { return 2*r.Uint64N(readsKeys) + 1 }},
	// The same Gets when only the memtable holds versions above the
	// base, as in ./bench at 500k keys, where the flushed rounds have
	// been compacted into the base by the time the reads start: a "no"
	// saves one memtable probe, and the filter steps aside (bypass).
	{"readbase-absent-memtable", overwriteBase(0), func(r *rand.Rand) uint64 { return 2*r.Uint64N(readsKeys) + 1 }},
	// Zipfian Gets of loaded keys (./bench ycsb-b's reads) on the
	// compacted store after ycsb-a's zipfian overwrites: the hot keys
	// have versions above the base, the cold ones do not.
	{"ycsb-b", func(b *testing.B, d *DB, r *rand.Rand) {
		if err := d.Compact(nil, nil); err != nil {
			b.Fatal(err)
		}
		key, values := make([]byte, benchutil.KeyLen), benchutil.NewValueSource(100, r)
		z := benchutil.NewZipf(readsKeys, 0.99)
		for range readsKeys / 2 {
			diffCostSet(b, d, benchutil.MakeKey(key, 2*benchutil.Scatter(z.Next(r), readsKeys)), values.Next(r))
		}
	}, zipfKey()},
}

// overwriteBase compacts the store whole, then overwrites 1 % of its keys
// at random, flushing after every flushEvery of them (never if 0).
func overwriteBase(flushEvery int) func(b *testing.B, d *DB, r *rand.Rand) {
	return func(b *testing.B, d *DB, r *rand.Rand) {
		if err := d.Compact(nil, nil); err != nil {
			b.Fatal(err)
		}
		key, values := make([]byte, benchutil.KeyLen), benchutil.NewValueSource(100, r)
		for j, i := range r.Perm(readsKeys)[:readsKeys/100] {
			diffCostSet(b, d, benchutil.MakeKey(key, 2*uint64(i)), values.Next(r))
			if flushEvery > 0 && j%flushEvery == 0 {
				if err := d.Flush(); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
}

// deleteHalf deletes half the loaded keys, in random order.
func deleteHalf(b *testing.B, d *DB, r *rand.Rand) {
	key := make([]byte, benchutil.KeyLen)
	for _, i := range r.Perm(readsKeys)[:readsKeys/2] {
		if err := d.Delete(benchutil.MakeKey(key, 2*uint64(i)), NoSync); err != nil {
			b.Fatal(err)
		}
	}
}

// zipfKey returns a picker of loaded keys' ids by ./bench's zipfian law
// (theta 0.99, hot keys scattered).
func zipfKey() func(r *rand.Rand) uint64 {
	z := benchutil.NewZipf(readsKeys, 0.99)
	return func(r *rand.Rand) uint64 { return 2 * benchutil.Scatter(z.Next(r), readsKeys) }
}
