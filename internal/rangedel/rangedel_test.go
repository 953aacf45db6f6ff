package rangedel

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/bloomkv/bloomkv/internal/base"
)

func key(i int) []byte { return []byte(fmt.Sprintf("k%02d", i)) }

// TestCoverMatchesBruteForce checks Fragment, Cover and Clip against a direct
// reading of random overlapping tombstones.
func TestCoverMatchesBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 300; trial++ {
		var ts []Tombstone
		for n := r.IntN(8); n > 0; n-- {
			a := r.IntN(30)
			b := a + 1 + r.IntN(10)
			ts = append(ts, Tombstone{Start: key(a), End: key(b), SeqNum: base.SeqNum(r.IntN(20) + 1)})
		}
		frags := Fragment(ts)
		for i := 1; i < len(frags); i++ {
			a, b := frags[i-1], frags[i]
			if string(a.Start) == string(b.Start) {
				if string(a.End) != string(b.End) || a.SeqNum <= b.SeqNum {
					t.Fatalf("fragments %v and %v share a start but not an end, or are not newest first", a, b)
				}
			} else if string(a.End) > string(b.Start) {
				t.Fatalf("fragments %v and %v overlap", a, b)
			}
		}
		lo, hi := key(r.IntN(40)), key(r.IntN(40))
		clipped := Clip(frags, lo, hi)
		for k := 0; k < 42; k++ {
			for _, readSeq := range []base.SeqNum{1, 5, 10, 21, base.SeqNumMax} {
				var want base.SeqNum
				for _, tb := range ts {
					if tb.Covers(key(k)) && tb.SeqNum < readSeq {
						want = max(want, tb.SeqNum)
					}
				}
				if got := Cover(frags, key(k), readSeq); got != want {
					t.Fatalf("trial %d: Cover(%s, %d) = %d, want %d (tombstones %v)", trial, key(k), readSeq, got, want, ts)
				}
				wantClip := want
				if string(key(k)) < string(lo) || string(key(k)) >= string(hi) {
					wantClip = 0
				}
				if got := Cover(clipped, key(k), readSeq); got != wantClip {
					t.Fatalf("trial %d: clipped to [%s, %s): Cover(%s, %d) = %d, want %d", trial, lo, hi, key(k), readSeq, got, wantClip)
				}
			}
		}
	}
}
