package filterblock

import (
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
