package bloomkv

import (
	"bytes"
	"errors"
	"testing"

	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/batchrepr"
)

func TestBatchEncoding(t *testing.T) {
	b := newBatch()
	b.Set([]byte("k1"), []byte("v1"))
	b.Delete([]byte("k2"))
	b.Set(nil, nil)
	b.setSeq(100)
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
	for i := 0; i < len(b.data); i++ {
		if _, _, err := batchrepr.Decode(b.data[:i], nil); !errors.Is(err, base.ErrCorruption) {
			t.Fatalf("prefix %d: %v", i, err)
		}
	}
	if _, _, err := batchrepr.Decode(append(bytes.Clone(b.data), 0), nil); !errors.Is(err, base.ErrCorruption) {
		t.Fatalf("trailing byte: %v", err)
	}
	bad := bytes.Clone(b.data)
	bad[batchHeaderLen] = 9 // unknown kind
	if _, _, err := batchrepr.Decode(bad, nil); !errors.Is(err, base.ErrCorruption) {
		t.Fatalf("unknown kind: %v", err)
	}
	var zero Batch // the zero Batch is usable
	if err := zero.Set([]byte("a"), nil); err != nil || zero.Count() != 1 {
		t.Fatalf("zero batch: %v", err)
	}
}
