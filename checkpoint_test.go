package bloomkv

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/bloomkv/bloomkv/vfs"
)

// contentsOf returns every key and value of d by a forward scan, after
// checking that a backward scan and a Get of each key agree with it.
func contentsOf(t testing.TB, d *DB) map[string]string {
	t.Helper()
	it, err := d.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	fwd := map[string]string{}
	var order []string
	for ok := it.First(); ok; ok = it.Next() {
		fwd[string(it.Key())] = string(it.Value())
		order = append(order, string(it.Key()))
	}
	var back []string
	for ok := it.Last(); ok; ok = it.Prev() {
		back = append(back, string(it.Key()))
		if fwd[string(it.Key())] != string(it.Value()) {
			t.Fatalf("%s: the backward scan reads %.12q, the forward one %.12q", it.Key(), it.Value(), fwd[string(it.Key())])
		}
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	slices.Reverse(back)
	if !slices.IsSorted(order) || len(order) != len(fwd) || !slices.Equal(order, back) {
		t.Fatalf("the scans disagree or are out of order: %d keys forward, %d backward", len(order), len(back))
	}
	for k, v := range fwd {
		got, err := d.Get([]byte(k))
		if err != nil || string(got) != v {
			t.Fatalf("Get(%s) = %.12q, %v; the scan reads %.12q", k, got, err, v)
		}
	}
	return fwd
}

// openCheckpoint opens the store at dir, checks it whole (Check) and returns
// its contents.
func openCheckpoint(t testing.TB, dir string, o *Options) map[string]string {
	t.Helper()
	d, err := Open(dir, o)
	if err != nil {
		t.Fatalf("opening the checkpoint %s: %v", dir, err)
	}
	defer d.Close()
	if _, err := d.Check(); err != nil {
		t.Fatalf("Check of the checkpoint %s: %v", dir, err)
	}
	return contentsOf(t, d)
}

// tableSet returns the file numbers of d's tables.
func tableSet(t testing.TB, d *DB) map[uint64]bool {
	t.Helper()
	levels, err := d.SSTables()
	if err != nil {
		t.Fatal(err)
	}
	out := map[uint64]bool{}
	for _, l := range levels {
		for _, ti := range l {
			out[ti.FileNum] = true
		}
	}
	return out
}

// tablesIn returns the file numbers of the tables in dir.
func tablesIn(t testing.TB, fsys vfs.FS, dir string) map[uint64]bool {
	t.Helper()
	names, err := fsys.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[uint64]bool{}
	for _, n := range names {
		if k, num := parseName(n); k == kindTable {
			out[num] = true
		}
	}
	return out
}

// layeredStore fills d so that its contents come from the last level, level
// 0 and the memtable at once, each overriding the one below, with a range
// deletion and point deletions among them. Background compactions are held
// so that level 0 stays, until release is called (or the test ends); a
// Compact waits for them.
func layeredStore(t *testing.T, d *DB) (release func()) {
	t.Helper()
	fillKeys(t, d, 3000, 100) // key 2i
	if err := d.Compact(nil, nil); err != nil {
		t.Fatal(err)
	}
	release = holdCompactions(t, d)
	for i := 0; i < 6000; i += 7 {
		if err := d.Set(levelKey(i), []byte(fmt.Sprintf("l0-%d", i)), NoSync); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.DeleteRange(levelKey(100), levelKey(200), NoSync); err != nil {
		t.Fatal(err)
	}
	if err := d.Flush(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 6000; i += 11 {
		if err := d.Set(levelKey(i), []byte(fmt.Sprintf("mem-%d", i)), NoSync); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1000; i < 1100; i += 2 {
		if err := d.Delete(levelKey(i), NoSync); err != nil {
			t.Fatal(err)
		}
	}
	m := d.Metrics()
	if m.Levels[0].Files == 0 || m.Levels[6].Files == 0 || m.MemTableSize == 0 {
		t.Fatalf("want data in the memtable, level 0 and level 6; levels %v, memtable %d bytes", levelFiles(m), m.MemTableSize)
	}
	return release
}

// TestCheckpoint: a checkpoint of a store whose data lies in the memtable,
// level 0 and level 6 opens with the same contents, on a MemFS and on the
// operating system's file system (where its tables are hard links). Writes
// to the store and its compactions afterwards leave the checkpoint as it
// was, and the store deletes its obsolete tables as usual.
func TestCheckpoint(t *testing.T) {
	for _, tc := range []struct {
		name      string
		fs        vfs.FS
		dir, ckpt string
	}{
		{"mem", vfs.NewMem(), "/db", "/backups/ckpt"},
		{"os", vfs.Default, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.dir == "" {
				root := t.TempDir()
				tc.dir, tc.ckpt = vfs.Join(root, "db"), vfs.Join(root, "backups", "ckpt")
			}
			d := mustOpen(t, tc.dir, memOpts(tc.fs))
			closeAtCleanup(t, d)
			release := layeredStore(t, d)
			want := contentsOf(t, d)
			tables := tableSet(t, d)

			if err := d.Checkpoint(tc.ckpt); err != nil {
				t.Fatal(err)
			}
			if ok, _ := tc.fs.Exists(tc.ckpt + checkpointTmpSuffix); ok {
				t.Fatal("the temporary directory outlived the checkpoint")
			}
			// Before the checkpoint is opened: its compactions would
			// replace its tables.
			if tc.fs == vfs.Default {
				for num := range tables {
					a, err1 := os.Stat(vfs.Join(tc.dir, tableName(num)))
					b, err2 := os.Stat(vfs.Join(tc.ckpt, tableName(num)))
					if err1 != nil || err2 != nil || !os.SameFile(a, b) {
						t.Fatalf("table %d is not a hard link in the checkpoint (%v, %v)", num, err1, err2)
					}
				}
			}
			// Read-only, so that the checkpoint keeps the tables it was
			// given (a compaction of its own would replace them).
			readOnly := &Options{FS: tc.fs, ReadOnly: true, Logger: quietLogger()}
			if got := openCheckpoint(t, tc.ckpt, readOnly); !maps.Equal(got, want) {
				t.Fatalf("the checkpoint differs from the store: %s", diffSummary(got, want))
			}

			// The store goes on: new writes, then everything compacted.
			release()
			for i := range 500 {
				if err := d.Set(levelKey(i), []byte("after"), NoSync); err != nil {
					t.Fatal(err)
				}
			}
			if err := d.Set([]byte("zz-new"), []byte("after"), Sync); err != nil {
				t.Fatal(err)
			}
			if err := d.Compact(nil, nil); err != nil {
				t.Fatal(err)
			}
			expect(t, d, "zz-new", "after")
			live := tableSet(t, d)
			for num := range tables {
				if live[num] {
					t.Fatalf("table %d survived a compaction of everything", num)
				}
			}
			// The checkpoint's pin is gone: the store removes the tables it
			// no longer holds.
			waitFor(t, "the store to remove its obsolete tables", func() bool {
				return maps.Equal(tablesIn(t, tc.fs, tc.dir), tableSet(t, d))
			})
			// The checkpoint is as it was, its tables whole, read-only and
			// then as a store that takes writes.
			if !maps.Equal(tablesIn(t, tc.fs, tc.ckpt), tables) {
				t.Fatalf("the checkpoint's tables are %v, want %v", tablesIn(t, tc.fs, tc.ckpt), tables)
			}
			for _, o := range []*Options{readOnly, memOpts(tc.fs)} {
				if got := openCheckpoint(t, tc.ckpt, o); !maps.Equal(got, want) {
					t.Fatalf("the checkpoint changed after the store's writes and compaction: %s", diffSummary(got, want))
				}
			}
			if err := d.Checkpoint(tc.ckpt); !errors.Is(err, fs.ErrExist) {
				t.Fatalf("a checkpoint into an existing directory: %v, want fs.ErrExist", err)
			}
		})
	}
}

// TestCheckpointCopies: where the file system cannot link, the tables are
// copied.
func TestCheckpointCopies(t *testing.T) {
	e := vfs.NewErrorFS(vfs.NewMem())
	d := mustOpen(t, "/db", memOpts(e))
	closeAtCleanup(t, d)
	layeredStore(t, d)
	want := contentsOf(t, d)
	var links atomic.Int64
	e.SetInjector(func(op vfs.Op, name string) error {
		if op == vfs.OpLink {
			links.Add(1)
			return &os.LinkError{Op: "link", Old: name, New: "?", Err: errors.ErrUnsupported}
		}
		return nil
	})
	if err := d.Checkpoint("/ckpt"); err != nil {
		t.Fatal(err)
	}
	e.SetInjector(nil)
	if n := int64(len(tableSet(t, d))); links.Load() != n {
		t.Fatalf("%d links tried for %d tables", links.Load(), n)
	}
	if got := openCheckpoint(t, "/ckpt", memOpts(e)); !maps.Equal(got, want) {
		t.Fatalf("the copied checkpoint differs: %s", diffSummary(got, want))
	}
}

// TestCheckpointPinsTables: a compaction that runs while the checkpoint
// links its tables removes none of them from under it.
func TestCheckpointPinsTables(t *testing.T) {
	e := vfs.NewErrorFS(vfs.NewMem())
	d := mustOpen(t, "/db", memOpts(e))
	closeAtCleanup(t, d)
	layeredStore(t, d)()
	want := contentsOf(t, d)
	before := tableSet(t, d)
	var compacted atomic.Bool
	var compactErr error
	e.SetInjector(func(op vfs.Op, name string) error {
		if op == vfs.OpLink && compacted.CompareAndSwap(false, true) {
			compactErr = d.Compact(nil, nil)
		}
		return nil
	})
	if err := d.Checkpoint("/ckpt"); err != nil {
		t.Fatal(err)
	}
	e.SetInjector(nil)
	if !compacted.Load() || compactErr != nil {
		t.Fatalf("no compaction during the checkpoint (%v)", compactErr)
	}
	for num := range before {
		if tableSet(t, d)[num] {
			t.Fatalf("table %d survived the compaction", num)
		}
	}
	if got := openCheckpoint(t, "/ckpt", memOpts(e)); !maps.Equal(got, want) {
		t.Fatalf("the checkpoint differs: %s", diffSummary(got, want))
	}
	waitFor(t, "the store to remove its obsolete tables", func() bool {
		return maps.Equal(tablesIn(t, e, "/db"), tableSet(t, d))
	})
}

// TestCheckpointUnderLoad: with writers running, a checkpoint holds every
// write acknowledged before it began and, of each writer's later writes, a
// prefix, ending no later than the write under way when it returned.
func TestCheckpointUnderLoad(t *testing.T) {
	const writers = 4
	fs := vfs.NewMem()
	d := mustOpen(t, "/db", memOpts(fs)) // small memtables: rotations and flushes under way
	closeAtCleanup(t, d)
	var acked, started [writers]atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := NoSync
			if w%2 == 0 {
				o = Sync
			}
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				started[w].Store(int64(i + 1))
				if err := d.Set(fmt.Appendf(nil, "w%d-%07d", w, i), bytes.Repeat([]byte{byte(i)}, 100), o); err != nil {
					errs <- err
					return
				}
				acked[w].Store(int64(i + 1))
			}
		}()
	}
	for round := range 3 {
		for w := range writers {
			min := int64(100 * (round + 1))
			waitFor(t, "the writers to write", func() bool { return acked[w].Load() >= min })
		}
		var before, after [writers]int64
		for w := range writers {
			before[w] = acked[w].Load()
		}
		dir := fmt.Sprintf("/ckpt%d", round)
		if err := d.Checkpoint(dir); err != nil {
			t.Fatal(err)
		}
		for w := range writers {
			after[w] = started[w].Load()
		}
		got := openCheckpoint(t, dir, memOpts(fs))
		total := 0
		for w := range writers {
			prefix := fmt.Sprintf("w%d-", w)
			n := int64(0)
			for k := range got {
				if strings.HasPrefix(k, prefix) {
					n++
				}
			}
			// The keys held must be exactly the first n.
			for i := range n {
				k := fmt.Sprintf("w%d-%07d", w, i)
				if v, ok := got[k]; !ok || v != string(bytes.Repeat([]byte{byte(i)}, 100)) {
					t.Fatalf("round %d: writer %d: the checkpoint holds %d keys but not %s: not a prefix", round, w, n, k)
				}
			}
			total += int(n)
			if n < before[w] || n > after[w] {
				t.Fatalf("round %d: writer %d: the checkpoint holds its first %d writes; %d were acknowledged before it began, %d begun when it returned",
					round, w, n, before[w], after[w])
			}
		}
		if total != len(got) {
			t.Fatalf("round %d: the checkpoint holds %d keys no writer wrote", round, len(got)-total)
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// TestCheckpointCrash: a crash at any point of a checkpoint leaves the store
// with every synced write, and the checkpoint's directory either absent or
// whole; a checkpoint to the same directory after the crash succeeds (it
// removes what the one cut short left). Tables linked, and copied.
func TestCheckpointCrash(t *testing.T) {
	for _, copyTables := range []bool{false, true} {
		t.Run(fmt.Sprintf("copy=%v", copyTables), func(t *testing.T) {
			m := vfs.NewMem()
			e := vfs.NewErrorFS(m)
			d := mustOpen(t, "/db", memOpts(e))
			closeAtCleanup(t, d)
			want := map[string]string{}
			for i := range 1500 {
				k, v := fmt.Sprintf("k%05d", i), fmt.Sprintf("v%d", i)
				if err := d.Set([]byte(k), []byte(v), Sync); err != nil {
					t.Fatal(err)
				}
				want[k] = v
				switch i {
				case 500:
					if err := d.Compact(nil, nil); err != nil {
						t.Fatal(err)
					}
				case 1000:
					if err := d.Flush(); err != nil {
						t.Fatal(err)
					}
				}
			}
			waitForCompactions(t, d)

			// A crash image before each operation that changes the file
			// system, keeping random parts of unsynced bytes.
			keep := rand.New(rand.NewPCG(7, 7))
			var mu sync.Mutex
			var images []*vfs.MemFS
			snap := func() {
				mu.Lock()
				defer mu.Unlock()
				images = append(images, m.CrashCloneKeeping(func(string, int) int { return keep.IntN(1 << 16) }))
			}
			e.SetInjector(func(op vfs.Op, name string) error {
				switch op {
				case vfs.OpRead, vfs.OpOpen, vfs.OpList, vfs.OpExists:
					return nil
				case vfs.OpLink:
					if copyTables {
						return &os.LinkError{Op: "link", Old: name, New: "?", Err: errors.ErrUnsupported}
					}
				}
				snap()
				return nil
			})
			if err := d.Checkpoint("/ckpt"); err != nil {
				t.Fatal(err)
			}
			e.SetInjector(nil)
			snap()

			var absent, whole, retried int
			for i, img := range images {
				src, err := Open("/db", memOpts(img))
				if err != nil {
					t.Fatalf("image %d: the store does not open: %v", i, err)
				}
				if got := contentsOf(t, src); !maps.Equal(got, want) {
					t.Fatalf("image %d: the store lost synced writes: %s", i, diffSummary(got, want))
				}
				exists, _ := img.Exists("/ckpt")
				if !exists {
					absent++
					if _, err := Open("/ckpt", &Options{FS: img, ReadOnly: true, Logger: quietLogger()}); err == nil {
						t.Fatalf("image %d: a store opens in the absent checkpoint directory", i)
					}
					if ok, _ := img.Exists("/ckpt" + checkpointTmpSuffix); ok {
						retried++
					}
					if err := src.Checkpoint("/ckpt"); err != nil {
						t.Fatalf("image %d: a checkpoint after the crash: %v", i, err)
					}
				} else {
					whole++
				}
				if err := src.Close(); err != nil {
					t.Fatal(err)
				}
				if got := openCheckpoint(t, "/ckpt", memOpts(img)); !maps.Equal(got, want) {
					t.Fatalf("image %d (checkpoint present after the crash: %v): the checkpoint differs: %s", i, exists, diffSummary(got, want))
				}
			}
			if absent == 0 || whole == 0 || retried == 0 {
				t.Fatalf("%d images: the checkpoint absent in %d (a temporary directory left in %d), whole in %d; want some of each",
					len(images), absent, retried, whole)
			}
			t.Logf("%d crash images: checkpoint absent in %d (temporary directory left in %d), whole in %d", len(images), absent, retried, whole)
		})
	}
}

// TestCheckpointReadOnly: a read-only store is checkpointed with the writes
// its logs hold.
func TestCheckpointReadOnly(t *testing.T) {
	fs := storeWithWAL(t, 50) // writes in the WAL alone
	d, err := Open("/db", &Options{FS: fs, ReadOnly: true, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	want := contentsOf(t, d)
	if len(want) != 50 {
		t.Fatalf("the store holds %d keys, want 50", len(want))
	}
	if err := d.Checkpoint("/ckpt"); err != nil {
		t.Fatal(err)
	}
	if got := openCheckpoint(t, "/ckpt", memOpts(fs)); !maps.Equal(got, want) {
		t.Fatalf("the checkpoint differs: %s", diffSummary(got, want))
	}
}

// TestCheckpointErrors: a closed store, a directory in use by another
// checkpoint, a store whose log failed, and a failure midway, which leaves
// no directory behind and the store working.
func TestCheckpointErrors(t *testing.T) {
	e := vfs.NewErrorFS(vfs.NewMem())
	d := mustOpen(t, "/db", memOpts(e))
	closeAtCleanup(t, d)
	if err := d.Set([]byte("k"), []byte("v"), Sync); err != nil {
		t.Fatal(err)
	}

	// Another checkpoint to the same directory is under way.
	if err := e.MkdirAll("/busy" + checkpointTmpSuffix); err != nil {
		t.Fatal(err)
	}
	l, err := e.Lock(vfs.Join("/busy"+checkpointTmpSuffix, lockName))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Checkpoint("/busy"); !errors.Is(err, vfs.ErrLocked) {
		t.Fatalf("a checkpoint to a directory another is building: %v, want ErrLocked", err)
	}
	l.Close()

	// A stale temporary directory, with junk in it, is emptied.
	junk, err := e.Create(vfs.Join("/busy"+checkpointTmpSuffix, "000099.sst"))
	if err != nil {
		t.Fatal(err)
	}
	junk.Write([]byte("junk"))
	junk.Close()
	if err := d.Checkpoint("/busy"); err != nil {
		t.Fatal(err)
	}
	if ok, _ := e.Exists("/busy/000099.sst"); ok {
		t.Fatal("a stale file of the temporary directory reached the checkpoint")
	}

	// Each failure midway returns the error and leaves nothing behind.
	for _, op := range []vfs.Op{vfs.OpCreate, vfs.OpWrite, vfs.OpSync, vfs.OpRename, vfs.OpSyncDir} {
		e.SetInjector(func(o vfs.Op, name string) error {
			if o == op && strings.HasPrefix(name, "/fail") {
				return &os.PathError{Op: o.String(), Path: name, Err: vfs.ErrInjected}
			}
			return nil
		})
		err := d.Checkpoint("/fail")
		e.SetInjector(nil)
		if !errors.Is(err, vfs.ErrInjected) {
			t.Fatalf("%s failing: %v", op, err)
		}
		for _, dir := range []string{"/fail", "/fail" + checkpointTmpSuffix} {
			if ok, _ := e.Exists(dir); ok {
				t.Fatalf("%s failing left %s", op, dir)
			}
		}
	}
	if err := d.Checkpoint("/ok"); err != nil {
		t.Fatal(err)
	}
	if got := openCheckpoint(t, "/ok", memOpts(e)); got["k"] != "v" {
		t.Fatalf("the checkpoint after the failures: %v", got)
	}
	expect(t, d, "k", "v")

	// A store whose log failed holds writes its log lacks.
	e.SetInjector(func(o vfs.Op, name string) error {
		if o == vfs.OpSync && strings.HasSuffix(name, ".log") {
			return &os.PathError{Op: o.String(), Path: name, Err: vfs.ErrInjected}
		}
		return nil
	})
	if err := d.Set([]byte("k2"), []byte("v"), Sync); err == nil {
		t.Fatal("a synced write succeeded with its sync failing")
	}
	e.SetInjector(nil)
	if err := d.Checkpoint("/after-failure"); !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("a checkpoint of a store whose log failed: %v", err)
	}
	if ok, _ := e.Exists("/after-failure"); ok {
		t.Fatal("the refused checkpoint left its directory")
	}

	d.Close()
	if err := d.Checkpoint("/closed"); !errors.Is(err, ErrClosed) {
		t.Fatalf("a checkpoint of a closed store: %v, want ErrClosed", err)
	}
}
