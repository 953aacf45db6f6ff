package bloomkv

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

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

// TestFailedOpenAfterTornWAL: after a crash leaves a torn WAL, an Open that
// fails part way (here: the CURRENT rename) must leave a store the next Open
// recovers (review finding: a new empty WAL made the torn one "not the
// last", and every later Open failed).
func TestFailedOpenAfterTornWAL(t *testing.T) {
	fs := storeWithWAL(t, 20)
	name := walFile(t, fs)
	data := readFile(t, fs, name)
	rewrite(t, fs, name, data[:len(data)-30])
	efs := vfs.NewErrorFS(fs)
	rename := vfs.OpRename
	efs.SetInjector(vfs.FailOnce(&rename, 0))
	if _, err := Open("/db", memOpts(efs)); err == nil {
		t.Fatal("Open succeeded despite the failed rename")
	}
	d := mustOpen(t, "/db", memOpts(fs))
	defer d.Close()
	for i := range 19 {
		expect(t, d, fmt.Sprintf("k%03d", i), strings.Repeat("v", 200))
	}
}

// TestCloseReportsAFailedSync: Close must not pass off a failed WAL sync as
// success by syncing again.
func TestCloseReportsAFailedSync(t *testing.T) {
	efs := vfs.NewErrorFS(vfs.NewMem())
	d := mustOpen(t, "/db", memOpts(efs))
	sync := vfs.OpSync
	efs.SetInjector(vfs.FailOnce(&sync, 0))
	if err := d.Set([]byte("k"), []byte("v"), Sync); err == nil {
		t.Fatal("write with a failed fsync succeeded")
	}
	efs.SetInjector(nil)
	if err := d.Close(); err == nil {
		t.Fatal("Close returned nil after a failed fsync")
	}
}

// TestFlushWaitsForEarlierFreezes: a Flush that finds the memtable empty
// still waits for memtables frozen before it (review finding).
func TestFlushWaitsForEarlierFreezes(t *testing.T) {
	fs := newSlowFS(t)
	d := mustOpen(t, "/db", memOpts(fs))
	defer d.Close()
	d.Set([]byte("k"), []byte("v"), NoSync)
	first := make(chan error)
	go func() { first <- d.Flush() }() // freezes the memtable; its flush waits on the gate
	for d.Metrics().ImmutableMemTables == 0 {
		runtimeGosched()
	}
	second := make(chan int)
	go func() {
		if err := d.Flush(); err != nil {
			t.Error(err)
		}
		second <- d.Metrics().Levels[0].Files // at the moment it returns
	}()
	// Give the second Flush time to find the memtable empty (a wrong
	// implementation returns then); the check is what it sees on return.
	time.Sleep(20 * time.Millisecond)
	fs.open()
	if n := <-second; n != 1 {
		t.Fatalf("the second Flush returned with %d L0 tables, before the first memtable was flushed", n)
	}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
}
