package bloomkv

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/bloomkv/bloomkv/vfs"
)

// TestReadsHoldTheirTables: a read that took a state before a compaction
// still reads the tables that state names, after the compaction replaced
// them.
func TestReadsHoldTheirTables(t *testing.T) {
	d := mustOpen(t, "/db", memOpts(vfs.NewMem()))
	closeAtCleanup(t, d)
	release := holdCompactions(t, d)
	for i := range 4 {
		for j := range 200 {
			// Overlapping tables, which merge (disjoint ones would move).
			d.Set([]byte(fmt.Sprintf("k%03d-%d", j, i)), []byte("v"), NoSync)
		}
		d.Flush()
	}
	old := d.acquire() // pins the four L0 tables
	release()          // let the compaction run
	for d.Metrics().Compactions == 0 {
		runtime.Gosched()
	}
	if n := old.version.NumFiles(0); n != 4 {
		t.Fatalf("pinned state has %d L0 tables", n)
	}
	v, err := d.get(old, []byte("k100-2"), old.version.Files(0)[0].LargestSeq+1)
	if err != nil || string(v) != "v" {
		t.Fatalf("read through a pinned state after compaction: %q, %v", v, err)
	}
	d.release(old)
	expect(t, d, "k199-3", "v")
}
