package bloomkv

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/manifest"
	"github.com/bloomkv/bloomkv/sstable"
	"github.com/bloomkv/bloomkv/vfs"
)

// TestCompactionKeepsNewestAndDropsTheRest writes overwrites and deletes over
// many flushes, so level 0 is compacted into level 1 repeatedly, and checks
// every key against a model, before and after reopening; compacted tables'
// files are gone.
func TestCompactionKeepsNewestAndDropsTheRest(t *testing.T) {
	fs := vfs.NewMem()
	o := memOpts(fs)
	var mu sync.Mutex
	var began, ended []CompactionInfo
	o.EventListener.CompactionBegin = func(i CompactionInfo) { mu.Lock(); began = append(began, i); mu.Unlock() }
	o.EventListener.CompactionEnd = func(i CompactionInfo) { mu.Lock(); ended = append(ended, i); mu.Unlock() }
	d := mustOpen(t, "/db", o)
	model := map[string]string{}
	r := rand.New(rand.NewPCG(5, 5))
	for i := range 20_000 {
		k := fmt.Sprintf("key%05d", r.IntN(3000))
		if r.IntN(5) == 0 {
			if err := d.Delete([]byte(k), NoSync); err != nil {
				t.Fatal(err)
			}
			delete(model, k)
			continue
		}
		v := fmt.Sprintf("v%d-%s", i, strings.Repeat("x", r.IntN(200)))
		if err := d.Set([]byte(k), []byte(v), NoSync); err != nil {
			t.Fatal(err)
		}
		model[k] = v
	}
	if err := d.Flush(); err != nil {
		t.Fatal(err)
	}
	check := func(d *DB) {
		for i := range 3000 {
			k := fmt.Sprintf("key%05d", i)
			expect(t, d, k, model[k])
		}
	}
	check(d)
	waitForCompactions(t, d) // a running compaction's outputs are not yet in the version
	m := d.Metrics()
	// A store this small has the last level for base.
	if m.Compactions == 0 || m.Levels[6].Files == 0 || m.Levels[0].Files >= o.withDefaultsMust(t).L0StopWritesThreshold {
		t.Fatalf("no compaction into the base level, L6: %+v", m)
	}
	// Every table file on disk is one the version holds.
	names, _ := fs.List("/db")
	onDisk := 0
	for _, n := range names {
		if k, _ := parseName(n); k == kindTable {
			onDisk++
		}
	}
	held := 0
	for _, l := range m.Levels {
		held += l.Files
	}
	if onDisk != held {
		t.Fatalf("%d tables on disk, %d in the version: compacted tables were not deleted", onDisk, held)
	}
	d.Close()
	mu.Lock()
	// The first table moves into the empty last level; later ones merge.
	merge := slices.IndexFunc(ended, func(i CompactionInfo) bool { return !i.Move && i.FromLevel == 0 })
	if len(began) == 0 || len(ended) != len(began) || merge < 0 {
		t.Fatalf("compaction events: %d began, %d ended, %d of them merges", len(began), len(ended), merge+1)
	}
	if e := ended[merge]; e.Err != nil || len(e.Inputs) < 2 || len(e.Outputs) == 0 || e.BytesOut == 0 || e.ToLevel != 6 {
		t.Fatalf("first merge %+v", e)
	}
	mu.Unlock()
	d = mustOpen(t, "/db", o)
	defer d.Close()
	check(d)
}

// TestCompactionKeepsTheEmptyKeyDeleted: the empty key, deleted after being
// set, stays deleted through a compaction that drops its tombstone (review
// finding: the merge took a nil previous key for "none seen").
func TestCompactionKeepsTheEmptyKeyDeleted(t *testing.T) {
	o := memOpts(vfs.NewMem())
	o.L0CompactionThreshold = 1 // the first table moves down, the second merges with it
	d := mustOpen(t, "/db", o)
	defer d.Close()
	d.Set([]byte(""), []byte("old"), NoSync)
	d.Set([]byte("a"), []byte("1"), NoSync)
	d.Flush()
	d.Delete([]byte(""), NoSync)
	d.Set([]byte("b"), []byte("2"), NoSync)
	d.Flush()
	for d.Metrics().Compactions == 0 {
		runtime.Gosched()
	}
	expect(t, d, "", "")
	expect(t, d, "a", "1")
	expect(t, d, "b", "2")
}

