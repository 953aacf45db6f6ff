package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	pebblebloom "github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/objstorage/objstorageprovider"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/bloomkv/bloomkv/internal/pebbletest"
)

// pebbleStore is a store Pebble wrote, and what it holds by Pebble's word.
type pebbleStore struct {
	dir string
	wal string // the WAL still holding writes
	fmv pebble.FormatMajorVersion
	// levels are the tables Pebble lists, level by level; entries the
	// live keys and values Pebble's iterator returns; gets Pebble's answer
	// for probe keys ("" and absent when it has none).
	levels  [][]pebble.SSTableInfo
	entries [][2]string
	gets    map[string]*string
}

// probeKeys are keys to ask each store for: present, overwritten, deleted,
// range-deleted, written again after a range deletion, in the WAL only,
// merged, single-deleted, ingested, excised (from format 016), absent.
var probeKeys = []string{"pk00000", "pk00001", "pk00021", "pk00022", "pk00003", "pk00007", "pk00008", "pk00009", "pk00010", "pk01000", "pk01050",
	"pk01099", "pk02001", "pk02005", "pk00040", "pk00049", "pk00060", "pk02941", "pk02945", "pk02948", "pk02961", "pk02999", "pk03000", "pk99999", ""}

// writePebbleStore writes a store with Pebble at format major version fmv:
// keys compacted to the bottom level; then overwrites, deletions, range
// deletions and range keys flushed to level 0; then more of each left in
// the WAL (with log data, a single deletion and a merge when withMerge is
// set). Compactions are manual only, so that the store is the same on every
// run but for creation times.
func writePebbleStore(t testing.TB, dir string, fmv pebble.FormatMajorVersion, withMerge bool) *pebbleStore {
	t.Helper()
	return writePebbleStoreWith(t, dir, fmv, withMerge, nil)
}

