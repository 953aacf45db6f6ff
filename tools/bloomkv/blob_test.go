package main

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	pebbledb "github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/objstorage"
	"github.com/cockroachdb/pebble/v2/sstable/blob"
	"github.com/cockroachdb/pebble/v2/sstable/block"
)

// writePebbleBlob writes n values with Pebble's blob writer, in small zstd
// blocks, to path and returns them.
func writePebbleBlob(t testing.TB, path string, n int) [][]byte {
	t.Helper()
	obj := &objstorage.MemObj{}
	w := blob.NewFileWriter(5, obj, blob.FileWriterOptions{Compression: block.ZstdCompression, ChecksumType: block.ChecksumTypeCRC32c,
		FlushGovernor: block.MakeFlushGovernor(1024, 90, 0, nil)})
	var values [][]byte
	for i := range n {
		v := bytes.Repeat(fmt.Appendf(nil, "blob value %d;", i), 3+i%17)
		w.AddValue(v)
		values = append(values, v)
	}
	if _, err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, obj.Data(), 0o644); err != nil {
		t.Fatal(err)
	}
	return values
}

// TestBlobDump runs blob dump and blob layout on a blob file Pebble wrote:
// the text lists every block and value, the JSON lines every value as
// written.
func TestBlobDump(t *testing.T) {
	path := filepath.Join(t.TempDir(), "000005.blob")
	values := writePebbleBlob(t, path, 200)
	out, errOut, code := runTool("blob", "dump", path)
	if code != 0 || errOut != "" {
		t.Fatalf("blob dump: exit %d, %q", code, errOut)
	}
	if !strings.HasPrefix(out, path+": Pebble blob file, format 1, crc32c checksums, ") || !strings.Contains(out, "200 values\n") ||
		!strings.Contains(out, "original file 000005") || strings.Count(out, ", zstd, ") < 5 {
		t.Fatalf("blob dump:\n%s", out)
	}
	for i, v := range values {
		if !strings.Contains(out, fmt.Sprintf("  %d bytes  %q\n", len(v), v)) {
			t.Fatalf("blob dump lacks value %d:\n%s", i, out)
		}
	}
	layout, _, code := runTool("blob", "layout", path)
	if code != 0 || strings.Contains(layout, "blob value") || strings.Count(layout, "\n  block ") != strings.Count(out, "\n  block ") {
		t.Fatalf("blob layout: exit %d:\n%s", code, layout)
	}

	out, _, code = runTool("--json", "blob", "dump", "--value-format", "hex", path)
	if code != 0 {
		t.Fatalf("blob dump --json: exit %d", code)
	}
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<20)
	var file blobFileOut
	n := 0
	for sc.Scan() {
		if file.File == "" {
			if err := json.Unmarshal(sc.Bytes(), &file); err != nil || file.Values != len(values) || len(file.Blocks) < 5 || file.Index.Block != -1 {
				t.Fatalf("first line %s: %+v, %v", sc.Bytes(), file, err)
			}
			continue
		}
		var v blobValueOut
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatal(err)
		}
		got, err := hex.DecodeString(v.Value)
		if err != nil || n >= len(values) || !bytes.Equal(got, values[n]) || v.Length != len(values[n]) || v.File != path {
			t.Fatalf("value line %d: %s", n, sc.Bytes())
		}
		n++
	}
	if n != len(values) {
		t.Fatalf("%d value lines, want %d", n, len(values))
	}
}

// TestBlobDumpDamaged runs blob dump and blob layout on truncated and
// bit-flipped copies of a blob file: every one must exit 1 with one line
// naming the file and an offset.
func TestBlobDumpDamaged(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "000005.blob")
	writePebbleBlob(t, path, 150)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.blob")
	for i, d := range damaged(rand.New(rand.NewPCG(9, 9)), data, 60) {
		if err := os.WriteFile(bad, d, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, cmd := range [][]string{{"blob", "dump"}, {"blob", "layout"}, {"--json", "blob", "dump"}} {
			args := append(append([]string(nil), cmd...), bad)
			_, errOut, code := runTool(args...)
			expectOneLine(t, args, bad, errOut, code)
			if code != 1 || !strings.Contains(errOut, "offset") {
				t.Fatalf("%v on variant %d (%d of %d bytes): exit %d, %q", args, i, len(d), len(data), code, errOut)
			}
		}
	}
	// A good file after a bad one is still dumped.
	out, errOut, code := runTool("blob", "layout", bad, path)
	if code != 1 || strings.Count(errOut, "\n") != 1 || !strings.Contains(out, path+": Pebble blob file") {
		t.Fatalf("bad then good: exit %d, %q\n%s", code, errOut, out)
	}
}

// TestPebbleBlobStore runs the commands on a store Pebble wrote with value
// separation (format major version 024): db lsm lists its blob files, blob
// dump reads each, and db get gives Pebble's answers (or, until the sstable
// reader tells values in blob files apart, refuses in one line the tables
// holding them).
func TestPebbleBlobStore(t *testing.T) {
	ps := writePebbleStoreWith(t, t.TempDir(), pebbledb.FormatValueSeparation, false, func(o *pebbledb.Options) {
		o.Experimental.EnableColumnarBlocks = func() bool { return true }
		o.Experimental.ValueSeparationPolicy = func() pebbledb.ValueSeparationPolicy {
			return pebbledb.ValueSeparationPolicy{Enabled: true, MinimumSize: 1, MaxBlobReferenceDepth: 10, TargetGarbageRatio: 1}
		}
	})
	blobs, _ := filepath.Glob(filepath.Join(ps.dir, "*.blob"))
	if len(blobs) == 0 {
		t.Fatal("Pebble wrote no blob file")
	}
	out, errOut, code := runTool("db", "lsm", ps.dir)
	if code != 0 || !strings.Contains(out, "  blob files: "+filepath.Base(blobs[0])) {
		t.Fatalf("db lsm: exit %d, %q:\n%s", code, errOut, out)
	}
	args := append([]string{"blob", "dump", "--value-format", "size"}, blobs...)
	if out, errOut, code = runTool(args...); code != 0 || strings.Count(out, ": Pebble blob file, format 1, ") != len(blobs) {
		t.Fatalf("blob dump: exit %d, %q:\n%s", code, errOut, out)
	}
	// db get: Pebble's answer, or, while the sstable reader does not tell
	// values in blob files apart, a refusal of the tables holding them.
	for _, k := range probeKeys[:len(probeKeys)-1] {
		cmd := []string{"db", "get", "--value-format", "hex", ps.dir, k}
		out, errOut, code := runTool(cmd...)
		expectOneLine(t, cmd, ps.dir, errOut, code)
		want, ok := ps.gets[k]
		switch {
		case code == 1 && strings.Contains(errOut, "references blob files"):
		case ok && (code != 0 || out != hex.EncodeToString([]byte(*want))+"\n"):
			t.Fatalf("db get %s: exit %d, %q %q; Pebble %q", k, code, out, errOut, *want)
		case !ok && (code != 1 || !strings.Contains(errOut, "not found")):
			t.Fatalf("db get %s: exit %d, %q %q; Pebble has none", k, code, out, errOut)
		}
	}
}
