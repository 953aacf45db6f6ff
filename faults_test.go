package bloomkv

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/bloomkv/bloomkv/internal/vfs"
)

// TestWALSyncFailure: a failed fsync fails its write and every later write
// (it is never retried as if it had succeeded); reads keep working; after the
// fault is gone and the store reopened, every acknowledged write is there.
func TestWALSyncFailure(t *testing.T) {
	mem := vfs.NewMem()
	efs := vfs.NewErrorFS(mem)
	d := mustOpen(t, "/db", memOpts(efs))
	for i := range 10 {
		if err := d.Set([]byte(fmt.Sprintf("k%d", i)), []byte("v"), Sync); err != nil {
			t.Fatal(err)
		}
	}
	efs.SetInjector(func(op vfs.Op, name string) error {
		if op == vfs.OpSync && strings.HasSuffix(name, ".log") {
			return errors.New("EIO")
		}
		return nil
	})
	if err := d.Set([]byte("lost"), []byte("v"), Sync); err == nil {
		t.Fatal("a Sync write whose fsync failed returned success")
	}
	efs.SetInjector(nil) // the device recovers, but the store must not trust it
	if err := d.Set([]byte("after"), []byte("v"), Sync); err == nil || !strings.Contains(err.Error(), "no more writes") {
		t.Fatalf("write after a failed fsync: %v", err)
	}
	expect(t, d, "k3", "v") // reads work
	d.Close()
	d = mustOpen(t, "/db", memOpts(mem))
	defer d.Close()
	for i := range 10 {
		expect(t, d, fmt.Sprintf("k%d", i), "v")
	}
	if err := d.Set([]byte("again"), []byte("v"), Sync); err != nil {
		t.Fatalf("reopened store refuses writes: %v", err)
	}
}

// TestFlushFailure: a flush that cannot write its table stops writes with a
// clear error and tells the EventListener; the data stays in the WAL and is
// recovered by the next Open.
func TestFlushFailure(t *testing.T) {
	mem := vfs.NewMem()
	efs := vfs.NewErrorFS(mem)
	var bgErr error
	o := memOpts(efs)
	o.EventListener.BackgroundError = func(err error) { bgErr = err }
	d := mustOpen(t, "/db", o)
	efs.SetInjector(func(op vfs.Op, name string) error {
		if op == vfs.OpCreate && strings.HasSuffix(name, ".sst") {
			return errors.New("ENOSPC")
		}
		return nil
	})
	for i := range 100 {
		if err := d.Set([]byte(fmt.Sprintf("k%03d", i)), []byte("v"), NoSync); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Flush(); err == nil || !strings.Contains(err.Error(), "ENOSPC") {
		t.Fatalf("Flush with a failing disk: %v", err)
	}
	if err := d.Set([]byte("x"), nil, NoSync); err == nil {
		t.Fatal("write accepted after a failed flush")
	}
	if bgErr == nil {
		t.Fatal("the EventListener was not told")
	}
	expect(t, d, "k050", "v")
	d.Close()
	efs.SetInjector(nil)
	d = mustOpen(t, "/db", memOpts(mem))
	defer d.Close()
	for i := range 100 {
		expect(t, d, fmt.Sprintf("k%03d", i), "v")
	}
}

// TestOpenFailsCleanly: I/O errors during Open return an error and leave
// nothing locked, so a later Open succeeds.
func TestOpenFailsCleanly(t *testing.T) {
	mem := vfs.NewMem()
	d := mustOpen(t, "/db", memOpts(mem))
	d.Set([]byte("k"), []byte("v"), Sync)
	d.Close()
	for op := vfs.OpCreate; op <= vfs.OpLock; op++ {
		efs := vfs.NewErrorFS(mem)
		o := op
		efs.SetInjector(vfs.FailOnce(&o, 0))
		if d, err := Open("/db", memOpts(efs)); err == nil {
			d.Close() // this op is not used by Open, or only after the point of no return
		}
		d := mustOpen(t, "/db", memOpts(mem))
		expect(t, d, "k", "v")
		d.Close()
	}
}