// TestDataLandsOnSeveralLevels: with small level targets, writes flow down
// through L1 and beyond by score, every level stays within its invariants,
// and every key reads back.
func TestDataLandsOnSeveralLevels(t *testing.T) {
	o := &Options{FS: vfs.NewMem(), Logger: quietLogger(), MemTableSize: 256 << 10,
		LBaseMaxBytes: 512 << 10, TargetFileSize: 128 << 10, MaxConcurrentCompactions: 2}
	d := mustOpen(t, "/db", o)
	defer d.Close()
	const n = 60_000
	fillKeys(t, d, n, 100)
	if err := d.Flush(); err != nil {
		t.Fatal(err)
	}
	waitForCompactions(t, d)
	m := d.Metrics()
	used := 0
	for l := 1; l < 7; l++ {
		if m.Levels[l].Files > 0 {
			used++
		}
		if l < 6 && m.Levels[l].Score >= 1.5 {
			t.Errorf("L%d left at score %.2f", l, m.Levels[l].Score)
		}
	}
	if used < 2 {
		t.Fatalf("data on %d levels below L0, want several:\n%s", used, m)
	}
	for i := 0; i < 2*n; i += 97 {
		_, err := d.Get(levelKey(i))
		if (i%2 == 0) != (err == nil) {
			t.Fatalf("Get(%s): %v", levelKey(i), err)
		}
	}
	it, _ := d.NewIter(nil)
	count := 0
	for ok := it.First(); ok; ok = it.Next() {
		count++
	}
	if err := it.Close(); err != nil || count != n {
		t.Fatalf("scan found %d keys (%v), want %d", count, err, n)
	}
	t.Logf("\n%s", d.Metrics())
}

// TestCloseWaitsForCompact: Close waits for a Compact under way (a review
// found Close returning, and releasing the directory, while Compact still
// wrote tables).
func TestCloseWaitsForCompact(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	fs := vfs.NewMem()
	o := &Options{FS: fs, Logger: quietLogger()}
	o.EventListener.CompactionBegin = func(info CompactionInfo) {
		if info.Manual {
			once.Do(func() { close(started); <-release })
		}
	}
	d := mustOpen(t, "/db", o)
	// A table in the last level (the first moves there), then newer
	// versions over it, which Compact must merge into it.
	fillKeys(t, d, 1000, 10)
	if err := d.Flush(); err != nil {
		t.Fatal(err)
	}
	waitForCompactions(t, d)
	fillKeys(t, d, 1000, 10)
	compacted := make(chan error, 1)
	go func() { compacted <- d.Compact(nil, nil) }()
	<-started
	closed := make(chan error, 1)
	go func() { closed <- d.Close() }()
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while Compact was running", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	// Finished, or stopped by Close, its outputs deleted; either way
	// before Close returned.
	if err := <-compacted; err != nil && !errors.Is(err, ErrClosed) {
		t.Fatalf("Compact: %v", err)
	}
	assertNoLeftovers(t, fs, "/db")
}

// TestCompactDropsWhatSnapshotsNoLongerNeed: deletions kept in the last
// level for an open snapshot are dropped by the next Compact after the
// snapshot closes, and the snapshot read its view throughout.
func TestCompactDropsWhatSnapshotsNoLongerNeed(t *testing.T) {
	d := mustOpen(t, "/db", &Options{FS: vfs.NewMem(), Logger: quietLogger()})
	defer d.Close()
	fillKeys(t, d, 1000, 10)
	snap, err := d.NewSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	if err := d.DeleteRange(levelKey(0), levelKey(1000), NoSync); err != nil {
		t.Fatal(err)
	}
	if err := d.Delete(levelKey(1500), NoSync); err != nil {
		t.Fatal(err)
	}
	if err := d.Compact(nil, nil); err != nil {
		t.Fatal(err)
	}
	deletions := func() (n uint64) {
		s := d.acquire()
		defer d.release(s)
		for f := range s.version.Level(6) {
			r, err := d.tables.get(f)
			if err != nil {
				t.Fatal(err)
			}
			n += r.Properties().NumDeletions
		}
		return n
	}
	if deletions() == 0 {
		t.Fatal("the compaction dropped deletions an open snapshot needs")
	}
	for _, k := range []int{0, 998, 1500} {
		if _, err := snap.Get(levelKey(k)); err != nil {
			t.Fatalf("snapshot Get(%s): %v", levelKey(k), err)
		}
		if _, err := d.Get(levelKey(k)); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Get(%s) = %v after its deletion", levelKey(k), err)
		}
	}
	if err := snap.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := snap.Get(levelKey(0)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Get on a closed snapshot: %v", err)
	}
	if err := d.Compact(nil, nil); err != nil {
		t.Fatal(err)
	}
	if n := deletions(); n != 0 {
		t.Fatalf("%d deletions left in the last level with no snapshot open", n)
	}
	for _, k := range []int{0, 998, 1500} {
		if _, err := d.Get(levelKey(k)); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Get(%s) = %v after compaction", levelKey(k), err)
		}
	}
	if _, err := d.Get(levelKey(1000)); err != nil { // the range's end is not in it
		t.Fatalf("Get(%s) = %v", levelKey(1000), err)
	}
}