// writePebbleStoreWith is writePebbleStore with options changed by tweak.
// Columnar blocks are off unless tweak turns them on.
func writePebbleStoreWith(t testing.TB, dir string, fmv pebble.FormatMajorVersion, withMerge bool, tweak func(*pebble.Options)) *pebbleStore {
	t.Helper()
	opts := &pebble.Options{
		FormatMajorVersion:          fmv,
		MemTableSize:                4 << 20,
		DisableAutomaticCompactions: true,
		Logger:                      quietLogger{},
	}
	for l := range opts.Levels {
		opts.Levels[l].FilterPolicy = pebblebloom.FilterPolicy(10)
	}
	opts.Experimental.EnableColumnarBlocks = func() bool { return false }
	opts.Experimental.EnableValueBlocks = func() bool { return true }
	if tweak != nil {
		tweak(opts)
	}
	d, err := pebble.Open(dir, opts)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(err)
	key := func(i int) []byte { return fmt.Appendf(nil, "pk%05d", i) }
	// Round 1: 3000 keys, to the bottom level.
	b := d.NewBatch()
	for i := range 3000 {
		must(b.Set(key(i), fmt.Appendf(nil, "v1-%d", i), nil))
	}
	must(b.Commit(pebble.Sync))
	must(d.Flush())
	must(d.Compact(context.Background(), key(0), key(99999), false))
	// Round 2: overwrites, deletions, a range deletion and range keys, to L0
	// in two flushes.
	for part := range 2 {
		b = d.NewBatch()
		for i := part; i < 3000; i += 7 {
			must(b.Set(key(i), fmt.Appendf(nil, "v2-%d", i), nil))
		}
		for i := 3 + part; i < 3000; i += 11 {
			must(b.Delete(key(i), nil))
		}
		must(b.Commit(pebble.Sync))
		must(d.Flush())
	}
	// Two versions each of pk00040-pk00049, 3,000-byte values, in one
	// table: a snapshot keeps the older, whose value Pebble puts in a
	// value block (format 015 on, and 013-014 with value blocks on). Sized
	// deletions of pk00060-pk00064 (015 on).
	var snap *pebble.Snapshot
	for v := range 2 {
		b = d.NewBatch()
		for i := 40; i < 50; i++ {
			must(b.Set(key(i), fmt.Appendf(nil, "large-%d-%d-%s", v, i, strings.Repeat("x", 3000)), nil))
		}
		must(b.Commit(pebble.Sync))
		if v == 0 {
			snap = d.NewSnapshot()
		}
	}
	if fmv >= pebble.FormatDeleteSizedAndObsolete {
		b = d.NewBatch()
		for i := 60; i < 65; i++ {
			must(b.DeleteSized(key(i), 5, nil))
		}
		must(b.Commit(pebble.Sync))
	}
	must(d.Flush())
	must(snap.Close())
	// An ingested table: its keys read at the sequence number the
	// manifest gives it, newer than the overwrites above.
	ingest := filepath.Join(t.TempDir(), "ingest.sst")
	f, err := vfs.Default.Create(ingest, vfs.WriteCategoryUnspecified)
	must(err)
	w := sstable.NewWriter(objstorageprovider.NewFileWritable(f), sstable.WriterOptions{TableFormat: sstable.TableFormatPebblev2, FilterPolicy: pebblebloom.FilterPolicy(10)})
	for i := 20; i < 30; i++ {
		must(w.Set(key(i), fmt.Appendf(nil, "ingested-%d", i)))
	}
	must(w.Close())
	must(d.Ingest(context.Background(), []string{ingest}))
	must(d.DeleteRange(key(1000), key(1100), pebble.Sync))
	must(d.RangeKeySet(key(500), key(600), nil, []byte("rk1"), pebble.Sync))
	must(d.RangeKeyDelete(key(550), key(560), pebble.Sync))
	must(d.Set(key(1050), []byte("after the range deletion"), pebble.Sync))
	must(d.Flush())
	if fmv >= pebble.FormatVirtualSSTables {
		// An ingest with an excise through tables of L0 and L6: Pebble
		// keeps their parts outside the span as virtual tables.
		excise := filepath.Join(t.TempDir(), "excise.sst")
		f, err := vfs.Default.Create(excise, vfs.WriteCategoryUnspecified)
		must(err)
		w := sstable.NewWriter(objstorageprovider.NewFileWritable(f), sstable.WriterOptions{TableFormat: sstable.TableFormatPebblev2, FilterPolicy: pebblebloom.FilterPolicy(10)})
		must(w.Set(key(2945), []byte("ingested with an excise")))
		must(w.Close())
		_, err = d.IngestAndExcise(context.Background(), []string{excise}, nil, nil, pebble.KeyRange{Start: key(2940), End: key(2960)})
		must(err)
	}
	// Round 3, in the WAL only.
	b = d.NewBatch()
	must(b.Set(key(7), []byte("in the WAL"), nil))
	must(b.Delete(key(8), nil))
	must(b.DeleteRange(key(2000), key(2010), nil))
	must(b.RangeKeySet(key(2500), key(2600), nil, []byte("rk2"), nil))
	must(b.LogData([]byte("log data"), nil))
	must(b.Set(key(3000), []byte("new key"), nil))
	if withMerge {
		must(b.Merge(key(9), []byte("+merged"), nil))
		must(b.SingleDelete(key(10), nil))
		must(b.RangeKeyUnset(key(2500), key(2550), nil, nil))
	}
	must(b.Commit(pebble.Sync))
	must(d.Set(key(2005), []byte("after the WAL's range deletion"), pebble.Sync))
	ps := &pebbleStore{dir: dir, fmv: fmv}
	ps.record(t, d, probeKeys)
	must(d.Close())
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	if len(logs) == 0 {
		t.Fatal("Pebble left no WAL")
	}
	ps.wal = logs[len(logs)-1]
	return ps
}

