package batchrepr

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/bloomkv/bloomkv/internal/base"
)

// encode builds a batch by hand, independently of the store's Batch.
func encode(seq base.SeqNum, entries ...Entry) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(seq))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(entries)))
	for _, e := range entries {
		b = append(b, byte(e.Kind))
		b = binary.AppendUvarint(b, uint64(len(e.Key)))
		b = append(b, e.Key...)
		if e.Kind != base.KindDelete {
			b = binary.AppendUvarint(b, uint64(len(e.Value)))
			b = append(b, e.Value...)
		}
	}
	return b
}

func TestDecode(t *testing.T) {
	data := encode(7,
		Entry{base.KindSet, []byte("a"), []byte("1")},
		Entry{base.KindDelete, []byte("b"), nil},
		Entry{base.KindRangeDelete, []byte("c"), []byte("f")},
	)
	var got []string
	seq, count, err := Decode(data, func(seq base.SeqNum, e Entry) {
		got = append(got, base.MakeInternalKey(e.Key, seq, e.Kind).String()+"="+string(e.Value))
	})
	want := []string{`"a"#7,SET=1`, `"b"#8,DEL=`, `"c"#9,RANGEDEL=f`}
	if err != nil || seq != 7 || count != 3 || len(got) != len(want) {
		t.Fatalf("Decode: %v seq %d count %d %q", err, seq, count, got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("entry %d: %s, want %s", i, got[i], want[i])
		}
	}
	bad := map[string][]byte{
		"inverted range":  encode(1, Entry{base.KindRangeDelete, []byte("z"), []byte("a")}),
		"empty range":     encode(1, Entry{base.KindRangeDelete, []byte("a"), []byte("a")}),
		"unknown kind":    encode(1, Entry{base.Kind(9), []byte("a"), nil}),
		"seq overflow":    encode(base.SeqNumMax, Entry{base.KindSet, []byte("a"), nil}, Entry{base.KindSet, []byte("b"), nil}),
		"trailing byte":   append(encode(1, Entry{base.KindSet, []byte("a"), nil}), 0),
		"count too large": binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint64(nil, 1), 5),
	}
	for i := range data {
		bad["prefix "+string(rune('0'+i%10))+"/"+string(rune('a'+i/10))] = data[:i]
	}
	for name, b := range bad {
		if _, _, err := Decode(b, nil); !errors.Is(err, base.ErrCorruption) {
			t.Errorf("%s: %v, want an error wrapping ErrCorruption", name, err)
		}
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(encode(1, Entry{base.KindSet, []byte("key"), []byte("value")}, Entry{base.KindDelete, []byte("gone"), nil}))
	f.Add(encode(5, Entry{base.KindRangeDelete, []byte("a"), []byte("b")}))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkDecoded(t, data, Decode)
	})
}

// checkDecoded decodes data with decode: an error wraps ErrCorruption, and a
// success yields the entries the count states (log data aside), in range.
func checkDecoded(t *testing.T, data []byte, decode func([]byte, func(base.SeqNum, Entry)) (base.SeqNum, uint32, error)) {
	n := uint32(0)
	seq, count, err := decode(data, func(_ base.SeqNum, e Entry) {
		if e.Kind != kindLogData {
			n++
		}
	})
	if err != nil {
		if !errors.Is(err, base.ErrCorruption) {
			t.Fatalf("%v does not wrap ErrCorruption", err)
		}
		return
	}
	if n != count || uint64(seq)+uint64(count) > uint64(base.SeqNumMax)+1 {
		t.Fatalf("decoded %d entries of %d from seq %d", n, count, seq)
	}
}