// TestBottomCompactionZeroesSequenceNumbers: a compaction into the bottom
// writes the versions every snapshot sees with sequence number 0 and keeps
// the sequence numbers of those an open snapshot does not see; reads,
// snapshot reads, later writes and range deletions over the zeroed keys, and
// a reopen, are unaffected.
func TestBottomCompactionZeroesSequenceNumbers(t *testing.T) {
	fs := vfs.NewMem()
	o := &Options{FS: fs, Logger: quietLogger()}
	d := mustOpen(t, "/db", o)
	defer func() { d.Close() }()
	const n = 1000
	for i := range n {
		if err := d.Set(levelKey(i), []byte("old"), NoSync); err != nil {
			t.Fatal(err)
		}
	}
	snap, err := d.NewSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		d.Set(levelKey(i), []byte("new"), NoSync)
	}
	for i := 100; i < 110; i++ {
		d.Delete(levelKey(i), NoSync)
	}
	if err := d.DeleteRange(levelKey(200), levelKey(210), NoSync); err != nil {
		t.Fatal(err)
	}
	// lastLevel counts the last level's point entries by whether their
	// sequence number is 0, and checks the manifest's sequence bounds.
	lastLevel := func() (zero, other int) {
		t.Helper()
		s := d.acquire()
		defer d.release(s)
		for l := range manifest.NumLevels - 1 {
			if n := s.version.NumFiles(l); n != 0 {
				t.Fatalf("L%d holds %d tables after Compact", l, n)
			}
		}
		for f := range s.version.Level(manifest.NumLevels - 1) {
			r, err := d.tables.get(f)
			if err != nil {
				t.Fatal(err)
			}
			it := r.NewCompactionIter()
			lo := base.SeqNumMax
			for ok := it.First(); ok; ok = it.Next() {
				seq := it.Key().SeqNum()
				lo = min(lo, seq)
				if seq == 0 {
					zero++
				} else {
					other++
				}
			}
			if err := it.Close(); err != nil {
				t.Fatal(err)
			}
			if lo < f.SmallestSeq {
				t.Fatalf("table %d holds sequence number %d below its manifest bound %d", f.FileNum, lo, f.SmallestSeq)
			}
		}
		return zero, other
	}
	if err := d.Compact(nil, nil); err != nil {
		t.Fatal(err)
	}
	// The snapshot sees every "old" version, so all n are zeroed; the 100
	// overwrites and 10 deletions after it keep theirs.
	if zero, other := lastLevel(); zero != n || other != 110 {
		t.Fatalf("with a snapshot open: %d entries with sequence number 0 (want %d), %d others (want 110)", zero, n, other)
	}
	for _, k := range []int{0, 99, 100, 109, 200, 209, 999} {
		if v, err := snap.Get(levelKey(k)); err != nil || string(v) != "old" {
			t.Fatalf("snapshot Get(%s) = %q, %v; want old", levelKey(k), v, err)
		}
	}
	expect(t, d, string(levelKey(0)), "new")
	expect(t, d, string(levelKey(99)), "new")
	expect(t, d, string(levelKey(100)), "")
	expect(t, d, string(levelKey(205)), "")
	expect(t, d, string(levelKey(210)), "old")
	if err := snap.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.Compact(nil, nil); err != nil {
		t.Fatal(err)
	}
	if zero, other := lastLevel(); zero != n-20 || other != 0 {
		t.Fatalf("no snapshot open: %d entries with sequence number 0 (want %d), %d others (want 0)", zero, n-20, other)
	}
	if _, err := d.Check(); err != nil {
		t.Fatal(err)
	}
	d.Close()
	d = mustOpen(t, "/db", o)
	// Newer writes and range deletions shadow the zeroed versions, in the
	// upper levels and after they too reach the bottom.
	d.Set(levelKey(5), []byte("newer"), NoSync)
	if err := d.DeleteRange(levelKey(300), levelKey(310), NoSync); err != nil {
		t.Fatal(err)
	}
	if err := d.Flush(); err != nil {
		t.Fatal(err)
	}
	check := func() {
		t.Helper()
		expect(t, d, string(levelKey(5)), "newer")
		expect(t, d, string(levelKey(150)), "old")
		expect(t, d, string(levelKey(50)), "new")
		expect(t, d, string(levelKey(305)), "")
		expect(t, d, string(levelKey(310)), "old")
		expect(t, d, string(levelKey(105)), "")
	}
	check()
	if err := d.Compact(nil, nil); err != nil {
		t.Fatal(err)
	}
	check()
	if zero, other := lastLevel(); zero != n-30 || other != 0 {
		t.Fatalf("after the last Compact: %d entries with sequence number 0 (want %d), %d others (want 0)", zero, n-30, other)
	}
	if _, err := d.Check(); err != nil {
		t.Fatal(err)
	}
}

