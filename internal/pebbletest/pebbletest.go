// Package pebbletest holds what tests of several packages use to read files
// with Pebble's own readers, the oracle they are checked against. Only
// tests import it.
package pebbletest

import (
	"context"
	"testing"

	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// OpenTable opens the table file at path with Pebble's sstable reader,
// closed when the test ends.
func OpenTable(t testing.TB, path string) *sstable.Reader {
	t.Helper()
	f, err := vfs.Default.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	readable, err := sstable.NewSimpleReadable(f)
	if err != nil {
		t.Fatal(err)
	}
	r, err := sstable.NewReader(context.Background(), readable, sstable.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}