// record notes what Pebble's d holds: its tables, its live entries and
// its answers for probes.
func (ps *pebbleStore) record(t testing.TB, d *pebble.DB, probes []string) {
	t.Helper()
	ps.gets = map[string]*string{}
	var err error
	if ps.levels, err = d.SSTables(); err != nil {
		t.Fatal(err)
	}
	it, err := d.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	for ok := it.First(); ok; ok = it.Next() {
		ps.entries = append(ps.entries, [2]string{string(it.Key()), string(it.Value())})
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	for _, k := range probes {
		v, closer, err := d.Get([]byte(k))
		if err == pebble.ErrNotFound {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		s := string(v)
		ps.gets[k] = &s
		closer.Close()
	}
}

type quietLogger struct{}

func (quietLogger) Infof(string, ...any)  {}
func (quietLogger) Errorf(string, ...any) {}
func (quietLogger) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
}

// TestPebbleWAL dumps the WAL of a Pebble store: every batch Pebble
// wrote, with each kind of entry, and the EOF trailer Pebble's close wrote.
func TestPebbleWAL(t *testing.T) {
	ps := writePebbleStore(t, t.TempDir(), pebble.FormatFlushableIngest, true)
	out, errOut, code := runTool("wal", "dump", ps.wal)
	if code != 0 || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	for _, want := range []string{
		"offset 0: batch seq 4439, 8 entries\n",
		`    SET      "pk00007" "in the WAL"` + "\n",
		`    DEL      "pk00008"` + "\n",
		`    RANGEDEL "pk02000" "pk02010"` + "\n",
		`    RANGEKEYSET "pk02500" "pk02600" ""="rk2"` + "\n",
		`    LOGDATA  "log data"` + "\n",
		`    MERGE    "pk00009" "+merged"` + "\n",
		`    SINGLEDEL "pk00010"` + "\n",
		`    RANGEKEYUNSET "pk02500" "pk02550" ""` + "\n",
		"  end: clean (EOF trailer)\n  2 records, 9 entries, sequence numbers 4439-4447\n",
	} {
		if !strings.Contains(out, want) {
			t.Fatalf("wal dump lacks %q:\n%s", want, out)
		}
	}
	js, _, _ := runTool("--json", "wal", "dump", ps.wal)
	if !strings.Contains(js, `{"seq":4443,"kind":"LOGDATA","key":"log data"}`) || !strings.Contains(js, `"eof_trailer":true`) {
		t.Fatalf("wal dump --json:\n%s", js)
	}
}

// TestPebbleManifest dumps a Pebble store's manifest: Pebble's edits, and
// the version they build is the one Pebble lists.
func TestPebbleManifest(t *testing.T) {
	ps := writePebbleStore(t, t.TempDir(), pebble.FormatFlushableIngest, false)
	name := filepath.Join(ps.dir, "MANIFEST-000001")
	out, errOut, code := runTool("manifest", "dump", name)
	if code != 0 || errOut != "" || !strings.HasPrefix(out, name+" (Pebble)\n") || !strings.Contains(out, "range keys \"pk00500\"#4436,RANGEKEYSET") {
		t.Fatalf("exit %d, stderr %q:\n%s", code, errOut, out)
	}
	js, _, _ := runTool("--json", "manifest", "dump", name)
	lines := strings.Split(strings.TrimSpace(js), "\n")
	var v struct {
		Format string
		Levels [][]struct {
			File, Size, SmallestSeq, LargestSeq uint64 `json:",omitempty"`
			Smallest, Largest                   string
		}
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &v); err != nil {
		t.Fatal(err)
	}
	if v.Format != "pebble" || len(v.Levels) != len(ps.levels) {
		t.Fatalf("version: %+v", v)
	}
	tables := 0
	for l, want := range ps.levels {
		if len(v.Levels[l]) != len(want) {
			t.Fatalf("L%d: %d tables, Pebble lists %d", l, len(v.Levels[l]), len(want))
		}
		byFile := map[uint64]int{}
		for i, g := range v.Levels[l] {
			byFile[g.File] = i
		}
		for i, w := range want {
			g := v.Levels[l][byFile[uint64(w.FileNum)]]
			if g.File != uint64(w.FileNum) || g.Size != w.Size || g.Smallest != string(w.Smallest.UserKey)+fmt.Sprintf("#%d,%s", w.Smallest.SeqNum(), w.Smallest.Kind()) {
				t.Fatalf("L%d table %d: %+v, Pebble: %v %d %s", l, i, g, w.FileNum, w.Size, w.Smallest)
			}
			tables++
		}
	}
	if tables < 4 {
		t.Fatalf("only %d tables", tables)
	}
}

// dirState lists a directory's files with their sizes and modification
// times.
func dirState(t *testing.T, dir string) map[string]string {
	t.Helper()
	names, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, n := range names {
		info, err := n.Info()
		if err != nil {
			t.Fatal(err)
		}
		out[n.Name()] = fmt.Sprintf("%d %v %v", info.Size(), info.ModTime().UnixNano(), info.Mode())
	}
	return out
}

// TestPebbleStores runs the db commands on stores Pebble wrote at format
// major versions 013 (the oldest Pebble v2 opens; Pebblev2 tables), 014,
// 015 (Pebblev4 tables), 020 (WAL-sync chunks; Pebblev4 tables with
// columnar blocks off) and, with columnar blocks on, 019 (Pebblev5
// tables), 021 (Pebblev6) and 022 (Pebblev7, values not separated): the
// answers are Pebble's, and nothing in the directory changes.
func TestPebbleStores(t *testing.T) {
	for fmv := pebble.FormatMinSupported; fmv <= pebble.FormatNewest; fmv++ {
		t.Run(fmt.Sprint(fmv), func(t *testing.T) {
			// Columnar blocks from 019 on, as Pebble's default; values
			// of 1 KiB and more in blob files at 024.
			isColumnar := fmv >= pebble.FormatColumnarBlocks
			tableFormat := fmt.Sprintf("Pebblev%d", fmv.MaxTableFormat()-sstable.TableFormatPebblev1+1)
			ps := writePebbleStoreWith(t, t.TempDir(), fmv, true, func(o *pebble.Options) {
				o.Experimental.EnableColumnarBlocks = func() bool { return isColumnar }
				if fmv >= pebble.FormatValueSeparation {
					o.Experimental.ValueSeparationPolicy = func() pebble.ValueSeparationPolicy {
						return pebble.ValueSeparationPolicy{Enabled: true, MinimumSize: 1024, MaxBlobReferenceDepth: 10}
					}
				}
			})
			before := dirState(t, ps.dir)
			jsonLines := func(args ...string) []string {
				t.Helper()
				out, errOut, code := runTool(append([]string{"--json"}, args...)...)
				if code != 0 || errOut != "" {
					t.Fatalf("%v: exit %d, stderr %q", args, code, errOut)
				}
				return strings.Split(strings.TrimSuffix(out, "\n"), "\n")
			}

			// db scan: every live key and value, as Pebble's iterator.
			lines := jsonLines("db", "scan", "--key-format", "hex", "--value-format", "hex", ps.dir)
			if len(lines) != len(ps.entries) || len(ps.entries) < 2000 {
				t.Fatalf("db scan: %d entries, Pebble %d", len(lines), len(ps.entries))
			}
			for i, l := range lines {
				var kv kvOut
				if err := json.Unmarshal([]byte(l), &kv); err != nil {
					t.Fatal(err)
				}
				if want := ps.entries[i]; kv.Key != hex.EncodeToString([]byte(want[0])) || kv.Value != hex.EncodeToString([]byte(want[1])) {
					t.Fatalf("db scan entry %d: %+v, Pebble %q", i, kv, want)
				}
			}
			// A bounded scan.
			out, _, code := runTool("db", "scan", "--start", "pk01000", "--end", "pk01100", "--count", "3", ps.dir)
			if code != 0 || out != "\"pk01050\" \"after the range deletion\"\n" {
				t.Fatalf("bounded scan: exit %d: %q", code, out)
			}

			// db get: Pebble's answer for each probe.
			for _, k := range probeKeys[:len(probeKeys)-1] {
				out, errOut, code := runTool("db", "get", "--value-format", "hex", ps.dir, k)
				want, ok := ps.gets[k]
				switch {
				case ok && (code != 0 || out != hex.EncodeToString([]byte(*want))+"\n"):
					t.Fatalf("db get %s: exit %d, %q %q; Pebble %q", k, code, out, errOut, *want)
				case !ok && (code != 1 || !strings.Contains(errOut, "not found")):
					t.Fatalf("db get %s: exit %d, %q %q; Pebble has none", k, code, out, errOut)
				}
			}
			if len(ps.gets) < 8 || len(ps.gets) > len(probeKeys)-4 {
				t.Fatalf("Pebble has %d of the %d probe keys: the probes cover too little", len(ps.gets), len(probeKeys))
			}

			// db lsm: Pebble's tables, level by level.
			var lsm lsmOut
			if err := json.Unmarshal([]byte(jsonLines("db", "lsm", ps.dir)[0]), &lsm); err != nil {
				t.Fatal(err)
			}
			if lsm.Format != "pebble" || lsm.FormatVersion != uint64(fmv) || lsm.Manifest != "MANIFEST-000001" || len(lsm.WALs) != 1 {
				t.Fatalf("db lsm: %+v", lsm)
			}
			for l, want := range ps.levels {
				got := lsm.Levels[l].Tables
				if len(got) != len(want) {
					t.Fatalf("db lsm L%d: %d tables, Pebble %d", l, len(got), len(want))
				}
				for _, w := range want {
					if !slices.ContainsFunc(got, func(g lsmTableOut) bool {
						backing := ""
						if w.Virtual {
							backing = fmt.Sprintf("%s.sst", w.BackingSSTNum)
						}
						return g.File == fmt.Sprintf("%s.sst", w.FileNum) && g.Backing == backing && g.Size == w.Size && g.SmallestSeq == uint64(w.SmallestSeqNum)
					}) {
						t.Fatalf("db lsm L%d lacks %s: %+v", l, w.FileNum, got)
					}
				}
			}

			// db check: sound, with Pebble's live keys.
			var chk dbCheckOut
			if err := json.Unmarshal([]byte(jsonLines("db", "check", ps.dir)[0]), &chk); err != nil {
				t.Fatal(err)
			}
			if !chk.OK || chk.LiveKeys != uint64(len(ps.entries)) || chk.Tables != lsm.Tables || chk.RangeDeletions == 0 {
				t.Fatalf("db check: %+v", chk)
			}

			// db options: the OPTIONS file Pebble wrote.
			var opts optionsOut
			if err := json.Unmarshal([]byte(jsonLines("db", "options", ps.dir)[0]), &opts); err != nil {
				t.Fatal(err)
			}
			if opts.Options["Options"]["format_major_version"] != fmt.Sprint(uint64(fmv)) || opts.Options["Options"]["comparer"] != "leveldb.BytewiseComparator" {
				t.Fatalf("db options: %+v", opts.Options["Options"])
			}

			// The older values of pk00040-pk00049 are in a value block.
			valueBlocks := 0
			for _, l := range ps.levels {
				for _, tb := range l {
					var lo layoutOut
					if err := json.Unmarshal([]byte(jsonLines("sstable", "layout", filepath.Join(ps.dir, tb.BackingSSTNum.String()+".sst"))[0]), &lo); err != nil {
						t.Fatal(err)
					}
					for _, b := range lo.Blocks {
						if b.Kind == "value" {
							valueBlocks++
						}
					}
				}
			}
			switch {
			case fmv < pebble.FormatValueSeparation && valueBlocks == 0:
				t.Fatal("no table has a value block")
			case fmv >= pebble.FormatValueSeparation && len(lsm.BlobFiles) == 0:
				t.Fatalf("no blob file: %+v", lsm)
			}
			// Every table file agrees with Pebble's own reader: its
			// entries (keys, sequence numbers, kinds, values but those in
			// blob files) and properties.
			for _, l := range ps.levels {
				for _, tb := range l {
					sameAsPebbleReader(t, filepath.Join(ps.dir, tb.BackingSSTNum.String()+".sst"))
				}
			}
			// Every table, by the sstable commands.
			if isColumnar {
				var l map[string]any
				tb := ps.levels[len(ps.levels)-1][0]
				if err := json.Unmarshal([]byte(jsonLines("sstable", "layout", filepath.Join(ps.dir, tb.BackingSSTNum.String()+".sst"))[0]), &l); err != nil || l["format"] != tableFormat {
					t.Fatalf("sstable layout: format %v (%v), want %s", l["format"], err, tableFormat)
				}
			}
			for _, cmd := range fileCommands[:5] {
				for _, l := range ps.levels {
					for _, tb := range l {
						args := append(slices.Clone(cmd), filepath.Join(ps.dir, tb.BackingSSTNum.String()+".sst"))
						if _, errOut, code := runTool(args...); code != 0 {
							t.Fatalf("%v: exit %d, %q", args, code, errOut)
						}
					}
				}
			}
			// Nothing written, renamed or touched.
			if after := dirState(t, ps.dir); !maps.Equal(before, after) {
				t.Fatalf("the directory changed:\nbefore %v\nafter  %v", before, after)
			}
			// Commands that do not read Pebble stores say so.
			if _, errOut, code := runTool("db", "diff", ps.dir); code != 1 || !strings.Contains(errOut, "is a Pebble store") {
				t.Fatalf("db diff: exit %d, %q", code, errOut)
			}
		})
	}
	t.Run("CURRENT instead of markers", func(t *testing.T) {
		// As Pebble named its manifest before format major version 013.
		ps := writePebbleStore(t, t.TempDir(), pebble.FormatFlushableIngest, false)
		markers, _ := filepath.Glob(filepath.Join(ps.dir, "marker.*"))
		for _, m := range markers {
			if err := os.Remove(m); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(ps.dir, "CURRENT"), []byte("MANIFEST-000001\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		out, errOut, code := runTool("db", "scan", ps.dir)
		if lines := strings.Count(out, "\n"); code != 0 || errOut != "" || lines != len(ps.entries) {
			t.Fatalf("db scan: exit %d, %q, %d lines of %d", code, errOut, lines, len(ps.entries))
		}
		if out, _, code := runTool("db", "lsm", ps.dir); code != 0 || !strings.Contains(out, "format major version 000; MANIFEST-000001") {
			t.Fatalf("db lsm: exit %d:\n%s", code, out)
		}
		// Without Pebble's OPTIONS file it is bloomkv's to open, and not one.
		opts, _ := filepath.Glob(filepath.Join(ps.dir, "OPTIONS-*"))
		for _, o := range opts {
			os.Remove(o)
		}
		if _, errOut, code := runTool("db", "scan", ps.dir); code != 1 || !strings.Contains(errOut, "unknown tag 103") {
			t.Fatalf("db scan without OPTIONS: exit %d, %q", code, errOut)
		}
	})
}

// blockingFS holds the creation of tables while armed: a flush waits at
// its output table until release is closed.
type blockingFS struct {
	vfs.FS
	armed   atomic.Bool
	release chan struct{}
}

func (fs *blockingFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	if fs.armed.Load() && strings.HasSuffix(name, ".sst") {
		<-fs.release
	}
	return fs.FS.Create(name, category)
}

// writeFlushableStore writes, with Pebble at format major version fmv, a
// store that crashed with a flushable ingest in its WAL: the table was
// ingested over a key in the memtable, so Pebble queued it behind that
// memtable and named it in the WAL; the flush is held and the crash image
// taken before it ran. From format 018 on the ingest comes with an excise,
// which deletes every older key in its span. The image is copied to a
// directory on disk; ps holds what the store held when it crashed.
func writeFlushableStore(t *testing.T, fmv pebble.FormatMajorVersion) *pebbleStore {
	t.Helper()
	mem := vfs.NewCrashableMem()
	fs := &blockingFS{FS: mem, release: make(chan struct{})}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	const dir = "/db"
	opts := &pebble.Options{FS: fs, FormatMajorVersion: fmv, DisableAutomaticCompactions: true, Logger: quietLogger{}}
	opts.Experimental.EnableColumnarBlocks = func() bool { return false }
	d, err := pebble.Open(dir, opts)
	must(err)
	released := false
	defer func() {
		if !released {
			close(fs.release)
			d.Close()
		}
	}()
	key := func(i int) []byte { return fmt.Appendf(nil, "pk%05d", i) }
	b := d.NewBatch()
	for i := 2900; i < 3000; i++ {
		must(b.Set(key(i), fmt.Appendf(nil, "v1-%d", i), nil))
	}
	must(b.Commit(pebble.Sync))
	must(d.Flush())
	must(d.Compact(context.Background(), key(0), key(99999), false))
	must(d.Set(key(2948), []byte("in the memtable"), pebble.Sync))
	must(d.Set(key(2970), []byte("in the memtable"), pebble.Sync))

	f, err := mem.Create("/ingest.sst", vfs.WriteCategoryUnspecified)
	must(err)
	w := sstable.NewWriter(objstorageprovider.NewFileWritable(f), sstable.WriterOptions{TableFormat: sstable.TableFormatPebblev2})
	for _, i := range []int{2945, 2950} {
		must(w.Set(key(i), fmt.Appendf(nil, "flushable-%d", i)))
	}
	must(w.Close())
	fs.armed.Store(true)
	var stats pebble.IngestOperationStats
	if fmv >= pebble.FormatFlushableIngestExcises {
		stats, err = d.IngestAndExcise(context.Background(), []string{"/ingest.sst"}, nil, nil, pebble.KeyRange{Start: key(2940), End: key(2960)})
	} else {
		stats, err = d.IngestWithStats(context.Background(), []string{"/ingest.sst"})
	}
	must(err)
	if stats.MemtableOverlappingFiles != 1 {
		t.Fatalf("the ingest was not flushable: %+v", stats)
	}
	must(d.Set(key(2950), []byte("after the ingest"), pebble.Sync))
	must(d.Set(key(2990), []byte("after the ingest"), pebble.Sync))

	ps := &pebbleStore{fmv: fmv}
	var probes []string
	for i := 2938; i < 2962; i++ {
		probes = append(probes, string(key(i)))
	}
	ps.record(t, d, probes)
	img := mem.CrashClone(vfs.CrashCloneCfg{})
	close(fs.release)
	released = true
	must(d.Close())

	// The image, on disk.
	ps.dir = t.TempDir()
	names, err := img.List(dir)
	must(err)
	for _, name := range names {
		src, err := img.Open(filepath.Join(dir, name))
		must(err)
		data, err := io.ReadAll(src)
		must(err)
		must(src.Close())
		must(os.WriteFile(filepath.Join(ps.dir, name), data, 0o644))
	}
	logs, _ := filepath.Glob(filepath.Join(ps.dir, "*.log"))
	if len(logs) < 2 {
		t.Fatalf("the image has %d WALs, want the ingest's and the one after it", len(logs))
	}
	ps.wal = logs[len(logs)-1]
	return ps
}

// TestPebbleFlushableIngest reads a store that crashed with a flushable
// ingest (and, from format 018, its excise) only in its WAL: scans and
// gets answer as Pebble did before the crash, and the table is listed as
// flushable, not in a level.
func TestPebbleFlushableIngest(t *testing.T) {
	for _, fmv := range []pebble.FormatMajorVersion{pebble.FormatFlushableIngest, pebble.FormatFlushableIngestExcises, pebble.FormatWALSyncChunks} {
		t.Run(fmt.Sprint(fmv), func(t *testing.T) {
			ps := writeFlushableStore(t, fmv)
			out, errOut, code := runTool("--json", "db", "scan", ps.dir)
			if code != 0 || errOut != "" {
				t.Fatalf("db scan: exit %d, %q", code, errOut)
			}
			lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
			if len(lines) != len(ps.entries) {
				t.Fatalf("db scan: %d entries, Pebble %d", len(lines), len(ps.entries))
			}
			for i, l := range lines {
				var kv kvOut
				if err := json.Unmarshal([]byte(l), &kv); err != nil {
					t.Fatal(err)
				}
				if want := ps.entries[i]; kv.Key != want[0] || kv.Value != want[1] {
					t.Fatalf("db scan entry %d: %+v, Pebble %q", i, kv, want)
				}
			}
			for i := 2938; i < 2962; i++ {
				k := fmt.Sprintf("pk%05d", i)
				out, _, code := runTool("db", "get", ps.dir, k)
				if want, ok := ps.gets[k]; ok != (code == 0) || ok && out != fmt.Sprintf("%q\n", *want) {
					t.Fatalf("db get %s: exit %d, %q; Pebble %v", k, code, out, ps.gets[k])
				}
			}
			// What the ingest and excise changed is visible.
			want := map[string]string{"pk02945": "flushable-2945", "pk02950": "after the ingest"}
			if fmv < pebble.FormatFlushableIngestExcises {
				want["pk02948"] = "in the memtable"
				want["pk02941"] = "v1-2941"
			}
			for k, v := range want {
				if got := ps.gets[k]; got == nil || *got != v {
					t.Fatalf("Pebble's %s is %v, want %q: the store is not the one meant", k, got, v)
				}
			}
			if fmv >= pebble.FormatFlushableIngestExcises && (ps.gets["pk02948"] != nil || ps.gets["pk02941"] != nil) {
				t.Fatalf("the excise left keys: %v %v", ps.gets["pk02941"], ps.gets["pk02948"])
			}
			var chk dbCheckOut
			out, errOut, code = runTool("--json", "db", "check", ps.dir)
			if err := json.Unmarshal([]byte(out), &chk); err != nil || code != 0 || !chk.OK || chk.LiveKeys != uint64(len(ps.entries)) {
				t.Fatalf("db check: exit %d, %q, %+v", code, errOut, chk)
			}
			var lsm lsmOut
			out, _, code = runTool("--json", "db", "lsm", ps.dir)
			if err := json.Unmarshal([]byte(out), &lsm); err != nil || code != 0 {
				t.Fatalf("db lsm: exit %d, %v", code, err)
			}
			if len(lsm.Flushable) != 1 || lsm.Flushable[0].SmallestSeq != lsm.Flushable[0].LargestSeq {
				t.Fatalf("db lsm flushable: %+v", lsm.Flushable)
			}
			for l, want := range ps.levels {
				if len(lsm.Levels[l].Tables) != len(want) {
					t.Fatalf("db lsm L%d: %d tables, Pebble %d", l, len(lsm.Levels[l].Tables), len(want))
				}
			}
			// The WAL names a table that is gone: an error naming the
			// WAL, the record's offset and the table.
			if err := os.Remove(filepath.Join(ps.dir, lsm.Flushable[0].File)); err != nil {
				t.Fatal(err)
			}
			_, errOut, code = runTool("db", "scan", ps.dir)
			expectOneLine(t, []string{"db", "scan"}, ps.dir, errOut, code)
			if code != 1 || !strings.Contains(errOut, ".log: record at offset") || !strings.Contains(errOut, "flushable ingest of table") {
				t.Fatalf("db scan without the ingested table: exit %d, %q", code, errOut)
			}
		})
	}
}

// TestSSTableScanBlobValues scans a Pebblev7 table whose values lie in a
// blob file: in its store the values are resolved through the manifest;
// copied alone, each shows as its reference; with --blob-file, resolved
// from the file given.
func TestSSTableScanBlobValues(t *testing.T) {
	ps := writeNewestPebbleStore(t, t.TempDir())
	// The flush of pk00040-pk00049's two versions wrote table 000012 and
	// blob file 000013 (as the 024 goldens show).
	table := filepath.Join(ps.dir, "000012.sst")
	blobs := []string{filepath.Join(ps.dir, "000013.blob")}
	scan := func(args ...string) []scanOut {
		t.Helper()
		out, errOut, code := runTool(append([]string{"--json", "sstable", "scan"}, args...)...)
		if code != 0 {
			t.Fatalf("sstable scan %v: exit %d, %q", args, code, errOut)
		}
		var got []scanOut
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			var o scanOut
			if err := json.Unmarshal([]byte(l), &o); err != nil {
				t.Fatal(err)
			}
			got = append(got, o)
		}
		return got
	}
	check := func(got []scanOut, resolved bool) {
		t.Helper()
		blobValues := 0
		for _, o := range got {
			if o.Blob == nil {
				continue
			}
			blobValues++
			switch {
			case resolved && (o.Value == nil || !strings.HasPrefix(*o.Value, "large-") || len(*o.Value) != int(o.Blob.Length) || o.Blob.File == ""):
				t.Fatalf("%s: %+v, value %.40q", o.Key, o.Blob, deref(o.Value))
			case !resolved && (o.Value != nil || o.Blob.File != "" || o.Blob.Length < 3000):
				t.Fatalf("%s: %+v, value %.40q", o.Key, o.Blob, deref(o.Value))
			}
		}
		if blobValues != 20 {
			t.Fatalf("%d values in blob files, want pk00040-pk00049's 20", blobValues)
		}
	}
	check(scan(table), true)
	alone := filepath.Join(t.TempDir(), filepath.Base(table))
	data, err := os.ReadFile(table)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(alone, data, 0o644); err != nil {
		t.Fatal(err)
	}
	check(scan(alone), false)
	check(scan("--blob-file", blobs[0], alone), true)
	// The wrong blob file: an error naming it, not a wrong value.
	if _, errOut, code := runTool("sstable", "scan", "--blob-file", table, alone); code != 1 || !strings.Contains(errOut, table) {
		t.Fatalf("scan with a table for a blob file: exit %d, %q", code, errOut)
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// sameAsPebbleReader compares sstable scan and sstable properties of a
// table with what Pebble's reader gives: every point entry (key, sequence
// number, kind, and value, but for one in a blob file, which scan resolves
// only in its store) and the counts and sizes of its properties.
func sameAsPebbleReader(t *testing.T, path string) {
	t.Helper()
	r := pebbletest.OpenTable(t, path)
	it, err := r.NewIter(sstable.NoTransforms, nil, nil, sstable.DebugHandlesBlobContext)
	if err != nil {
		t.Fatal(err)
	}
	type pointOut struct{ key, kind, value string }
	var theirs []pointOut
	var seqs []uint64
	for kv := it.First(); kv != nil; kv = it.Next() {
		p := pointOut{key: string(kv.K.UserKey), kind: kv.K.Kind().String()}
		if v, _, err := kv.Value(nil); err == nil && kv.K.Kind() == pebble.InternalKeyKindSet {
			p.value = string(v)
		}
		theirs = append(theirs, p)
		seqs = append(seqs, uint64(kv.K.SeqNum()))
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runTool("--json", "sstable", "scan", path)
	if code != 0 {
		t.Fatalf("sstable scan %s: exit %d, %q", path, code, errOut)
	}
	i := 0
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var o scanOut
		if err := json.Unmarshal([]byte(line), &o); err != nil {
			t.Fatal(err)
		}
		if o.End != "" {
			continue // a range deletion or range key
		}
		if i >= len(theirs) {
			t.Fatalf("%s: scan has more point entries than Pebble's %d", path, len(theirs))
		}
		want := theirs[i]
		if o.Key != want.key || o.Kind != want.kind || o.Seq != seqs[i] ||
			o.Blob == nil && want.kind == "SET" && (o.Value == nil || *o.Value != want.value) {
			t.Fatalf("%s entry %d: %+v (value %.40q), Pebble %q#%d,%s %.40q", path, i, o, deref(o.Value), want.key, seqs[i], want.kind, want.value)
		}
		i++
	}
	if i != len(theirs) {
		t.Fatalf("%s: scan has %d point entries, Pebble %d", path, i, len(theirs))
	}
	var p propertiesOut
	out, _, _ = runTool("--json", "sstable", "properties", path)
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatal(err)
	}
	pp, err := r.ReadPropertiesBlock(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.Entries != pp.NumEntries || p.Deletions != pp.NumDeletions || p.RangeDeletions != pp.NumRangeDeletions ||
		p.RawKeySize != pp.RawKeySize || p.RawValueSize != pp.RawValueSize || p.DataSize != pp.DataSize ||
		p.Properties["rocksdb.index.size"] != fmt.Sprint(pp.IndexSize) {
		// (IndexSize is measured from the blocks; the property, as the
		// writer recorded it, is compared as stored.)
		t.Fatalf("%s: entries, deletions, range deletions, raw key and value sizes, data and index sizes: %d %d %d %d %d %d %s; Pebble's %d %d %d %d %d %d %d",
			path, p.Entries, p.Deletions, p.RangeDeletions, p.RawKeySize, p.RawValueSize, p.DataSize, p.Properties["rocksdb.index.size"],
			pp.NumEntries, pp.NumDeletions, pp.NumRangeDeletions, pp.RawKeySize, pp.RawValueSize, pp.DataSize, pp.IndexSize)
	}
}
