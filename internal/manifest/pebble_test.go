package manifest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/objstorage/objstorageprovider"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/record"
)

// pebbleManifest writes a store with Pebble (tables on L0 and L6, one
// ingested, range deletions and range keys) and returns its manifest's edits and the levels
// Pebble lists.
func pebbleManifest(t testing.TB) ([][]byte, [][]pebble.SSTableInfo) {
	t.Helper()
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	d, err := pebble.Open(dir, &pebble.Options{FormatMajorVersion: pebble.FormatFlushableIngest, DisableAutomaticCompactions: true})
	must(err)
	for round := range 4 {
		for i := range 500 {
			must(d.Set(fmt.Appendf(nil, "k%04d", i*4+round), []byte("v"), nil))
		}
		if round == 1 {
			must(d.DeleteRange([]byte("k0100"), []byte("k0200"), nil))
			must(d.RangeKeySet([]byte("k0300"), []byte("k0400"), nil, []byte("rk"), nil))
		}
		must(d.Flush())
		switch round {
		case 0:
			must(d.Compact(context.Background(), []byte("k"), []byte("l"), false))
		case 2:
			must(d.Compact(context.Background(), []byte("k0000"), []byte("k0500"), false))
			// An ingested table, its keys at the one sequence number
			// the manifest gives.
			path := filepath.Join(dir, "ingest.sst")
			f, err := vfs.Default.Create(path, vfs.WriteCategoryUnspecified)
			must(err)
			w := sstable.NewWriter(objstorageprovider.NewFileWritable(f), sstable.WriterOptions{TableFormat: sstable.TableFormatPebblev2})
			for i := range 10 {
				must(w.Set(fmt.Appendf(nil, "k%04dx", i), []byte("ingested")))
			}
			must(w.Close())
			must(d.Ingest(context.Background(), []string{path}))
		}
	}
	tables, err := d.SSTables()
	must(err)
	must(d.Close())
	f, err := os.Open(filepath.Join(dir, "MANIFEST-000001"))
	must(err)
	defer f.Close()
	r, err := record.NewReader(f, "MANIFEST-000001")
	must(err)
	var recs [][]byte
	for {
		rec, err := r.Next()
		if err == io.EOF {
			break
		}
		must(err)
		recs = append(recs, append([]byte(nil), rec...))
	}
	return recs, tables
}

// TestDecodePebble builds the version from a Pebble manifest's edits: the
// same tables, levels, sizes, bounds and sequence numbers Pebble lists.
func TestDecodePebble(t *testing.T) {
	recs, want := pebbleManifest(t)
	v := &Version{}
	rangeKeys := 0
	for i, rec := range recs {
		e, err := DecodePebble(rec)
		if err != nil {
			t.Fatalf("edit %d: %v", i, err)
		}
		for _, pt := range e.Tables {
			if pt.HasRangeKeys {
				rangeKeys++
			}
		}
		if v, err = v.Apply(&e.VersionEdit); err != nil {
			t.Fatalf("edit %d: %v", i, err)
		}
	}
	levels := 0
	for l := range NumLevels {
		got := v.Files(l)
		if len(got) != len(want[l]) {
			t.Fatalf("L%d: %d tables, Pebble lists %d", l, len(got), len(want[l]))
		}
		if len(got) > 0 {
			levels++
		}
		byNum := map[uint64]pebble.SSTableInfo{}
		for _, w := range want[l] {
			byNum[uint64(w.FileNum)] = w
		}
		for _, g := range got {
			w, ok := byNum[g.FileNum]
			if !ok || g.Size != w.Size || g.SmallestSeq != base.SeqNum(w.SmallestSeqNum) || g.LargestSeq != base.SeqNum(w.LargestSeqNum) ||
				string(g.Smallest.UserKey) != string(w.Smallest.UserKey) || uint64(g.Smallest.Trailer) != uint64(w.Smallest.Trailer) ||
				string(g.Largest.UserKey) != string(w.Largest.UserKey) || uint64(g.Largest.Trailer) != uint64(w.Largest.Trailer) {
				t.Fatalf("L%d table %d: %s size %d seqs %d-%d; Pebble: %+v", l, g.FileNum, g, g.Size, g.SmallestSeq, g.LargestSeq, w.TableInfo)
			}
		}
	}
	if levels < 2 || rangeKeys == 0 {
		t.Fatalf("the store has %d levels, %d tables with range keys: the test covers too little", levels, rangeKeys)
	}
}

// TestDecodePebbleRefuses: damage is corruption; tags and custom fields
// Pebble's decoder does not know, and column families, are unsupported,
// named with their offset.
func TestDecodePebbleRefuses(t *testing.T) {
	recs, _ := pebbleManifest(t)
	var withTable []byte
	for _, rec := range recs {
		if e, _ := DecodePebble(rec); e != nil && len(e.NewFiles) > 0 && withTable == nil {
			withTable = rec
		}
	}
	for _, c := range []struct {
		name        string
		data        []byte
		unsupported bool
		msg         string
	}{
		{"unknown tag", append([]byte{3, 5}, 110), true, "unknown tag 110 at offset 2"},
		{"column family", []byte{0xc8, 0x01, 1}, true, "column-family tag 200 at offset 0"},
		{"truncated", withTable[:len(withTable)-3], false, "offset"},
		{"bad level", []byte{6, 9, 1}, false, "level 9 out of range"},
		{"must-understand custom field", append(withTable[:len(withTable)-1:len(withTable)-1], 70, 1, 0, 1), true, "custom field 70"},
	} {
		_, err := DecodePebble(c.data)
		if errors.Is(err, base.ErrUnsupportedFormat) != c.unsupported || errors.Is(err, base.ErrCorruption) == c.unsupported ||
			err == nil || !containsStr(err.Error(), c.msg) {
			t.Errorf("%s: %v, want %q (unsupported %v)", c.name, err, c.msg, c.unsupported)
		}
	}
}

func containsStr(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

func FuzzDecodePebble(f *testing.F) {
	recs, _ := pebbleManifest(f)
	for _, rec := range recs {
		f.Add(rec)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := DecodePebble(data)
		if err != nil {
			if !errors.Is(err, base.ErrCorruption) && !errors.Is(err, base.ErrUnsupportedFormat) {
				t.Fatalf("%v is neither corruption nor unsupported", err)
			}
			return
		}
		if len(e.NewFiles) != len(e.Tables) {
			t.Fatalf("%d new files, %d tables' details", len(e.NewFiles), len(e.Tables))
		}
		var v Version
		v.Apply(&e.VersionEdit) // must not panic
	})
}
