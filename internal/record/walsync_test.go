package record

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"reflect"
	"testing"

	pebblerecord "github.com/cockroachdb/pebble/v2/record"

	"github.com/bloomkv/bloomkv/internal/base"
)

// syncLog writes recs as WAL-sync log num, and returns the log, each
// record's offset, and the offset synced (SetSynced) after each record:
// every syncEvery-th record is followed by a sync.
func syncLog(t testing.TB, num uint64, recs [][]byte, syncEvery int) (data []byte, offs, synced []int64) {
	t.Helper()
	var buf bytes.Buffer
	w := NewWriterOptions(&buf, 0, WriterOptions{SyncOffsets: true, LogNum: num})
	var last int64
	for i, rec := range recs {
		off, err := w.Write(rec)
		if err != nil {
			t.Fatal(err)
		}
		offs = append(offs, off)
		if (i+1)%syncEvery == 0 {
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
			last = w.Size()
			w.SetSynced(last)
		}
		synced = append(synced, last)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return bytes.Clone(buf.Bytes()), offs, synced
}

func readSyncLog(data []byte, num uint64) ([][]byte, *Reader, error) {
	return readLogOptions(data, Options{Pebble: true, LogNum: num})
}

// TestWALSyncRoundTrip: a WAL-sync log reads back whole, with our reader
// and with Pebble's, and zeroed space after it is its clean end.
func TestWALSyncRoundTrip(t *testing.T) {
	recs := records(7)
	data, offs, _ := syncLog(t, 42, recs, 3)
	for _, zeros := range []int{0, 5, BlockSize + 100, 1 << 20} {
		log := append(bytes.Clone(data), make([]byte, zeros)...)
		got, r, err := readSyncLog(log, 42)
		if err != nil || len(got) != len(recs) {
			t.Fatalf("%d zeros: %d records of %d, %v", zeros, len(got), len(recs), err)
		}
		for i := range recs {
			if !bytes.Equal(got[i], recs[i]) {
				t.Fatalf("record %d differs", i)
			}
		}
		if _, _, torn := r.TornTail(); torn {
			t.Fatalf("%d zeros: a clean log reported a torn tail", zeros)
		}
		at, zeroed := r.ZeroedTail()
		if zeros >= BlockSize && !zeroed {
			t.Fatalf("%d zeros: no zeroed tail", zeros)
		}
		if zeroed && at != int64(len(data)) || r.End() < int64(len(data)) {
			t.Fatalf("%d zeros: ends at %d (zeroed tail at %d), the log is %d bytes", zeros, r.End(), at, len(data))
		}
	}
	// Offsets as the writer gave them.
	r, _ := NewReaderOptions(bytes.NewReader(data), "x", Options{Pebble: true, LogNum: 42})
	for i := range recs {
		if _, err := r.Next(); err != nil || r.Offset() != offs[i] {
			t.Fatalf("record %d at %d, written at %d: %v", i, r.Offset(), offs[i], err)
		}
	}

	// Pebble's reader; its log-number type is in a package of Pebble's
	// that cannot be imported, so convert by reflection.
	ctor := reflect.ValueOf(pebblerecord.NewReader)
	pr := ctor.Call([]reflect.Value{reflect.ValueOf(io.Reader(bytes.NewReader(data))), reflect.ValueOf(uint64(42)).Convert(ctor.Type().In(1))})[0].Interface().(*pebblerecord.Reader)
	for i := range recs {
		rr, err := pr.Next()
		if err != nil {
			t.Fatalf("Pebble's reader, record %d: %v", i, err)
		}
		got, err := io.ReadAll(rr)
		if err != nil || !bytes.Equal(got, recs[i]) {
			t.Fatalf("Pebble's reader, record %d differs (%v)", i, err)
		}
	}
	if _, err := pr.Next(); err != io.EOF {
		t.Fatalf("Pebble's reader after the last record: %v", err)
	}
}

// TestWALSyncUnsyncedHoles: in space prepared ahead of the writes a crash
// may keep a later unsynced write and lose an earlier one. Such a hole past
// every synced offset ends the log there, torn; a hole before an offset a
// chunk says was synced is corruption.
func TestWALSyncUnsyncedHoles(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	recs := randomRecords(rng, 200)
	data, offs, synced := syncLog(t, 7, recs, 10)
	data = append(data, make([]byte, 64<<10)...)
	var corrupt, tornTails int
	for trial := range 300 {
		i := 1 + rng.IntN(len(recs)-2) // the first record lost
		log := bytes.Clone(data)
		end := int(offs[i+1])
		clear(log[offs[i]:end]) // record i never reached the disk
		got, r, err := readSyncLog(log, 7)
		// Was record i covered by a sync some later chunk records?
		vouched := false
		for j := i + 1; j < len(recs); j++ {
			if synced[j-1] > offs[i] { // record j's chunks carry synced[j-1]
				vouched = true
				break
			}
		}
		if vouched {
			if !errors.Is(err, base.ErrCorruption) {
				t.Fatalf("trial %d: record %d lost before a sync past it: %d records, %v", trial, i, len(got), err)
			}
			corrupt++
			continue
		}
		if err != nil {
			t.Fatalf("trial %d: record %d lost after the last sync: %v", trial, i, err)
		}
		if len(got) != i {
			t.Fatalf("trial %d: %d records, want the %d before the hole", trial, len(got), i)
		}
		if r.End() != offs[i] {
			t.Fatalf("trial %d: ends at %d, the hole is at %d", trial, r.End(), offs[i])
		}
		tornTails++
	}
	if corrupt == 0 || tornTails == 0 {
		t.Fatalf("%d holes before a sync, %d after: the trials missed a case", corrupt, tornTails)
	}
}

// TestWALSyncDamageBeforeSynced: a damaged chunk before an offset a chunk
// already read says was synced is corruption, even with nothing after it.
func TestWALSyncDamageBeforeSynced(t *testing.T) {
	recs := [][]byte{bytes.Repeat([]byte("a"), 100), bytes.Repeat([]byte("b"), 100), bytes.Repeat([]byte("c"), 100)}
	var buf bytes.Buffer
	w := NewWriterOptions(&buf, 0, WriterOptions{SyncOffsets: true, LogNum: 3})
	w.Write(recs[0])
	w.Write(recs[1])
	w.Flush()
	w.SetSynced(w.Size())
	w.Write(recs[2])
	w.Flush()
	data := buf.Bytes()
	// The last chunk's payload damaged: torn (nothing synced past it).
	bad := bytes.Clone(data)
	bad[len(bad)-1] ^= 1
	got, r, err := readSyncLog(bad, 3)
	if _, _, torn := r.TornTail(); err != nil || len(got) != 2 || !torn {
		t.Fatalf("damaged unsynced tail: %d records, torn %v, %v", len(got), torn, err)
	}
	// The second record damaged: the third says it was synced.
	bad = bytes.Clone(data)
	bad[walSyncHeader+100+walSyncHeader+5] ^= 1
	if _, _, err := readSyncLog(bad, 3); !errors.Is(err, base.ErrCorruption) {
		t.Fatalf("damage before a synced offset: %v", err)
	}
	// A log of another number is not this one's (a reused file).
	if got, _, err := readSyncLog(data, 4); err != nil || len(got) != 0 {
		t.Fatalf("read as log 4: %d records, %v", len(got), err)
	}
}