// TestCompactRewritesEachTableOnce: Compact of a store whose data sits in
// level 0, the levels between (5; 4 and 5) and the last level merges them
// all in one compaction: every table is read by one merge, nothing is
// written into the levels between on the way, and every key reads its
// newest value after.
func TestCompactRewritesEachTableOnce(t *testing.T) {
	for _, between := range [][]int{{5}, {4, 5}} {
		t.Run(fmt.Sprintf("L0+%v+L6", between), func(t *testing.T) { testCompactRewritesEachTableOnce(t, between) })
	}
}

func testCompactRewritesEachTableOnce(t *testing.T, between []int) {
	var mu sync.Mutex
	var infos []CompactionInfo
	o := memOpts(vfs.NewMem())
	o.MemTableSize = 256 << 10
	o.L0CompactionThreshold = 8 // the 3 flushes below leave tables in L0
	o.L0StopWritesThreshold = 100
	o.LBaseMaxBytes = 2 << 20 // about 2 MiB of data: level 5 is the base once it holds some
	o.TargetFileSize = 128 << 10
	o.Compression = sstable.NoCompression
	o.EventListener.CompactionEnd = func(c CompactionInfo) {
		mu.Lock()
		defer mu.Unlock()
		infos = append(infos, c)
	}
	d := mustOpen(t, "/db", o)
	defer d.Close()
	const n = 20_000
	fillKeysOrder(t, d, n, 100, true)
	if err := d.Compact(nil, nil); err != nil {
		t.Fatal(err)
	}
	// Tables of the last level up to the levels between, as the level
	// targets leave a store of this size, deterministically: every other
	// one to the base (the highest), every third of the rest below it.
	moveTables(t, d, 6, between[0], func(i int) bool { return i%2 == 0 })
	for _, l := range between[1:] {
		moveTables(t, d, 6, l, func(i int) bool { return i%3 == 0 })
	}
	// Newer versions of every 13th key, across the whole range, in
	// level-0 tables.
	for i := range 1500 {
		if err := d.Set(levelKey(2*13*i), []byte("new"), NoSync); err != nil {
			t.Fatal(err)
		}
		if i%500 == 499 {
			if err := d.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	waitForCompactions(t, d)
	m := d.Metrics()
	for l := range m.Levels {
		if (m.Levels[l].Files == 0) == (l == 0 || slices.Contains(between, l) || l == 6) {
			t.Fatalf("want tables in L0, %v and L6 only; tables per level: %v", between, levelFiles(m))
		}
	}
	// Every table of levels 0 and 5 is to be read once, by a merge into
	// the last level; those of the last level at most once.
	d.mu.Lock()
	mustRead := map[uint64]bool{}
	for _, l := range append([]int{0}, between...) {
		for f := range d.mu.version.Level(l) {
			mustRead[f.FileNum] = true
		}
	}
	d.mu.Unlock()
	mu.Lock()
	infos = nil
	mu.Unlock()
	if err := d.Compact(nil, nil); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	read := map[uint64]int{}
	for _, c := range infos {
		if c.Move || !c.Manual {
			continue
		}
		if c.ToLevel != len(m.Levels)-1 {
			t.Errorf("Compact merged L%d into L%d, not into the last level", c.FromLevel, c.ToLevel)
		}
		for _, f := range c.Inputs {
			read[f]++
		}
	}
	mu.Unlock()
	for f, n := range read {
		if n > 1 {
			t.Errorf("table %d read by %d merges", f, n)
		}
	}
	for f := range mustRead {
		if read[f] == 0 {
			t.Errorf("table %d of level 0 or %v not read by a merge into the last level", f, between)
		}
	}
	for i := range n {
		want := "new"
		if i%13 != 0 || i >= 13*1500 {
			want = ""
		}
		v, err := d.Get(levelKey(2 * i))
		if err != nil {
			t.Fatalf("key %d: %v", 2*i, err)
		}
		if want != "" && string(v) != want {
			t.Fatalf("key %d: %q, want %q", 2*i, v, want)
		}
		if want == "" && len(v) != 100 {
			t.Fatalf("key %d: a value of %d bytes, want the first 100", 2*i, len(v))
		}
	}
	if _, err := d.Check(); err != nil {
		t.Fatal(err)
	}
}

// TestElisionOnlyCompaction: a table of deletions moved whole into the last
// level is rewritten alone, without them, once no open snapshot needs them;
// the data reads the same throughout.
func TestElisionOnlyCompaction(t *testing.T) {
	o := memOpts(vfs.NewMem())
	d := mustOpen(t, "/db", o)
	defer d.Close()
	// A snapshot from before the deletions: it does not see them.
	snap, err := d.NewSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	b := d.NewBatch()
	for i := range 1000 {
		k := fmt.Appendf(nil, "k%04d", i)
		if i%2 == 0 {
			b.Set(k, []byte("v"))
		} else {
			b.Delete(k) // of nothing: only the deletion remains to drop
		}
	}
	if err := d.Apply(b, NoSync); err != nil {
		t.Fatal(err)
	}
	if err := d.Flush(); err != nil {
		t.Fatal(err)
	}
	deletionsInLastLevel := func() (n uint64) {
		d.mu.Lock()
		defer d.mu.Unlock()
		for f := range d.mu.version.Level(manifest.NumLevels - 1) {
			n += f.Deletions
		}
		return n
	}
	waitForCompactions(t, d)
	if n := deletionsInLastLevel(); n != 500 {
		t.Fatalf("with a snapshot open, %d deletions in the last level, want the 500 moved there\n%s", n, d.Metrics())
	}
	if err := snap.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "an elision-only compaction", func() bool { return deletionsInLastLevel() == 0 })
	if m := d.Metrics(); m.Compactions == 0 || m.Levels[6].Files != 1 {
		t.Fatalf("compactions %d, last level %d tables", m.Compactions, m.Levels[6].Files)
	}
	for i := range 1000 {
		want := ""
		if i%2 == 0 {
			want = "v"
		}
		expect(t, d, fmt.Sprintf("k%04d", i), want)
	}
}

// TestL0MoveWaitsForOlderBusyTables: a level-0 table must not move into the
// base while an older level-0 table overlapping it is held by a running
// compaction into a deeper level. The base rises from L6 to L5 while level
// 0's older tables A and B merge into L6 (the newest table C makes the store
// too large for an L6 base); C, newer and overlapping them, then overlaps no
// other table that is not busy and no table of the empty L5. Moved into L5
// while A and B still sit in level 0, its versions are below theirs: a Get
// stops at A's older version, or at A's older range deletion, and never
// reaches C's. (TestModel's wrong reads, with the differential-file filter
// on or off.)
func TestL0MoveWaitsForOlderBusyTables(t *testing.T) {
	for _, filterOff := range []bool{false, true} {
		t.Run(fmt.Sprintf("DisableDiffFilter=%t", filterOff), func(t *testing.T) {
			testL0MoveWaitsForOlderBusyTables(t, filterOff)
		})
	}
}

func testL0MoveWaitsForOlderBusyTables(t *testing.T, filterOff bool) {
	var hold atomic.Bool
	held, gate := make(chan struct{}, 1), make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(gate) }) }
	t.Cleanup(release)
	moved := make(chan struct{}, 16)
	o := memOpts(vfs.NewMem())
	// Uncompressed tables, so that their sizes, and with them the base
	// level, are what the test sets: the store of L6, A and B (about 12
	// KiB) has L6 for base, and with C's 44 KiB, L5.
	o.Compression = sstable.NoCompression
	o.LBaseMaxBytes = 24 << 10
	o.L0CompactionThreshold = 2
	o.MaxConcurrentCompactions = 2
	o.DisableDiffFilter = filterOff
	o.EventListener.CompactionBegin = func(info CompactionInfo) {
		if info.FromLevel == 0 && !info.Move && hold.CompareAndSwap(true, false) {
			held <- struct{}{}
			<-gate
		}
	}
	o.EventListener.CompactionEnd = func(info CompactionInfo) {
		if info.Move && info.Err == nil {
			moved <- struct{}{}
		}
	}
	d := mustOpen(t, "/db", o)
	closeAtCleanup(t, d)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	value := bytes.Repeat([]byte("v"), 100)
	for i := range 100 {
		must(d.Set(fmt.Appendf(nil, "k%03d", i), value, NoSync))
	}
	must(d.Compact(nil, nil))
	waitForCompactions(t, d)

	// A: older versions of k030 and k050, and a range deletion over k041.
	must(d.Set([]byte("k030"), []byte("A"), NoSync))
	must(d.Set([]byte("k050"), []byte("A"), NoSync))
	must(d.DeleteRange([]byte("k040"), []byte("k042"), NoSync))
	must(d.Flush())
	waitForCompactions(t, d) // A overlaps L6's table: it does not move
	// B overlaps A: level 0 two deep merges into L6, held at its start.
	hold.Store(true)
	must(d.Set([]byte("k020"), []byte("B"), NoSync))
	must(d.Set([]byte("k060"), []byte("B"), NoSync))
	must(d.Flush())
	select {
	case <-held:
	case <-time.After(time.Minute):
		t.Fatalf("no merge of level 0 began:\n%s", d.Metrics())
	}
	for len(moved) > 0 {
		<-moved // the first table's, into the empty store's L6
	}
	// C: the newest versions of the three keys, and 44 KiB besides.
	must(d.Delete([]byte("k030"), NoSync))
	must(d.Set([]byte("k041"), []byte("C"), NoSync))
	must(d.Set([]byte("k050"), []byte("C"), NoSync))
	for i := range 400 {
		must(d.Set(fmt.Appendf(nil, "k050-%03d", i), value, NoSync))
	}
	must(d.Flush())
	// Wait until the compaction picker has had its say: nothing but the
	// held merge runs and nothing is due, or C has moved.
	waitFor(t, "the picker to settle", func() bool {
		if len(moved) > 0 {
			return true
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		return len(d.mu.running) == 1 && d.levelScoresLocked(d.mu.version)[0] < 1
	})
	d.mu.Lock()
	base := d.levelTargets(d.mu.version, d.mu.running).base
	d.mu.Unlock()
	if base != 5 {
		t.Fatalf("the base level is L%d with C flushed; the test needs L5", base)
	}
	check := func(when string) {
		t.Helper()
		s := d.acquire()
		bad := false
		for _, err := range d.checkLevels(s.version) { // an older version above a newer one
			t.Errorf("%s: %v", when, err)
			bad = true
		}
		d.release(s)
		for _, c := range []struct{ key, want string }{{"k030", ""}, {"k041", "C"}, {"k050", "C"}, {"k020", "B"}} {
			got, err := d.Get([]byte(c.key))
			if c.want == "" && !errors.Is(err, ErrNotFound) || c.want != "" && (err != nil || string(got) != c.want) {
				t.Errorf("%s: Get(%s) = %q, %v; want %q", when, c.key, got, err, c.want)
				bad = true
			}
		}
		if bad {
			t.Logf("levels:\n%s", d.Metrics())
		}
	}
	check("with the merge of A and B into L6 running")
	release()
	waitForCompactions(t, d)
	check("after it")
}

