package main

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

// goldenCases are the command lines of the golden tests.
func (f *fixture) goldenCases() []struct {
	name string
	args []string
} {
	return []struct {
		name string
		args []string
	}{
		{"sstable-properties", []string{"sstable", "properties", f.table, f.ldbTable}},
		{"sstable-layout", []string{"sstable", "layout", f.table}},
		{"sstable-layout-v", []string{"sstable", "layout", "-v", "--value-format", "quoted", f.ldbTable}},
		{"sstable-scan", []string{"sstable", "scan", f.table}},
		{"sstable-scan-bounds", []string{"sstable", "scan", "--start", "key012", "--end", "hex:6b6579303230", "--count", "6", "--key-format", "hex", "--value-format", "size", f.table}},
		{"sstable-check", []string{"sstable", "check", f.table, f.ldbTable}},
		{"sstable-filter", []string{"sstable", "filter", "--probes", "20000", f.table}},
		{"wal-dump", []string{"wal", "dump", f.wal}},
		{"manifest-dump", []string{"manifest", "dump", f.manifest}},
		{"db-lsm", []string{"db", "lsm", f.db}},
		{"db-get", []string{"db", "get", f.db, "user000"}},
		{"db-scan", []string{"db", "scan", "--start", "user000", "--end", "user030", f.db}},
		{"db-check", []string{"db", "check", f.db}},
		{"manifest-summarize", []string{"manifest", "summarize", "--edits", "2", f.manifest}},
		{"manifest-check", []string{"manifest", "check", f.manifest}},
		{"find", []string{"find", f.db, "user000"}},
		{"db-space", []string{"db", "space", "--start", "user010", "--end", "user040", f.db}},
		{"db-properties", []string{"db", "properties", f.db}},
		{"sstable-space", []string{"sstable", "space", "--start", "key050", "--end", "key060", f.table}},
		{"sstable-dump", []string{"sstable", "dump", "--count", "5", f.table}},
		{"db-space-no-keys", []string{"db", "space", "--start", "a", "--end", "b", f.db}},
		{"join", []string{"join", "--start", "user020", "--end", "user026", f.db, f.db}},
		{"join-limit", []string{"join", "--limit", "2", "--strategy", "filter", f.db, f.db}},
		{"diff", []string{"diff", f.db, f.db}},
		{"find-swapped", []string{"find", "user000", f.db}},
		{"db-get-swapped", []string{"db", "get", "user000", f.db}},
		{"join-no-scheme", []string{"join", f.db, "localhost:1"}},
	}
}

// goldenExit is the exit status of the golden cases that do not exit 0.
var goldenExit = map[string]int{"find-swapped": exitUsage, "db-get-swapped": exitUsage, "join-no-scheme": exitUsage}

// pebbleGoldenCases are the command lines of the golden tests on a store
// Pebble wrote at format major version 013 (writePebbleStore).
func pebbleGoldenCases(ps *pebbleStore) []struct {
	name string
	args []string
} {
	table := filepath.Join(ps.dir, "000015.sst") // range deletion and range keys
	return []struct {
		name string
		args []string
	}{
		{"pebble-db-lsm", []string{"db", "lsm", ps.dir}},
		{"pebble-db-scan", []string{"db", "scan", "--start", "pk00995", "--end", "pk01060", ps.dir}},
		{"pebble-db-get", []string{"db", "get", ps.dir, "pk00009"}},
		{"pebble-db-check", []string{"db", "check", ps.dir}},
		{"pebble-db-options", []string{"db", "options", ps.dir}},
		{"pebble-manifest-dump", []string{"manifest", "dump", filepath.Join(ps.dir, "MANIFEST-000001")}},
		{"pebble-wal-dump", []string{"wal", "dump", ps.wal}},
		{"pebble-sstable-properties", []string{"sstable", "properties", table}},
		{"pebble-sstable-scan", []string{"sstable", "scan", table}},
		{"pebble-sstable-layout-v", []string{"sstable", "layout", "-v", "--value-format", "quoted", table}},
		// Two versions of ten keys: the older values in a value block.
		{"pebble-sstable-layout-value-blocks", []string{"sstable", "layout", filepath.Join(ps.dir, "000012.sst")}},
		{"pebble-manifest-summarize", []string{"manifest", "summarize", "--edits", "3", filepath.Join(ps.dir, "MANIFEST-000001")}},
		{"pebble-manifest-check", []string{"manifest", "check", filepath.Join(ps.dir, "MANIFEST-000001")}},
		{"pebble-find", []string{"find", ps.dir, "pk01050"}},
		{"pebble-db-space", []string{"db", "space", "--start", "pk00500", "--end", "pk01500", ps.dir}},
		{"pebble-db-properties", []string{"db", "properties", ps.dir}},
		{"pebble-sstable-space", []string{"sstable", "space", "--start", "pk01000", "--end", "pk01100", table}},
		{"pebble-db-space-no-keys", []string{"db", "space", "--start", "a", "--end", "b", ps.dir}},
	}
}

