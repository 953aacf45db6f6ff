package main

import (
	"strings"
	"testing"

	"github.com/bloomkv/bloomkv/vfs"
)

// TestReadProgress: the progress of db check and db diff counts the bytes
// read of the store's tables, through the file system the store is opened
// on: none before the work, all of them after a check.
func TestReadProgress(t *testing.T) {
	f := newFixture(t)
	rc := &readCounter{FS: vfs.Default}
	d, err := openDBOn(f.db, rc)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	total, err := tableBytes(d)
	if err != nil || total == 0 {
		t.Fatalf("table bytes %d, %v", total, err)
	}
	rc.n.Store(0)
	if got := rc.describe("check", total); !strings.HasPrefix(got, "check [....................]   0% 0 B read, the tables hold ") {
		t.Fatalf("before: %q", got)
	}
	if _, err := d.Check(); err != nil {
		t.Fatal(err)
	}
	if read := uint64(rc.n.Load()); read < total {
		t.Fatalf("check read %d bytes of tables of %d", read, total)
	}
	if got := rc.describe("check", total); !strings.Contains(got, "[####################] 100%") {
		t.Fatalf("after: %q", got)
	}
}
