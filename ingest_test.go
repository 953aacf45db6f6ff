package bloomkv

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	stdmaps "maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/manifest"
	"github.com/bloomkv/bloomkv/sstable"
	"github.com/bloomkv/bloomkv/vfs"

	pebblebloom "github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/cockroachkvs"
	"github.com/cockroachdb/pebble/v2/objstorage/objstorageprovider"
	pebblesstable "github.com/cockroachdb/pebble/v2/sstable"
	pebblevfs "github.com/cockroachdb/pebble/v2/vfs"
)

// ingestEntry is one key of a table for Ingest: a set, or a deletion when
// del.
type ingestEntry struct {
	key, value string
	del        bool
}

// sets returns the sets of keys key(i) to value prefix+i for i in [from, to).
func sets(from, to int, prefix string) []ingestEntry {
	var out []ingestEntry
	for i := from; i < to; i++ {
		out = append(out, ingestEntry{key: string(diffKey(i)), value: fmt.Sprintf("%s-%d", prefix, i)})
	}
	return out
}

// setsTable writes a table for Ingest at name of sets(from, to, prefix),
// which want takes in.
func setsTable(t testing.TB, fs vfs.FS, name string, from, to int, prefix string, want map[string]string) {
	t.Helper()
	entries := sets(from, to, prefix)
	writeIngestTable(t, fs, name, entries)
	for _, e := range entries {
		want[e.key] = e.value
	}
}

// strayTables lists the tables in the store's directory that its version
// does not hold.
func strayTables(t testing.TB, d *DB, fs vfs.FS) []string {
	t.Helper()
	live := map[string]bool{}
	tables, err := d.SSTables()
	if err != nil {
		t.Fatal(err)
	}
	for _, ts := range tables {
		for _, ti := range ts {
			live[ti.Name] = true
		}
	}
	names, err := fs.List("/db")
	if err != nil {
		t.Fatal(err)
	}
	var stray []string
	for _, n := range names {
		if strings.HasSuffix(n, ".sst") && !live[n] {
			stray = append(stray, n)
		}
	}
	return stray
}

// overwrites returns entries for keys diffKey(from) to diffKey(to-1): every
// del-th (i%del == 1) a deletion, the others sets to prefix-i; want takes
// them in.
func overwrites(from, to, del int, prefix string, want map[string]string) []ingestEntry {
	var entries []ingestEntry
	for i := from; i < to; i++ {
		k := string(diffKey(i))
		if i%del == 1 {
			entries = append(entries, ingestEntry{key: k, del: true})
			delete(want, k)
		} else {
			entries = append(entries, ingestEntry{key: k, value: fmt.Sprintf("%s-%d", prefix, i)})
			want[k] = fmt.Sprintf("%s-%d", prefix, i)
		}
	}
	return entries
}

// writeIngestTable writes a table for Ingest at name on fs, creating its
// directory: the entries, in the order given, and the range deletions
// [d[0], d[1]). It does not sync the file: Ingest makes its link or copy
// durable.
func writeIngestTable(t testing.TB, fs vfs.FS, name string, entries []ingestEntry, dels ...[2]string) {
	t.Helper()
	if err := fs.MkdirAll(filepath.Dir(name)); err != nil {
		t.Fatal(err)
	}
	writeTableWith(t, fs, name, sstable.WriterOptions{BlockSize: 512}, func(w *sstable.Writer) error {
		for _, e := range entries {
			var err error
			if e.del {
				err = w.Delete([]byte(e.key))
			} else {
				err = w.Set([]byte(e.key), []byte(e.value))
			}
			if err != nil {
				return err
			}
		}
		for _, d := range dels {
			if err := w.DeleteRange([]byte(d[0]), []byte(d[1]), 0); err != nil {
				return err
			}
		}
		return nil
	})
}

