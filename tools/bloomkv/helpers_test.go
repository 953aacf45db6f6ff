package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"

	"github.com/bloomkv/bloomkv"
	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/sstable"
)

// runTool runs a command line in-process and returns its output and status.
func runTool(args ...string) (stdout, stderr string, code int) {
	var out, errOut bytes.Buffer
	code = run(args, &out, &errOut)
	return out.String(), errOut.String(), code
}

// jsonOf runs a command line with --json, which must exit 0 quietly, and
// returns the JSON object it prints.
func jsonOf(t *testing.T, args ...string) map[string]any {
	t.Helper()
	out, errOut, code := runTool(append([]string{"--json"}, args...)...)
	if code != 0 || errOut != "" {
		t.Fatalf("%v: exit %d, stderr %q", args, code, errOut)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("%v: %v\n%s", args, err, out)
	}
	return m
}

// writeTable writes a table of n keys "key000".."key<n-1>" (every seventh
// a deletion, values of varied length) and two range deletions.
func writeTable(t testing.TB, path string, n int, opts sstable.WriterOptions) {
	t.Helper()
	var buf bytes.Buffer
	w, err := sstable.NewWriter(&buf, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		seq := base.SeqNum(1000 + i)
		if i%7 == 3 {
			err = w.Add(base.MakeInternalKey(fmt.Appendf(nil, "key%03d", i), seq, base.KindDelete), nil)
		} else {
			err = w.Add(base.MakeInternalKey(fmt.Appendf(nil, "key%03d", i), seq, base.KindSet), bytes.Repeat([]byte{byte('a' + i%26)}, 5+i%40))
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if opts.TableFormat != sstable.TableFormatLevelDB {
		if err := w.DeleteRange([]byte("key010"), []byte("key020"), 2000); err != nil {
			t.Fatal(err)
		}
		if err := w.DeleteRange([]byte("key015"), []byte("key030"), 2001); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// writeStore writes a store with two flushed tables and writes left in its
// WAL, and returns its directory.
func writeStore(t testing.TB, dir string) string {
	t.Helper()
	db := filepath.Join(dir, "db")
	d, err := bloomkv.Open(db, &bloomkv.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	for round := range 2 {
		b := d.NewBatch()
		for i := range 50 {
			b.Set(fmt.Appendf(nil, "user%03d", i*2+round), fmt.Appendf(nil, "value-%d-%d", round, i))
		}
		if err := d.Apply(b, bloomkv.Sync); err != nil {
			t.Fatal(err)
		}
		if err := d.Flush(); err != nil {
			t.Fatal(err)
		}
		// The first table moves into the empty store's last level in the
		// background; the second, over it, stays in level 0. Waiting for
		// the move keeps the manifest's edits in one order.
		for round == 0 && d.Metrics().Levels[0].Files > 0 {
			runtime.Gosched()
		}
	}
	if err := d.Delete([]byte("user004"), bloomkv.Sync); err != nil {
		t.Fatal(err)
	}
	if err := d.DeleteRange([]byte("user010"), []byte("user020"), bloomkv.Sync); err != nil {
		t.Fatal(err)
	}
	if err := d.Set([]byte("user000"), []byte("newest"), bloomkv.Sync); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	return db
}

// storeFile returns the path of the store's one file whose name matches
// pattern.
func storeFile(t testing.TB, db, pattern string) string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(db, pattern))
	if err != nil || len(m) != 1 {
		t.Fatalf("%s in %s: %v %v", pattern, db, m, err)
	}
	return m[0]
}

// fixture is a directory of files every command runs on.
type fixture struct {
	dir, table, ldbTable, db, wal, manifest string
	tables                                  []string
}

func newFixture(t testing.TB) *fixture {
	dir := t.TempDir()
	f := &fixture{dir: dir, table: filepath.Join(dir, "ours.sst"), ldbTable: filepath.Join(dir, "leveldb.sst")}
	writeTable(t, f.table, 200, sstable.WriterOptions{BlockSize: 512})
	writeTable(t, f.ldbTable, 40, sstable.WriterOptions{TableFormat: sstable.TableFormatLevelDB, Compression: sstable.NoCompression})
	f.db = writeStore(t, dir)
	f.wal = storeFile(t, f.db, "*.log")
	f.manifest = storeFile(t, f.db, "MANIFEST-*")
	f.tables, _ = filepath.Glob(filepath.Join(f.db, "*.sst"))
	slices.Sort(f.tables)
	return f
}
