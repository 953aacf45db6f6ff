package bloomkv

import (
	"bytes"
	"errors"
	"testing"

	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/batchrepr"
	"github.com/bloomkv/bloomkv/vfs"
)

func TestBatchEncoding(t *testing.T) {
	b := newBatch()
	b.Set([]byte("k1"), []byte("v1"))
	b.Delete([]byte("k2"))
	b.Set(nil, nil)
	b.setSeq(100)
	t.Run("entries decode in order with consecutive sequence numbers", func(t *testing.T) {
		var got []string
		seq, count, err := batchrepr.Decode(b.data, func(seq base.SeqNum, e batchrepr.Entry) {
			got = append(got, base.MakeInternalKey(e.Key, seq, e.Kind).String()+"="+string(e.Value))
		})
		want := []string{`"k1"#100,SET=v1`, `"k2"#101,DEL=`, `""#102,SET=`}
		if err != nil || seq != 100 || count != 3 || len(got) != 3 {
			t.Fatalf("decode: %v %d %d %v", err, seq, count, got)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("entry %d: %s, want %s", i, got[i], want[i])
			}
		}
	})
	t.Run("every truncation is corruption", func(t *testing.T) {
		for i := 0; i < len(b.data); i++ {
			if _, _, err := batchrepr.Decode(b.data[:i], nil); !errors.Is(err, base.ErrCorruption) {
				t.Fatalf("prefix %d: %v", i, err)
			}
		}
	})
	t.Run("a trailing byte is corruption", func(t *testing.T) {
		if _, _, err := batchrepr.Decode(append(bytes.Clone(b.data), 0), nil); !errors.Is(err, base.ErrCorruption) {
			t.Fatalf("trailing byte: %v", err)
		}
	})
	t.Run("an unknown kind is corruption", func(t *testing.T) {
		bad := bytes.Clone(b.data)
		bad[batchHeaderLen] = 9 // unknown kind
		if _, _, err := batchrepr.Decode(bad, nil); !errors.Is(err, base.ErrCorruption) {
			t.Fatalf("unknown kind: %v", err)
		}
	})
}

// TestBatchCountLenAndReset: a batch counts its writes and its bytes past
// the header; Reset empties it after it was applied.
func TestBatchCountLenAndReset(t *testing.T) {
	d := mustOpen(t, "/db", memOpts(vfs.NewMem()))
	defer d.Close()
	b := d.NewBatch()
	b.Set([]byte("d"), []byte("4"))
	b.Set([]byte("a"), []byte("1'"))
	b.Delete([]byte("c"))
	if b.Count() != 3 || b.Len() <= batchHeaderLen {
		t.Fatalf("batch count %d len %d", b.Count(), b.Len())
	}
	if err := d.Apply(b, Sync); err != nil {
		t.Fatal(err)
	}
	b.Reset()
	if b.Count() != 0 || b.Len() != batchHeaderLen {
		t.Fatal("Reset left writes")
	}
}

// TestZeroBatchIsUsable: a Batch needs no constructor.
func TestZeroBatchIsUsable(t *testing.T) {
	var zero Batch
	if err := zero.Set([]byte("a"), nil); err != nil || zero.Count() != 1 {
		t.Fatalf("zero batch: %v", err)
	}
}
