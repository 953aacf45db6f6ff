package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"

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

// The sizes sstable properties gives (data, index, filter, other meta and
// value blocks) and the footer make up the file: of a table of ours, and of
// Pebble's tables with value blocks.
func TestPropertiesSizesMakeUpTheFile(t *testing.T) {
	dir := t.TempDir()
	ours := filepath.Join(dir, "ours.sst")
	writeBottomTable(t, ours, 500)
	ps := writePebbleStore(t, filepath.Join(dir, "pebble"), pebble.FormatDeleteSizedAndObsolete, true)
	files, _ := filepath.Glob(filepath.Join(ps.dir, "*.sst"))
	valueBlocks := false
	for _, f := range append(files, ours) {
		p := jsonLines[propertiesOut](t, "sstable", "properties", f)[0]
		l := jsonLines[layoutOut](t, "sstable", "layout", f)[0]
		footer := l.Blocks[len(l.Blocks)-1]
		if footer.Kind != "footer" {
			t.Fatalf("%s: last block %+v, not the footer", f, footer)
		}
		if sum := p.DataSize + p.IndexSize + p.FilterSize + p.MetaSize + p.ValueSize + footer.Length; sum != p.FileSize {
			t.Errorf("%s: data %d + index %d + filter %d + meta %d + values %d + footer %d = %d, file %d",
				filepath.Base(f), p.DataSize, p.IndexSize, p.FilterSize, p.MetaSize, p.ValueSize, footer.Length, sum, p.FileSize)
		}
		valueBlocks = valueBlocks || p.ValueSize > 0
	}
	if !valueBlocks {
		t.Fatal("no Pebble table with value blocks: the test covers nothing of them")
	}
}
