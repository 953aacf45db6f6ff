package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	pebblebloom "github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/objstorage/objstorageprovider"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
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
// merged, single-deleted, ingested, absent.
var probeKeys = []string{"pk00000", "pk00001", "pk00021", "pk00022", "pk00003", "pk00007", "pk00008", "pk00009", "pk00010", "pk01000", "pk01050",
	"pk01099", "pk02001", "pk02005", "pk02999", "pk03000", "pk99999", ""}

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
		MemTableSize:                1 << 20,
		DisableAutomaticCompactions: true,
		Logger:                      quietLogger{},
	}
	for l := range opts.Levels {
		opts.Levels[l].FilterPolicy = pebblebloom.FilterPolicy(10)
	}
	opts.Experimental.EnableColumnarBlocks = func() bool { return false }
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
	ps := &pebbleStore{dir: dir, fmv: fmv, gets: map[string]*string{}}
	ps.levels, err = d.SSTables()
	must(err)
	it, err := d.NewIter(nil)
	must(err)
	for ok := it.First(); ok; ok = it.Next() {
		ps.entries = append(ps.entries, [2]string{string(it.Key()), string(it.Value())})
	}
	must(it.Close())
	for _, k := range probeKeys {
		v, closer, err := d.Get([]byte(k))
		if err == pebble.ErrNotFound {
			continue
		}
		must(err)
		s := string(v)
		ps.gets[k] = &s
		must(closer.Close())
	}
	must(d.Close())
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	if len(logs) == 0 {
		t.Fatal("Pebble left no WAL")
	}
	ps.wal = logs[len(logs)-1]
	return ps
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
		"offset 0: batch seq 4419, 8 entries\n",
		`    SET      "pk00007" "in the WAL"` + "\n",
		`    DEL      "pk00008"` + "\n",
		`    RANGEDEL "pk02000" "pk02010"` + "\n",
		`    RANGEKEYSET "pk02500" "pk02600" ""="rk2"` + "\n",
		`    LOGDATA  "log data"` + "\n",
		`    MERGE    "pk00009" "+merged"` + "\n",
		`    SINGLEDEL "pk00010"` + "\n",
		`    RANGEKEYUNSET "pk02500" "pk02550" ""` + "\n",
		"  end: clean (EOF trailer)\n  2 records, 9 entries, sequence numbers 4419-4427\n",
	} {
		if !strings.Contains(out, want) {
			t.Fatalf("wal dump lacks %q:\n%s", want, out)
		}
	}
	js, _, _ := runTool("--json", "wal", "dump", ps.wal)
	if !strings.Contains(js, `{"seq":4423,"kind":"LOGDATA","key":"log data"}`) || !strings.Contains(js, `"eof_trailer":true`) {
		t.Fatalf("wal dump --json:\n%s", js)
	}
}

// TestPebbleManifest dumps a Pebble store's manifest: Pebble's edits, and
// the version they build is the one Pebble lists.
func TestPebbleManifest(t *testing.T) {
	ps := writePebbleStore(t, t.TempDir(), pebble.FormatFlushableIngest, false)
	name := filepath.Join(ps.dir, "MANIFEST-000001")
	out, errOut, code := runTool("manifest", "dump", name)
	if code != 0 || errOut != "" || !strings.HasPrefix(out, name+" (Pebble)\n") || !strings.Contains(out, "range keys \"pk00500\"#4416,RANGEKEYSET") {
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
	columnar := map[pebble.FormatMajorVersion]string{
		pebble.FormatColumnarBlocks: "Pebblev5", pebble.FormatTableFormatV6: "Pebblev6", pebble.FormatValueSeparation: "Pebblev7",
	}
	for _, fmv := range []pebble.FormatMajorVersion{pebble.FormatFlushableIngest, pebble.FormatPrePebblev1MarkedCompacted,
		pebble.FormatDeleteSizedAndObsolete, pebble.FormatWALSyncChunks,
		pebble.FormatColumnarBlocks, pebble.FormatTableFormatV6, pebble.FormatValueSeparation} {
		t.Run(fmt.Sprint(fmv), func(t *testing.T) {
			tableFormat, isColumnar := columnar[fmv]
			ps := writePebbleStoreWith(t, t.TempDir(), fmv, true, func(o *pebble.Options) {
				o.Experimental.EnableColumnarBlocks = func() bool { return isColumnar }
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
						return g.File == fmt.Sprintf("%s.sst", w.FileNum) && g.Size == w.Size && g.SmallestSeq == uint64(w.SmallestSeqNum)
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

			// Every table, by the sstable commands.
			if isColumnar {
				var l map[string]any
				tb := ps.levels[len(ps.levels)-1][0]
				if err := json.Unmarshal([]byte(jsonLines("sstable", "layout", filepath.Join(ps.dir, tb.FileNum.String()+".sst"))[0]), &l); err != nil || l["format"] != tableFormat {
					t.Fatalf("sstable layout: format %v (%v), want %s", l["format"], err, tableFormat)
				}
			}
			for _, cmd := range fileCommands[:5] {
				for _, l := range ps.levels {
					for _, tb := range l {
						args := append(slices.Clone(cmd), filepath.Join(ps.dir, tb.FileNum.String()+".sst"))
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
