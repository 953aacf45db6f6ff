package record

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"reflect"
	"testing"

	pebblerecord "github.com/cockroachdb/pebble/v2/record"

	"github.com/bloomkv/bloomkv/internal/base"
)

// pebbleLog writes records with Pebble's log writer as log number num, in
// its recyclable chunk format or, with walSync, its WAL-sync one, closed
// (ending with the EOF trailer) when closed is set.
func pebbleLog(t testing.TB, num uint64, recs [][]byte, walSync, closed bool) []byte {
	t.Helper()
	var buf bytes.Buffer
	cfg := pebblerecord.LogWriterConfig{
		WriteWALSyncOffsets: func() bool { return walSync },
		QueueSemChan:        make(chan struct{}, 100),
	}
	// The log number's type is in a package of Pebble's that cannot be
	// imported: convert num to it by reflection.
	ctor := reflect.ValueOf(pebblerecord.NewLogWriter)
	w := ctor.Call([]reflect.Value{reflect.ValueOf(io.Writer(&buf)), reflect.ValueOf(num).Convert(ctor.Type().In(1)), reflect.ValueOf(cfg)})[0].Interface().(*pebblerecord.LogWriter)
	for _, r := range recs {
		if _, err := w.WriteRecord(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	data := bytes.Clone(buf.Bytes())
	if !closed {
		// As if the writer had died before closing: no EOF trailer (the
		// last recyclable header).
		data = data[:len(data)-recyclableHeader]
	}
	return data
}

// randomRecords returns n records of sizes up to a few blocks.
func randomRecords(r *rand.Rand, n int) [][]byte {
	recs := make([][]byte, n)
	for i := range recs {
		size := r.IntN(200)
		if r.IntN(10) == 0 {
			size = r.IntN(3 * BlockSize)
		}
		recs[i] = make([]byte, size)
		for j := range recs[i] {
			recs[i][j] = byte(r.Uint32())
		}
	}
	return recs
}

// readPebbleLog reads every record of a Pebble log with our reader.
func readPebbleLog(data []byte, num uint64) ([][]byte, *Reader, error) {
	return readLogOptions(data, Options{Pebble: true, LogNum: num})
}

func TestPebbleLogs(t *testing.T) {
	for _, walSync := range []bool{false, true} {
		for _, closed := range []bool{false, true} {
			t.Run(fmt.Sprintf("walSync=%v/closed=%v", walSync, closed), func(t *testing.T) {
				r := rand.New(rand.NewPCG(1, 2))
				recs := randomRecords(r, 300)
				data := pebbleLog(t, 7, recs, walSync, closed)
				got, rd, err := readPebbleLog(data, 7)
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != len(recs) {
					t.Fatalf("%d records, want %d", len(got), len(recs))
				}
				for i := range got {
					if !bytes.Equal(got[i], recs[i]) {
						t.Fatalf("record %d differs", i)
					}
				}
				if rd.EOFTrailer() != closed {
					t.Fatalf("EOF trailer %v, want %v", rd.EOFTrailer(), closed)
				}
				if _, _, torn := rd.TornTail(); torn {
					t.Fatal("torn tail on a whole log")
				}
				// Without the log number, the first chunk's is taken.
				if got, _, err := readPebbleLog(data, 0); err != nil || len(got) != len(recs) {
					t.Fatalf("without the log number: %d records, %v", len(got), err)
				}
				// The wrong number: nothing is this log's.
				if got, rd, err := readPebbleLog(data, 8); err != nil || len(got) != 0 {
					t.Fatalf("log 8: %d records, %v", len(got), err)
				} else if off, why, torn := rd.TornTail(); !torn || off != 0 {
					t.Fatalf("log 8: torn %v at %d (%s)", torn, off, why)
				}
				// The legacy reader refuses Pebble's chunks.
				lr, _ := NewReader(bytes.NewReader(data), "p.log")
				if _, err := lr.Next(); err != io.EOF {
					t.Fatal(err)
				} else if _, why, torn := lr.TornTail(); !torn || why != "unknown chunk type 5" && why != "unknown chunk type 9" {
					t.Fatalf("legacy reader: torn %v (%s)", torn, why)
				}
			})
		}
	}
}

// TestRecycledPebbleLog: a log file reused under a new number, cut short
// by a crash, ends where the new log's chunks end; the old log's chunks
// after them are the file's previous use, not corruption.
func TestRecycledPebbleLog(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	old := pebbleLog(t, 5, randomRecords(r, 400), false, true)
	recs := randomRecords(r, 50)
	cur := pebbleLog(t, 9, recs, false, false)
	if len(cur) >= len(old) {
		t.Fatalf("the new log (%d bytes) does not leave the old (%d) behind", len(cur), len(old))
	}
	data := append(bytes.Clone(cur), old[len(cur):]...)
	got, rd, err := readPebbleLog(data, 9)
	if err != nil || len(got) != len(recs) {
		t.Fatalf("%d records of %d, %v", len(got), len(recs), err)
	}
	if off, why, torn := rd.TornTail(); !torn || off < int64(len(cur))-walSyncHeader || why == "" {
		t.Fatalf("torn %v at %d (%s), the new log ends at %d", torn, off, why, len(cur))
	}
}

// FuzzPebbleLog damages Pebble logs at the offsets the input names: the
// reader returns a prefix of the records and then the end, torn or clean,
// or an error wrapping ErrCorruption; never a record that was not written.
func FuzzPebbleLog(f *testing.F) {
	r := rand.New(rand.NewPCG(5, 6))
	recs := randomRecords(r, 20)
	recs[10] = bytes.Repeat([]byte("crosses a block"), BlockSize/10) // a record of three chunks
	logs := [][]byte{pebbleLog(f, 3, recs, false, true), pebbleLog(f, 3, recs, true, false)}
	f.Add(uint8(0), []byte{0, 10, 1})
	f.Add(uint8(1), []byte{0x80, 0x00, 0x10, 0x00, 0x07, 0xff})
	f.Fuzz(func(t *testing.T, which uint8, flips []byte) {
		bad := bytes.Clone(logs[int(which)%len(logs)])
		for i := 0; i+3 <= len(flips); i += 3 {
			off := (int(flips[i])<<8 | int(flips[i+1])) * len(bad) / 65536
			bad[off] ^= flips[i+2]
		}
		got, _, err := readPebbleLog(bad, 3)
		if err != nil && !errors.Is(err, base.ErrCorruption) {
			t.Fatalf("error %v is not corruption", err)
		}
		for i, rec := range got {
			if i >= len(recs) || !bytes.Equal(rec, recs[i]) {
				t.Fatalf("record %d was not written", i)
			}
		}
	})
}
