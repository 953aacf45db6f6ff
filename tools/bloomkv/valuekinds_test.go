package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

// sstable scan prints the value of every entry that has one, and find the
// value of every version it lists: a SETWITHDEL (a set a flush wrote over a
// deletion a snapshot kept) and a MERGE operand as well as a SET.
func TestScanAndFindShowEveryValueKind(t *testing.T) {
	dir := t.TempDir()
	opts := &pebble.Options{DisableAutomaticCompactions: true, Logger: quietLogger{}, FormatMajorVersion: pebble.FormatDeleteSizedAndObsolete}
	opts.Experimental.EnableColumnarBlocks = func() bool { return false }
	d, err := pebble.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	d.Set([]byte("a"), []byte("old"), nil)
	d.Flush()
	s := d.NewSnapshot()
	d.Delete([]byte("a"), nil)
	d.Set([]byte("a"), []byte("over-del"), nil)
	d.Merge([]byte("m"), []byte("operand"), nil)
	if err := d.Flush(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	out, _, code := runTool(append([]string{"sstable", "scan"}, files...)...)
	if code != 0 {
		t.Fatalf("sstable scan: exit %d", code)
	}
	for _, want := range []string{`MERGE "operand"`, `SETWITHDEL "over-del"`, `SET "old"`} {
		if !strings.Contains(out, want) {
			t.Errorf("sstable scan: no %s:\n%s", want, out)
		}
	}
	out, _, code = runTool("find", dir, "a")
	if code != 0 {
		t.Fatalf("find: exit %d", code)
	}
	if first := strings.SplitN(out, "\n", 2)[0]; !strings.Contains(first, "SETWITHDEL") || !strings.Contains(first, "over-del") {
		t.Errorf("find: the SETWITHDEL line has no value:\n%s", out)
	}
}