// writeNewestPebbleStore writes writePebbleStore's store at Pebble's newest
// format major version, 024, as Pebble's own tool opens stores: columnar
// tables (Pebblev7), and values of 1 KiB and more in blob files.
func writeNewestPebbleStore(t *testing.T, dir string) *pebbleStore {
	return writePebbleStoreWith(t, dir, pebble.FormatNewest, true, func(o *pebble.Options) {
		o.Experimental.EnableColumnarBlocks = func() bool { return true }
		o.Experimental.ValueSeparationPolicy = func() pebble.ValueSeparationPolicy {
			return pebble.ValueSeparationPolicy{Enabled: true, MinimumSize: 1024, MaxBlobReferenceDepth: 10}
		}
	})
}

// newestPebbleGoldenCases are the command lines of the golden tests on the
// store writeNewestPebbleStore wrote.
func newestPebbleGoldenCases(ps *pebbleStore) []struct {
	name string
	args []string
} {
	manifest := filepath.Join(ps.dir, "MANIFEST-000001")
	table := filepath.Join(ps.dir, "000016.sst") // range deletion and range keys
	blob := filepath.Join(ps.dir, "000013.blob") // pk00040-pk00049's values
	return []struct {
		name string
		args []string
	}{
		{"pebble024-db-lsm", []string{"db", "lsm", ps.dir}},
		{"pebble024-db-scan", []string{"db", "scan", "--start", "pk00995", "--end", "pk01060", ps.dir}},
		{"pebble024-db-get-blob", []string{"db", "get", "--value-format", "hex", ps.dir, "pk00041"}},
		{"pebble024-db-check", []string{"db", "check", ps.dir}},
		{"pebble024-manifest-dump", []string{"manifest", "dump", manifest}},
		{"pebble024-wal-dump", []string{"wal", "dump", ps.wal}},
		{"pebble024-sstable-properties", []string{"sstable", "properties", table}},
		{"pebble024-sstable-scan", []string{"sstable", "scan", table}},
		{"pebble024-sstable-layout-v", []string{"sstable", "layout", "-v", "--value-format", "quoted", table}},
		{"pebble024-blob-layout", []string{"blob", "layout", blob}},
		// A table's values in the blob file, resolved through the manifest.
		{"pebble024-sstable-scan-blob", []string{"sstable", "scan", "--start", "pk00049", "--count", "2", filepath.Join(ps.dir, "000012.sst")}},
		{"pebble024-find", []string{"find", ps.dir, "pk00041"}},
		{"pebble024-db-properties", []string{"db", "properties", ps.dir}},
	}
}

// creationTimes matches the creation times Pebble's manifest records, the
// only part of its store that changes from run to run.
var creationTimes = regexp.MustCompile(`(created |"creation_time":)\d+`)

// TestGolden runs every command on the fixture and on a Pebble store, in
// text and JSON, and compares the output with testdata/golden (go test
// -update rewrites it).
func TestGolden(t *testing.T) {
	f := newFixture(t)
	ps := writePebbleStore(t, filepath.Join(f.dir, "pebbledb"), pebble.FormatFlushableIngest, true)
	newest := writeNewestPebbleStore(t, filepath.Join(f.dir, "pebbledb024"))
	cases := append(f.goldenCases(), pebbleGoldenCases(ps)...)
	for _, c := range append(cases, newestPebbleGoldenCases(newest)...) {
		for _, js := range []bool{false, true} {
			args, ext := c.args, ".txt"
			if js {
				args, ext = append([]string{"--json"}, c.args...), ".json"
			}
			t.Run(c.name+ext, func(t *testing.T) {
				out, errOut, code := runTool(args...)
				if code != goldenExit[c.name] {
					t.Fatalf("exit %d, stderr %q", code, errOut)
				}
				if js && code == 0 {
					for i, line := range strings.Split(strings.TrimSuffix(out+errOut, "\n"), "\n") {
						if line != "" && !json.Valid([]byte(line)) {
							t.Fatalf("line %d is not JSON: %s", i+1, line)
						}
					}
				}
				// What a command writes to stderr (a report, an error)
				// follows its records.
				if errOut != "" {
					out += "--- stderr\n" + errOut
				}
				got := strings.ReplaceAll(out, f.dir, "$TMP")
				got = creationTimes.ReplaceAllString(got, "${1}$$TIME")
				path := filepath.Join("testdata", "golden", c.name+ext)
				if *update {
					if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
						t.Fatal(err)
					}
					return
				}
				want, err := os.ReadFile(path)
				if err != nil {
					t.Fatalf("%v (run go test -update to write it)", err)
				}
				if got != string(want) {
					t.Fatalf("output differs from %s (go test -update rewrites it):\n--- got\n%s\n--- want\n%s", path, got, want)
				}
			})
		}
	}
}
