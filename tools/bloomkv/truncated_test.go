package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

// truncate cuts the file at path to two thirds of its size and returns
// its sizes before and after.
func truncate(t *testing.T, path string) (before, after int64) {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	before, after = st.Size(), st.Size()*2/3
	if err := os.Truncate(path, after); err != nil {
		t.Fatal(err)
	}
	return before, after
}

// TestTruncatedTables: a table cut short reads as truncated, not as
// another format: standalone, and in a store (bloomkv's and Pebble's),
// where db lsm and db check give the file's size against the manifest's.
func TestTruncatedTables(t *testing.T) {
	f := newFixture(t)
	cut := filepath.Join(f.dir, "cut.sst")
	copyFile(t, f.table, cut)
	truncate(t, cut)
	if _, errOut, code := runTool("sstable", "properties", cut); code != 1 || !strings.Contains(errOut, "truncated or not an sstable") {
		t.Errorf("standalone: exit %d, %q", code, errOut)
	}

	ps := writePebbleStore(t, filepath.Join(f.dir, "pebbledb"), pebble.FormatFlushableIngest, true)
	paths, _ := storeTables(t, ps.dir)
	for _, c := range []struct{ dir, table string }{{f.db, f.tables[0]}, {ps.dir, paths[len(paths)-1]}} {
		before, after := truncate(t, c.table)
		name := filepath.Base(c.table)
		sizes := fmt.Sprintf("is truncated at offset %d: the manifest records %d bytes", after, before)

		out, errOut, code := runTool("db", "lsm", c.dir)
		if code != 1 || !strings.Contains(out, fmt.Sprintf("%s  %8d bytes", name, before)) ||
			!strings.Contains(out, fmt.Sprintf("TRUNCATED: the file holds %d bytes", after)) || !strings.Contains(errOut, name) || !strings.Contains(errOut, sizes) {
			t.Errorf("%s: db lsm: exit %d:\n%s\nstderr %q", c.dir, code, out, errOut)
		}
		out, _, code = runTool("--json", "db", "lsm", c.dir)
		var lsm lsmOut
		if err := json.Unmarshal([]byte(out), &lsm); err != nil || code != 1 {
			t.Fatalf("%s: db lsm --json: exit %d, %v", c.dir, code, err)
		}
		marked := 0
		for _, l := range lsm.Levels {
			for _, tb := range l.Tables {
				if tb.Problem != "" {
					marked++
					if tb.File != name || tb.Problem != "truncated" || tb.FileSize == nil || *tb.FileSize != after {
						t.Errorf("%s: db lsm --json marks %+v", c.dir, tb)
					}
				}
			}
		}
		if marked != 1 {
			t.Errorf("%s: db lsm --json marks %d tables", c.dir, marked)
		}
		if _, errOut, code := runTool("db", "check", c.dir); code != 1 || !strings.Contains(errOut, name) || !strings.Contains(errOut, sizes) {
			t.Errorf("%s: db check: exit %d, %q", c.dir, code, errOut)
		}
	}
}
