package frame

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func writeRecords(t testing.TB, recs [][][]byte, opts ...Option) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := NewWriter(&buf, opts...)
	rw := NewRecordWriter(w)
	for _, rec := range recs {
		if err := rw.Append(rec...); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// readRecords reads every record, copied.
func readRecords(r io.Reader, maxFrame, maxField int) ([][][]byte, error) {
	rr := NewRecordReader(NewReader(r, maxFrame), maxField)
	var out [][][]byte
	for {
		rec, err := rr.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		cp := make([][]byte, len(rec))
		for i, f := range rec {
			cp[i] = bytes.Clone(f)
		}
		out = append(out, cp)
	}
}

func equalRecords(a, b [][][]byte) bool {
	return slices.EqualFunc(a, b, func(x, y [][]byte) bool { return slices.EqualFunc(x, y, bytes.Equal) })
}

func TestRecordsRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	recs := [][][]byte{
		{[]byte("k1"), []byte("v1")},
		{{}, {}},
		{},
		{[]byte("only")},
		{payload(rng, 1000, false), {}},
		{[]byte("k"), payload(rng, 300, true), {}, []byte("x")},
	}
	for i := range 200 {
		recs = append(recs, [][]byte{fmt.Appendf(nil, "key-%06d", i), payload(rng, rng.IntN(200), i%2 == 0)})
	}
	for _, size := range []int{1, 7, 100, DefaultSize} {
		stream := writeRecords(t, recs, WithSize(size))
		got, err := readRecords(bytes.NewReader(stream), size, 1000)
		if err != nil || !equalRecords(got, recs) {
			t.Fatalf("frame size %d: %d records, %v", size, len(got), err)
		}
	}
	if got, err := readRecords(bytes.NewReader(writeRecords(t, nil)), 0, 0); err != nil || len(got) != 0 {
		t.Fatalf("no records: %v, %v", got, err)
	}
}

func TestRecordErrors(t *testing.T) {
	if err := NewRecordWriter(NewWriter(io.Discard)).Append(make([][]byte, MaxFields+1)...); err == nil {
		t.Fatal("Append of too many fields succeeded")
	}
	if err := NewRecordWriter(NewWriter(io.Discard)).Append(make([][]byte, MaxFields)...); err != nil {
		t.Fatal(err)
	}
	stream := writeRecords(t, [][][]byte{{[]byte("key"), make([]byte, 101)}}, WithSize(16))
	if _, err := readRecords(bytes.NewReader(stream), 0, 100); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "field 1 is 101 bytes") {
		t.Fatalf("%v, want ErrTooLarge", err)
	}
	if _, err := readRecords(bytes.NewReader(stream), 0, 101); err != nil {
		t.Fatal(err)
	}
	for cut := range len(stream) {
		if _, err := readRecords(bytes.NewReader(stream[:cut]), 0, 0); !errors.Is(err, ErrTruncated) {
			t.Fatalf("stream cut at %d: %v, want ErrTruncated", cut, err)
		}
	}

	// Payloads that are complete frame streams but bad records.
	for _, c := range []struct {
		name    string
		payload []byte
		says    string
	}{
		{"no field length", []byte{2, 1, 'a'}, "record at payload offset 0: field 1 cut by the end"},
		{"short field", []byte{1, 0, 1, 5, 'a'}, "record at payload offset 2: field 0 cut by the end"},
		{"overlong length", []byte{1, 0x81, 0x00, 'a'}, "field 0: length not in its shortest encoding"},
		{"overflow", []byte{1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02}, "length overflows"},
		{"overflow 2", []byte{1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, "length overflows"},
	} {
		_, err := readRecords(bytes.NewReader(AppendMessage(nil, c.payload)), 0, 1<<20)
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v, want ErrCorrupt saying %q", c.name, err, c.says)
		}
	}
	// The largest length that fits: too large, not corrupt.
	_, err := readRecords(bytes.NewReader(AppendMessage(nil, []byte{1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})), 0, 1<<20)
	if !errors.Is(err, ErrTooLarge) {
		t.Errorf("2^64-1 byte field: %v", err)
	}
}

func TestRecordWriterAllocs(t *testing.T) {
	w := NewWriter(io.Discard)
	rw := NewRecordWriter(w)
	k, v := []byte("key-000001"), make([]byte, 100)
	if allocs := testing.AllocsPerRun(1000, func() { rw.Append(k, v) }); allocs != 0 {
		t.Errorf("%v allocations per Append", allocs)
	}
}
