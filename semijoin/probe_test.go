package semijoin

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/bloomkv/bloomkv/filterblock"
)

// TestProbeSmallAndLargeFilters checks Probe against each key's own
// MayContain, with values and without, for a filter the CPU's caches hold
// (probed key by key) and one probeBatchBytes or larger (probed in
// batches): the same keys in the same order, with their values; and that an
// error from fn stops the probe in the middle of a batch and is returned.
func TestProbeSmallAndLargeFilters(t *testing.T) {
	d := openStore(t)
	r := rand.New(rand.NewPCG(7, 8))
	m := map[string]string{}
	for i := range 5000 {
		m[keyShapes[i%len(keyShapes)](r, i)] = fmt.Sprint("v", r.Uint64()%1000, "-", i)
	}
	m["empty value"] = ""
	fill(t, d, m)
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	s := Local(d, Limits{})
	for _, bits := range []uint64{1 << 14, 8 * probeBatchBytes} {
		f, err := filterblock.NewBloom(bits, 3)
		if err != nil {
			t.Fatal(err)
		}
		for i, k := range keys {
			if i%3 == 0 {
				f.Add([]byte(k))
			}
		}
		wire := f.AppendWire(nil)
		var want []string
		for _, k := range keys {
			if f.MayContain([]byte(k)) {
				want = append(want, k)
			}
		}
		for _, values := range []bool{true, false} {
			var got []string
			err := s.Probe(context.Background(), KeyRange{}, wire, values, func(k, v []byte) error {
				if values && string(v) != m[string(k)] || !values && v != nil {
					t.Fatalf("%d bits: value of %q = %q (values %v)", bits, k, v, values)
				}
				got = append(got, string(k))
				return nil
			})
			if err != nil || !slices.Equal(got, want) {
				t.Fatalf("%d bits, values %v: %d keys, %v; want %d (%d keys in all)", bits, values, len(got), err, len(want), len(keys))
			}
		}
		stop := errors.New("stop")
		n := 0
		err = s.Probe(context.Background(), KeyRange{}, wire, true, func(k, v []byte) error {
			if n++; n == 100 {
				return stop
			}
			return nil
		})
		if !errors.Is(err, stop) || n != 100 {
			t.Fatalf("%d bits: fn's error after %d keys: %v", bits, n, err)
		}
	}
}
