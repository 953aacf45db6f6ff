package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

// pebbleStore is a store Pebble wrote, and what it holds by Pebble's word.
type pebbleStore struct {
	dir string
	wal string // the WAL still holding writes
	fmv pebble.FormatMajorVersion
	// levels are the tables Pebble lists, level by level.
	levels [][]pebble.SSTableInfo
}

// writePebbleStore writes a store with Pebble at format major version fmv:
// keys compacted to the bottom level; then overwrites, deletions, range
// deletions and range keys flushed to level 0; then more of each left in
// the WAL (with log data, a single deletion and a merge when withMerge is
// set). Compactions are manual only, so that the store is the same on every
// run but for creation times.
func writePebbleStore(t testing.TB, dir string, fmv pebble.FormatMajorVersion, withMerge bool) *pebbleStore {
	t.Helper()
	opts := &pebble.Options{
		FormatMajorVersion:          fmv,
		MemTableSize:                1 << 20,
		DisableAutomaticCompactions: true,
		Logger:                      quietLogger{},
	}
	d, err := pebble.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
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
	ps := &pebbleStore{dir: dir, fmv: fmv}
	ps.levels, err = d.SSTables()
	must(err)
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
		"offset 0: batch seq 4418, 8 entries\n",
		`    SET      "pk00007" "in the WAL"` + "\n",
		`    DEL      "pk00008"` + "\n",
		`    RANGEDEL "pk02000" "pk02010"` + "\n",
		`    RANGEKEYSET "pk02500" "pk02600" ""="rk2"` + "\n",
		`    LOGDATA  "log data"` + "\n",
		`    MERGE    "pk00009" "+merged"` + "\n",
		`    SINGLEDEL "pk00010"` + "\n",
		`    RANGEKEYUNSET "pk02500" "pk02550" ""` + "\n",
		"  end: clean (EOF trailer)\n  2 records, 9 entries, sequence numbers 4418-4426\n",
	} {
		if !strings.Contains(out, want) {
			t.Fatalf("wal dump lacks %q:\n%s", want, out)
		}
	}
	js, _, _ := runTool("--json", "wal", "dump", ps.wal)
	if !strings.Contains(js, `{"seq":4422,"kind":"LOGDATA","key":"log data"}`) || !strings.Contains(js, `"eof_trailer":true`) {
		t.Fatalf("wal dump --json:\n%s", js)
	}
}

// TestPebbleManifest dumps a Pebble store's manifest: Pebble's edits, and
// the version they build is the one Pebble lists.
func TestPebbleManifest(t *testing.T) {
	ps := writePebbleStore(t, t.TempDir(), pebble.FormatFlushableIngest, false)
	name := filepath.Join(ps.dir, "MANIFEST-000001")
	out, errOut, code := runTool("manifest", "dump", name)
	if code != 0 || errOut != "" || !strings.HasPrefix(out, name+" (Pebble)\n") || !strings.Contains(out, "range keys \"pk00500\"#4415,RANGEKEYSET") {
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
