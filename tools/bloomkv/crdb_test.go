package main

import (
	"encoding/hex"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	pebblebloom "github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/cockroachkvs"
	"github.com/cockroachdb/pebble/v2/objstorage/objstorageprovider"
	pebble "github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/bloomkv/bloomkv/internal/pebbletest"
)

// writeCRDBTable writes CockroachDB's keys (pebbletest.CRDBKeys; every
// fifth a deletion) and a range deletion with Pebble's writer, CockroachDB's
// comparer and key schema, a Bloom filter and a two-level index; it
// returns the keys.
func writeCRDBTable(t *testing.T, path string, format pebble.TableFormat, n int) [][]byte {
	t.Helper()
	f, err := vfs.Default.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	w := pebble.NewWriter(objstorageprovider.NewFileWritable(f), pebble.WriterOptions{
		TableFormat:    format,
		Comparer:       &cockroachkvs.Comparer,
		KeySchema:      &cockroachkvs.KeySchema,
		FilterPolicy:   pebblebloom.FilterPolicy(10),
		BlockSize:      512,
		IndexBlockSize: 256,
	})
	keys := pebbletest.CRDBKeys(n, 7)
	for i, k := range keys {
		if i%5 == 0 {
			err = w.Delete(k)
		} else {
			err = w.Set(k, fmt.Appendf(nil, "crdb-value-%d", i))
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	start := cockroachkvs.EncodeKey(nil, keys[n/4][:cockroachkvs.Split(keys[n/4])-1], nil)
	end := cockroachkvs.EncodeKey(nil, keys[n/2][:cockroachkvs.Split(keys[n/2])-1], nil)
	if err := w.DeleteRange(start, end); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return keys
}

// TestCockroachTables runs every sstable command on tables of CockroachDB's
// comparer that Pebble wrote, row (Pebblev4) and columnar (crdb1, Pebblev7):
// each exits 0 and reads every entry, in CockroachDB's key order.
func TestCockroachTables(t *testing.T) {
	for _, format := range []pebble.TableFormat{pebble.TableFormatPebblev4, pebble.TableFormatPebblev7} {
		t.Run(format.String(), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "crdb.sst")
			keys := writeCRDBTable(t, path, format, 2000)
			n := len(keys)
			prefixes := map[string]bool{}
			for _, k := range keys {
				prefixes[string(k[:cockroachkvs.Split(k)])] = true
			}
			p := jsonOf(t, "sstable", "properties", path)
			if p["entries"].(float64) != float64(n+1) || p["comparer"] != "cockroach_comparator" || p["index_type"] != "two-level" {
				t.Fatalf("properties: %v", p)
			}
			if schema, _ := p["properties"].(map[string]any)["pebble.colblk.schema"].(string); (format >= pebble.TableFormatPebblev5) != strings.Contains(schema, "crdb1") {
				t.Fatalf("properties: key schema %q", schema)
			}

			l := jsonOf(t, "sstable", "layout", "-v", path)
			records := 0
			for _, b := range l["blocks"].([]any) {
				bm := b.(map[string]any)
				if bm["checksum"] == "bad" {
					t.Fatalf("layout: %v", bm)
				}
				if bm["kind"] == "data" {
					records += len(bm["records"].([]any))
				}
			}
			if records != n {
				t.Fatalf("layout: %d data records, want %d", records, n)
			}

			out, errOut, code := runTool("sstable", "scan", "--key-format", "hex", path)
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if code != 0 || errOut != "" || len(lines) != 1+n+1 {
				t.Fatalf("scan: exit %d, %q, %d lines", code, errOut, len(lines))
			}
			// Every key, in CockroachDB's order (points after the range
			// deletion, which is not at the start); as Pebble's reader
			// returns them, crdb1's normalized (no zero logical time, no
			// synthetic byte).
			i := 0
			for _, line := range lines[1:] {
				if strings.Contains(line, "RANGEDEL") {
					continue
				}
				h, _, _ := strings.Cut(strings.TrimSpace(line), "#")
				k, err := hex.DecodeString(h)
				if err != nil || cockroachkvs.Compare(k, keys[i]) != 0 || !strings.HasPrefix(line, "  "+h+"#0,") {
					t.Fatalf("scan line %d: %q, want key %x", i, line, keys[i])
				}
				i++
			}
			// From a key between two versions: the next version on.
			mid := keys[n*3/4]
			roach := mid[:cockroachkvs.Split(mid)-1]
			between := cockroachkvs.EncodeMVCCKey(nil, roach, 1<<62, 0) // above every wall time written
			out, _, code = runTool("sstable", "scan", "--key-format", "hex", "--count", "1", "--start", "hex:"+hex.EncodeToString(between), path)
			if want := hex.EncodeToString(roach) + "00"; code != 0 || !strings.HasPrefix(strings.Split(out, "\n")[1], "  "+want) {
				t.Fatalf("scan from %x: %q, want a version of %s", between, out, want)
			}

			c := jsonOf(t, "sstable", "check", path)
			if c["ok"] != true || c["entries"].(float64) != float64(n) || c["user_keys"].(float64) != float64(n) || c["filter"] != "rocksdb.BuiltinBloomFilter" {
				t.Fatalf("check: %v", c)
			}

			f := jsonOf(t, "sstable", "filter", "--probes", "20000", path)
			if f["keys"].(float64) != float64(len(prefixes)) {
				t.Fatalf("filter: %v keys, want %d prefixes", f["keys"], len(prefixes))
			}
			if rate, want := f["measured_fp_rate"].(float64), f["expected_fp_rate"].(float64); rate > 2*want || rate < want/3 {
				t.Fatalf("filter: measured false-positive rate %.4f, expected %.4f", rate, want)
			}

			s := jsonOf(t, "sstable", "space", "--start", "hex:"+hex.EncodeToString(keys[n/2]), path)
			if blocks, of := s["data_blocks"].(float64), s["of_data_blocks"].(float64); blocks < of/3 || blocks > of*2/3 {
				t.Fatalf("space from the middle key: %v", s)
			}
		})
	}
}