// writeTableWith writes a table at name with our writer, filled by fill.
func writeTableWith(t testing.TB, fs vfs.FS, name string, o sstable.WriterOptions, fill func(w *sstable.Writer) error) {
	t.Helper()
	f, err := fs.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	w, err := sstable.NewWriter(f, o)
	if err == nil {
		err = fill(w)
	}
	if err == nil {
		err = w.Close()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
}

// modelOf reads every key of d (or a snapshot) with an iterator.
func modelOf(t testing.TB, newIter func(*IterOptions) (*Iterator, error)) map[string]string {
	t.Helper()
	it, err := newIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for ok := it.First(); ok; ok = it.Next() {
		m[string(it.Key())] = string(it.Value())
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	return m
}

// sameContents compares a store's contents with want, both by a scan and by
// a Get of every key of want and of absent.
func sameContents(t testing.TB, what string, get func([]byte) ([]byte, error), newIter func(*IterOptions) (*Iterator, error), want map[string]string, absent []string) {
	t.Helper()
	if got := modelOf(t, newIter); !stdmaps.Equal(got, want) {
		t.Fatalf("%s: a scan differs from the model: %s", what, diffSummary(got, want))
	}
	for k, v := range want {
		g, err := get([]byte(k))
		if err != nil || string(g) != v {
			t.Fatalf("%s: Get(%q) = %q, %v; want %q", what, k, g, err, v)
		}
	}
	for _, k := range absent {
		if _, ok := want[k]; ok {
			continue
		}
		if g, err := get([]byte(k)); !errors.Is(err, ErrNotFound) {
			t.Fatalf("%s: Get(%q) = %q, %v; want ErrNotFound", what, k, g, err)
		}
	}
}

// allKeys lists diffKey(0) to diffKey(n-1).
func allKeys(n int) []string {
	var out []string
	for i := range n {
		out = append(out, string(diffKey(i)))
	}
	return out
}

func ingestedLevels(t testing.TB, d *DB) map[uint64]int {
	t.Helper()
	tables, err := d.SSTables()
	if err != nil {
		t.Fatal(err)
	}
	out := map[uint64]int{}
	for l, ts := range tables {
		for _, ti := range ts {
			if ti.Ingested {
				out[ti.FileNum] = l
			}
		}
	}
	return out
}

func TestIngestIntoEmptyStore(t *testing.T) {
	mem := vfs.NewMem()
	o := memOpts(mem)
	var infos []IngestInfo
	o.EventListener.TableIngested = func(info IngestInfo) { infos = append(infos, info) }
	d := mustOpen(t, "/db", o)
	defer d.Close()
	want := map[string]string{}
	var paths []string
	for i, r := range [][2]int{{200, 300}, {0, 100}, {400, 450}} { // not in key order
		p := fmt.Sprintf("/in/%d.sst", i)
		setsTable(t, mem, p, r[0], r[1], "ing", want)
		paths = append(paths, p)
	}
	if err := d.Ingest(paths); err != nil {
		t.Fatal(err)
	}
	sameContents(t, "after Ingest", d.Get, d.NewIter, want, allKeys(500))
	m := d.Metrics()
	if m.Ingests != 1 || m.IngestedTables != 3 || m.IngestedBytes == 0 || m.Levels[6].BytesIngested != m.IngestedBytes || m.Levels[6].Files != 3 {
		t.Fatalf("metrics after ingesting 3 tables into an empty store: %+v\n%s", m, m)
	}
	if !strings.Contains(m.String(), "ingests: 1 (3 tables") {
		t.Fatalf("Metrics.String does not show the ingest:\n%s", m)
	}
	if len(infos) != 1 || len(infos[0].Tables) != 3 || infos[0].Tables[1].Path != paths[1] || infos[0].FlushedMemTable {
		t.Fatalf("TableIngested: %+v", infos)
	}
	for _, ti := range infos[0].Tables {
		if ti.Level != 6 || !ti.Linked || ti.Size == 0 || ti.FileNum == 0 {
			t.Fatalf("table %+v: want linked into L6 (an empty store)", ti)
		}
	}
	if levels := ingestedLevels(t, d); len(levels) != 3 {
		t.Fatalf("SSTables marks %d tables ingested", len(levels))
	}
	for _, p := range paths {
		if ok, _ := mem.Exists(p); ok {
			t.Fatalf("%s was not removed after a successful Ingest", p)
		}
	}
	if _, err := d.Check(); err != nil {
		t.Fatal(err)
	}
	// The sequence number is above every earlier write, and later writes
	// go above it.
	if err := d.Set(diffKey(0), []byte("after"), NoSync); err != nil {
		t.Fatal(err)
	}
	expect(t, d, string(diffKey(0)), "after")
	if infos[0].SeqNum == 0 || base.SeqNum(d.visibleSeq.Load()) != base.SeqNum(infos[0].SeqNum)+1 {
		t.Fatalf("ingest at %d, visible now %d", infos[0].SeqNum, d.visibleSeq.Load())
	}
}

// shadowStore returns a store with keys 0-99 in the last level ("l6-i"),
// 50-149 in level 0 ("l0-i") and 100-199 in the memtable ("mem-i"), and
// the model of it.
func shadowStore(t *testing.T, o *Options) (*DB, map[string]string) {
	t.Helper()
	d := mustOpen(t, "/db", o)
	want := map[string]string{}
	put := func(from, to int, prefix string) {
		for _, e := range sets(from, to, prefix) {
			if err := d.Set([]byte(e.key), []byte(e.value), NoSync); err != nil {
				t.Fatal(err)
			}
			want[e.key] = e.value
		}
	}
	put(0, 100, "l6")
	if err := d.Compact(nil, nil); err != nil {
		t.Fatal(err)
	}
	put(50, 150, "l0")
	if err := d.Flush(); err != nil {
		t.Fatal(err)
	}
	put(100, 200, "mem")
	if got := levelFiles(d.Metrics()); got[0] != 1 || got[6] != 1 || d.Metrics().MemTableSize == 0 {
		t.Fatalf("shape %v, memtable %d", got, d.Metrics().MemTableSize)
	}
	return d, want
}

func TestIngestShadowsOlderData(t *testing.T) {
	mem := vfs.NewMem()
	o := memOpts(mem)
	var info IngestInfo
	o.EventListener.TableIngested = func(i IngestInfo) { info = i }
	d, want := shadowStore(t, o)
	before := stdmaps.Clone(want)
	snap, err := d.NewSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	// Keys 25-174: new values, every sixth a deletion; a range deletion
	// over 180-189 (memtable keys); a second table over 300-309 (new keys).
	entries := overwrites(25, 175, 6, "ing", want)
	for i := 180; i < 190; i++ {
		delete(want, string(diffKey(i)))
	}
	writeIngestTable(t, mem, "/in/a.sst", entries, [2]string{string(diffKey(180)), string(diffKey(190))})
	setsTable(t, mem, "/in/b.sst", 300, 310, "new", want)
	if err := d.Ingest([]string{"/in/a.sst", "/in/b.sst"}); err != nil {
		t.Fatal(err)
	}
	if !info.FlushedMemTable || info.Tables[0].Level != 0 || info.Tables[1].Level != 6 {
		t.Fatalf("the overlapping table must go to L0 after a flush, the other to L6: %+v", info)
	}
	if d.Metrics().MemTableSize != 0 {
		t.Fatal("the overlapping memtable was not flushed")
	}
	keys := allKeys(400)
	sameContents(t, "after Ingest", d.Get, d.NewIter, want, keys)
	sameContents(t, "the snapshot taken before", snap.Get, snap.NewIter, before, keys)
	if _, err := d.Check(); err != nil {
		t.Fatal(err)
	}
	checkDiffFilter(t, d)

	// Reopened, the override persists (crashed or closed cleanly).
	for _, crash := range []bool{true, false} {
		img := mem.CrashClone()
		if !crash {
			snap.Close()
			if err := d.Close(); err != nil {
				t.Fatal(err)
			}
			img = mem
		}
		d2 := mustOpen(t, "/db", memOpts(img))
		sameContents(t, fmt.Sprintf("reopened (crash %v)", crash), d2.Get, d2.NewIter, want, keys)
		// The L6 table at least (level 0's may have been compacted).
		if levels := ingestedLevels(t, d2); !slices.Contains(slices.Collect(mapValues(levels)), 6) {
			t.Fatalf("reopened: ingested tables in levels %v", levels)
		}
		if _, err := d2.Check(); err != nil {
			t.Fatal(err)
		}
		if crash {
			d2.Close()
			continue
		}
		// Compact folds the overrides into rewritten tables.
		if err := d2.Compact(nil, nil); err != nil {
			t.Fatal(err)
		}
		// The table ingested into L0 was merged; the one in L6 stays
		// unless the whole last level was rewritten (for its deletions).
		levels := ingestedLevels(t, d2)
		if _, ok := levels[info.Tables[0].FileNum]; ok || len(levels) > 1 || len(levels) == 1 && levels[info.Tables[1].FileNum] != 6 {
			t.Fatalf("after Compact, ingested tables left: %v (table %d went to L0, %d to L6)", levels, info.Tables[0].FileNum, info.Tables[1].FileNum)
		}
		sameContents(t, "after Compact", d2.Get, d2.NewIter, want, keys)
		if _, err := d2.Check(); err != nil {
			t.Fatal(err)
		}
		d2.Close()
		d3 := mustOpen(t, "/db", memOpts(img))
		sameContents(t, "reopened after Compact", d3.Get, d3.NewIter, want, keys)
		d3.Close()
	}
}

func mapValues(m map[uint64]int) func(func(int) bool) { return stdmaps.Values(m) }

// TestIngestLevel checks the level picked for a table over made-up
// versions: the lowest level from the base down with nothing overlapping
// at it or above, and no compaction writing there over its range.
func TestIngestLevel(t *testing.T) {
	o, err := (&Options{Logger: quietLogger()}).withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	tbl := func(num uint64, a, b string) *manifest.FileMetadata {
		return &manifest.FileMetadata{FileNum: num, Size: 1 << 20,
			Smallest: base.MakeInternalKey([]byte(a), 1, base.KindSet), Largest: base.MakeInternalKey([]byte(b), 1, base.KindSet)}
	}
	withDel := func(m *manifest.FileMetadata, end string) *manifest.FileMetadata {
		m.Largest = base.MakeRangeDeleteSentinel([]byte(end))
		return m
	}
	var levels [manifest.NumLevels][]*manifest.FileMetadata
	levels[0] = []*manifest.FileMetadata{tbl(1, "p", "q")}
	levels[5] = []*manifest.FileMetadata{tbl(2, "d", "e"), tbl(3, "h", "i")}
	levels[6] = []*manifest.FileMetadata{tbl(4, "a", "c"), tbl(5, "f", "g"), withDel(tbl(6, "j", "l"), "m")}
	d := &DB{opts: o}
	d.mu.version = manifest.NewVersionForTesting(levels)
	if b := d.levelTargets(d.mu.version, nil).base; b != 5 {
		t.Fatalf("base L%d, want L5", b)
	}
	for _, c := range []struct {
		lo, hi string
		want   int
	}{
		{"x", "z", 6},   // nothing anywhere
		{"f1", "f2", 5}, // overlaps an L6 table
		{"d5", "d6", 0}, // overlaps the base level
		{"p", "p", 0},   // overlaps level 0
		{"e1", "e2", 6}, // between the tables of L5 and of L6
		{"m", "n", 6},   // at the exclusive end of a range deletion: no overlap
		{"l5", "l6", 5}, // inside the range deletion of table 6
	} {
		if got := d.ingestLevelLocked(tbl(99, c.lo, c.hi), 5); got != c.want {
			t.Errorf("[%s, %s]: L%d, want L%d", c.lo, c.hi, got, c.want)
		}
	}
	// A compaction writing into L6 over [d, g] (inputs from L5 and L6 with
	// a gap between them) keeps a table in the gap at L5, above its
	// outputs.
	d.mu.running = []*compaction{{level: 5, outputLevel: 6, lo: []byte("d"), hi: []byte("g")}}
	if got := d.ingestLevelLocked(tbl(99, "e1", "e2"), 5); got != 5 {
		t.Errorf("beside a compaction into L6: L%d, want L5", got)
	}
	if got := d.ingestLevelLocked(tbl(99, "x", "z"), 5); got != 6 {
		t.Errorf("away from the compaction: L%d, want L6", got)
	}
	// One writing into L5 over the range keeps it out of L5 only.
	d.mu.running = []*compaction{{level: 4, outputLevel: 5, lo: []byte("w"), hi: []byte("z")}}
	if got := d.ingestLevelLocked(tbl(99, "x", "y"), 5); got != 6 {
		t.Errorf("below a compaction into L5: L%d, want L6", got)
	}
	if got := d.ingestLevelLocked(tbl(99, "f1", "f2"), 5); got != 5 {
		t.Errorf("L6 overlapped, L5 written into elsewhere: L%d, want L5", got)
	}
	d.mu.running = []*compaction{{level: 4, outputLevel: 5, lo: []byte("f"), hi: []byte("f3")}}
	if got := d.ingestLevelLocked(tbl(99, "f1", "f2"), 5); got != 0 {
		t.Errorf("L6 overlapped and L5 written into: L%d, want L0", got)
	}
}

// badTables writes, on fs under /bad, tables Ingest must refuse, by name.
func badTables(t *testing.T, fs vfs.FS) map[string]string {
	t.Helper()
	good := sets(500, 600, "bad")
	out := map[string]string{}
	add := func(name string, data []byte) {
		p := "/bad/" + name + ".sst"
		fs.MkdirAll("/bad")
		rewrite(t, fs, p, data)
		out[name] = p
	}
	writeIngestTable(t, fs, "/bad/src.sst", good)
	src := readFile(t, fs, "/bad/src.sst")
	fs.Remove("/bad/src.sst")
	add("truncated", src[:len(src)-20])
	add("truncated-middle", src[:len(src)/2])
	flipped := bytes.Clone(src)
	flipped[100] ^= 0x10 // in the first data block
	add("bit-flipped", flipped)

	// Out of order: a table whose keys are full at every entry, one of
	// them then rewritten to sort after the next, its block's checksum
	// made right again.
	writeUncompressedTable(t, fs, "/bad/order-src.sst", good)
	order := readFile(t, fs, "/bad/order-src.sst")
	fs.Remove("/bad/order-src.sst")
	add("out-of-order", reorderKey(t, order, string(diffKey(510)), string(diffKey(515))))

	writeTableWith(t, fs, "/bad/seqs.sst", sstable.WriterOptions{}, func(w *sstable.Writer) error {
		for i, e := range good {
			if err := w.Add(base.MakeInternalKey([]byte(e.key), base.SeqNum(i%2*7), base.KindSet), []byte(e.value)); err != nil {
				return err
			}
		}
		return nil
	})
	out["nonzero-seqs"] = "/bad/seqs.sst"
	writeTableWith(t, fs, "/bad/rangedel-seq.sst", sstable.WriterOptions{}, func(w *sstable.Writer) error {
		w.Set([]byte(good[0].key), nil)
		return w.DeleteRange([]byte(good[1].key), []byte(good[5].key), 3)
	})
	out["nonzero-range-deletion-seq"] = "/bad/rangedel-seq.sst"
	writeTableWith(t, fs, "/bad/dup.sst", sstable.WriterOptions{}, func(w *sstable.Writer) error {
		// Through Add: Set and Delete refuse a key twice.
		if err := w.Add(base.MakeInternalKey([]byte("dup"), 0, base.KindSet), []byte("v")); err != nil {
			return err
		}
		return w.Add(base.MakeInternalKey([]byte("dup"), 0, base.KindDelete), nil) // #0,DEL sorts after #0,SET
	})
	out["repeated-key"] = "/bad/dup.sst"
	writeTableWith(t, fs, "/bad/bigkey.sst", sstable.WriterOptions{}, func(w *sstable.Writer) error {
		return w.Set(bytes.Repeat([]byte{'k'}, MaxKeySize+1), nil)
	})
	out["key-too-large"] = "/bad/bigkey.sst"
	add("not-a-table", []byte("this is not an sstable, it is text that goes on for a while"))
	add("cockroachdb", crdbTable(t, good))
	out["missing"] = "/bad/missing.sst"
	return out
}

// crdbTable writes entries' keys as CockroachDB's engine keys (a sentinel
// and a version appended) with Pebble's writer under CockroachDB's comparer
// and key schema, in Pebblev7: a table the inspection tool reads and the
// store must refuse.
func crdbTable(t *testing.T, entries []ingestEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := pebblesstable.NewWriter(objstorageprovider.NewRemoteWritable(nopWriteCloser{&buf}), pebblesstable.WriterOptions{
		TableFormat: pebblesstable.TableFormatPebblev7, Comparer: &cockroachkvs.Comparer, KeySchema: &cockroachkvs.KeySchema,
	})
	for _, e := range entries {
		if err := w.Set(cockroachkvs.EncodeMVCCKey(nil, []byte(e.key), 1000, 0), []byte(e.value)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// nopWriteCloser is a buffer Pebble's writer can close.
type nopWriteCloser struct{ *bytes.Buffer }

func (nopWriteCloser) Close() error { return nil }

// reorderKey replaces key from (stored whole, in an uncompressed block)
// with to, of the same length, and fixes the block's checksum.
func reorderKey(t *testing.T, data []byte, from, to string) []byte {
	t.Helper()
	if len(from) != len(to) {
		t.Fatalf("%q and %q differ in length", from, to)
	}
	out := bytes.Clone(data)
	i := bytes.Index(out, []byte(from))
	if i < 0 {
		t.Fatalf("%q not found", from)
	}
	copy(out[i:], to)
	r, err := sstable.NewReader(bytes.NewReader(data), int64(len(data)), sstable.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range r.Blocks().Blocks {
		h := b.Handle
		if b.Kind != sstable.BlockData || uint64(i) < h.Offset || uint64(i) >= h.Offset+h.Length {
			continue
		}
		end := h.Offset + h.Length
		c := crc32.Checksum(out[h.Offset:end+1], crc32.MakeTable(crc32.Castagnoli)) // the block and its type byte
		c = (c>>15 | c<<17) + 0xa282ead8                                            // masked, as LevelDB stores it
		binary.LittleEndian.PutUint32(out[end+1:], c)
		return out
	}
	t.Fatalf("%q lies in no data block", from)
	return nil
}

// writeUncompressedTable writes the sets of entries as a table for Ingest
// whose keys lie whole in its blocks (no compression, no shared prefixes),
// for tests that change them in place (reorderKey).
func writeUncompressedTable(t testing.TB, fs vfs.FS, name string, entries []ingestEntry) {
	t.Helper()
	writeTableWith(t, fs, name, sstable.WriterOptions{BlockSize: 512, BlockRestartInterval: 1, Compression: sstable.NoCompression}, func(w *sstable.Writer) error {
		for _, e := range entries {
			if err := w.Set([]byte(e.key), []byte(e.value)); err != nil {
				return err
			}
		}
		return nil
	})
}

// storeFiles lists the store's directory with each file's contents.
func storeFiles(t *testing.T, fs vfs.FS) map[string]string {
	t.Helper()
	names, err := fs.List("/db")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, n := range names {
		if n != lockName {
			out[n] = string(readFile(t, fs, "/db/"+n))
		}
	}
	return out
}

// TestIngestSyncFailure: when the sync of one of the tables fails, Ingest
// fails naming it, ingests none of them, and leaves their files; the store
// takes them once the device syncs again.
func TestIngestSyncFailure(t *testing.T) {
	mem := vfs.NewMem()
	efs := vfs.NewErrorFS(mem)
	d := mustOpen(t, "/db", memOpts(efs))
	defer d.Close()
	want := map[string]string{}
	var paths []string
	for i := range 6 {
		p := fmt.Sprintf("/in/%d.sst", i)
		setsTable(t, mem, p, 100*i, 100*i+50, "ing", want)
		paths = append(paths, p)
	}
	injected := errors.New("EIO")
	efs.SetInjector(func(op vfs.Op, name string) error {
		if op == vfs.OpSync && name == "/in/4.sst" {
			return injected
		}
		return nil
	})
	err := d.Ingest(paths)
	if !errors.Is(err, injected) || !strings.Contains(err.Error(), "/in/4.sst") {
		t.Fatalf("Ingest with a failing sync: %v", err)
	}
	sameContents(t, "after the failed Ingest", d.Get, d.NewIter, map[string]string{}, allKeys(600))
	for _, p := range paths {
		if ok, err := mem.Exists(p); !ok || err != nil {
			t.Fatalf("the failed Ingest took %s: %v", p, err)
		}
	}
	efs.SetInjector(nil)
	if err := d.Ingest(paths); err != nil {
		t.Fatal(err)
	}
	sameContents(t, "after Ingest", d.Get, d.NewIter, want, allKeys(600))
}

// TestIngestRefusesBadTables: each bad table is refused, with an error
// naming it, and nothing changes. With VerifyIngestedTables every entry is
// checked; by default what placing a table needs (its structure,
// properties, range deletions, the blocks of its first and last entries),
// so the table that is bad only in its middle passes
// (TestIngestMiddleDamage).
func TestIngestRefusesBadTables(t *testing.T) {
	for _, verify := range []bool{false, true} {
		t.Run(fmt.Sprintf("VerifyIngestedTables=%v", verify), func(t *testing.T) {
			var unverified []string
			if !verify {
				unverified = []string{"out-of-order"}
			}
			testIngestRefusesBadTables(t, verify, unverified)
		})
	}
}

func testIngestRefusesBadTables(t *testing.T, verify bool, unverified []string) {
	t.Helper()
	mem := vfs.NewMem()
	o := memOpts(mem)
	o.VerifyIngestedTables = verify
	d := mustOpen(t, "/db", o)
	defer d.Close()
	for _, e := range sets(0, 50, "old") {
		d.Set([]byte(e.key), []byte(e.value), Sync)
	}
	if err := d.Flush(); err != nil {
		t.Fatal(err)
	}
	waitForCompactions(t, d) // no background edit while the files are compared below
	want := modelOf(t, d.NewIter)
	bad := badTables(t, mem)
	names := slices.Sorted(stdmaps.Keys(bad))
	wantWords := map[string]string{
		"truncated": "", "truncated-middle": "", "bit-flipped": "checksum", "out-of-order": "out of order",
		"nonzero-seqs": "sequence number 7", "nonzero-range-deletion-seq": "sequence number 3", "repeated-key": "repeats",
		"key-too-large": "exceeds", "not-a-table": "", "missing": "", "cockroachdb": `comparer "cockroach_comparator"`,
	}
	for i, name := range names {
		if slices.Contains(unverified, name) {
			continue
		}
		t.Run(name, func(t *testing.T) {
			p := bad[name]
			good1, good2 := fmt.Sprintf("/in/g%d-1.sst", i), fmt.Sprintf("/in/g%d-2.sst", i)
			writeIngestTable(t, mem, good1, sets(100, 110, "g1"))
			writeIngestTable(t, mem, good2, sets(700, 710, "g2"))
			filesBefore := storeFiles(t, mem)
			err := d.Ingest([]string{good1, p, good2})
			if err == nil {
				t.Fatal("Ingest accepted it")
			}
			if !strings.Contains(err.Error(), p) {
				t.Fatalf("the error does not name the file %s: %v", p, err)
			}
			if w := wantWords[name]; w != "" && !strings.Contains(err.Error(), w) {
				t.Fatalf("the error does not say %q: %v", w, err)
			}
			switch name {
			case "missing":
				if !errors.Is(err, fs.ErrNotExist) {
					t.Fatalf("%v does not wrap fs.ErrNotExist", err)
				}
			case "truncated", "truncated-middle", "not-a-table":
				// The end of the file is no table footer: an unknown
				// format, as RocksDB and Pebble say too, or damage.
				if !errors.Is(err, ErrCorruption) && !errors.Is(err, ErrUnsupportedFormat) {
					t.Fatalf("%v wraps neither ErrCorruption nor ErrUnsupportedFormat", err)
				}
				if !strings.Contains(err.Error(), "offset") {
					t.Fatalf("the error names no offset: %v", err)
				}
			case "bit-flipped", "out-of-order":
				if !errors.Is(err, ErrCorruption) {
					t.Fatalf("%v does not wrap ErrCorruption", err)
				}
				if !strings.Contains(err.Error(), "offset") {
					t.Fatalf("the error names no offset: %v", err)
				}
			case "key-too-large":
				if !errors.Is(err, ErrTooLarge) {
					t.Fatalf("%v does not wrap ErrTooLarge", err)
				}
			}
			// Nothing changed: the store's files (no link left, no
			// manifest edit), its contents, the files given.
			if got := storeFiles(t, mem); !mapsEqual(got, filesBefore) {
				t.Fatalf("the store's files changed: %v -> %v", keysOf(filesBefore), keysOf(got))
			}
			sameContents(t, "after the refusal", d.Get, d.NewIter, want, allKeys(800))
			for _, g := range []string{good1, good2} {
				if ok, _ := mem.Exists(g); !ok {
					t.Fatalf("%s was removed by a failed Ingest", g)
				}
			}
		})
	}
	if m := d.Metrics(); m.Ingests != 0 || m.IngestedTables != 0 {
		t.Fatalf("refused ingests counted: %d, %d", m.Ingests, m.IngestedTables)
	}

	// Two good tables that overlap each other.
	writeIngestTable(t, mem, "/in/o1.sst", sets(100, 120, "o1"))
	writeIngestTable(t, mem, "/in/o2.sst", sets(119, 130, "o2"))
	filesBefore := storeFiles(t, mem)
	if err := d.Ingest([]string{"/in/o1.sst", "/in/o2.sst"}); err == nil || !strings.Contains(err.Error(), "overlap") ||
		!strings.Contains(err.Error(), "/in/o1.sst") || !strings.Contains(err.Error(), "/in/o2.sst") {
		t.Fatalf("overlapping tables: %v", err)
	}
	// A table whose range deletion reaches into the next one's keys.
	writeIngestTable(t, mem, "/in/r1.sst", sets(100, 101, "r1"), [2]string{string(diffKey(100)), string(diffKey(120))})
	writeIngestTable(t, mem, "/in/r2.sst", sets(119, 130, "r2"))
	if err := d.Ingest([]string{"/in/r2.sst", "/in/r1.sst"}); err == nil || !strings.Contains(err.Error(), "overlap") {
		t.Fatalf("a range deletion overlapping the next table: %v", err)
	}
	// The same file twice.
	if err := d.Ingest([]string{"/in/o1.sst", "/in/o1.sst"}); err == nil || !strings.Contains(err.Error(), "overlap") {
		t.Fatalf("the same table twice: %v", err)
	}
	if got := storeFiles(t, mem); !mapsEqual(got, filesBefore) {
		t.Fatalf("the store's files changed: %v -> %v", keysOf(filesBefore), keysOf(got))
	}
	sameContents(t, "after the refusals", d.Get, d.NewIter, want, allKeys(800))
	// A range deletion's end is exclusive: a table whose deletion ends
	// where the next table begins does not overlap it.
	writeIngestTable(t, mem, "/in/r3.sst", sets(100, 101, "r3"), [2]string{string(diffKey(100)), string(diffKey(119))})
	if err := d.Ingest([]string{"/in/r2.sst", "/in/r3.sst"}); err != nil {
		t.Fatalf("a range deletion ending at the next table's first key: %v", err)
	}
	for i := 100; i < 130; i++ {
		want[string(diffKey(i))] = fmt.Sprintf("r2-%d", i)
	}
	want[string(diffKey(100))] = "r3-100"
	for i := 101; i < 119; i++ {
		delete(want, string(diffKey(i)))
	}
	sameContents(t, "after ingesting r2 and r3", d.Get, d.NewIter, want, allKeys(800))
}

func mapsEqual(a, b map[string]string) bool { return stdmaps.Equal(a, b) }

func keysOf(m map[string]string) []string { return slices.Sorted(stdmaps.Keys(m)) }

func TestIngestStates(t *testing.T) {
	mem := vfs.NewMem()
	writeIngestTable(t, mem, "/in/a.sst", sets(0, 10, "a"))

	// An older format: refused until the version is raised.
	o := memOpts(mem)
	o.FormatVersion = FormatVersioned
	d := mustOpen(t, "/db", o)
	err := d.Ingest([]string{"/in/a.sst"})
	if !errors.Is(err, ErrUnsupportedFormat) || !strings.Contains(err.Error(), "RatchetFormatVersion") {
		t.Fatalf("Ingest into a FormatVersioned store: %v", err)
	}
	if ok, _ := mem.Exists("/in/a.sst"); !ok {
		t.Fatal("a refused Ingest removed its file")
	}
	if err := d.RatchetFormatVersion(FormatIngest); err != nil {
		t.Fatal(err)
	}
	if err := d.Ingest([]string{"/in/a.sst"}); err != nil {
		t.Fatalf("after the ratchet: %v", err)
	}
	expect(t, d, string(diffKey(3)), "a-3")
	if err := d.Ingest(nil); err != nil {
		t.Fatalf("no tables: %v", err)
	}
	// An empty table is skipped.
	writeIngestTable(t, mem, "/in/empty.sst", nil)
	if err := d.Ingest([]string{"/in/empty.sst"}); err != nil || d.Metrics().Ingests != 1 {
		t.Fatalf("an empty table: %v, %d ingests", err, d.Metrics().Ingests)
	}
	d.Close()
	writeIngestTable(t, mem, "/in/b.sst", sets(20, 30, "b"))
	if err := d.Ingest([]string{"/in/b.sst"}); !errors.Is(err, ErrClosed) {
		t.Fatalf("closed: %v", err)
	}
	o = memOpts(mem)
	o.ReadOnly = true
	d = mustOpen(t, "/db", o)
	defer d.Close()
	if err := d.Ingest([]string{"/in/b.sst"}); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("read-only: %v", err)
	}
	expect(t, d, string(diffKey(3)), "a-3")
}

// TestIngestCopiesWithoutLink: a file system that cannot link gets a copy.
func TestIngestCopiesWithoutLink(t *testing.T) {
	mem := vfs.NewMem()
	efs := vfs.NewErrorFS(mem)
	op := vfs.OpLink
	efs.SetInjector(func(o vfs.Op, name string) error {
		if o == op {
			return vfs.ErrInjected
		}
		return nil
	})
	o := memOpts(efs)
	var info IngestInfo
	o.EventListener.TableIngested = func(i IngestInfo) { info = i }
	d := mustOpen(t, "/db", o)
	defer d.Close()
	writeIngestTable(t, mem, "/in/a.sst", sets(0, 10, "a"))
	if err := d.Ingest([]string{"/in/a.sst"}); err != nil {
		t.Fatal(err)
	}
	if info.Tables[0].Linked {
		t.Fatal("reported linked where the link failed")
	}
	expect(t, d, string(diffKey(3)), "a-3")
}

// pebbleTable writes entries with Pebble's sstable writer in its RocksDBv2
// format (Snappy, Pebble's bloom filter, Set and Delete at sequence number
// 0) and returns the file's bytes.
func pebbleTable(t *testing.T, entries []ingestEntry, dels ...[2]string) []byte {
	t.Helper()
	name := filepath.Join(t.TempDir(), "p.sst")
	f, err := pebblevfs.Default.Create(name, pebblevfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	w := pebblesstable.NewWriter(objstorageprovider.NewFileWritable(f), pebblesstable.WriterOptions{
		TableFormat:  pebblesstable.TableFormatRocksDBv2,
		Compression:  pebblesstable.SnappyCompression,
		FilterPolicy: pebblebloom.FilterPolicy(10),
		BlockSize:    512,
	})
	for _, e := range entries {
		if e.del {
			err = w.Delete([]byte(e.key))
		} else {
			err = w.Set([]byte(e.key), []byte(e.value))
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range dels {
		if err := w.DeleteRange([]byte(d[0]), []byte(d[1])); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestIngestPebbleTable(t *testing.T) {
	mem := vfs.NewMem()
	d, want := shadowStore(t, memOpts(mem))
	defer d.Close()
	entries := overwrites(40, 160, 5, "pebble", want)
	for i := 160; i < 170; i++ {
		delete(want, string(diffKey(i)))
	}
	mem.MkdirAll("/in")
	rewrite(t, mem, "/in/p.sst", pebbleTable(t, entries, [2]string{string(diffKey(160)), string(diffKey(170))}))
	if err := d.Ingest([]string{"/in/p.sst"}); err != nil {
		t.Fatal(err)
	}
	sameContents(t, "after ingesting Pebble's table", d.Get, d.NewIter, want, allKeys(300))
	if _, err := d.Check(); err != nil {
		t.Fatal(err)
	}
	if err := d.Compact(nil, nil); err != nil {
		t.Fatal(err)
	}
	sameContents(t, "after Compact", d.Get, d.NewIter, want, allKeys(300))
}

// TestIngestDiffFilter: a table ingested above the base has its keys in
// the differential-file filter (a miss would return the base's older
// value); one ingested into the base needs none; compacting the first into
// the base takes its keys out again without a miss.
func TestIngestDiffFilter(t *testing.T) {
	mem := vfs.NewMem()
	d := baseStore(t, memOpts(mem), 2000)
	closeAtCleanup(t, d)
	problem := checkDiffAtEveryPublish(d)
	var entries []ingestEntry
	want := map[string]string{}
	for i := range 2000 {
		want[string(diffKey(i))] = fmt.Sprintf("base-%d", i)
	}
	for i := 100; i < 1900; i += 7 {
		entries = append(entries, ingestEntry{key: string(diffKey(i)), value: fmt.Sprintf("ing-%d", i)})
		want[string(diffKey(i))] = fmt.Sprintf("ing-%d", i)
	}
	writeIngestTable(t, mem, "/in/over.sst", entries)
	setsTable(t, mem, "/in/beyond.sst", 5000, 5100, "beyond", want)
	if err := d.Ingest([]string{"/in/over.sst", "/in/beyond.sst"}); err != nil {
		t.Fatal(err)
	}
	levels := ingestedLevels(t, d)
	got := slices.Sorted(mapValues(levels))
	if !slices.Equal(got, []int{0, 6}) {
		t.Fatalf("ingested tables in levels %v, want L0 and L6", got)
	}
	if !d.Metrics().DiffFilter.On {
		t.Fatal("the filter went off")
	}
	for i := 100; i < 1900; i += 7 {
		if !d.MayHaveChanged(diffKey(i)) {
			t.Fatalf("the filter says %q (ingested above the base) has not changed", diffKey(i))
		}
	}
	// The keys ingested into the base were not added: the filter rules
	// them out (but for its false positives).
	unchanged := 0
	for i := 5000; i < 5100; i++ {
		if !d.MayHaveChanged(diffKey(i)) {
			unchanged++
		}
	}
	if unchanged < 90 {
		t.Fatalf("the filter rules out %d of 100 keys ingested into the base", unchanged)
	}
	sameContents(t, "after Ingest", d.Get, d.NewIter, want, nil)
	c, err := d.CheckDiffFilter(0)
	if err != nil || c.Missed != 0 || c.Changed == 0 {
		t.Fatalf("CheckDiffFilter: %+v, %v", c, err)
	}
	if p := problem(); p != "" {
		t.Fatal(p)
	}
	// Into the base, then a rebuild after Compact: nothing missed.
	if err := d.Compact(nil, nil); err != nil {
		t.Fatal(err)
	}
	waitForCompactions(t, d)
	sameContents(t, "after Compact", d.Get, d.NewIter, want, nil)
	if p := problem(); p != "" {
		t.Fatal(p)
	}
	checkDiffFilter(t, d)
}

// TestIngestConcurrentWrites: writes go on while tables are ingested; each
// write is ordered before or after the ingestion it meets, as its sequence
// number says, and the race detector sees the commit pipeline shared.
func TestIngestConcurrentWrites(t *testing.T) {
	mem := vfs.NewMem()
	d := mustOpen(t, "/db", memOpts(mem))
	defer d.Close()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	writeErr := make(chan error, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				writeErr <- nil
				return
			default:
			}
			// Key w is in every table ingested: the last write after an
			// ingestion wins over it.
			if err := d.Set([]byte("w"), fmt.Appendf(nil, "write-%d", i), NoSync); err != nil {
				writeErr <- err
				return
			}
		}
	}()
	for round := range 20 {
		p := fmt.Sprintf("/in/%d.sst", round)
		writeIngestTable(t, mem, p, []ingestEntry{{key: "w", value: fmt.Sprintf("ingest-%d", round)}})
		if err := d.Ingest([]string{p}); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	if err := <-writeErr; err != nil {
		t.Fatal(err)
	}
	p := "/in/last.sst"
	writeIngestTable(t, mem, p, []ingestEntry{{key: "w", value: "ingest-last"}})
	if err := d.Ingest([]string{p}); err != nil {
		t.Fatal(err)
	}
	expect(t, d, "w", "ingest-last")
	if err := d.Set([]byte("w"), []byte("final"), NoSync); err != nil {
		t.Fatal(err)
	}
	expect(t, d, "w", "final")
	if _, err := d.Check(); err != nil {
		t.Fatal(err)
	}
}

// Link is a mutating operation of crashFS too: a crash image may follow
// it.
func (c *crashFS) Link(oldname, newname string) error {
	err := c.MemFS.Link(oldname, newname)
	c.after("link", newname)
	return err
}

// TestIngestCrash crashes at every file-system operation of a workload
// around an Ingest: the store reopened from each image holds all of the
// ingested keys or none (all once Ingest has returned), passes Check, and
// holds no table its version does not.
func TestIngestCrash(t *testing.T) {
	workload := func(c *crashFS) (acked bool) {
		d, err := Open("/db", crashOpts(c, quietLogger()))
		if err != nil {
			return false
		}
		defer d.Close()
		for _, e := range sets(0, 40, "pre") {
			if err := d.Set([]byte(e.key), []byte(e.value), Sync); err != nil {
				return false
			}
		}
		writeIngestTable(t, c, "/in/a.sst", sets(20, 60, "ing"))
		writeIngestTable(t, c, "/in/b.sst", sets(100, 130, "ing"), [2]string{string(diffKey(130)), string(diffKey(140))})
		if c.crashed.Load() {
			return false
		}
		err = d.Ingest([]string{"/in/a.sst", "/in/b.sst"})
		acked = err == nil && !c.crashed.Load()
		for _, e := range sets(200, 210, "post") {
			d.Set([]byte(e.key), []byte(e.value), Sync)
		}
		return acked
	}
	count := &crashFS{MemFS: vfs.NewMem(), keep: rand.New(rand.NewPCG(1, 1))}
	if !workload(count) {
		t.Fatal("the workload failed without a crash")
	}
	total := count.ops.Load()
	ingested := append(sets(20, 60, "ing"), sets(100, 130, "ing")...)
	var all, none int
	for at := int64(1); at <= total; at++ {
		c := &crashFS{MemFS: vfs.NewMem(), at: at, keep: rand.New(rand.NewPCG(2, uint64(at)))}
		acked := workload(c)
		if c.image == nil {
			continue // this run made fewer operations (background work varies)
		}
		// No compaction writes a table while the directory is compared
		// with the version below (a move writes none).
		o := memOpts(c.image)
		o.L0CompactionThreshold, o.L0StopWritesThreshold = 100, 200
		d, err := Open("/db", o)
		if err != nil {
			if acked {
				t.Fatalf("crash after %s (point %d): reopen: %v", c.what, at, err)
			}
			continue // the store was not created yet
		}
		found := 0
		for _, e := range ingested {
			if v, err := d.Get([]byte(e.key)); err == nil && string(v) == e.value {
				found++
			}
		}
		switch {
		case found == len(ingested):
			all++
		case found == 0 && !acked:
			none++
		default:
			d.Close()
			t.Fatalf("crash after %s (point %d, Ingest acknowledged %v): %d of %d ingested keys", c.what, at, acked, found, len(ingested))
		}
		if _, err := d.Check(); err != nil {
			d.Close()
			t.Fatalf("crash after %s (point %d): %v", c.what, at, err)
		}
		if stray := strayTables(t, d, c.image); len(stray) > 0 {
			d.Close()
			t.Fatalf("crash after %s (point %d): %v left in the store, in no version", c.what, at, stray)
		}
		d.Close()
	}
	if all == 0 || none == 0 {
		t.Fatalf("%d crash points: %d with all ingested keys, %d with none; the test should see both", total, all, none)
	}
	t.Logf("%d crash points: %d with every ingested key, %d with none", total, all, none)
}

// TestIngestDuringClose: an Ingest racing Close either completes before
// the store is let go or fails with ErrClosed, leaving nothing behind; the
// store reopens with all of its keys or none.
func TestIngestDuringClose(t *testing.T) {
	mem := vfs.NewMem()
	for round := range 30 {
		d := mustOpen(t, "/db", memOpts(mem))
		for _, e := range sets(0, 20, "pre") {
			d.Set([]byte(e.key), []byte(e.value), NoSync)
		}
		p := fmt.Sprintf("/in/%d.sst", round)
		writeIngestTable(t, mem, p, sets(1000*round+100, 1000*round+150, "ing"))
		done := make(chan error, 1)
		go func() { done <- d.Ingest([]string{p}) }()
		if err := d.Close(); err != nil {
			t.Fatalf("round %d: Close: %v", round, err)
		}
		err := <-done
		if err != nil && !errors.Is(err, ErrClosed) {
			t.Fatalf("round %d: Ingest: %v", round, err)
		}
		o := memOpts(mem)
		o.L0CompactionThreshold, o.L0StopWritesThreshold = 100, 200 // no table written while the files are listed
		d = mustOpen(t, "/db", o)
		found := 0
		for _, e := range sets(1000*round+100, 1000*round+150, "ing") {
			if v, err := d.Get([]byte(e.key)); err == nil && string(v) == e.value {
				found++
			}
		}
		if (err == nil) != (found == 50) || found != 0 && found != 50 {
			t.Fatalf("round %d: Ingest returned %v, and %d of 50 keys are in the store", round, err, found)
		}
		if stray := strayTables(t, d, mem); len(stray) > 0 {
			t.Fatalf("round %d: %v in the store, in no version", round, stray)
		}
		d.Close()
	}
}

// TestIngestThenCheckpoint: a checkpoint of a store holding ingested tables
// records them with their sequence number, and its format version.
func TestIngestThenCheckpoint(t *testing.T) {
	mem := vfs.NewMem()
	d, want := shadowStore(t, memOpts(mem))
	defer d.Close()
	entries := overwrites(30, 120, 4, "ing", want)
	writeIngestTable(t, mem, "/in/a.sst", entries)
	setsTable(t, mem, "/in/b.sst", 500, 520, "far", want)
	if err := d.Ingest([]string{"/in/a.sst", "/in/b.sst"}); err != nil {
		t.Fatal(err)
	}
	if err := d.Checkpoint("/ckpt"); err != nil {
		t.Fatal(err)
	}
	c := mustOpen(t, "/ckpt", memOpts(mem))
	defer c.Close()
	if v := c.FormatVersion(); v != FormatNewest {
		t.Fatalf("the checkpoint is at %v", v)
	}
	sameContents(t, "the checkpoint", c.Get, c.NewIter, want, allKeys(600))
	if len(ingestedLevels(t, c)) == 0 {
		t.Fatal("the checkpoint holds no ingested table")
	}
	if _, err := c.Check(); err != nil {
		t.Fatal(err)
	}
}

// TestIngestMiddleDamage: a table damaged in a middle data block (its
// bytes, or an entry out of order with the checksum right) over keys the
// store holds older values of. By default Ingest reads only the blocks of
// the table's first and last entries, so it takes the table when the
// differential-file filter is off (or the table goes to the last level);
// every read of the damaged block then fails with ErrCorruption naming the
// store's table, never with an older value (before or after a reopen),
// the other keys read the new values, and a compaction that reads the block
// fails and leaves the table.
// With the differential-file filter on, a table bound above the base is read
// whole for the filter's hashes, and refused; with VerifyIngestedTables
// every such table is refused, and nothing changes.
func TestIngestMiddleDamage(t *testing.T) {
	for _, damage := range []string{"bit-flip", "out-of-order"} {
		for _, c := range []struct{ verify, diff bool }{{false, false}, {false, true}, {true, false}} {
			t.Run(fmt.Sprintf("%s/VerifyIngestedTables=%v/diff=%v", damage, c.verify, c.diff), func(t *testing.T) {
				testIngestMiddleDamage(t, damage, c.verify, c.diff)
			})
		}
	}
}

func testIngestMiddleDamage(t *testing.T, damage string, verify, diff bool) {
	mem := vfs.NewMem()
	o := memOpts(mem)
	o.VerifyIngestedTables, o.DisableDiffFilter = verify, !diff
	d := mustOpen(t, "/db", o)
	defer func() { d.Close() }()
	for _, e := range sets(0, 400, "old") {
		if err := d.Set([]byte(e.key), []byte(e.value), NoSync); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Compact(nil, []byte("\xff")); err != nil {
		t.Fatal(err)
	}
	entries := sets(0, 400, "new")
	if err := mem.MkdirAll("/in"); err != nil {
		t.Fatal(err)
	}
	writeUncompressedTable(t, mem, "/in/t.sst", entries)
	data := readFile(t, mem, "/in/t.sst")
	r, err := sstable.NewReader(bytes.NewReader(data), int64(len(data)), sstable.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var blocks []sstable.BlockInfo
	for _, b := range r.Blocks().Blocks {
		if b.Kind == sstable.BlockData {
			blocks = append(blocks, b)
		}
	}
	if len(blocks) < 5 {
		t.Fatalf("%d data blocks: too few for a middle one", len(blocks))
	}
	mid := blocks[len(blocks)/2]
	var damaged []string
	if err := r.BlockRecords(mid, func(k, _ []byte) bool {
		damaged = append(damaged, string(k[:len(k)-8]))
		return true
	}); err != nil || len(damaged) < 4 {
		t.Fatalf("the middle block's keys: %v, %v", damaged, err)
	}
	want := "checksum"
	switch damage {
	case "bit-flip":
		data[mid.Handle.Offset+mid.Handle.Length/2] ^= 0x40
	case "out-of-order":
		data, want = reorderKey(t, data, damaged[1], damaged[3]), "out of order"
	}
	rewrite(t, mem, "/in/t.sst", data)

	err = d.Ingest([]string{"/in/t.sst"})
	if verify || diff {
		if err == nil || !errors.Is(err, ErrCorruption) || !strings.Contains(err.Error(), "/in/t.sst") || !strings.Contains(err.Error(), want) {
			t.Fatalf("Ingest: %v; want a refusal wrapping ErrCorruption naming /in/t.sst and saying %q", err, want)
		}
		for _, e := range sets(0, 400, "old") {
			if v, err := d.Get([]byte(e.key)); err != nil || string(v) != e.value {
				t.Fatalf("after the refusal, Get(%s) = %q, %v; want %q", e.key, v, err, e.value)
			}
		}
		return
	}
	if err != nil {
		t.Fatalf("Ingest: %v", err)
	}
	readAll := func(when string) {
		t.Helper()
		for _, e := range entries {
			v, err := d.Get([]byte(e.key))
			if slices.Contains(damaged, e.key) {
				// The store's name for the table, not the path
				// Ingest was given: its reader changed hands.
				if !errors.Is(err, ErrCorruption) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "/db/") || strings.Contains(err.Error(), "/in/") {
					t.Fatalf("%s: Get(%s) in the damaged block = %q, %v; want ErrCorruption naming the store's table and saying %q", when, e.key, v, err, want)
				}
				continue
			}
			if err != nil || string(v) != e.value {
				t.Fatalf("%s: Get(%s) = %q, %v; want %q", when, e.key, v, err, e.value)
			}
		}
		it, err := d.NewIter(nil)
		if err != nil {
			t.Fatal(err)
		}
		for ok := it.First(); ok; ok = it.Next() {
		}
		if err := it.Close(); !errors.Is(err, ErrCorruption) || !strings.Contains(err.Error(), want) {
			t.Fatalf("%s: a walk over the store: %v; want ErrCorruption saying %q", when, err, want)
		}
	}
	readAll("after Ingest")
	// The table went to level 0, over the old values in the last level,
	// where a Compact merges it.
	if lv := d.Metrics().Levels; lv[0].Files != 1 || lv[len(lv)-1].Files != 1 {
		t.Fatalf("levels after Ingest: %+v; want a table in level 0 and one in the last", lv)
	}
	if err := d.Compact(nil, []byte("\xff")); !errors.Is(err, ErrCorruption) || !strings.Contains(err.Error(), want) {
		t.Fatalf("Compact over the damaged table: %v; want ErrCorruption saying %q", err, want)
	}
	if err := d.Set([]byte("a"), nil, NoSync); err == nil {
		t.Fatal("a write after a failed compaction was taken")
	}
	d.Close()
	d = mustOpen(t, "/db", o)
	readAll("after a reopen")
}

// linkHookFS runs hook before its first Link.
type linkHookFS struct {
	*vfs.MemFS
	hook func()
}

func (l *linkHookFS) Link(oldname, newname string) error {
	if h := l.hook; h != nil {
		l.hook = nil
		h()
	}
	return l.MemFS.Link(oldname, newname)
}

// TestIngestDiffFilterLateOverlap: a table bound for the last level when
// Ingest looks (so it does not hash its keys then) that a flush puts above
// the base before its edit still has every key counted by the
// differential-file filter: Ingest hashes it at the edit.
func TestIngestDiffFilterLateOverlap(t *testing.T) {
	mem := vfs.NewMem()
	fs := &linkHookFS{MemFS: mem}
	o := memOpts(fs)
	o.L0CompactionThreshold, o.L0StopWritesThreshold = 100, 200
	d := baseStore(t, o, 2000)
	closeAtCleanup(t, d)
	problem := checkDiffAtEveryPublish(d)
	want := map[string]string{}
	for i := range 2000 {
		want[string(diffKey(i))] = fmt.Sprintf("base-%d", i)
	}
	setsTable(t, mem, "/in/beyond.sst", 5000, 5100, "beyond", want)
	fs.hook = func() {
		if err := d.Set(diffKey(5050), []byte("late"), NoSync); err != nil {
			t.Error(err)
		}
		if err := d.Flush(); err != nil {
			t.Error(err)
		}
	}
	if err := d.Ingest([]string{"/in/beyond.sst"}); err != nil {
		t.Fatal(err)
	}
	if fs.hook != nil {
		t.Fatal("Ingest linked nothing")
	}
	if got := slices.Collect(stdmaps.Values(ingestedLevels(t, d))); !slices.Equal(got, []int{0}) {
		t.Fatalf("ingested into levels %v, want L0 (above the table flushed meanwhile)", got)
	}
	for i := 5000; i < 5100; i++ {
		if !d.MayHaveChanged(diffKey(i)) {
			t.Fatalf("the filter says %q (ingested above the base) has not changed", diffKey(i))
		}
	}
	sameContents(t, "after Ingest", d.Get, d.NewIter, want, nil)
	checkDiffFilter(t, d)
	if p := problem(); p != "" {
		t.Fatal(p)
	}
}

// openCountFS counts the opens of each file.
type openCountFS struct {
	*vfs.MemFS
	mu    sync.Mutex
	opens map[string]int
}

func (c *openCountFS) Open(name string) (vfs.File, error) {
	c.mu.Lock()
	c.opens[name]++
	c.mu.Unlock()
	return c.MemFS.Open(name)
}

// TestIngestKeepsItsReaders: the store keeps the readers Ingest opened to
// check the tables it links, so reads after it open no table again, and
// they read the keys at the sequence number Ingest assigned (an older
// snapshot does not see them). A copied table is another file: the store
// opens its copy.
func TestIngestKeepsItsReaders(t *testing.T) {
	for _, link := range []bool{true, false} {
		t.Run(fmt.Sprintf("linked=%v", link), func(t *testing.T) {
			c := &openCountFS{MemFS: vfs.NewMem(), opens: map[string]int{}}
			var fsys vfs.FS = c
			if !link {
				efs := vfs.NewErrorFS(c)
				efs.SetInjector(func(o vfs.Op, _ string) error {
					if o == vfs.OpLink {
						return vfs.ErrInjected
					}
					return nil
				})
				fsys = efs
			}
			o := memOpts(fsys)
			var info IngestInfo
			o.EventListener.TableIngested = func(i IngestInfo) { info = i }
			d := mustOpen(t, "/db", o)
			defer d.Close()
			if err := d.Set(diffKey(3), []byte("old"), NoSync); err != nil {
				t.Fatal(err)
			}
			snap, err := d.NewSnapshot()
			if err != nil {
				t.Fatal(err)
			}
			defer snap.Close()
			writeIngestTable(t, c.MemFS, "/in/a.sst", sets(0, 50, "a"), [2]string{string(diffKey(60)), string(diffKey(70))})
			writeIngestTable(t, c.MemFS, "/in/b.sst", sets(100, 150, "b"))
			c.mu.Lock()
			clear(c.opens)
			c.mu.Unlock()
			if err := d.Ingest([]string{"/in/a.sst", "/in/b.sst"}); err != nil {
				t.Fatal(err)
			}
			for _, e := range append(sets(0, 50, "a"), sets(100, 150, "b")...) {
				if v, err := d.Get([]byte(e.key)); err != nil || string(v) != e.value {
					t.Fatalf("Get(%s) = %q, %v; want %q", e.key, v, err, e.value)
				}
			}
			if v, err := snap.Get(diffKey(3)); err != nil || string(v) != "old" {
				t.Fatalf("the snapshot's Get = %q, %v; want old", v, err)
			}
			if v, err := snap.Get(diffKey(7)); !errors.Is(err, ErrNotFound) {
				t.Fatalf("the snapshot sees an ingested key: %q, %v", v, err)
			}
			c.mu.Lock()
			defer c.mu.Unlock()
			if len(info.Tables) != 2 || info.Tables[0].Linked != link {
				t.Fatalf("IngestInfo %+v", info)
			}
			// Who opens a copy first varies (the reads, or the diff
			// filter's rebuild after a move into the base), but the table
			// cache opens each once.
			want := 0
			if !link {
				want = 1
			}
			for _, it := range info.Tables {
				if n := c.opens["/db/"+tableName(it.FileNum)]; n != want {
					t.Fatalf("the store opened its table %s of %s %d times since Ingest (%v), want %d", tableName(it.FileNum), it.Path, n, c.opens, want)
				}
			}
		})
	}
}

// handleFS counts the files opened for reading and not yet closed, by name.
type handleFS struct {
	*vfs.MemFS
	mu   sync.Mutex
	open map[string]int
}

type countedFile struct {
	vfs.File
	fs     *handleFS
	name   string
	closed bool
}

func (c *handleFS) Open(name string) (vfs.File, error) {
	f, err := c.MemFS.Open(name)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.open[name]++
	c.mu.Unlock()
	return &countedFile{File: f, fs: c, name: name}, nil
}

func (f *countedFile) Close() error {
	f.fs.mu.Lock()
	if !f.closed {
		f.closed = true
		f.fs.open[f.name]--
	}
	f.fs.mu.Unlock()
	return f.File.Close()
}

// openUnder returns the files under dir open now.
func (c *handleFS) openUnder(dir string) map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for name, n := range c.open {
		if n != 0 && strings.HasPrefix(name, dir) {
			out[name] = n
		}
	}
	return out
}

// TestIngestClosesWhatItOpens: whatever an Ingest meets (tables refused,
// an empty table, a failed link, success), it leaves open no file it was
// given but those whose readers the store adopted, and Close closes
// every file the store opened.
func TestIngestClosesWhatItOpens(t *testing.T) {
	for _, verify := range []bool{false, true} {
		t.Run(fmt.Sprintf("VerifyIngestedTables=%v", verify), func(t *testing.T) {
			c := &handleFS{MemFS: vfs.NewMem(), open: map[string]int{}}
			efs := vfs.NewErrorFS(c)
			failLink := false
			efs.SetInjector(func(o vfs.Op, _ string) error {
				if o == vfs.OpLink && failLink {
					return vfs.ErrInjected
				}
				return nil
			})
			o := memOpts(efs)
			o.VerifyIngestedTables = verify
			d := mustOpen(t, "/db", o)
			bad := badTables(t, c.MemFS)
			i := 0
			ingest := func(what string, wantErr bool, names ...string) {
				t.Helper()
				i++
				var paths []string
				for j, name := range names {
					p := bad[name]
					if p == "" {
						p = fmt.Sprintf("/in/%d-%d.sst", i, j)
						switch name {
						case "empty":
							writeIngestTable(t, c.MemFS, p, nil)
						default:
							writeIngestTable(t, c.MemFS, p, sets(1000*i+10*j, 1000*i+10*j+5, name))
						}
					}
					paths = append(paths, p)
				}
				err := d.Ingest(paths)
				if (err != nil) != wantErr {
					t.Fatalf("%s: Ingest: %v", what, err)
				}
				if wantErr || failLink {
					for _, p := range paths {
						if open := c.openUnder(p); len(open) > 0 {
							t.Fatalf("%s: files left open: %v", what, open)
						}
					}
				}
				if open := c.openUnder("/bad/"); len(open) > 0 {
					t.Fatalf("%s: files left open: %v", what, open)
				}
			}
			ingest("a bad table among good ones", true, "good", "bit-flipped", "good2")
			ingest("a table refused after the others loaded", true, "good", "good2", "not-a-table")
			ingest("an empty table and a good one", false, "empty", "good")
			failLink = true
			ingest("tables copied where links fail", false, "good", "good2")
			failLink = false
			ingest("tables linked", false, "good", "good2")
			if err := d.Close(); err != nil {
				t.Fatal(err)
			}
			if open := c.openUnder("/"); len(open) > 0 {
				t.Fatalf("after Close, files still open: %v", open)
			}
		})
	}
}
