package sstable

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestPebbleIngestsOurPebblev1Tables writes a table with this package's
// Writer in TableFormatPebblev1, with the sequence number 0 an ingested
// table carries, hands it to Pebble's Ingest, and reads it back through
// Pebble: its sets shadow older values, its deletions and range deletion
// remove them. Pebble refuses the same table in RocksDBv2 format, which is
// why the format exists.
func TestPebbleIngestsOurPebblev1Tables(t *testing.T) {
	write := func(format TableFormat) []byte {
		var buf bytes.Buffer
		w, err := NewWriter(&buf, WriterOptions{TableFormat: format, BlockSize: 256})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 500 {
			k := []byte(fmt.Sprintf("key%04d", i))
			switch {
			case i%10 == 3:
				err = w.Delete(k)
			default:
				err = w.Set(k, []byte(fmt.Sprintf("new%d", i)))
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if err := w.DeleteRange([]byte("key0600"), []byte("key0700"), 0); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	fs := vfs.NewMem()
	db, err := pebble.Open("db", &pebble.Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for i := range 800 {
		if err := db.Set([]byte(fmt.Sprintf("key%04d", i)), []byte("old"), nil); err != nil {
			t.Fatal(err)
		}
	}
	put := func(name string, data []byte) {
		f, err := fs.Create(name, vfs.WriteCategoryUnspecified)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(data); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	put("rocks.sst", write(TableFormatRocksDBv2))
	if err := db.Ingest(t.Context(), []string{"rocks.sst"}); err == nil {
		t.Fatal("Pebble ingested a RocksDBv2-format table; the Pebblev1 option may be unneeded")
	}
	ours := write(TableFormatPebblev1)
	// Our reader reads it as the RocksDBv2 table with the same entries.
	rd, rocks := openTable(t, ours), openTable(t, write(TableFormatRocksDBv2))
	if rd.Properties().NumEntries != 501 /* 500 points, 1 range deletion */ || rd.Properties().Format != TableFormatPebblev1 {
		t.Fatalf("our reader: %d entries, format %v", rd.Properties().NumEntries, rd.Properties().Format)
	}
	a, b := rd.NewIter(), rocks.NewIter()
	for okA, okB := a.First(), b.First(); okA || okB; okA, okB = a.Next(), b.Next() {
		if okA != okB || base.CompareInternal(a.Key(), b.Key()) != 0 || a.Key().Trailer != b.Key().Trailer || !bytes.Equal(a.Value(), b.Value()) {
			t.Fatalf("the Pebblev1 and RocksDBv2 tables differ at %v / %v", a.Key(), b.Key())
		}
	}
	put("ours.sst", ours)
	if err := db.Ingest(t.Context(), []string{"ours.sst"}); err != nil {
		t.Fatalf("Pebble refused our Pebblev1 table: %v", err)
	}
	for i := range 800 {
		k := fmt.Sprintf("key%04d", i)
		v, closer, err := db.Get([]byte(k))
		var want string
		switch {
		case i < 500 && i%10 == 3, i >= 600 && i < 700:
			want = "" // deleted by the table
		case i < 500:
			want = fmt.Sprintf("new%d", i)
		default:
			want = "old"
		}
		if want == "" {
			if !errors.Is(err, pebble.ErrNotFound) {
				t.Fatalf("%s: got %q, %v; want it deleted", k, v, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		if string(v) != want {
			t.Fatalf("%s: got %q, want %q", k, v, want)
		}
		closer.Close()
	}
}
