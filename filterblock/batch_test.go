package filterblock

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

func TestMayContainHashesMatchesSingleProbes(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, keys := range []int{0, 1, 40, 5000} {
		b := NewBuilder(10)
		for i := range keys {
			b.AddHash(uint64(i) * 0x9e3779b97f4a7c15)
		}
		f, err := Decode(b.Finish())
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []int{0, 1, 15, 16, 17, 100} {
			hs := make([]uint64, n)
			for i := range hs {
				if i%2 == 0 && keys > 0 {
					hs[i] = uint64(rng.IntN(keys)) * 0x9e3779b97f4a7c15 // present
				} else {
					hs[i] = rng.Uint64()
				}
			}
			may := make([]bool, n+3)
			for i := range may {
				may[i] = true // stale answers must be overwritten
			}
			got := f.MayContainHashes(hs, may)
			want := 0
			for i, h := range hs {
				w := f.MayContainHash(h)
				if may[i] != w {
					t.Fatalf("keys=%d n=%d: hash %d: batch says %v, single probe %v", keys, n, i, may[i], w)
				}
				if w {
					want++
				}
			}
			if got != want {
				t.Fatalf("keys=%d n=%d: %d maybes counted, want %d", keys, n, got, want)
			}
		}
	}
}

func TestMayContainHashesDoesNotAllocate(t *testing.T) {
	b := NewBuilder(10)
	for i := range 1000 {
		b.AddHash(uint64(i) * 0x9e3779b97f4a7c15)
	}
	f, err := Decode(b.Finish())
	if err != nil {
		t.Fatal(err)
	}
	hs := make([]uint64, 100)
	for i := range hs {
		hs[i] = uint64(i) * 0x9e3779b97f4a7c15
	}
	may := make([]bool, len(hs))
	if n := testing.AllocsPerRun(100, func() { f.MayContainHashes(hs, may) }); n != 0 {
		t.Fatalf("%v allocations per batch, want 0", n)
	}
}

// TestMayContainEachMatchesSingleProbes: keys probing filters of their own
// (of 0, 1, 40 and 5000 keys, mixed in one batch) are answered as each
// filter's MayContainHash answers.
func TestMayContainEachMatchesSingleProbes(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	sizes := []int{0, 1, 40, 5000}
	filters := make([]*Filter, len(sizes))
	for j, keys := range sizes {
		b := NewBuilder(10)
		for i := range keys {
			b.AddHash(uint64(i)*0x9e3779b97f4a7c15 + uint64(j))
		}
		f, err := Decode(b.Finish())
		if err != nil {
			t.Fatal(err)
		}
		filters[j] = &f
	}
	for _, n := range []int{0, 1, 15, 16, 17, 100, 1000} {
		hs, fs := make([]uint64, n), make([]*Filter, n)
		for i := range hs {
			j := rng.IntN(len(sizes))
			fs[i] = filters[j]
			if keys := sizes[j]; i%2 == 0 && keys > 0 {
				hs[i] = uint64(rng.IntN(keys))*0x9e3779b97f4a7c15 + uint64(j) // present
			} else {
				hs[i] = rng.Uint64()
			}
		}
		may := make([]bool, n+3)
		for i := range may {
			may[i] = true // stale answers must be overwritten
		}
		got := MayContainEach(fs, hs, may)
		want, yes, no := 0, 0, 0
		for i, h := range hs {
			w := fs[i].MayContainHash(h)
			if may[i] != w {
				t.Fatalf("n=%d: hash %d: batch says %v, its filter's single probe %v", n, i, may[i], w)
			}
			if w {
				want++
				yes++
			} else {
				no++
			}
		}
		if got != want {
			t.Fatalf("n=%d: %d maybes counted, want %d", n, got, want)
		}
		if !may[n] || !may[n+1] || !may[n+2] {
			t.Fatalf("n=%d: wrote past the batch", n)
		}
		if n >= 100 && (yes == 0 || no == 0) {
			t.Fatalf("n=%d: %d true and %d false answers: one side untested", n, yes, no)
		}
	}
	hs, fs, may := make([]uint64, 100), make([]*Filter, 100), make([]bool, 100)
	for i := range hs {
		hs[i], fs[i] = uint64(i)*0x9e3779b97f4a7c15+3, filters[i%len(filters)]
	}
	if a := testing.AllocsPerRun(100, func() { MayContainEach(fs, hs, may) }); a != 0 {
		t.Fatalf("%v allocations per batch, want 0", a)
	}
}

// BenchmarkMayContainHashes probes absent keys in batches of 100 of a filter
// of 1M and of 8M keys (1.2 and 10 MB at 10 bits a key): by one
// MayContainHashes call a batch ("batched"), by a MayContainHash each
// ("single"), and by MayContainEach over 64 filters of the same total size,
// a key's filter drawn at random ("each", as a level's tables).
func BenchmarkMayContainHashes(b *testing.B) {
	const batch = 100
	for _, n := range []int{1 << 20, 8 << 20} {
		build := func(keys, salt int) *Filter {
			bl := NewBuilder(10)
			for i := range keys {
				bl.AddHash(uint64(i)*0x9e3779b97f4a7c15 + uint64(salt))
			}
			f, err := Decode(bl.Finish())
			if err != nil {
				b.Fatal(err)
			}
			return &f
		}
		one := build(n, 0)
		many := make([]*Filter, 64)
		for j := range many {
			many[j] = build(n/len(many), j+1)
		}
		rng := rand.New(rand.NewPCG(5, 6))
		hs, fs := make([]uint64, 1<<16), make([]*Filter, 1<<16)
		for i := range hs {
			hs[i], fs[i] = rng.Uint64(), many[rng.IntN(len(many))]
		}
		may := make([]bool, batch)
		for _, c := range []struct {
			name  string
			probe func(off int) // the batch hs[off:off+batch]
		}{
			{"batched", func(off int) { one.MayContainHashes(hs[off:off+batch], may) }},
			{"single", func(off int) {
				for j, h := range hs[off : off+batch] {
					may[j] = one.MayContainHash(h)
				}
			}},
			{"each", func(off int) { MayContainEach(fs[off:off+batch], hs[off:off+batch], may) }},
		} {
			b.Run(fmt.Sprintf("keys=%d/%s", n, c.name), func(b *testing.B) {
				keys := 0
				for i := 0; b.Loop(); i += batch {
					c.probe(i % (len(hs) - batch))
					keys += batch
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(keys), "ns/key")
			})
		}
	}
}