// TestSeeksCompactLevel0: a level-0 table below the compaction threshold
// stays while nothing reads through it, and is compacted into the base once
// iterator seeks have met it l0MinSeeks times (its size allows no more).
func TestSeeksCompactLevel0(t *testing.T) {
	d := mustOpen(t, "/db", memOpts(vfs.NewMem()))
	defer d.Close()
	for round := range 2 { // the first table moves to the last level; the second, over it, stays
		for i := range 1000 {
			if err := d.Set(levelKey(i), fmt.Appendf(nil, "v%d", round), NoSync); err != nil {
				t.Fatal(err)
			}
		}
		if err := d.Flush(); err != nil {
			t.Fatal(err)
		}
		waitForCompactions(t, d)
	}
	if m := d.Metrics(); m.Levels[0].Files != 1 || m.Levels[6].Files != 1 {
		t.Fatalf("tables per level %v, want one in L0 and one in L6", levelFiles(m))
	}
	it, err := d.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	for i := range l0MinSeeks - 1 {
		if !it.SeekGE(levelKey(i)) || string(it.Value()) != "v1" {
			t.Fatalf("seek %d: %q", i, it.Value())
		}
	}
	waitForCompactions(t, d)
	if n := d.Metrics().Levels[0].Files; n != 1 {
		t.Fatalf("%d level-0 tables after %d seeks, want the one still there", n, l0MinSeeks-1)
	}
	it.SeekGE(levelKey(0))
	waitFor(t, "level 0 compacted after its seeks", func() bool { return d.Metrics().Levels[0].Files == 0 })
	expect(t, d, string(levelKey(5)), "v1")
}

