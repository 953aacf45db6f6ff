package bloomkv

import (
	"errors"
	"testing"

	"github.com/bloomkv/bloomkv/vfs"
)

// TestTableOpenFailureIsNotShared: a table open that failed (a transient
// I/O error) is reported by the call that made it, and neither a call that
// found the failed entry nor a later one gets that error: each opens the
// table again.
func TestTableOpenFailureIsNotShared(t *testing.T) {
	mem := vfs.NewMem()
	d := mustOpen(t, "/db", memOpts(mem))
	if err := d.Set([]byte("k"), []byte("v"), NoSync); err != nil {
		t.Fatal(err)
	}
	if err := d.Flush(); err != nil {
		t.Fatal(err)
	}
	meta := newestTable(d)
	num := meta.FileNum
	d.Close()

	efs := vfs.NewErrorFS(mem)
	tc := &tableCache{fs: efs, dir: "/db", tables: map[uint64]*openTable{}}
	defer tc.close()
	open := vfs.OpOpen
	efs.SetInjector(vfs.FailOnce(&open, 0))
	if _, err := tc.get(meta); !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("the open that meets the fault: %v", err)
	}
	if r, err := tc.get(meta); err != nil || r == nil {
		t.Fatalf("the next open: %v", err)
	}

	// A call that finds another call's failed entry (as it would while
	// that call, a compaction say, was failing) opens the table itself.
	failed := &openTable{err: errors.New("another call's failed open")}
	failed.once.Do(func() {})
	tc.evict(num)
	tc.tables[num] = failed
	if r, err := tc.get(meta); err != nil || r == nil {
		t.Fatalf("a call that found a failed entry: %v", err)
	}
	tc.mu.Lock()
	good := tc.tables[num]
	tc.mu.Unlock()
	if good == nil || good == failed || good.r == nil {
		t.Fatal("the table's entry is not the reopened one")
	}
}

// TestTableCacheForgets: a table evicted is opened again by the next get,
// not served from the lookup without the lock; after close, a get of a
// table opened before is ErrClosed.
func TestTableCacheForgets(t *testing.T) {
	mem := vfs.NewMem()
	d := mustOpen(t, "/db", memOpts(mem))
	if err := d.Set([]byte("k"), []byte("v"), NoSync); err != nil {
		t.Fatal(err)
	}
	if err := d.Flush(); err != nil {
		t.Fatal(err)
	}
	meta := newestTable(d)
	d.Close()

	tc := &tableCache{fs: mem, dir: "/db", tables: map[uint64]*openTable{}}
	first, err := tc.get(meta)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := tc.get(meta); err != nil || again != first {
		t.Fatalf("second get = %p, %v; want the open table %p", again, err, first)
	}
	tc.evict(meta.FileNum)
	reopened, err := tc.get(meta)
	if err != nil || reopened == first {
		t.Fatalf("get after evict = %p, %v; want a new open of the table", reopened, err)
	}
	if err := tc.close(); err != nil {
		t.Fatal(err)
	}
	if _, err := tc.get(meta); !errors.Is(err, ErrClosed) {
		t.Fatalf("get after close: %v, want ErrClosed", err)
	}
}
