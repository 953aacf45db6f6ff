package rocksbloom

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	pebble "github.com/cockroachdb/pebble/v2"
	pebblebloom "github.com/cockroachdb/pebble/v2/bloom"

	"github.com/bloomkv/bloomkv/internal/base"
)

// pebbleFilter builds a table filter of keys with Pebble's own writer.
func pebbleFilter(keys [][]byte, bitsPerKey int) []byte {
	w := pebblebloom.FilterPolicy(bitsPerKey).NewWriter(pebble.TableFilter)
	for _, k := range keys {
		w.AddKey(k)
	}
	return w.Finish(nil)
}

func TestReadsPebbleFilters(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 7, 1000, 20000} {
		keys := make([][]byte, n)
		for i := range keys {
			// Every tail length and bytes ≥ 0x80, where the sign extension
			// matters.
			k := make([]byte, r.IntN(13))
			for j := range k {
				k[j] = byte(r.Uint32())
			}
			keys[i] = append(k, byte(i), byte(i>>8), byte(i>>16))
		}
		data := pebbleFilter(keys, 10)
		f, err := Decode(data)
		if err != nil {
			t.Fatalf("n=%d: %v", n, err)
		}
		for _, k := range keys {
			if !f.MayContain(k) {
				t.Fatalf("n=%d: false negative for %x", n, k)
			}
		}
		// Absent keys: our answer must equal Pebble's, bit for bit.
		policy := pebblebloom.FilterPolicy(10)
		fp := 0
		const probes = 20000
		for i := range probes {
			k := fmt.Appendf(nil, "absent-%d-%d", n, i)
			got, want := f.MayContain(k), policy.MayContain(pebble.TableFilter, data, k)
			if got != want {
				t.Fatalf("n=%d: %q: we say %v, Pebble says %v", n, k, got, want)
			}
			if got {
				fp++
			}
		}
		if f.LineBits() != 512 || f.Probes() != 6 {
			t.Fatalf("n=%d: line bits %d, k %d; want 512 and 6", n, f.LineBits(), f.Probes())
		}
		if n == 20000 {
			if rate := float64(fp) / probes; rate > 0.02 {
				t.Fatalf("false-positive rate %.4f at 10 bits/key", rate)
			}
			if est := f.EstimateKeys(); math.Abs(est-float64(n))/float64(n) > 0.05 {
				t.Fatalf("estimated %.0f keys from the bits, want about %d", est, n)
			}
			if set := f.BitsSet(); set == 0 || set >= uint64(f.Lines()*512) {
				t.Fatalf("%d bits set of %d", set, f.Lines()*512)
			}
		}
	}
}

func TestDecodeRejectsMalformed(t *testing.T) {
	good := pebbleFilter([][]byte{[]byte("a"), []byte("b")}, 10)
	bad := map[string][]byte{
		"lines mismatch": append(append([]byte(nil), good[:len(good)-5]...), 6, 7, 0, 0, 0),
		"no probes":      append(append([]byte(nil), good[:len(good)-5]...), 0, 1, 0, 0, 0),
		"bits, no lines": append(make([]byte, 64), 6, 0, 0, 0, 0),
	}
	for name, b := range bad {
		if _, err := Decode(b); !errors.Is(err, base.ErrCorruption) {
			t.Errorf("%s: %v, want ErrCorruption", name, err)
		}
	}
	for _, n := range []int{0, 3, 5} { // Pebble writes 0 bytes for a table without points
		empty, err := Decode(make([]byte, n))
		if err != nil || empty.MayContain([]byte("x")) || empty.EstimateKeys() != 0 || empty.Lines() != 0 {
			t.Fatalf("empty filter of %d bytes: %v", n, err)
		}
	}
	if _, err := Decode(append(make([]byte, 64), 0xff, 0, 0, 0, 0)); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("newer format: %v, want ErrUnsupported", err)
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(pebbleFilter([][]byte{[]byte("a"), []byte("b")}, 10), []byte("a"))
	f.Fuzz(func(t *testing.T, data, key []byte) {
		flt, err := Decode(data)
		if err != nil {
			if !errors.Is(err, base.ErrCorruption) && !errors.Is(err, ErrUnsupported) {
				t.Fatalf("%v does not wrap ErrCorruption", err)
			}
			return
		}
		flt.MayContain(key)
		flt.EstimateKeys()
	})
}