// TestCompactEmptyingTheDifferentialRebuildsTheFilter: a Compact that takes
// every table above the last level into it leaves the differential-file
// filter to a build rather than removing each version it took in. Gets
// during it, and after it, return the model's values; once it returns, the
// filter counts nothing of the levels it emptied, and MayHaveChanged is
// false for the keys written before it.
func TestCompactEmptyingTheDifferentialRebuildsTheFilter(t *testing.T) {
	o := memOpts(vfs.NewMem())
	o.TargetFileSize = 32 << 10
	d := mustOpen(t, "/db", o)
	defer d.Close()
	const n = 4000
	model := map[string]string{}
	for i := range n {
		k, v := fmt.Sprintf("k%05d", i), fmt.Sprintf("v%d", i)
		if err := d.Set([]byte(k), []byte(v), NoSync); err != nil {
			t.Fatal(err)
		}
		model[k] = v
	}
	if err := d.Compact(nil, nil); err != nil {
		t.Fatal(err)
	}
	// Versions above the last level: overwrites and deletions in tables
	// of the levels above it, and in no memtable.
	for i := 0; i < n; i += 3 {
		k := fmt.Sprintf("k%05d", i)
		if i%2 == 0 {
			if err := d.Delete([]byte(k), NoSync); err != nil {
				t.Fatal(err)
			}
			delete(model, k)
		} else {
			v := fmt.Sprintf("w%d", i)
			if err := d.Set([]byte(k), []byte(v), NoSync); err != nil {
				t.Fatal(err)
			}
			model[k] = v
		}
		if i%600 == 0 {
			if err := d.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := d.Flush(); err != nil {
		t.Fatal(err)
	}
	before := d.Metrics().DiffFilter
	if !before.On || before.Keys == 0 {
		t.Fatalf("before Compact the filter is %+v, want on and counting the overwrites", before)
	}
	check := func(k string) error {
		got, err := d.Get([]byte(k))
		want, ok := model[k]
		switch {
		case !ok && !errors.Is(err, ErrNotFound):
			return fmt.Errorf("Get(%s) = %q, %v; want not found", k, got, err)
		case ok && (err != nil || string(got) != want):
			return fmt.Errorf("Get(%s) = %q, %v; want %q", k, got, err, want)
		}
		return nil
	}
	stop := make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		for i := 0; ; i = (i + 7) % n {
			select {
			case <-stop:
				errc <- nil
				return
			default:
			}
			if err := check(fmt.Sprintf("k%05d", i)); err != nil {
				errc <- err
				return
			}
		}
	}()
	err := d.Compact(nil, nil)
	close(stop)
	if rerr := <-errc; rerr != nil {
		t.Fatal(rerr)
	}
	if err != nil {
		t.Fatal(err)
	}
	after := d.Metrics().DiffFilter
	if !after.On || after.Keys != 0 || after.Rebuilds <= before.Rebuilds {
		t.Fatalf("after Compact the filter is %+v (before: %+v), want on, rebuilt and counting nothing", after, before)
	}
	for i := range n {
		k := fmt.Sprintf("k%05d", i)
		if err := check(k); err != nil {
			t.Fatal(err)
		}
		if d.MayHaveChanged([]byte(k)) {
			t.Fatalf("MayHaveChanged(%s) after Compact", k)
		}
	}
}

// TestCompactOutputSyncFailure: a compaction whose output fails to sync
// (on the goroutine that syncs it while the merge goes on) fails, names no
// output, and stops the store's writes; reopened, the store holds every
// key as before.
func TestCompactOutputSyncFailure(t *testing.T) {
	const n = 20000
	mem, efs, d := openLevel0Store(t, n)
	var syncs atomic.Int64
	efs.SetInjector(func(op vfs.Op, name string) error {
		if op == vfs.OpSync && strings.HasSuffix(name, ".sst") && syncs.Add(1) == 2 {
			return fmt.Errorf("injected EIO syncing %s: %w", name, vfs.ErrInjected)
		}
		return nil
	})
	err := d.Compact(nil, nil)
	if !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("Compact with a failing output sync: %v", err)
	}
	if syncs.Load() < 2 {
		t.Fatalf("%d output syncs: the compaction wrote too few outputs to test", syncs.Load())
	}
	if err := d.Set([]byte("x"), nil, NoSync); err == nil {
		t.Fatal("write accepted after a failed compaction")
	}
	expect(t, d, "k01234", syncTestValue(1234, 1))
	d.Close()
	efs.SetInjector(nil)
	d = mustOpen(t, "/db", memOpts(mem))
	defer d.Close()
	for i := range n {
		expect(t, d, fmt.Sprintf("k%05d", i), syncTestValue(i, 1))
	}
	if err := d.Compact(nil, nil); err != nil {
		t.Fatal(err)
	}
	expect(t, d, "k19999", syncTestValue(19999, 1))
}

