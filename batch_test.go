package bloomkv

import (
	"bytes"
	"errors"
	"testing"

	"github.com/bloomkv/bloomkv/internal/base"
)

func TestBatchEncoding(t *testing.T) {
	b := newBatch()
	b.Set([]byte("k1"), []byte("v1"))
	b.Delete([]byte("k2"))
	b.Set(nil, nil)
	b.setSeq(100)
	var got []string
	seq, count, err := decodeBatch(b.data, func(seq base.SeqNum, e batchEntry) {
		got = append(got, base.MakeInternalKey(e.key, seq, e.kind).String()+"="+string(e.value))
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
		if _, _, err := decodeBatch(b.data[:i], nil); !errors.Is(err, base.ErrCorruption) {
			t.Fatalf("prefix %d: %v", i, err)
		}
	}
	if _, _, err := decodeBatch(append(bytes.Clone(b.data), 0), nil); !errors.Is(err, base.ErrCorruption) {
		t.Fatalf("trailing byte: %v", err)
	}
	bad := bytes.Clone(b.data)
	bad[batchHeaderLen] = 9 // unknown kind
	if _, _, err := decodeBatch(bad, nil); !errors.Is(err, base.ErrCorruption) {
		t.Fatalf("unknown kind: %v", err)
	}
	var zero Batch // the zero Batch is usable
	if err := zero.Set([]byte("a"), nil); err != nil || zero.Count() != 1 {
		t.Fatalf("zero batch: %v", err)
	}
}

func FuzzDecodeBatch(f *testing.F) {
	b := newBatch()
	b.Set([]byte("key"), []byte("value"))
	b.Delete([]byte("gone"))
	f.Add(b.data)
	f.Fuzz(func(t *testing.T, data []byte) {
		if _, _, err := decodeBatch(data, func(base.SeqNum, batchEntry) {}); err != nil && !errors.Is(err, base.ErrCorruption) {
			t.Fatalf("%v does not wrap ErrCorruption", err)
		}
	})
}
