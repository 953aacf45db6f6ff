package main

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	pebbledb "github.com/cockroachdb/pebble/v2"
	pebble "github.com/cockroachdb/pebble/v2/sstable"
)

// fileCommands are the commands that read one file, to be run on every
// damaged file whatever its kind.
var fileCommands = [][]string{
	{"sstable", "properties"},
	{"sstable", "layout", "-v"},
	{"sstable", "scan"},
	{"sstable", "check"},
	{"sstable", "filter", "--probes", "200"},
	{"wal", "dump"},
	{"manifest", "dump"},
	{"manifest", "summarize"},
	{"manifest", "check"},
	{"manifest", "lsm"},
	{"sstable", "space", "--start", "key050", "--end", "pk01000"},
	{"blob", "dump"},
}

// expectOneLine asserts that a run either succeeded quietly or failed with
// status 1 and one line on stderr naming the file, and never printed a Go
// stack trace.
func expectOneLine(t *testing.T, args []string, name, stderr string, code int) {
	t.Helper()
	switch {
	case strings.Contains(stderr, "goroutine ") || strings.Contains(stderr, "panic"):
		t.Fatalf("%v: stack trace:\n%s", args, stderr)
	case code == 0 && stderr != "":
		t.Fatalf("%v: exit 0 with stderr %q", args, stderr)
	case code == 0:
	case code != 1:
		t.Fatalf("%v: exit %d, want 0 or 1 (stderr %q)", args, code, stderr)
	case strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "bloomkv: ") || !strings.Contains(stderr, name):
		t.Fatalf("%v: want one line on stderr naming %s, got %q", args, name, stderr)
	}
}

// damaged returns variants of data: truncations and single bit flips.
func damaged(r *rand.Rand, data []byte, flips int) [][]byte {
	var out [][]byte
	for _, n := range []int{0, 1, 7, len(data) / 2, len(data) - 54, len(data) - 49, len(data) - 8, len(data) - 1} {
		if n >= 0 && n < len(data) {
			out = append(out, data[:n])
		}
	}
	for range 8 {
		out = append(out, data[:r.IntN(len(data))])
	}
	for range flips {
		d := bytes.Clone(data)
		d[r.IntN(len(d))] ^= 1 << r.IntN(8)
		out = append(out, d)
	}
	return out
}