// TestCompactSyncsOutputsBeforeItsEdit: the outputs of a compaction are
// synced on a goroutine of their own while the merge goes on, and slowly
// here; a crash at the moment the compaction's manifest edit reaches the
// disk still finds every output whole, so every key is read back.
func TestCompactSyncsOutputsBeforeItsEdit(t *testing.T) {
	const n = 20000
	mem, efs, d := openLevel0Store(t, n)
	defer d.Close()
	var mu sync.Mutex
	var crashes []*vfs.MemFS
	keepManifest := func(name string, unsynced int) int {
		if strings.Contains(name, "MANIFEST") {
			return unsynced // the edit reached the disk
		}
		return 0
	}
	efs.SetInjector(func(op vfs.Op, name string) error {
		switch {
		case op == vfs.OpSync && strings.HasSuffix(name, ".sst"):
			time.Sleep(2 * time.Millisecond)
		case op == vfs.OpSync && strings.Contains(name, "MANIFEST"):
			mu.Lock()
			crashes = append(crashes, mem.CrashCloneKeeping(keepManifest))
			mu.Unlock()
		}
		return nil
	})
	if err := d.Compact(nil, nil); err != nil {
		t.Fatal(err)
	}
	efs.SetInjector(nil)
	if len(crashes) == 0 {
		t.Fatal("Compact synced no manifest edit")
	}
	for i, fs := range crashes {
		c, err := Open("/db", memOpts(fs))
		if err != nil {
			t.Fatalf("crash %d: %v", i, err)
		}
		for j := range n {
			expect(t, c, fmt.Sprintf("k%05d", j), syncTestValue(j, 1))
		}
		c.Close()
	}
}

