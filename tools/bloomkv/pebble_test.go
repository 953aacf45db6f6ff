package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	pebblebloom "github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/objstorage/objstorageprovider"
	pebble "github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// writePebbleTable writes n keys (every fifth a deletion) and, in the
// RocksDBv2 format, a range deletion with Pebble's own writer: small data
// and index blocks, so that the index has two levels, and Pebble's Bloom
// filter at 10 bits/key.
func writePebbleTable(t *testing.T, path string, format pebble.TableFormat, n int) {
	t.Helper()
	f, err := vfs.Default.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	// The columnar formats with the other compressions Pebble writes.
	compression := map[pebble.TableFormat]*pebble.CompressionProfile{
		pebble.TableFormatPebblev5: pebble.ZstdCompression, pebble.TableFormatPebblev6: pebble.MinLZCompression,
	}[format]
	if compression == nil {
		compression = pebble.SnappyCompression
	}
	w := pebble.NewWriter(objstorageprovider.NewFileWritable(f), pebble.WriterOptions{
		TableFormat:    format,
		Compression:    compression,
		FilterPolicy:   pebblebloom.FilterPolicy(10),
		BlockSize:      512,
		IndexBlockSize: 256,
	})
	for i := range n {
		k := fmt.Appendf(nil, "pk%05d", i)
		if i%5 == 0 {
			err = w.Delete(k)
		} else {
			err = w.Set(k, fmt.Appendf(nil, "pebble-value-%d", i))
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if format != pebble.TableFormatLevelDB {
		if err := w.DeleteRange([]byte("pk00100"), []byte("pk00200")); err != nil {
			t.Fatal(err)
		}
	}
	if format >= pebble.TableFormatPebblev2 {
		// Range keys: a set over a part of the range deletion, and a
		// deletion of range keys after it.
		if err := w.RangeKeySet([]byte("pk00150"), []byte("pk00250"), nil, []byte("rk")); err != nil {
			t.Fatal(err)
		}
		if err := w.RangeKeyDelete([]byte("pk00300"), []byte("pk00301")); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// pebbleFormats are the table formats Pebble writes that bloomkv reads.
var pebbleFormats = []pebble.TableFormat{pebble.TableFormatLevelDB, pebble.TableFormatRocksDBv2, pebble.TableFormatPebblev1,
	pebble.TableFormatPebblev2, pebble.TableFormatPebblev3, pebble.TableFormatPebblev4,
	pebble.TableFormatPebblev5, pebble.TableFormatPebblev6, pebble.TableFormatPebblev7}

// TestPebbleTables runs every sstable command on tables Pebble wrote in
// the LevelDB, RocksDBv2 and Pebblev1 to v7 formats.
func TestPebbleTables(t *testing.T) {
	const n = 3000
	for _, format := range pebbleFormats {
		t.Run(format.String(), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "pebble.sst")
			writePebbleTable(t, path, format, n)
			dels, index, parts, rangeKeys := 0, "single block", 0, 0
			if format != pebble.TableFormatLevelDB {
				dels, index, parts = 1, "two-level", 2 // LevelDB's format has one index block
			}
			if format >= pebble.TableFormatPebblev2 {
				rangeKeys = 2
			}

			p := jsonOf(t, "sstable", "properties", path)
			if p["entries"].(float64) != n+float64(dels) || p["range_deletions"].(float64) != float64(dels) ||
				p["filter_policy"] != "rocksdb.BuiltinBloomFilter" || p["comparer"] != "leveldb.BytewiseComparator" ||
				p["index_type"] != index || p["smallest_key"] != "pk00000#0,DEL" || p["data_blocks"].(float64) < 10 {
				t.Fatalf("properties: %v", p)
			}
			if bpk := p["filter_bits_per_key"].(float64); bpk < 10 || bpk > 11 {
				t.Fatalf("filter bits/key %.2f, Pebble was asked for 10", bpk)
			}

			l := jsonOf(t, "sstable", "layout", "-v", path)
			kinds := map[string]int{}
			records := 0
			for _, b := range l["blocks"].([]any) {
				bm := b.(map[string]any)
				if bm["checksum"] == "bad" {
					t.Fatalf("layout: %v", bm)
				}
				kinds[bm["kind"].(string)]++
				if bm["kind"] == "data" {
					records += len(bm["records"].([]any))
				}
			}
			if records != n || kinds["index-partition"] < parts || kinds["filter"] != 1 || kinds["properties"] != 1 || kinds["range-del"] != dels ||
				kinds["range-key"] != min(rangeKeys, 1) || kinds["footer"] != 1 {
				t.Fatalf("layout: %d data records, kinds %v", records, kinds)
			}

			out, errOut, code := runTool("sstable", "scan", path)
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if code != 0 || errOut != "" || len(lines) != 1+n+dels+rangeKeys || !strings.Contains(out, `"pk00001"#0,SET "pebble-value-1"`) {
				t.Fatalf("scan: exit %d, %q, %d lines", code, errOut, len(lines))
			}
			if rangeKeys > 0 {
				// The range deletion, then the range key set inside it,
				// then the points.
				for _, want := range []string{
					"  [\"pk00100\", \"pk00200\")#0,RANGEDEL\n  \"pk00100\"#0,DEL\n",
					"  [\"pk00150\", \"pk00250\")#0,RANGEKEYSET \"\"=\"rk\"\n  \"pk00150\"#0,DEL\n",
					"  [\"pk00300\", \"pk00301\")#0,RANGEKEYDEL\n  \"pk00300\"#0,DEL\n",
				} {
					if !strings.Contains(out, want) {
						t.Fatalf("scan lacks %q", want)
					}
				}
				out, _, _ := runTool("sstable", "scan", "--start", "pk00299", "--count", "2", path)
				if want := "  [\"pk00300\", \"pk00301\")#0,RANGEKEYDEL\n"; !strings.Contains(out, "\"pk00299\"#0,SET") || !strings.Contains(out, want) {
					t.Fatalf("scan from pk00299: %q", out)
				}
				out, _, _ = runTool("--json", "sstable", "layout", "-v", "--value-format", "quoted", path)
				if !strings.Contains(out, `"kind":"range-key"`) || !strings.Contains(out, `"key":"[pk00150, pk00250) #0,RANGEKEYSET","value":"=rk"`) {
					t.Fatalf("layout -v: no range keys (%d bytes of output)", len(out))
				}
			}

			c := jsonOf(t, "sstable", "check", path)
			if c["ok"] != true || c["entries"].(float64) != n || c["user_keys"].(float64) != n || c["filter"] != "rocksdb.BuiltinBloomFilter" {
				t.Fatalf("check: %v", c)
			}

			f := jsonOf(t, "sstable", "filter", "--probes", "50000", path)
			if f["k"].(float64) != 6 || f["line_bits"].(float64) != 512 || f["keys"].(float64) != n {
				t.Fatalf("filter: %v", f)
			}
			if est := f["estimated_keys"].(float64); est < 0.9*n || est > 1.1*n {
				t.Fatalf("filter: estimated %.0f keys of %d", est, n)
			}
			if rate, want := f["measured_fp_rate"].(float64), f["expected_fp_rate"].(float64); rate > 2*want || rate < want/2 {
				t.Fatalf("filter: measured false-positive rate %.4f, expected %.4f", rate, want)
			}
			t.Logf("Pebble %v table: filter bits/key %.2f, expected FP %.3f%%, measured %.3f%%", format,
				f["bits_per_key"], 100*f["expected_fp_rate"].(float64), 100*f["measured_fp_rate"].(float64))
		})
	}
}

// TestPebbleTablesWithoutPoints: Pebble writes an empty filter block for a
// table without point keys (only range deletions, or nothing); every
// command reads it as a sound table.
func TestPebbleTablesWithoutPoints(t *testing.T) {
	for _, format := range pebbleFormats {
		path := filepath.Join(t.TempDir(), "pebble.sst")
		writePebbleTable(t, path, format, 0)
		for _, cmd := range fileCommands[:4] {
			args := append(append([]string(nil), cmd...), path)
			out, errOut, code := runTool(args...)
			if code != 0 || errOut != "" {
				t.Fatalf("%v %v: exit %d, stderr %q", format, args, code, errOut)
			}
			if cmd[1] == "check" && !strings.Contains(out, ": ok:") {
				t.Fatalf("%v check: %s", format, out)
			}
		}
	}
}
