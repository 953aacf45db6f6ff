package record

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/bloomkv/bloomkv/internal/base"
)

// records returns records of sizes that exercise block boundaries.
func records(seed uint64) [][]byte {
	r := rand.New(rand.NewPCG(seed, 1))
	sizes := []int{0, 1, 100, BlockSize - HeaderSize, BlockSize - HeaderSize - 1, BlockSize, 3*BlockSize + 17, 5}
	for range 40 {
		sizes = append(sizes, r.IntN(3000))
	}
	var out [][]byte
	for i, n := range sizes {
		rec := make([]byte, n)
		for j := range rec {
			rec[j] = byte(i + j*7)
		}
		out = append(out, rec)
	}
	return out
}

func writeLog(t testing.TB, recs [][]byte) ([]byte, []int64) {
	t.Helper()
	var buf bytes.Buffer
	w := NewWriter(&buf, 0)
	var offs []int64
	for i, rec := range recs {
		off, err := w.Write(rec)
		if err != nil {
			t.Fatal(err)
		}
		offs = append(offs, off)
		if i%5 == 0 {
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if w.Size() != int64(buf.Len()) {
		t.Fatalf("Size %d, wrote %d", w.Size(), buf.Len())
	}
	return buf.Bytes(), offs
}

// readLog returns the records of data and the reader's final error.
func readLog(data []byte) ([][]byte, *Reader, error) {
	return readLogOptions(data, Options{})
}

// readLogOptions is readLog with a Reader configured by o.
func readLogOptions(data []byte, o Options) ([][]byte, *Reader, error) {
	r, err := NewReaderOptions(bytes.NewReader(data), "test.log", o)
	if err != nil {
		return nil, nil, err
	}
	var out [][]byte
	for {
		rec, err := r.Next()
		if err == io.EOF {
			return out, r, nil
		}
		if err != nil {
			return out, r, err
		}
		out = append(out, append([]byte(nil), rec...))
	}
}

func TestRoundTrip(t *testing.T) {
	recs := records(1)
	data, _ := writeLog(t, recs)
	got, r, err := readLog(data)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, torn := r.TornTail(); torn {
		t.Fatal("a clean log reported a torn tail")
	}
	if len(got) != len(recs) {
		t.Fatalf("%d records, want %d", len(got), len(recs))
	}
	for i := range recs {
		if !bytes.Equal(got[i], recs[i]) {
			t.Fatalf("record %d differs", i)
		}
	}
}

func TestRecordOffsets(t *testing.T) {
	recs := records(1)
	data, offs := writeLog(t, recs)
	r, err := NewReader(bytes.NewReader(data), "test.log")
	if err != nil {
		t.Fatal(err)
	}
	for i := range recs {
		if _, err := r.Next(); err != nil {
			t.Fatal(err)
		}
		if r.Offset() != offs[i] {
			t.Fatalf("record %d: Offset %d, the writer wrote it at %d", i, r.Offset(), offs[i])
		}
	}
}

func TestAppendToExistingLog(t *testing.T) {
	recs := records(2)
	data, _ := writeLog(t, recs[:10])
	buf := bytes.NewBuffer(append([]byte(nil), data...))
	w := NewWriter(buf, int64(len(data)))
	for _, rec := range recs[10:] {
		w.Write(rec)
	}
	w.Flush()
	got, _, err := readLog(buf.Bytes())
	if err != nil || len(got) != len(recs) {
		t.Fatalf("%d records, %v", len(got), err)
	}
}

// TestTornTails cuts a log at every offset: the reader returns exactly the
// records wholly before the cut and reports a torn tail when the cut is not
// at a record boundary; never an error, never a partial record.
func TestTornTails(t *testing.T) {
	var recs [][]byte
	for i, n := range []int{0, 1, 100, 5000, 20000, 30000, 7, 300, BlockSize - 2*HeaderSize - 2, 40} {
		recs = append(recs, bytes.Repeat([]byte{byte(i + 1)}, n))
	}
	data, offs := writeLog(t, recs)
	stride := 1
	if testing.Short() {
		stride = 7
	}
	ends := map[int]bool{}
	for i := range recs {
		end := len(data)
		if i+1 < len(offs) {
			end = int(offs[i+1])
		}
		ends[end] = true
	}
	for cut := 0; cut <= len(data); cut += stride {
		got, r, err := readLog(data[:cut])
		if err != nil {
			t.Fatalf("cut at %d: %v", cut, err)
		}
		want := 0
		for i := range recs {
			end := len(data)
			if i+1 < len(offs) {
				end = int(offs[i+1])
			}
			// A record whose last chunk is complete is whole, even if
			// the padding after it is cut.
			if int(offs[i]) < cut && cut >= end-padAfter(data, end) {
				want = i + 1
			}
		}
		if len(got) != want {
			t.Fatalf("cut at %d: %d records, want %d", cut, len(got), want)
		}
		for i := range got {
			if !bytes.Equal(got[i], recs[i]) {
				t.Fatalf("cut at %d: record %d damaged", cut, i)
			}
		}
		_, _, torn := r.TornTail()
		if cut > 0 && !ends[cut] && want < len(recs) && !torn && cut != int(offs[want]) {
			// Cut inside record want: it must be reported torn (unless the
			// cut fell in padding before it).
			if !inPadding(cut) {
				t.Fatalf("cut at %d inside record %d: no torn tail reported", cut, want)
			}
		}
	}
}

// padAfter returns how many padding bytes precede offset end (a record that
// ends within HeaderSize of a block's end is followed by padding).
func padAfter(data []byte, end int) int {
	if end%BlockSize == 0 && end > 0 {
		n := 0
		for n < HeaderSize-1 && data[end-1-n] == 0 && (end-1-n)%BlockSize >= BlockSize-HeaderSize+1 {
			n++
		}
		return n
	}
	return 0
}

func inPadding(off int) bool { return BlockSize-off%BlockSize < HeaderSize }

// TestCorruptionInTheMiddle flips a bit in every record but the last: each
// is reported as corruption naming the file and an offset.
func TestCorruptionInTheMiddle(t *testing.T) {
	recs := records(4)[:20]
	data, offs := writeLog(t, recs)
	r := rand.New(rand.NewPCG(4, 4))
	for i := 0; i+1 < len(recs); i++ {
		end := int(offs[i+1])
		at := int(offs[i]) + r.IntN(end-int(offs[i]))
		if inPadding(at) {
			continue
		}
		bad := append([]byte(nil), data...)
		bad[at] ^= 1 << r.IntN(8)
		_, _, err := readLog(bad)
		if !errors.Is(err, base.ErrCorruption) || !bytes.Contains([]byte(err.Error()), []byte("test.log")) || !bytes.Contains([]byte(err.Error()), []byte("offset")) {
			t.Fatalf("flip at %d in record %d: %v, want ErrCorruption naming file and offset", at, i, err)
		}
	}
	// A flip in the last record cannot be told from a torn write: the log
	// ends before it, and no damaged record is returned.
	last := len(recs) - 1
	bad := append([]byte(nil), data...)
	bad[offs[last]+HeaderSize] ^= 1
	got, rd, err := readLog(bad)
	if err != nil || len(got) != last {
		t.Fatalf("flip in the last record: %d records, %v", len(got), err)
	}
	if off, why, torn := rd.TornTail(); !torn || off != offs[last] {
		t.Fatalf("torn tail %v at %d (%s), want at %d", torn, off, why, offs[last])
	}
}

func TestWriteErrorSticks(t *testing.T) {
	w := NewWriter(failWriter{}, 0)
	w.Write([]byte("x"))
	if err := w.Flush(); err == nil {
		t.Fatal("Flush succeeded")
	}
	if _, err := w.Write([]byte("y")); err == nil {
		t.Fatal("Write after a failed Flush succeeded")
	}
}

type failWriter struct{}

func (failWriter) Write(p []byte) (int, error) { return len(p) / 2, fmt.Errorf("disk full") }

func FuzzReader(f *testing.F) {
	data, _ := writeLog(f, records(5)[:6])
	f.Add(data[:min(len(data), 4000)])
	small, _ := writeLog(f, [][]byte{[]byte("a"), []byte("bb"), make([]byte, 300)})
	f.Add(small)
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _, err := readLog(data)
		if err != nil && !errors.Is(err, base.ErrCorruption) {
			t.Fatalf("error %v does not wrap ErrCorruption", err)
		}
	})
}