// openLevel0Store opens a store on an ErrorFS over a MemFS whose flushes
// stay in level 0, with outputs of 16 KiB, sets n keys in it (setInTurns)
// and waits for its compactions, so that none runs while Compact does.
func openLevel0Store(t *testing.T, n int) (*vfs.MemFS, *vfs.ErrorFS, *DB) {
	t.Helper()
	mem := vfs.NewMem()
	efs := vfs.NewErrorFS(mem)
	o := memOpts(efs)
	o.TargetFileSize = 16 << 10
	o.L0CompactionThreshold, o.L0StopWritesThreshold = 1000, 1000
	d := mustOpen(t, "/db", o)
	setInTurns(t, d, n)
	waitForCompactions(t, d)
	return mem, efs, d
}

// setInTurns sets keys 0 to n-1 in a shuffled order, twice (the second time
// to their final values, syncTestValue(i, 1)), and flushes: tables of
// overlapping ranges, for a compaction to merge.
func setInTurns(t *testing.T, d *DB, n int) {
	t.Helper()
	r := rand.New(rand.NewPCG(7, 7))
	for round := range 2 {
		for _, i := range r.Perm(n) {
			if err := d.Set([]byte(fmt.Sprintf("k%05d", i)), []byte(syncTestValue(i, round)), NoSync); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := d.Flush(); err != nil {
		t.Fatal(err)
	}
}

// syncTestValue is the value setInTurns gives key i in round round.
func syncTestValue(i, round int) string {
	return fmt.Sprintf("v%d.%d-%x", i, round, uint32(i)*2654435761)
}
