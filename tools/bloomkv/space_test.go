package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/bloomkv/bloomkv"
	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/manifest"
	"github.com/bloomkv/bloomkv/internal/record"
	"github.com/bloomkv/bloomkv/sstable"
)

// jsonLines runs a command with --json, which must succeed, and decodes
// each line of its output into a new T.
func jsonLines[T any](t *testing.T, args ...string) []T {
	t.Helper()
	out, errOut, code := runTool(append([]string{"--json"}, args...)...)
	if code != 0 {
		t.Fatalf("%v: exit %d, stderr %q", args, code, errOut)
	}
	var vs []T
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		var v T
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("%v: %v: %s", args, err, line)
		}
		vs = append(vs, v)
	}
	return vs
}

// storeTables lists a store's current tables' paths as db lsm gives them.
func storeTables(t *testing.T, dir string) (paths []string, levels []int) {
	t.Helper()
	lsm := jsonLines[lsmOut](t, "db", "lsm", dir)[0]
	for _, l := range lsm.Levels {
		for _, tb := range l.Tables {
			paths = append(paths, filepath.Join(dir, tb.File))
			levels = append(levels, l.Level)
		}
	}
	return paths, levels
}

// writeLayeredStore writes a bloomkv store holding versions of "k" in L6
// (moved there), in L0 and in its WAL, among other keys.
func writeLayeredStore(t *testing.T, dir string) {
	d, err := bloomkv.Open(dir, &bloomkv.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	for round, v := range []string{"in L6", "in L0", "in the WAL"} {
		for _, k := range []string{"a", "k", "z"} {
			if err := d.Set([]byte(k), []byte(v), bloomkv.Sync); err != nil {
				t.Fatal(err)
			}
		}
		if round == 2 {
			break
		}
		if err := d.Flush(); err != nil {
			t.Fatal(err)
		}
		for round == 0 && d.Metrics().Levels[0].Files > 0 {
			runtime.Gosched()
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestFind(t *testing.T) {
	check := func(t *testing.T, dir, key string, want []foundOut) {
		got := jsonLines[foundOut](t, "find", dir, key)
		if len(got) != len(want) {
			t.Fatalf("find %s: %d versions, want %d: %+v", key, len(got), len(want), got)
		}
		for i, g := range got {
			w := want[i]
			if g.Where != w.Where || g.Kind != w.Kind || g.Value != w.Value || (w.File != "" && g.File != w.File) {
				t.Fatalf("find %s: version %d is %+v, want %+v", key, i, g, w)
			}
			if i > 0 && g.Seq > got[i-1].Seq {
				t.Fatalf("find %s: not newest first: %+v", key, got)
			}
		}
	}
	t.Run("bloomkv", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "db")
		writeLayeredStore(t, dir)
		paths, levels := storeTables(t, dir)
		var l0, l6 string
		for i, p := range paths {
			switch levels[i] {
			case 0:
				l0 = filepath.Base(p)
			case 6:
				l6 = filepath.Base(p)
			}
		}
		wal := filepath.Base(storeFile(t, dir, "*.log"))
		check(t, dir, "k", []foundOut{
			{File: wal, Where: "WAL", Kind: "SET", Value: "in the WAL"},
			{File: l0, Where: "L0", Kind: "SET", Value: "in L0"},
			{File: l6, Where: "L6", Kind: "SET", Value: "in L6"},
		})
		// A table file left out of the manifest is found as such.
		data, err := os.ReadFile(filepath.Join(dir, l6))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "999999.sst"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		check(t, dir, "k", []foundOut{
			{File: wal, Where: "WAL", Kind: "SET", Value: "in the WAL"},
			{File: l0, Where: "L0", Kind: "SET", Value: "in L0"},
			{File: l6, Where: "L6", Kind: "SET", Value: "in L6"},
			{File: "999999.sst", Where: "not in the current version", Kind: "SET", Value: "in L6"},
		})
		if _, errOut, code := runTool("find", dir, "absent"); code != 1 || !strings.Contains(errOut, dir) {
			t.Fatalf("find absent: exit %d, stderr %q", code, errOut)
		}
	})
	t.Run("bloomkv ingested", func(t *testing.T) {
		// An ingested table's keys are stored at 0 and read at the
		// sequence number the ingestion assigned. The table goes to L0
		// (the flushed memtable overlaps it); a compaction into L6
		// would rewrite it with sequence 0, so none is allowed.
		dir := filepath.Join(t.TempDir(), "db")
		d, err := bloomkv.Open(dir, &bloomkv.Options{
			FormatVersion:         bloomkv.FormatNewest,
			L0CompactionThreshold: 8,
			L0StopWritesThreshold: 16,
			Logger:                slog.New(slog.NewTextHandler(io.Discard, nil)),
		})
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if err := d.Set([]byte("k"), []byte("set"), bloomkv.Sync); err != nil {
				t.Fatal(err)
			}
		}
		var buf bytes.Buffer
		w, err := sstable.NewWriter(&buf, sstable.WriterOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Set([]byte("k"), []byte("ingested")); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		ingest := filepath.Join(t.TempDir(), "ingest.sst")
		if err := os.WriteFile(ingest, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := d.Ingest([]string{ingest}); err != nil {
			t.Fatal(err)
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
		got := jsonLines[foundOut](t, "find", dir, "k")
		if len(got) == 0 || got[0].Value != "ingested" || got[0].Seq <= 3 || got[0].Level == nil || *got[0].Level != 0 {
			t.Fatalf("find k: %+v", got)
		}
	})
	t.Run("pebble", func(t *testing.T) {
		ps := writePebbleStore(t, filepath.Join(t.TempDir(), "pebbledb"), pebble.FormatFlushableIngest, true)
		// pk00007: v1 compacted to L6, v2 flushed to L0, then in the WAL.
		check(t, ps.dir, "pk00007", []foundOut{
			{File: filepath.Base(ps.wal), Where: "WAL", Kind: "SET", Value: "in the WAL"},
			{Where: "L0", Kind: "SET", Value: "v2-7"},
			{Where: "L6", Kind: "SET", Value: "v1-7"},
		})
		got := jsonLines[foundOut](t, "find", ps.dir, "pk00007")
		for i, level := range []int{0, 6} {
			if !slices.ContainsFunc(ps.levels[level], func(ti pebble.SSTableInfo) bool {
				return got[i+1].File == fmt.Sprintf("%06d.sst", ti.FileNum)
			}) {
				t.Fatalf("%s is not in Pebble's L%d: %+v", got[i+1].File, level, ps.levels[level])
			}
		}
		// pk00025: in L6, deleted in L0, then ingested: read at the
		// ingestion's sequence number, not the 0 its file stores.
		got = jsonLines[foundOut](t, "find", ps.dir, "pk00025")
		if len(got) != 3 || got[0].Value != "ingested-25" || got[0].Seq <= got[1].Seq || got[1].Kind != "DEL" || got[2].Value != "v1-25" || got[2].Seq == 0 {
			t.Fatalf("find pk00025: %+v", got)
		}
		// pk01050: in L6, overwritten in L0, range-deleted, then set again
		// (both in one L0 table, and in the WAL that was flushed to it).
		got = jsonLines[foundOut](t, "find", ps.dir, "pk01050")
		var kinds []string
		for _, g := range got {
			kinds = append(kinds, g.Where+" "+g.Kind)
		}
		if want := []string{"L0 SET", "obsolete WAL SET", "L0 RANGEDEL", "obsolete WAL RANGEDEL", "L0 SET", "L6 SET"}; !slices.Equal(kinds, want) {
			t.Fatalf("find pk01050: %v, want %v", kinds, want)
		}
	})
}

func TestDBProperties(t *testing.T) {
	f := newFixture(t)
	ps := writePebbleStore(t, filepath.Join(f.dir, "pebbledb"), pebble.FormatFlushableIngest, true)
	for _, dir := range []string{f.db, ps.dir} {
		paths, levels := storeTables(t, dir)
		got := jsonLines[dbPropertiesOut](t, "db", "properties", dir)[0]
		want := propSums{Level: -1}
		perLevel := make([]propSums, manifest.NumLevels)
		for i, p := range paths {
			pr := jsonLines[propertiesOut](t, "sstable", "properties", p)[0]
			for _, s := range []*propSums{&want, &perLevel[levels[i]]} {
				s.Tables++
				s.FileSize += pr.FileSize
				s.DataSize += pr.DataSize
				s.IndexSize += pr.IndexSize
				s.FilterSize += pr.FilterSize
				s.Entries += pr.Entries
				s.Deletions += pr.Deletions
				s.RangeDeletions += pr.RangeDeletions
				s.RawKeySize += pr.RawKeySize
				s.RawValueSize += pr.RawValueSize
			}
		}
		if got.Total != want {
			t.Fatalf("%s: total %+v, want the sum of sstable properties %+v", dir, got.Total, want)
		}
		for l := range perLevel {
			perLevel[l].Level = l
			if got.Levels[l] != perLevel[l] {
				t.Fatalf("%s: L%d %+v, want %+v", dir, l, got.Levels[l], perLevel[l])
			}
		}
		if want.Tables < 2 || want.Entries == 0 || want.DataSize == 0 {
			t.Fatalf("%s: too little to test: %+v", dir, want)
		}
	}
}

func TestSpace(t *testing.T) {
	f := newFixture(t)
	ps := writePebbleStore(t, filepath.Join(f.dir, "pebbledb"), pebble.FormatFlushableIngest, true)
	// A table of 200 keys in 512-byte blocks: the whole range is its data;
	// a narrow range a few blocks; one past the end, none.
	pr := jsonLines[propertiesOut](t, "sstable", "properties", f.table)[0]
	all := jsonLines[spaceOut](t, "sstable", "space", f.table)[0]
	if all.Size != pr.DataSize || all.DataBlocks != pr.DataBlocks || all.OfBlocks != pr.DataBlocks {
		t.Fatalf("sstable space, unbounded: %+v, want data size %d in %d blocks", all, pr.DataSize, pr.DataBlocks)
	}
	narrow := jsonLines[spaceOut](t, "sstable", "space", "--start", "key050", "--end", "key060", f.table)[0]
	if narrow.DataBlocks < 1 || narrow.DataBlocks > 3 || narrow.Size == 0 || narrow.Size >= all.Size/4 {
		t.Fatalf("sstable space [key050, key060): %+v of %+v", narrow, all)
	}
	halves := jsonLines[spaceOut](t, "sstable", "space", "--end", "key100", f.table)[0].Size +
		jsonLines[spaceOut](t, "sstable", "space", "--start", "key100", f.table)[0].Size
	if halves < all.Size || halves > all.Size+600 {
		t.Fatalf("sstable space: halves %d, whole %d (one block may count twice)", halves, all.Size)
	}
	if none := jsonLines[spaceOut](t, "sstable", "space", "--start", "zzz", f.table)[0]; none.Size != 0 || none.DataBlocks != 0 {
		t.Fatalf("sstable space past the end: %+v", none)
	}
	if none := jsonLines[spaceOut](t, "sstable", "space", "--start", "a", "--end", "b", f.table)[0]; none.Size != 0 || none.DataBlocks != 0 {
		t.Fatalf("sstable space before the first key: %+v", none)
	}
	for _, dir := range []string{f.db, ps.dir} {
		// Unbounded: every table whole, as db properties sums them.
		props := jsonLines[dbPropertiesOut](t, "db", "properties", dir)[0]
		whole := jsonLines[dbSpaceOut](t, "db", "space", dir)[0]
		if whole.Size != props.Total.FileSize || whole.Tables != props.Total.Tables {
			t.Fatalf("%s: db space unbounded %+v, db properties %+v", dir, whole, props.Total)
		}
		for l := range whole.Levels {
			if whole.Levels[l].Size != props.Levels[l].FileSize {
				t.Fatalf("%s: L%d: db space %d, file size %d", dir, l, whole.Levels[l].Size, props.Levels[l].FileSize)
			}
		}
		// Ranges that hold no key: before, between and after the keys.
		for _, r := range [][2]string{{"a", "b"}, {"user", "user000"}, {"zzz", ""}, {"pk", "pk00000"}} {
			a := []string{"db", "space", "--start", r[0], dir}
			if r[1] != "" {
				a = append(a, "--end", r[1])
			}
			if none := jsonLines[dbSpaceOut](t, a...)[0]; none.Size != 0 || none.Tables != 0 {
				t.Fatalf("%s: db space [%q, %q) holds no key: %+v", dir, r[0], r[1], none)
			}
		}
	}
}

// TestDBSpaceAgainstPebble compares db space on a Pebble store with
// Pebble's own DB.EstimateDiskUsage, range by range.
func TestDBSpaceAgainstPebble(t *testing.T) {
	dir := t.TempDir()
	opts := &pebble.Options{DisableAutomaticCompactions: true, Logger: quietLogger{}, FormatMajorVersion: pebble.FormatFlushableIngest}
	opts.Experimental.EnableColumnarBlocks = func() bool { return false }
	d, err := pebble.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	key := func(i int) []byte { return fmt.Appendf(nil, "k%05d", i) }
	set := func(from, to, step int, v string) {
		b := d.NewBatch()
		for i := from; i < to; i += step {
			if err := b.Set(key(i), fmt.Appendf(nil, "%s-%d-%s", v, i, strings.Repeat("v", 40)), nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Commit(pebble.Sync); err != nil {
			t.Fatal(err)
		}
		if err := d.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	// A bottom-level table, then level-0 tables over parts
	// of it, one of them a narrow island.
	set(0, 20000, 1, "base")
	if err := d.Compact(context.Background(), key(0), key(99999), false); err != nil {
		t.Fatal(err)
	}
	set(5000, 9000, 3, "l0")
	set(12000, 12010, 1, "island")
	// End keys between stored keys ("~" sorts after every digit), so that
	// Pebble's inclusive end and db space's exclusive one agree.
	between := func(i int) string { return fmt.Sprintf("k%05d~", i) }
	ranges := [][2]string{
		{"a", "b"}, {"zz", "zzz"}, {between(12005), between(12006)},
		{"k", between(19999)}, {"a", "z"},
		{between(100), between(200)}, {between(4000), between(10000)},
		{between(11990), between(12020)}, {between(12003), between(15000)},
	}
	want := make([]uint64, len(ranges))
	for i, r := range ranges {
		if want[i], err = d.EstimateDiskUsage([]byte(r[0]), []byte(r[1])); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	nonzero := 0
	for i, r := range ranges {
		got := jsonLines[dbSpaceOut](t, "db", "space", "--start", r[0], "--end", r[1], dir)[0]
		if got.Size != want[i] {
			t.Errorf("db space [%s, %s): %d bytes in %d tables, Pebble's estimate %d", r[0], r[1], got.Size, got.Tables, want[i])
		}
		if want[i] > 0 {
			nonzero++
		}
	}
	if nonzero < 5 {
		t.Fatalf("only %d of %d ranges hold data: the store is not as the test means", nonzero, len(ranges))
	}
}

// writeManifest writes edits as a manifest and returns the offsets of
// their records.
func writeManifest(t *testing.T, path string, edits []*manifest.VersionEdit) []int64 {
	var buf bytes.Buffer
	w := record.NewWriter(&buf, 0)
	var offs []int64
	for _, ed := range edits {
		off, err := w.Write(ed.Encode())
		if err != nil {
			t.Fatal(err)
		}
		offs = append(offs, off)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return offs
}

func TestManifestCheck(t *testing.T) {
	f := newFixture(t)
	ps := writePebbleStore(t, filepath.Join(f.dir, "pebbledb"), pebble.FormatFlushableIngest, true)
	for _, m := range []string{f.manifest, filepath.Join(ps.dir, "MANIFEST-000001")} {
		out, errOut, code := runTool("manifest", "check", m)
		if code != 0 || !strings.HasPrefix(out, m+": ok: ") || errOut != "" {
			t.Fatalf("manifest check %s: exit %d, stdout %q, stderr %q", m, code, out, errOut)
		}
	}
	table := func(num uint64, lo, hi string) *manifest.FileMetadata {
		return &manifest.FileMetadata{FileNum: num, Size: 100, Smallest: base.MakeInternalKey([]byte(lo), 5, base.KindSet),
			Largest: base.MakeInternalKey([]byte(hi), 5, base.KindSet), SmallestSeq: 5, LargestSeq: 5}
	}
	bad := filepath.Join(f.dir, "MANIFEST-000009")
	offs := writeManifest(t, bad, []*manifest.VersionEdit{
		{ComparerName: "leveldb.BytewiseComparator", NextFileNum: 10, LastSeq: 5},
		{LogNumber: 3, NewFiles: []manifest.NewFile{{Level: 0, Meta: table(4, "a", "c")}}},
		{NewFiles: []manifest.NewFile{{Level: 1, Meta: table(5, "a", "f")}, {Level: 1, Meta: table(6, "e", "h")}}},
		{NewFiles: []manifest.NewFile{{Level: 6, Meta: table(4, "a", "c")}}},
		{DeletedFiles: []manifest.DeletedFile{{Level: 2, FileNum: 7}}, NextFileNum: 8, LastSeq: 4},
		{NewFiles: []manifest.NewFile{{Level: 3, Meta: table(12, "x", "y")}}},
	})
	out, errOut, code := runTool("manifest", "check", bad)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	want := []string{
		"edit 2 at offset " + itoa(offs[2]) + `: L1 tables 000005 ["a", "f"] and 000006 ["e", "h"] overlap`,
		"edit 3 at offset " + itoa(offs[3]) + ": adds table 000004 to L6, but it is live in L0 already",
		"edit 4 at offset " + itoa(offs[4]) + ": next file number 8 below the previous 10",
		"edit 4 at offset " + itoa(offs[4]) + ": last sequence number 4 below the previous 5",
		"edit 4 at offset " + itoa(offs[4]) + ": deletes table 000007 from L2, which is not live",
		"edit 5 at offset " + itoa(offs[5]) + ": adds table 000012, not below the next file number 10",
	}
	if code != 1 || len(lines) != len(want) || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, bad) {
		t.Fatalf("manifest check: exit %d, stdout:\n%s\nstderr %q", code, out, errOut)
	}
	for i, w := range want {
		if lines[i] != bad+": "+w {
			t.Fatalf("problem %d: %q, want %q", i, lines[i], bad+": "+w)
		}
	}
}

// TestManifestCheckPebble appends to a Pebble manifest a copy of its last
// edit, which adds a table again while it is live: manifest check names
// the new edit and its offset.
func TestManifestCheckPebble(t *testing.T) {
	ps := writePebbleStore(t, filepath.Join(t.TempDir(), "pebbledb"), pebble.FormatFlushableIngest, true)
	m := filepath.Join(t.TempDir(), "MANIFEST-000001")
	copyFile(t, filepath.Join(ps.dir, "MANIFEST-000001"), m)
	recs, _, err := readManifest(m)
	if err != nil {
		t.Fatal(err)
	}
	last := recs[len(recs)-1].rec
	ed, err := manifest.DecodePebble(last)
	if err != nil || len(ed.NewFiles) != 1 {
		t.Fatalf("last edit: %v %+v", err, ed)
	}
	f, err := os.OpenFile(m, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	w := record.NewWriter(f, st.Size())
	off, err := w.Write(last)
	if err == nil {
		err = w.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	nf := ed.NewFiles[0]
	want := fmt.Sprintf("%s: edit %d at offset %d: adds table %06d to L%d, but it is live in L%d already\n", m, len(recs), off, nf.Meta.FileNum, nf.Level, nf.Level)
	out, errOut, code := runTool("manifest", "check", m)
	if code != 1 || out != want || !strings.Contains(errOut, m) {
		t.Fatalf("manifest check: exit %d, stdout %q (want %q), stderr %q", code, out, want, errOut)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func TestManifestSummarize(t *testing.T) {
	f := newFixture(t)
	ps := writePebbleStore(t, filepath.Join(f.dir, "pebbledb"), pebble.FormatFlushableIngest, true)
	for _, c := range []struct{ dir, manifest string }{{f.db, f.manifest}, {ps.dir, filepath.Join(ps.dir, "MANIFEST-000001")}} {
		sum := jsonLines[summaryOut](t, "manifest", "summarize", "--edits", "2", c.manifest)[0]
		if len(sum.Buckets) != (sum.Edits+1)/2 {
			t.Fatalf("%s: %d edits in %d runs of 2", c.manifest, sum.Edits, len(sum.Buckets))
		}
		for l := range manifest.NumLevels {
			var added, deleted uint64
			for _, b := range sum.Buckets {
				added += b.BytesAdded[l]
				deleted += b.BytesDeleted[l]
			}
			if added != sum.Levels[l].BytesAdded || deleted != sum.Levels[l].BytesDeleted {
				t.Fatalf("%s: L%d: runs add %d and delete %d bytes, the whole %d and %d", c.manifest, l, added, deleted, sum.Levels[l].BytesAdded, sum.Levels[l].BytesDeleted)
			}
		}
		dump := jsonLines[map[string]any](t, "manifest", "dump", c.manifest)
		if sum.Edits != len(dump)-1 {
			t.Fatalf("%s: %d edits, manifest dump has %d", c.manifest, sum.Edits, len(dump)-1)
		}
		lsm := jsonLines[lsmOut](t, "db", "lsm", c.dir)[0]
		var added, deleted int
		kinds := 0
		for _, n := range sum.EditsByKind {
			kinds += n
		}
		if kinds != sum.Edits {
			t.Fatalf("%s: edits by kind %v, %d edits", c.manifest, sum.EditsByKind, sum.Edits)
		}
		for l, ls := range sum.Levels {
			if ls.Tables != len(lsm.Levels[l].Tables) || ls.Size != lsm.Levels[l].Size {
				t.Fatalf("%s: L%d: %d tables %d bytes, db lsm %d tables %d bytes", c.manifest, l, ls.Tables, ls.Size, len(lsm.Levels[l].Tables), lsm.Levels[l].Size)
			}
			if ls.Added-ls.Deleted != ls.Tables || ls.BytesAdded-ls.BytesDeleted != ls.Size {
				t.Fatalf("%s: L%d: added %d deleted %d, %d now", c.manifest, l, ls.Added, ls.Deleted, ls.Tables)
			}
			var by uint64
			for _, b := range ls.BytesAddedBy {
				by += b
			}
			if by != ls.BytesAdded {
				t.Fatalf("%s: L%d: bytes added by kind %v, %d in all", c.manifest, l, ls.BytesAddedBy, ls.BytesAdded)
			}
			added += ls.Added
			deleted += ls.Deleted
		}
		if sum.Tables != lsm.Tables || sum.Size != lsm.Size || added == 0 {
			t.Fatalf("%s: %+v, db lsm %d tables %d bytes", c.manifest, sum, lsm.Tables, lsm.Size)
		}
		if sum.EditsByKind["flush"] < 2 {
			t.Fatalf("%s: flushes: %v", c.manifest, sum.EditsByKind)
		}
	}
	// The Pebble store ingested one table and compacted once.
	sum := jsonLines[summaryOut](t, "manifest", "summarize", filepath.Join(ps.dir, "MANIFEST-000001"))[0]
	if sum.EditsByKind["ingest"] != 1 || sum.EditsByKind["compaction"] < 1 {
		t.Fatalf("Pebble manifest: %v", sum.EditsByKind)
	}
}

// TestSSTableSpacePebble runs sstable space on Pebble's tables, whose
// indexes have two levels (but in the LevelDB format): the whole range is the data, and a range split
// in two counts at most the block holding the split twice.
func TestSSTableSpacePebble(t *testing.T) {
	dir := t.TempDir()
	twoLevel := 0
	for _, format := range pebbleFormats {
		path := filepath.Join(dir, format.String()+".sst")
		writePebbleTable(t, path, format, 2000)
		pr := jsonLines[propertiesOut](t, "sstable", "properties", path)[0]
		all := jsonLines[spaceOut](t, "sstable", "space", path)[0]
		if pr.IndexType == "two-level" {
			twoLevel++
		}
		if all.Size != pr.DataSize || all.DataBlocks != pr.DataBlocks || pr.DataBlocks < 20 {
			t.Fatalf("%s: sstable space %+v, properties %+v", format, all, pr)
		}
		lo := jsonLines[spaceOut](t, "sstable", "space", "--end", "pk01000", path)[0]
		hi := jsonLines[spaceOut](t, "sstable", "space", "--start", "pk01000", path)[0]
		if lo.DataBlocks+hi.DataBlocks < all.DataBlocks || lo.DataBlocks+hi.DataBlocks > all.DataBlocks+1 || lo.DataBlocks < all.DataBlocks/3 || hi.DataBlocks < all.DataBlocks/3 {
			t.Fatalf("%s: halves %+v and %+v of %+v", format, lo, hi, all)
		}
		narrow := jsonLines[spaceOut](t, "sstable", "space", "--start", "pk01000", "--end", "pk01001", path)[0]
		if narrow.DataBlocks != 1 {
			t.Fatalf("%s: one key's range: %+v", format, narrow)
		}
	}
	if twoLevel < len(pebbleFormats)-1 {
		t.Fatalf("%d tables of %d with two-level indexes", twoLevel, len(pebbleFormats))
	}
}

// TestNewCommandsPebbleFormats runs the newer commands on Pebble stores of
// each format major version the inspector reads: the manifest checks out,
// its summary ends in the version db lsm lists, db properties and db space
// agree, and find lists pk00007's three versions.
func TestNewCommandsPebbleFormats(t *testing.T) {
	for fmv := pebble.FormatMinSupported; fmv <= pebble.FormatWALSyncChunks; fmv++ {
		t.Run(fmt.Sprintf("%03d", fmv), func(t *testing.T) {
			ps := writePebbleStore(t, filepath.Join(t.TempDir(), "pebbledb"), fmv, true)
			lsm := jsonLines[lsmOut](t, "db", "lsm", ps.dir)[0]
			m := filepath.Join(ps.dir, lsm.Manifest)
			if out, errOut, code := runTool("manifest", "check", m); code != 0 || !strings.Contains(out, ": ok: ") {
				t.Fatalf("manifest check: exit %d, %q, %q", code, out, errOut)
			}
			sum := jsonLines[summaryOut](t, "manifest", "summarize", m)[0]
			if sum.Tables != lsm.Tables || sum.Size != lsm.Size || sum.Format != "pebble" {
				t.Fatalf("manifest summarize %+v, db lsm %d tables %d bytes", sum, lsm.Tables, lsm.Size)
			}
			props := jsonLines[dbPropertiesOut](t, "db", "properties", ps.dir)[0]
			space := jsonLines[dbSpaceOut](t, "db", "space", ps.dir)[0]
			// db properties counts files: a virtual table's backing
			// file once.
			files, virtual := map[string]bool{}, 0
			var fileSize uint64
			for _, l := range lsm.Levels {
				for _, tb := range l.Tables {
					name := tb.File
					if tb.Backing != "" {
						name = tb.Backing
						virtual++
					}
					if !files[name] {
						files[name] = true
						st, err := os.Stat(filepath.Join(ps.dir, name))
						if err != nil {
							t.Fatal(err)
						}
						fileSize += uint64(st.Size())
					}
				}
			}
			if fmv >= pebble.FormatVirtualSSTables && virtual == 0 {
				t.Fatalf("no virtual table: %+v", lsm.Levels)
			}
			if props.Total.Tables != len(files) || props.Total.FileSize != fileSize || space.Tables != lsm.Tables {
				t.Fatalf("db properties %+v, db space %+v, db lsm %d tables, %d files of %d bytes", props.Total, space, lsm.Tables, len(files), fileSize)
			}
			if virtual == 0 && props.Total.FileSize != lsm.Size {
				t.Fatalf("db properties %+v, db lsm %d bytes", props.Total, lsm.Size)
			}
			// Unbounded, every table counts whole: a virtual table its
			// share of its file, as the manifest records it.
			if space.Size != lsm.Size {
				t.Fatalf("db space %+v, db lsm %d bytes", space, lsm.Size)
			}
			got := jsonLines[foundOut](t, "find", ps.dir, "pk00007")
			if len(got) != 3 || got[0].Where != "WAL" || got[1].Where != "L0" || got[2].Where != "L6" {
				t.Fatalf("find pk00007: %+v", got)
			}
			if fmv >= pebble.FormatVirtualSSTables {
				// pk00007's versions lie in virtual tables; pk02941's in
				// the part of their files the excise cut out.
				if got[1].Virtual == "" || got[2].Virtual == "" || got[1].Virtual == got[1].File {
					t.Fatalf("find pk00007: %+v", got)
				}
				out, errOut, code := runTool("--json", "find", ps.dir, "pk02941")
				if code == 1 && !strings.Contains(errOut, "no file holds key") || code > 1 {
					t.Fatalf("find pk02941: exit %d, %q", code, errOut)
				}
				for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
					var f foundOut
					if l != "" && (json.Unmarshal([]byte(l), &f) != nil || f.Level != nil) {
						t.Fatalf("find pk02941 (excised) lists a version in a table: %s", l)
					}
				}
			}
		})
	}
}
