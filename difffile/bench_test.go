package difffile

import (
	"testing"

	"github.com/bloomkv/bloomkv/filterblock"
)

const benchKeys = 1 << 20

// benchFilter returns a filter at its design capacity and the hashes of its
// keys and of as many absent keys.
func benchFilter(b *testing.B) (f *Filter, present, absent []uint64) {
	f = mustNew(b, benchKeys, 0)
	present = make([]uint64, benchKeys)
	absent = make([]uint64, benchKeys)
	for i, k := range testKeys(1, benchKeys) {
		present[i] = filterblock.Hash(k)
		f.AddHash(present[i])
	}
	for i, k := range testKeys(2, benchKeys) {
		absent[i] = filterblock.Hash(k)
	}
	return f, present, absent
}

func BenchmarkMayContainHash(b *testing.B) {
	f, present, absent := benchFilter(b)
	for _, c := range []struct {
		name   string
		hashes []uint64
	}{{"present", present}, {"absent", absent}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			hits, i := 0, 0
			for ; b.Loop(); i++ {
				if f.MayContainHash(c.hashes[i&(benchKeys-1)]) {
					hits++
				}
			}
			b.ReportMetric(float64(hits)/float64(i), "maybe/op")
		})
	}
}

// BenchmarkMayContainHashes probes batches of 100 keys, each batch one
// MayContainHashes call ("batched") or a MayContainHash per key ("single");
// an op is a key.
func BenchmarkMayContainHashes(b *testing.B) {
	f, present, absent := benchFilter(b)
	const batch = 100
	may := make([]bool, batch)
	for _, c := range []struct {
		name   string
		hashes []uint64
	}{{"present", present}, {"absent", absent}} {
		b.Run(c.name+"/batched", func(b *testing.B) {
			b.ReportAllocs()
			hits, keys := 0, 0
			for i := 0; b.Loop(); i += batch {
				off := i % (benchKeys - batch)
				hits += f.MayContainHashes(c.hashes[off:off+batch], may)
				keys += batch
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(keys), "ns/key")
			b.ReportMetric(float64(hits)/float64(keys), "maybe/key")
		})
		b.Run(c.name+"/single", func(b *testing.B) {
			b.ReportAllocs()
			hits, keys := 0, 0
			for i := 0; b.Loop(); i += batch {
				off := i % (benchKeys - batch)
				for _, h := range c.hashes[off : off+batch] {
					if f.MayContainHash(h) {
						hits++
					}
				}
				keys += batch
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(keys), "ns/key")
			b.ReportMetric(float64(hits)/float64(keys), "maybe/key")
		})
	}
}

// cycle runs op on each of hashes in turn while b.Loop lasts; after the last
// it stops the timer, runs undo on each and starts over, so that op always
// meets the filter in the same range of states.
func cycle(b *testing.B, hashes []uint64, op func(uint64) bool, undo func(uint64) bool) {
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if i == len(hashes) {
			b.StopTimer()
			for _, h := range hashes {
				undo(h)
			}
			i = 0
			b.StartTimer()
		}
		if !op(hashes[i]) {
			b.Fatal("operation failed")
		}
	}
}

// BenchmarkAddHash adds keys to a filter between one and two times its
// capacity.
func BenchmarkAddHash(b *testing.B) {
	f, _, absent := benchFilter(b)
	add := func(h uint64) bool { f.AddHash(h); return true }
	cycle(b, absent, add, f.RemoveHash)
}

// BenchmarkRemoveHash removes keys from a filter between zero and one times
// its capacity.
func BenchmarkRemoveHash(b *testing.B) {
	f, present, _ := benchFilter(b)
	add := func(h uint64) bool { f.AddHash(h); return true }
	cycle(b, present, f.RemoveHash, add)
}

func BenchmarkAddRemoveParallel(b *testing.B) {
	f, _, absent := benchFilter(b)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for i := 0; pb.Next(); i++ {
			h := absent[i&(benchKeys-1)]
			f.AddHash(h)
			f.RemoveHash(h)
		}
	})
}
