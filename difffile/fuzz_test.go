package difffile

import (
	"bytes"
	"errors"
	"testing"

	"github.com/bloomkv/bloomkv/filterblock"
)

// FuzzDecode feeds arbitrary bytes to Decode, as they are and with their
// checksum fixed up (so that the fuzzer also reaches the parameter checks):
// it must never panic, must fail only with ErrCorruption, and a filter it
// returns must re-encode to exactly the input and answer probes.
func FuzzDecode(f *testing.F) {
	for _, c := range [][2]int{{0, 0}, {16, 3}, {100, 80}} {
		enc := sampleFilter(f, c[0], c[1]).Encode()
		f.Add(enc)
		flipped := bytes.Clone(enc)
		flipped[5] ^= 0x40
		f.Add(flipped)
		f.Add(enc[:len(enc)-1])
	}
	probes := testKeys(0xfe, 32)
	hs := make([]uint64, len(probes))
	for i, k := range probes {
		hs[i] = filterblock.Hash(k)
	}
	may := make([]bool, len(hs))
	f.Fuzz(func(t *testing.T, data []byte) {
		check := func(data []byte) {
			g, err := Decode(data)
			if err != nil {
				if !errors.Is(err, ErrCorruption) {
					t.Fatalf("error %v does not wrap ErrCorruption", err)
				}
				return
			}
			if !bytes.Equal(g.Encode(), data) {
				t.Fatalf("re-encoding differs from the input")
			}
			for i, h := range hs {
				may[i] = !g.MayContainHash(h)
			}
			g.MayContainHashes(hs, may)
			for i, h := range hs {
				if may[i] != g.MayContainHash(h) {
					t.Fatalf("batched probe of key %d differs from the single one", i)
				}
			}
			for _, k := range probes {
				if g.MayContain(k) {
					g.Remove(k)
				}
				g.Add(k)
				if !g.MayContain(k) {
					t.Fatalf("false negative after Add in a decoded filter")
				}
			}
			g.NeedsGrowth()
			g.EstimateCount()
		}
		check(data)
		if len(data) >= headerLen+checksumLen {
			check(resum(bytes.Clone(data)))
		}
	})
}
