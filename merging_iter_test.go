package bloomkv

import (
	"math/rand/v2"
	"testing"

	"github.com/bloomkv/bloomkv/internal/base"
)

// TestCompareInternal checks the heap's comparison against
// base.CompareInternal on keys of every length up to 20 bytes, sharing
// prefixes of every length, and equal user keys with different trailers.
func TestCompareInternal(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	key := func() []byte {
		k := make([]byte, r.IntN(21))
		for i := range k {
			k[i] = byte(r.IntN(3)) * 0x7f // few values: long shared prefixes
		}
		return k
	}
	for range 200_000 {
		a := base.MakeInternalKey(key(), base.SeqNum(r.IntN(3)), base.KindSet)
		b := base.MakeInternalKey(key(), base.SeqNum(r.IntN(3)), base.KindSet)
		if r.IntN(4) == 0 {
			b.UserKey = append([]byte(nil), a.UserKey...)
		}
		if got, want := compareInternal(a, b), base.CompareInternal(a, b); got != want {
			t.Fatalf("compareInternal(%x#%d, %x#%d) = %d, want %d", a.UserKey, a.Trailer, b.UserKey, b.Trailer, got, want)
		}
	}
}