// TestBadInput runs every file command on truncated and bit-flipped
// tables (ours in both formats, Pebble's, CockroachDB's), WALs and manifests, on garbage,
// on missing files and on a directory; and every store command on stores
// with damaged files. Each run must end with status 0, or 1 and one line on
// stderr naming the file; a damaged table must fail sstable check.
func TestBadInput(t *testing.T) {
	f := newFixture(t)
	pebbleTable := filepath.Join(f.dir, "pebble.sst")
	writePebbleTable(t, pebbleTable, pebble.TableFormatRocksDBv2, 300)
	pebbleV2Table := filepath.Join(f.dir, "pebblev2.sst")
	writePebbleTable(t, pebbleV2Table, pebble.TableFormatPebblev2, 300)
	pebbleV4Table := filepath.Join(f.dir, "pebblev4.sst")
	writePebbleTable(t, pebbleV4Table, pebble.TableFormatPebblev4, 300)
	var columnarTables []string // Pebblev5 to v7: zstd, MinLZ, Snappy
	for _, format := range []pebble.TableFormat{pebble.TableFormatPebblev5, pebble.TableFormatPebblev6, pebble.TableFormatPebblev7} {
		path := filepath.Join(f.dir, fmt.Sprintf("%v.sst", format))
		writePebbleTable(t, path, format, 300)
		columnarTables = append(columnarTables, path)
	}
	crdbTable := filepath.Join(f.dir, "crdb.sst") // CockroachDB's comparer and key schema
	writeCRDBTable(t, crdbTable, pebble.TableFormatPebblev7, 300)
	ps := writePebbleStore(t, filepath.Join(f.dir, "pebbledb"), pebbledb.FormatFlushableIngest, true)
	pebbleBlob := filepath.Join(f.dir, "000005.blob")
	writePebbleBlob(t, pebbleBlob, 100)
	flips := 60
	if testing.Short() {
		flips = 15
	}
	for _, src := range []struct{ name, path string }{
		{"damaged table", f.table},
		{"damaged LevelDB-format table", f.ldbTable},
		{"damaged Pebble table", pebbleTable},
		{"damaged Pebblev2 table", pebbleV2Table},
		{"damaged Pebblev4 table", pebbleV4Table},
		{"damaged Pebblev5 table", columnarTables[0]},
		{"damaged Pebblev6 table", columnarTables[1]},
		{"damaged Pebblev7 table", columnarTables[2]},
		{"damaged CockroachDB table", crdbTable},
		{"damaged WAL", f.wal},
		{"damaged Pebble WAL", ps.wal},
		{"damaged Pebble manifest", filepath.Join(ps.dir, "MANIFEST-000001")},
		{"damaged manifest", f.manifest},
		{"damaged Pebble blob file", pebbleBlob},
	} {
		t.Run(src.name, func(t *testing.T) {
			data, err := os.ReadFile(src.path)
			if err != nil {
				t.Fatal(err)
			}
			isTable := strings.HasSuffix(src.path, ".sst")
			bad := filepath.Join(t.TempDir(), "bad")
			runs := 0
			for i, d := range damaged(rand.New(rand.NewPCG(7, 8)), data, flips) {
				if err := os.WriteFile(bad, d, 0o644); err != nil {
					t.Fatal(err)
				}
				for _, cmd := range fileCommands {
					args := append(append([]string(nil), cmd...), bad)
					_, errOut, code := runTool(args...)
					runs++
					expectOneLine(t, args, bad, errOut, code)
					if isTable && cmd[1] == "check" && code == 0 {
						diff := -1
						for j := range min(len(d), len(data)) {
							if d[j] != data[j] {
								diff = j
							}
						}
						t.Fatalf("%s variant %d (%d of %d bytes, differs at %d): sstable check found nothing wrong", filepath.Base(src.path), i, len(d), len(data), diff)
					}
				}
			}
			t.Logf("%d runs on damaged input", runs)
		})
	}

	garbage := filepath.Join(f.dir, "garbage")
	g := make([]byte, 5000)
	r := rand.New(rand.NewPCG(7, 8))
	for i := range g {
		g[i] = byte(r.Uint32())
	}
	os.WriteFile(garbage, g, 0o644)
	empty := filepath.Join(f.dir, "empty")
	os.WriteFile(empty, nil, 0o644)
	for _, c := range []struct{ name, path string }{
		{"garbage", garbage},
		{"empty file", empty},
		{"missing file", filepath.Join(f.dir, "missing")},
		{"directory", f.dir},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, cmd := range fileCommands {
				for _, js := range []bool{false, true} {
					args := append(append([]string(nil), cmd...), c.path)
					if js {
						args = append([]string{"--json"}, args...)
					}
					_, errOut, code := runTool(args...)
					expectOneLine(t, args, c.path, errOut, code)
					// Nothing is read from garbage; an empty file is a
					// valid (new) WAL, and nothing else.
					if code == 0 && (c.path != empty || cmd[0] != "wal") {
						t.Fatalf("%v: accepted", args)
					}
				}
			}
		})
	}

	t.Run("several files, one bad", func(t *testing.T) {
		// The good ones are still read, one line for the bad one, status 1.
		out, errOut, code := runTool("sstable", "check", f.table, garbage, f.ldbTable)
		if code != 1 || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, garbage) || strings.Count(out, ": ok:") != 2 {
			t.Fatalf("mixed files: exit %d, stdout %q, stderr %q", code, out, errOut)
		}
	})
	t.Run("directory holding no store", func(t *testing.T) {
		// An error, and nothing written there.
		emptyDir := t.TempDir()
		for _, cmd := range [][]string{{"db", "lsm", emptyDir}, {"db", "check", emptyDir}, {"db", "get", emptyDir, "k"}, {"db", "diff", emptyDir},
			{"db", "space", emptyDir}, {"db", "properties", emptyDir}, {"find", emptyDir, "k"}} {
			_, errOut, code := runTool(cmd...)
			expectOneLine(t, cmd, emptyDir, errOut, code)
			if names, _ := os.ReadDir(emptyDir); code != 1 || len(names) != 0 {
				t.Fatalf("%v: exit %d, left %v in the directory", cmd, code, names)
			}
		}
	})
	t.Run("keys that look like usage messages", func(t *testing.T) {
		// Still data: an absent key is a failure (1), not a usage
		// mistake (2).
		for _, key := range []string{"unknown command", "accepts 1 arg", "invalid argument"} {
			_, errOut, code := runTool("db", "get", f.db, key)
			if code != 1 || !strings.Contains(errOut, "not found") {
				t.Fatalf("db get %q: exit %d, stderr %q", key, code, errOut)
			}
		}
	})
	t.Run("store with a damaged file", func(t *testing.T) { storeDamage(t, f.db, "user001") })
	t.Run("Pebble store with a damaged file", func(t *testing.T) { storeDamage(t, ps.dir, "pk00001") })
}

// storeDamage runs the store commands on copies of the store in db with one
// file damaged, a subtest for each file; db get asks for key.
func storeDamage(t *testing.T, db, key string) {
	names, err := os.ReadDir(db)
	if err != nil {
		t.Fatal(err)
	}
	for n, victim := range names {
		if victim.Name() == "LOCK" {
			continue
		}
		t.Run(victim.Name(), func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(db, victim.Name()))
			if err != nil {
				t.Fatal(err)
			}
			if len(data) == 0 {
				t.Logf("%s is empty: nothing to damage", victim.Name())
				return
			}
			variants := damaged(rand.New(rand.NewPCG(7, uint64(n))), data, 6)
			runs := 0
			for i, d := range variants {
				dir := filepath.Join(t.TempDir(), "db")
				copyDir(t, db, dir)
				if err := os.WriteFile(filepath.Join(dir, victim.Name()), d, 0o644); err != nil {
					t.Fatal(err)
				}
				for _, cmd := range [][]string{{"db", "lsm", dir}, {"db", "get", dir, key}, {"db", "scan", dir}, {"db", "check", dir}, {"db", "diff", dir},
					{"db", "space", dir}, {"db", "properties", dir}, {"find", dir, key}} {
					_, errOut, code := runTool(cmd...)
					runs++
					expectOneLine(t, cmd, dir, errOut, code)
					if cmd[1] == "check" && code == 0 && strings.HasSuffix(victim.Name(), ".sst") {
						t.Fatalf("%s variant %d (%d of %d bytes): db check found nothing wrong", victim.Name(), i, len(d), len(data))
					}
				}
			}
			t.Logf("%d runs on damaged input", runs)
		})
	}
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	if err := os.MkdirAll(to, 0o755); err != nil {
		t.Fatal(err)
	}
	names, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		data, err := os.ReadFile(filepath.Join(from, n.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, n.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
