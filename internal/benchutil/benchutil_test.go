package benchutil

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/golang/snappy"
)

func TestMakeKey(t *testing.T) {
	buf := make([]byte, 32)
	if k := MakeKey(buf, 42); string(k) != "0000000000000042" || len(k) != KeyLen {
		t.Fatalf("MakeKey(42) = %q", k)
	}
	a, b := make([]byte, KeyLen), make([]byte, KeyLen)
	r := rand.New(rand.NewPCG(1, 1))
	for range 1000 {
		x, y := r.Uint64N(1e15), r.Uint64N(1e15)
		if got, want := bytes.Compare(MakeKey(a, x), MakeKey(b, y)), cmp.Compare(x, y); got != want {
			t.Fatalf("keys of %d and %d compare %d, ids %d", x, y, got, want)
		}
	}
}

func TestZipf(t *testing.T) {
	const n = 1000
	z := NewZipf(n, 0.99)
	r := rand.New(rand.NewPCG(7, 7))
	counts := make([]int, n)
	for range 100_000 {
		rank := z.Next(r)
		if rank >= n {
			t.Fatalf("rank %d of %d", rank, n)
		}
		counts[rank]++
	}
	if i := slices.Index(counts, slices.Max(counts)); i != 0 {
		t.Fatalf("rank %d drawn most often (%d times), not rank 0 (%d)", i, counts[i], counts[0])
	}
	// Rank 0 draws about 1/H(1000, 0.99) of the time (13%), far more than
	// rank 100 (about 0.14%).
	if counts[0] < 10_000 || counts[0] > 16_000 || counts[100] > counts[0]/20 {
		t.Errorf("counts: rank 0 %d, rank 1 %d, rank 100 %d", counts[0], counts[1], counts[100])
	}
}

// TestZipfSequence pins the ranks a seed draws: the benchmarks' workloads
// must not change under them.
func TestZipfSequence(t *testing.T) {
	z := NewZipf(1000, 0.99)
	r := rand.New(rand.NewPCG(1, 2))
	var got []uint64
	for range 8 {
		got = append(got, z.Next(r))
	}
	if want := []uint64{86, 16, 23, 12, 217, 9, 256, 6}; !slices.Equal(got, want) {
		t.Fatalf("ranks %v, want %v", got, want)
	}
}

func TestScatter(t *testing.T) {
	for _, n := range []uint64{1, 2, 3, 1000, 500_000, 1 << 40} {
		upper := 0
		for rank := range uint64(1000) {
			i := Scatter(rank, n)
			if i >= n {
				t.Fatalf("Scatter(%d, %d) = %d", rank, n, i)
			}
			if i >= n/2 {
				upper++
			}
		}
		// The popular ranks spread over the space, not bunched at its
		// start: about half land in its upper half.
		if n >= 1000 && (upper < 400 || upper > 600) {
			t.Errorf("n=%d: %d of the first 1000 ranks in the upper half", n, upper)
		}
	}
}

func TestValueSource(t *testing.T) {
	for _, size := range []int{1, 100, 1000} {
		v := NewValueSource(size, rand.New(rand.NewPCG(1, 2)))
		r := rand.New(rand.NewPCG(3, 4))
		var all []byte
		distinct := map[string]bool{}
		for range 1000 {
			val := v.Next(r)
			if len(val) != size || cap(val) != size {
				t.Fatalf("size %d: value of len %d cap %d", size, len(val), cap(val))
			}
			for _, c := range val {
				if c < ' ' || c > '~' {
					t.Fatalf("size %d: byte %#x is not printable", size, c)
				}
			}
			all = append(all, val...)
			distinct[string(val)] = true
		}
		if size >= 100 && len(distinct) < 990 {
			t.Errorf("size %d: only %d distinct values of 1000", size, len(distinct))
		}
		if size == 1000 {
			// Half of every stretch repeats the other half: Snappy halves
			// long values, about.
			if ratio := float64(len(snappy.Encode(nil, all))) / float64(len(all)); ratio < 0.45 || ratio > 0.65 {
				t.Errorf("values compress to %.2f of their size, want about half", ratio)
			}
		}
	}
}

// TestValueSourceSequence pins the values a seed gives.
func TestValueSourceSequence(t *testing.T) {
	v := NewValueSource(100, rand.New(rand.NewPCG(1, 0x76616c7565)))
	got := v.Next(rand.New(rand.NewPCG(5, 5)))
	if want := "|.p/+LY+q9uqbsaxI{`r"; string(got[:20]) != want {
		t.Fatalf("value starts %q, want %q", got[:20], want)
	}
}

func TestCPUTime(t *testing.T) {
	start := CPUTime()
	if start == 0 {
		t.Skip("CPU time is not measured here")
	}
	deadline := time.Now().Add(10 * time.Second)
	buf := make([]byte, 1<<16)
	for CPUTime()-start < 20*time.Millisecond {
		if time.Now().After(deadline) {
			t.Fatalf("CPU time went from %v to %v in 10s of hashing", start, CPUTime())
		}
		sum := sha256.Sum256(buf)
		copy(buf, sum[:])
	}
}
