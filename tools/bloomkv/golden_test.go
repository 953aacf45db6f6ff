package main

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
	}
}

// TestGolden runs every command on the fixture, in text and JSON, and
// compares the output with testdata/golden (go test -update rewrites it).
func TestGolden(t *testing.T) {
	f := newFixture(t)
	for _, c := range f.goldenCases() {
		for _, js := range []bool{false, true} {
			args, ext := c.args, ".txt"
			if js {
				args, ext = append([]string{"--json"}, c.args...), ".json"
			}
			t.Run(c.name+ext, func(t *testing.T) {
				out, errOut, code := runTool(args...)
				if code != 0 || errOut != "" {
					t.Fatalf("exit %d, stderr %q", code, errOut)
				}
				if js {
					for i, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
						if !json.Valid([]byte(line)) {
							t.Fatalf("line %d is not JSON: %s", i+1, line)
						}
					}
				}
				got := strings.ReplaceAll(out, f.dir, "$TMP")
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
