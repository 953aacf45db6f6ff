package semijoin

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/bloomkv/bloomkv"
)

// modelDiff is the exact difference of two maps, in key order.
func modelDiff(a, b map[string]string) []Difference {
	var out []Difference
	for k, va := range a {
		switch vb, ok := b[k]; {
		case !ok:
			out = append(out, Difference{Kind: OnlyA, Key: []byte(k), A: []byte(va)})
		case va != vb:
			out = append(out, Difference{Kind: Changed, Key: []byte(k), A: []byte(va), B: []byte(vb)})
		}
	}
	for k, vb := range b {
		if _, ok := a[k]; !ok {
			out = append(out, Difference{Kind: OnlyB, Key: []byte(k), B: []byte(vb)})
		}
	}
	slices.SortFunc(out, func(x, y Difference) int { return bytes.Compare(x.Key, y.Key) })
	return out
}

func collectDiff(t testing.TB, a, b Differ, o *DiffOptions) ([]Difference, DiffReport) {
	t.Helper()
	var got []Difference
	rep, err := Diff(context.Background(), a, b, o, func(d Difference) error {
		got = append(got, Difference{Kind: d.Kind, Key: bytes.Clone(d.Key), A: bytes.Clone(d.A), B: bytes.Clone(d.B)})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got, rep
}

// diffSides makes the maps of two sides that share n keys of a random shape
// but for up to 60 differences of every kind.
func diffSides(r *rand.Rand) (a, b map[string]string, n int) {
	shape := keyShapes[r.IntN(len(keyShapes))]
	n = []int{0, 1, 10, 500, 2000}[r.IntN(5)]
	a, b = map[string]string{}, map[string]string{}
	for i := range n {
		k := shape(r, i)
		v := fmt.Sprintf("v%d", r.IntN(1000))
		a[k], b[k] = v, v
	}
	for range r.IntN(60) {
		k := shape(r, r.IntN(3*n+10))
		switch r.IntN(3) {
		case 0:
			delete(b, k)
			a[k] = "a-only"
		case 1:
			delete(a, k)
			b[k] = "b-only"
		default:
			a[k], b[k] = "a-side", "b-side"
		}
	}
	return a, b, n
}

// TestDiffExact: over random pairs of stores (sizes, key shapes, and
// differences of every kind, none included), Diff finds exactly the keys a
// model finds, in key order.
func TestDiffExact(t *testing.T) {
	trials := 300
	if testing.Short() {
		trials = 50
	}
	r := rand.New(rand.NewPCG(3, 4))
	for trial := range trials {
		ma, mb, n := diffSides(r)
		da, db := openStore(t), openStore(t)
		fill(t, da, ma)
		fill(t, db, mb)
		want := modelDiff(ma, mb)
		got, rep := collectDiff(t, Local(da, Limits{}), Local(db, Limits{}), &DiffOptions{Seed: uint64(trial)})
		if !slices.EqualFunc(got, want, func(x, y Difference) bool {
			return x.Kind == y.Kind && bytes.Equal(x.Key, y.Key) && bytes.Equal(x.A, y.A) && bytes.Equal(x.B, y.B)
		}) {
			t.Fatalf("trial %d (%d keys): %d differences, want %d", trial, n, len(got), len(want))
		}
		if int(rep.OnlyA+rep.OnlyB+rep.Changed) != len(want) {
			t.Fatalf("trial %d: report %+v for %d differences", trial, rep, len(want))
		}
		da.Close()
		db.Close()
	}
}

// TestDiffCostsTheDifference: two 1M-key stores (100k with -short) that
// differ in 1,000 keys exchange at most 2 × d coded symbols' bytes of
// sketch, whatever their size.
func TestDiffCostsTheDifference(t *testing.T) {
	n, d := 1_000_000, 1000
	if testing.Short() {
		n = 100_000
	}
	da, db := openStore(t), openStore(t)
	ba, bb := da.NewBatch(), db.NewBatch()
	for i := range n {
		k := fmt.Appendf(nil, "key%09d", i)
		v := fmt.Appendf(nil, "value-%d", i)
		ba.Set(k, v)
		switch {
		case i%(n/d) == 0 && i%3 == 0: // A only
		case i%(n/d) == 0 && i%3 == 1:
			bb.Set(k, []byte("changed"))
		default:
			bb.Set(k, v)
		}
		if ba.Len() > 1<<20 {
			for _, p := range []struct {
				d *bloomkv.DB
				b *bloomkv.Batch
			}{{da, ba}, {db, bb}} {
				if err := p.d.Apply(p.b, bloomkv.NoSync); err != nil {
					t.Fatal(err)
				}
			}
			ba, bb = da.NewBatch(), db.NewBatch()
		}
	}
	for i := range d / 3 { // B only
		bb.Set(fmt.Appendf(nil, "new%09d", i), []byte("b"))
	}
	if err := da.Apply(ba, bloomkv.NoSync); err != nil {
		t.Fatal(err)
	}
	if err := db.Apply(bb, bloomkv.NoSync); err != nil {
		t.Fatal(err)
	}
	got, rep := collectDiff(t, Local(da, Limits{}), Local(db, Limits{}), nil)
	const symbolBytes = 26 // 24 fixed bytes and a count of a byte or two
	t.Logf("%d differences (%d only A, %d only B, %d changed) in %d symbols, %d bytes (%.1f a difference); %d bytes A→B, %d B→A in all",
		len(got), rep.OnlyA, rep.OnlyB, rep.Changed, rep.Symbols, rep.SymbolBytes, float64(rep.SymbolBytes)/float64(len(got)), rep.BytesAToB, rep.BytesBToA)
	if len(got) < d*9/10 || len(got) > d*11/10 {
		t.Fatalf("%d differences, want about %d", len(got), d)
	}
	// A changed key is two items in the sketch, one of each side.
	items := rep.OnlyA + rep.OnlyB + 2*rep.Changed
	if rep.SymbolBytes > 2*items*symbolBytes {
		t.Errorf("%d bytes of symbols for %d differing items: more than 2 × %d bytes each", rep.SymbolBytes, items, symbolBytes)
	}
}
