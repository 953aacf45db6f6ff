package batchrepr

import (
	"bytes"
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	pebblebatchrepr "github.com/cockroachdb/pebble/v2/batchrepr"

	"github.com/bloomkv/bloomkv/internal/base"
)

// pebbleBatch returns a batch of every kind Pebble's batches hold, as
// Pebble encodes it, at sequence number 100.
func pebbleBatch(t testing.TB) []byte {
	t.Helper()
	b := new(pebble.Batch)
	for _, err := range []error{
		b.Set([]byte("a"), []byte("1"), nil),
		b.Delete([]byte("b"), nil),
		b.Merge([]byte("c"), []byte("+"), nil),
		b.LogData([]byte("note"), nil),
		b.SingleDelete([]byte("d"), nil),
		b.DeleteRange([]byte("e"), []byte("f"), nil),
		b.RangeKeySet([]byte("g"), []byte("h"), nil, []byte("v"), nil),
		b.RangeKeyUnset([]byte("g"), []byte("h"), nil, nil),
		b.RangeKeyDelete([]byte("i"), []byte("j"), nil),
		b.DeleteSized([]byte("k"), 17, nil),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	repr := bytes.Clone(b.Repr())
	repr[0] = 100 // the sequence number, little-endian
	return repr
}

// TestDecodePebble decodes Pebble's batches as Pebble's reader does; the
// store's decoder refuses them.
func TestDecodePebble(t *testing.T) {
	repr := pebbleBatch(t)
	type ent struct {
		kind       base.Kind
		key, value string
		seq        base.SeqNum
	}
	var got []ent
	seq, count, err := DecodePebble(repr, func(s base.SeqNum, e Entry) {
		got = append(got, ent{e.Kind, string(e.Key), string(e.Value), s})
	})
	if err != nil {
		t.Fatal(err)
	}
	var want []ent
	r := pebblebatchrepr.Read(repr)
	next := base.SeqNum(100)
	for {
		kind, k, v, ok, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		want = append(want, ent{base.Kind(kind), string(k), string(v), next})
		if kind != 3 { // log data takes no sequence number
			next++
		}
	}
	h, _ := pebblebatchrepr.ReadHeader(repr)
	if seq != 100 || count != h.Count || len(got) != len(want) || len(want) != 10 {
		t.Fatalf("seq %d count %d (Pebble's %d), %d entries of %d", seq, count, h.Count, len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("entry %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	if _, _, err := Decode(repr, nil); !errors.Is(err, base.ErrCorruption) {
		t.Fatalf("the store's decoder: %v", err)
	}
	// Entries beyond the count that take sequence numbers are corruption.
	bad := bytes.Clone(repr)
	bad[8]--
	if _, _, err := DecodePebble(bad, nil); !errors.Is(err, base.ErrCorruption) {
		t.Fatalf("a count one short: %v", err)
	}
}

func FuzzDecodePebble(f *testing.F) {
	f.Add(pebbleBatch(f))
	f.Add(encode(5, Entry{base.KindRangeDelete, []byte("a"), []byte("b")}))
	f.Fuzz(func(t *testing.T, data []byte) { checkDecoded(t, data, DecodePebble) })
}
