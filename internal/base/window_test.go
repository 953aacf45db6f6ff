package base

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
)

// TestSearchWindows checks SearchWindows against sort.Search on sorted
// windows with runs of equal values, at every subrange and for targets at,
// between and beyond them, including the largest window.
func TestSearchWindows(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for round := range 200 {
		w := make([]uint64, r.IntN(40))
		for i := range w {
			w[i] = r.Uint64N(20)
			if round%5 == 0 && r.IntN(4) == 0 {
				w[i] = ^uint64(0)
			}
		}
		slices.Sort(w)
		targets := []uint64{0, 1, ^uint64(0), ^uint64(0) - 1, 25}
		for _, x := range w {
			targets = append(targets, x, x+1, x-1)
		}
		for lo := 0; lo <= len(w); lo++ {
			for hi := lo; hi <= len(w); hi++ {
				for _, k := range targets {
					want := lo + sort.Search(hi-lo, func(i int) bool { return w[lo+i] >= k })
					if got := SearchWindows(w, lo, hi, k); got != want {
						t.Fatalf("SearchWindows(%v, %d, %d, %d) = %d, want %d", w, lo, hi, k, got, want)
					}
				}
			}
		}
	}
}

// TestKeyWindow checks that keys with a common prefix whose windows differ
// sort as their windows do.
func TestKeyWindow(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	key := func() []byte {
		k := make([]byte, r.IntN(14))
		for i := range k {
			k[i] = []byte{0, 1, 0x7f, 0xff}[r.IntN(4)]
		}
		return append([]byte("pre"), k...)
	}
	for range 20000 {
		a, b := key(), key()
		wa, wb := KeyWindow(a, 3), KeyWindow(b, 3)
		if wa != wb && (wa < wb) != (bytes.Compare(a, b) < 0) {
			t.Fatalf("%x and %x: windows %x and %x sort the other way", a, b, wa, wb)
		}
	}
}

// TestWindowRunEnd checks WindowRunEnd against a linear scan, on runs of
// equal windows shorter and longer than the eight it steps through, the
// largest window's included.
func TestWindowRunEnd(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for range 500 {
		w := make([]uint64, r.IntN(60))
		for i := range w {
			w[i] = r.Uint64N(4)
			if r.IntN(5) == 0 {
				w[i] = ^uint64(0)
			}
		}
		slices.Sort(w)
		for lo := 0; lo <= len(w); lo++ {
			for _, k := range []uint64{0, 1, 2, 3, ^uint64(0)} {
				if lo < len(w) && w[lo] < k {
					continue // not a lower bound of k
				}
				want := lo
				for want < len(w) && w[want] == k {
					want++
				}
				if got := WindowRunEnd(w, lo, k); got != want {
					t.Fatalf("WindowRunEnd(%v, %d, %d) = %d, want %d", w, lo, k, got, want)
				}
			}
		}
	}
}
