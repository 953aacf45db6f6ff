package sstable

// Interoperability with Pebble's sstable package, both ways: tables bloomkv
// writes are read by Pebble's reader, and tables Pebble writes (LevelDB and
// RocksDBv2 formats, with and without Snappy, with Pebble's bloom filter) are
// read by ours, with identical keys, values and range deletions.

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	pebblebloom "github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/objstorage/objstorageprovider"
	pebble "github.com/cockroachdb/pebble/v2/sstable"
	pebbleblob "github.com/cockroachdb/pebble/v2/sstable/blob"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/rangedel"
)

// pebbleEntries reads every point entry and range deletion of a table with
// Pebble's reader.
func pebbleEntries(t *testing.T, data []byte) ([]entry, []RangeDeletion) {
	t.Helper()
	return pebbleEntriesWith(t, data, pebble.ReaderOptions{})
}

// pebbleEntriesWith is pebbleEntries with Pebble's reader options o.
func pebbleEntriesWith(t *testing.T, data []byte, o pebble.ReaderOptions) ([]entry, []RangeDeletion) {
	t.Helper()
	fs := vfs.NewMem()
	f, err := fs.Create("t.sst", vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	// A copy: Pebble built with invariants (as under -race) mangles buffers
	// handed to it, and the caller's data must stay intact.
	if _, err := f.Write(append([]byte(nil), data...)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if f, err = fs.Open("t.sst"); err != nil {
		t.Fatal(err)
	}
	readable, err := pebble.NewSimpleReadable(f)
	if err != nil {
		t.Fatal(err)
	}
	r, err := pebble.NewReader(context.Background(), readable, o)
	if err != nil {
		t.Fatalf("Pebble cannot open the table: %v", err)
	}
	defer r.Close()
	var handle []byte // the blob handle of the entry the iterator is on, if any
	it, err := r.NewIter(pebble.NoTransforms, nil, nil, blobRecorder(&handle))
	if err != nil {
		t.Fatal(err)
	}
	var entries []entry
	for kv := it.First(); kv != nil; kv = it.Next() {
		v, _, err := kv.Value(nil)
		if err != nil {
			t.Fatal(err)
		}
		if handle != nil {
			v, handle = append([]byte(blobMarker), handle...), nil
		}
		entries = append(entries, entry{
			key:   base.InternalKey{UserKey: append([]byte(nil), kv.K.UserKey...), Trailer: base.Trailer(kv.K.Trailer)},
			value: append([]byte(nil), v...),
		})
	}
	if err := it.Close(); err != nil {
		t.Fatalf("Pebble iterator: %v", err)
	}
	var dels []RangeDeletion
	rit, err := r.NewRawRangeDelIter(context.Background(), pebble.NoFragmentTransforms, pebble.NoReadEnv)
	if err != nil {
		t.Fatal(err)
	}
	if rit != nil {
		span, err := rit.First()
		for ; span != nil; span, err = rit.Next() {
			for _, k := range span.Keys {
				dels = append(dels, tomb(append([]byte(nil), span.Start...), append([]byte(nil), span.End...), base.SeqNum(k.SeqNum())))
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		rit.Close()
	}
	return entries, dels
}

func sameEntries(t *testing.T, got, want []entry, who string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d entries, want %d", who, len(got), len(want))
	}
	for i := range got {
		if !sameEntry(got[i], want[i]) {
			t.Fatalf("%s: entry %d is %s (%d-byte value), want %s (%d-byte value)", who, i, got[i].key, len(got[i].value), want[i].key, len(want[i].value))
		}
	}
}

func sameRangeDels(t *testing.T, got, want []RangeDeletion, who string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d range-deletion fragments, want %d", who, len(got), len(want))
	}
	for i := range got {
		if !bytes.Equal(got[i].Start, want[i].Start) || !bytes.Equal(got[i].End, want[i].End) || got[i].SeqNum != want[i].SeqNum {
			t.Fatalf("%s: fragment %d is %q-%q#%d, want %q-%q#%d", who, i, got[i].Start, got[i].End, got[i].SeqNum, want[i].Start, want[i].End, want[i].SeqNum)
		}
	}
}

func TestPebbleReadsOurTables(t *testing.T) {
	twoLevel := 0
	defer func() {
		if twoLevel == 0 && !t.Failed() {
			t.Error("no table had a two-level index")
		}
	}()
	for seed := range 12 {
		r := rand.New(rand.NewPCG(uint64(seed), 11))
		spec := randomSpec(r, 1+r.IntN(2000))
		opts := WriterOptions{BlockSize: []int{256, 4096}[seed%2], Compression: compressionIf(seed%3 == 0)}
		if seed%6 >= 4 {
			opts.IndexPartitionThreshold = 512 // a two-level index, where the index is larger
		}
		if seed%4 == 3 {
			opts.TableFormat = TableFormatLevelDB
			spec.dels = nil
		}
		format := TableFormatRocksDBv2
		if opts.TableFormat != 0 {
			format = opts.TableFormat
		}
		t.Run(fmt.Sprintf("seed=%d/%v/compression=%v", seed, format, opts.Compression != NoCompression), func(t *testing.T) {
			data := writeSpec(t, spec, opts)
			if openTable(t, data).props.IndexType == indexTypeTwoLevel {
				twoLevel++
			}
			entries, dels := pebbleEntries(t, data)
			sameEntries(t, entries, spec.entries, "Pebble reading bloomkv's table")
			sameRangeDels(t, dels, openTable(t, data).RangeDeletions(), "Pebble reading bloomkv's range deletions")
			if len(spec.dels) > 0 && len(dels) == 0 {
				t.Fatal("the table has range deletions but Pebble found none")
			}
		})
	}
}

// blobRecorder returns a blob context for Pebble's iterators that, instead
// of fetching a value held in a blob file, sets *handle to its inline handle
// (encoded as the table stores it). The function's result type lives in a
// package of Pebble's that cannot be imported: it is made by reflection.
func blobRecorder(handle *[]byte) pebble.TableBlobContext {
	var bc pebble.TableBlobContext
	fn := reflect.ValueOf(&bc).Elem().FieldByName("BlobHandleFn")
	fn.Set(reflect.MakeFunc(fn.Type(), func(args []reflect.Value) []reflect.Value {
		preface := args[0].Interface().(pebbleblob.InlineHandlePreface)
		h := binary.AppendUvarint(nil, uint64(preface.ReferenceID))
		h = binary.AppendUvarint(h, uint64(preface.ValueLen))
		*handle = append(h, args[1].Bytes()...)
		return []reflect.Value{reflect.Zero(fn.Type().Out(0))}
	}))
	return bc
}

// setPebbleTrailer sets a Pebble internal key's trailer, whose type lives in a
// package of Pebble's that cannot be imported.
func setPebbleTrailer(k *pebble.InternalKey, t base.Trailer) {
	reflect.ValueOf(&k.Trailer).Elem().SetUint(uint64(t))
}

// pebbleSpan returns a Pebble range-deletion span over [start, end) with one
// key per sequence number (given in descending order).
func pebbleSpan(start, end []byte, seqs []base.SeqNum) pebble.Span {
	span := pebble.Span{Start: start, End: end}
	keys := reflect.ValueOf(&span).Elem().FieldByName("Keys")
	for _, seq := range seqs {
		k := reflect.New(keys.Type().Elem()).Elem()
		k.FieldByName("Trailer").SetUint(uint64(base.MakeTrailer(seq, base.KindRangeDelete)))
		keys.Set(reflect.Append(keys, k))
	}
	return span
}

// writePebbleTable writes spec with Pebble's writer.
func writePebbleTable(t *testing.T, spec tableSpec, format pebble.TableFormat, snappy bool) []byte {
	t.Helper()
	compression := pebble.NoCompression
	if snappy {
		compression = pebble.SnappyCompression
	}
	return writePebbleTableWith(t, spec, pebble.WriterOptions{
		TableFormat:  format,
		Compression:  compression,
		FilterPolicy: pebblebloom.FilterPolicy(10),
		BlockSize:    1024,
	})
}

// writePebbleTableWith writes spec with Pebble's writer and options o.
func writePebbleTableWith(t *testing.T, spec tableSpec, o pebble.WriterOptions) []byte {
	t.Helper()
	fs := vfs.NewMem()
	f, err := fs.Create("p.sst", vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	w := pebble.NewWriter(objstorageprovider.NewFileWritable(f), o)
	addSpec(t, w, spec, 0)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	rf, err := fs.Open("p.sst")
	if err != nil {
		t.Fatal(err)
	}
	defer rf.Close()
	st, err := rf.Stat()
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, st.Size())
	if _, err := rf.ReadAt(data, 0); err != nil {
		t.Fatal(err)
	}
	return data
}

func TestWeReadPebbleTables(t *testing.T) {
	formats := []pebble.TableFormat{pebble.TableFormatLevelDB, pebble.TableFormatRocksDBv2}
	for i, format := range formats {
		for _, snappy := range []bool{false, true} {
			r := rand.New(rand.NewPCG(uint64(i), 13))
			spec := randomSpec(r, 3000)
			if format == pebble.TableFormatLevelDB {
				spec.dels = nil // the LevelDB format holds no range deletions
			}
			t.Run(fmt.Sprintf("%v/snappy=%v", format, snappy), func(t *testing.T) {
				data := writePebbleTable(t, spec, format, snappy)
				rd := openTable(t, data)
				if _, ok, _ := rd.Filter(); ok {
					t.Fatal("our reader claims Pebble's filter as its own")
				}
				sameEntries(t, readEntries(t, rd), spec.entries, "bloomkv reading Pebble's table")
				var want []RangeDeletion
				want = append(want, rangedel.Fragment(spec.dels)...)
				sameRangeDels(t, rd.RangeDeletions(), want, "bloomkv reading Pebble's range deletions")
				if len(spec.dels) > 0 && len(want) == 0 {
					t.Fatal("test built no range deletions")
				}
				// Everything else our reader offers works on their table.
				checkTable(t, rd, spec, r)
			})
		}
	}
}

// TestLegacyRangeDeletionsAreFragmented reads range deletions from RocksDB's
// older unfragmented block: the reader fragments them.
func TestLegacyRangeDeletionsAreFragmented(t *testing.T) {
	dels := []rangedel.Tombstone{tomb([]byte("a"), []byte("m"), 3), tomb([]byte("f"), []byte("z"), 7), tomb([]byte("c"), []byte("h"), 5)}
	var buf bytes.Buffer
	w, _ := NewWriter(&buf, WriterOptions{})
	w.legacyRangeDels = true
	for _, d := range dels {
		w.DeleteRange(d.Start, d.End, d.SeqNum)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	rd := openTable(t, buf.Bytes())
	var want []RangeDeletion
	want = append(want, rangedel.Fragment(dels)...)
	sameRangeDels(t, rd.RangeDeletions(), want, "legacy range deletions")
	if len(want) < 5 {
		t.Fatalf("only %d fragments: the test overlaps too little", len(want))
	}
}
