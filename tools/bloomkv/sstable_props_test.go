package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/sstable"
)

// writeBottomTable writes a table as a bottom-level compaction leaves it:
// n keys, every sequence number zeroed, in 512-byte blocks.
func writeBottomTable(t *testing.T, path string, n int) {
	t.Helper()
	var buf bytes.Buffer
	w, err := sstable.NewWriter(&buf, sstable.WriterOptions{BlockSize: 512, Compression: sstable.NoCompression})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := w.Add(base.MakeInternalKey(fmt.Appendf(nil, "key%04d", i), 0, base.KindSet), bytes.Repeat([]byte{'v'}, 30)); err != nil {
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

// TestPropertiesDamagedBottomTable: a bottom-level table (sequence numbers
// all 0) with one damaged data block still prints its properties, with the
// sequence numbers its properties state; a damaged first block leaves only
// the key range unreadable. Finding the damage is sstable check's job.
func TestPropertiesDamagedBottomTable(t *testing.T) {
	dir := t.TempDir()
	clean := filepath.Join(dir, "clean.sst")
	writeBottomTable(t, clean, 500)
	want := jsonLines[propertiesOut](t, "sstable", "properties", clean)[0]
	if want.Unreadable != nil || want.LargestSeq != 0 || want.DataBlocks < 5 {
		t.Fatalf("clean table: %+v", want)
	}
	layout := jsonLines[layoutOut](t, "sstable", "layout", clean)[0]
	var data []blockOut
	for _, b := range layout.Blocks {
		if b.Kind == "data" {
			data = append(data, b)
		}
	}
	raw, err := os.ReadFile(clean)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name       string
		block      blockOut
		unreadable []string
	}{
		{"middle", data[len(data)/2], nil},
		{"first", data[0], []string{"key range"}},
	} {
		path := filepath.Join(dir, c.name+".sst")
		b := bytes.Clone(raw)
		b[c.block.Offset+c.block.Length/2] ^= 0xff
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		got := jsonLines[propertiesOut](t, "sstable", "properties", path)[0]
		if got.Entries != want.Entries || got.DataSize != want.DataSize || got.LargestSeq != 0 || len(got.Unreadable) != len(c.unreadable) {
			t.Fatalf("%s block damaged: %+v", c.name, got)
		}
		for _, f := range c.unreadable {
			if !strings.Contains(got.Unreadable[f], "checksum") {
				t.Fatalf("%s block damaged: %q unreadable as %q", c.name, f, got.Unreadable[f])
			}
		}
		out, _, code := runTool("sstable", "properties", path)
		if code != 0 || !strings.Contains(out, "sequence numbers   0-0") {
			t.Fatalf("%s block damaged: exit %d\n%s", c.name, code, out)
		}
		if _, errOut, code := runTool("sstable", "check", path); code != 1 || !strings.Contains(errOut, "checksum") {
			t.Fatalf("%s block damaged: check exit %d, %q", c.name, code, errOut)
		}
	}
}
