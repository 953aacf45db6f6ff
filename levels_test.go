package bloomkv

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/vfs"
)

// fillKeys writes keys 2i for i in [0, n) (random values of valueSize
// bytes, which do not compress) in batches, so that the odd keys in between
// are absent.
func fillKeys(tb testing.TB, d *DB, n, valueSize int) { fillKeysOrder(tb, d, n, valueSize, false) }

// fillKeysOrder is fillKeys writing in random order when shuffle, so that
// the levels' key ranges overlap.
func fillKeysOrder(tb testing.TB, d *DB, n, valueSize int, shuffle bool) {
	tb.Helper()
	b := d.NewBatch()
	v := make([]byte, valueSize)
	r := rand.New(rand.NewPCG(uint64(n), 1))
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	if shuffle {
		r.Shuffle(n, func(i, j int) { order[i], order[j] = order[j], order[i] })
	}
	for i, k := range order {
		for j := range v {
			v[j] = byte(r.Uint32())
		}
		if err := b.Set(levelKey(2*k), v); err != nil {
			tb.Fatal(err)
		}
		if b.Count() == 1000 || i == n-1 {
			if err := d.Apply(b, NoSync); err != nil {
				tb.Fatal(err)
			}
			b = d.NewBatch()
		}
	}
}

func levelKey(i int) []byte { return fmt.Appendf(nil, "key%013d", i) }

// TestAbsentKeysSkipDataBlocks: in a store of 1M keys compacted to the last
// level, Gets of absent keys inside the tables' ranges consult the last
// level's filters and read a data block in at most 1.5 % of cases at 10
// bits/key, by the store's own metrics (filter passes and block-cache
// accesses: the index and filter are pinned, so every cache access is a
// data block).
func TestAbsentKeysSkipDataBlocks(t *testing.T) {
	n, probes := 1_000_000, 100_000
	if testing.Short() {
		n, probes = 100_000, 20_000
	}
	d := mustOpen(t, "/db", &Options{FS: vfs.NewMem(), Logger: quietLogger(), MemTableSize: 16 << 20})
	defer d.Close()
	fillKeys(t, d, n, 16)
	if err := d.Compact(nil, nil); err != nil {
		t.Fatal(err)
	}
	m := d.Metrics()
	for l := range 6 {
		if m.Levels[l].Files != 0 {
			t.Fatalf("after Compact, L%d holds %d tables:\n%s", l, m.Levels[l].Files, m)
		}
	}
	if m.Levels[6].Files == 0 {
		t.Fatalf("after Compact, the last level is empty:\n%s", m)
	}
	// The tables pin their filters (10 bits a key, at least) and indexes
	// outside the cache; a few index bytes a data block on top.
	if filterBytes := uint64(n) * 10 / 8; m.TableMemory < filterBytes || m.TableMemory > 2*filterBytes {
		t.Errorf("TableMemory %d bytes for %d keys' filters (%d bytes) and indexes", m.TableMemory, n, filterBytes)
	}
	r := rand.New(rand.NewPCG(7, 7))
	for range probes {
		k := levelKey(2*r.IntN(n-1) + 1) // odd: absent, inside the key range
		if _, err := d.Get(k); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Get(%s) = %v, want ErrNotFound", k, err)
		}
	}
	after := d.Metrics()
	probed := after.FilterProbes - m.FilterProbes
	passed := probed - (after.FilterNegatives - m.FilterNegatives)
	fp := after.FilterFalsePositives - m.FilterFalsePositives
	blockReads := (after.BlockCache.Hits + after.BlockCache.Misses) - (m.BlockCache.Hits + m.BlockCache.Misses)
	t.Logf("%d keys in %d last-level tables; %d absent Gets: %d filter probes, %d passed (%.3f%%), %d false positives, %d data-block reads (%.3f%%)",
		n, after.Levels[6].Files, probes, probed, passed, 100*float64(passed)/float64(probes), fp, blockReads, 100*float64(blockReads)/float64(probes))
	// One probe each, of the last level's filter, but for the rare key
	// that falls between two tables.
	if probed > uint64(probes) || probed < uint64(probes)*99/100 {
		t.Errorf("%d filter probes for %d Gets, want one each (the last level's filter)", probed, probes)
	}
	if passed != fp {
		t.Errorf("%d filter passes but %d false positives: every pass of an absent key is one", passed, fp)
	}
	if limit := uint64(probes) * 15 / 1000; passed > limit || blockReads > limit {
		t.Errorf("absent Gets read a data block %d times by the filter count and %d by the cache, over 1.5%% (%d)", passed, blockReads, limit)
	}
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

// waitForCompactions waits until no level is due for compaction and none
// runs.
func waitForCompactions(t testing.TB, d *DB) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for {
		s := d.levelScoresLocked(d.version)
		due := len(d.running) > 0 || len(d.imm) > 0
		for l := range 6 {
			due = due || s[l] >= 1
		}
		if !due || d.bgErr != nil {
			return
		}
		d.cond.Wait()
	}
}

// TestIteratorReportsReadErrors: a table read failing mid-scan stops the
// iterator, and both Error and Close report it (a review found Close
// returning nil for a scan cut short).
func TestIteratorReportsReadErrors(t *testing.T) {
	efs := vfs.NewErrorFS(vfs.NewMem())
	d := mustOpen(t, "/db", &Options{FS: efs, Logger: quietLogger(), CacheSize: 1})
	defer d.Close()
	fillKeys(t, d, 3000, 100)
	if err := d.Compact(nil, nil); err != nil {
		t.Fatal(err)
	}
	it, err := d.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		if n++; n == 100 {
			efs.SetInjector(func(op vfs.Op, name string) error {
				if op == vfs.OpRead && strings.HasSuffix(name, ".sst") {
					return vfs.ErrInjected
				}
				return nil
			})
		}
	}
	efs.SetInjector(nil)
	if n >= 3000 {
		t.Fatalf("the scan read all %d keys despite the failing reads", n)
	}
	if err := it.Error(); !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("Error() = %v, want the injected read error", err)
	}
	if err := it.Close(); !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("Close() = %v, want the injected read error", err)
	}
}

// TestCloseWaitsForCompact: Close waits for a Compact under way (a review
// found Close returning, and releasing the directory, while Compact still
// wrote tables).
func TestCloseWaitsForCompact(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	o := &Options{FS: vfs.NewMem(), Logger: quietLogger()}
	o.EventListener.CompactionBegin = func(info CompactionInfo) {
		if info.Manual {
			once.Do(func() { close(started); <-release })
		}
	}
	d := mustOpen(t, "/db", o)
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
	<-compacted // finished or stopped with ErrClosed; either way before Close returned
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
		for _, f := range s.version.Levels[6] {
			r, err := d.tables.get(f.FileNum)
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
		for l := range len(s.version.Levels) - 1 {
			if len(s.version.Levels[l]) != 0 {
				t.Fatalf("L%d holds %d tables after Compact", l, len(s.version.Levels[l]))
			}
		}
		for _, f := range s.version.Levels[len(s.version.Levels)-1] {
			r, err := d.tables.get(f.FileNum)
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

// TestRangeArguments: an inverted range is refused with a clear error; an
// empty one does nothing.
func TestRangeArguments(t *testing.T) {
	t.Run("inverted DeleteRange", func(t *testing.T) {
		d := mustOpen(t, "/db", &Options{FS: vfs.NewMem(), Logger: quietLogger()})
		defer d.Close()
		if err := d.DeleteRange([]byte("b"), []byte("a"), NoSync); err == nil || !strings.Contains(err.Error(), "start after its end") {
			t.Fatalf("inverted DeleteRange: %v", err)
		}
	})
	t.Run("inverted Compact", func(t *testing.T) {
		d := mustOpen(t, "/db", &Options{FS: vfs.NewMem(), Logger: quietLogger()})
		defer d.Close()
		if err := d.Compact([]byte("b"), []byte("a")); err == nil {
			t.Fatal("inverted Compact accepted")
		}
	})
	t.Run("empty DeleteRange", func(t *testing.T) {
		d := mustOpen(t, "/db", &Options{FS: vfs.NewMem(), Logger: quietLogger()})
		defer d.Close()
		d.Set([]byte("a"), []byte("1"), NoSync)
		if err := d.DeleteRange([]byte("a"), []byte("a"), NoSync); err != nil {
			t.Fatal(err)
		}
		expect(t, d, "a", "1")
	})
}

// TestCompactRewritesEachTableOnce: Compact of a store whose data sits in
// level 0 and level 1 (and nothing below, as after a load smaller than
// LBaseMaxBytes) moves level 1 to the last level and merges level 0 into
// it: every table is read by one merge, and nothing is written into level
// 1 on the way; every key reads its newest value after.
func TestCompactRewritesEachTableOnce(t *testing.T) {
	var mu sync.Mutex
	var infos []CompactionInfo
	o := memOpts(vfs.NewMem())
	o.MemTableSize = 256 << 10
	o.L0CompactionThreshold = 8 // the 3 flushes below leave tables in L0
	o.L0StopWritesThreshold = 100
	o.DisableCompression = true
	o.EventListener.CompactionEnd = func(c CompactionInfo) {
		mu.Lock()
		defer mu.Unlock()
		infos = append(infos, c)
	}
	d := mustOpen(t, "/db", o)
	defer d.Close()
	const n = 20_000
	fillKeysOrder(t, d, n, 100, true)
	waitForCompactions(t, d)
	for i := range 1500 { // newer versions, in level-0 tables
		if err := d.Set(levelKey(2*i), []byte("new"), NoSync); err != nil {
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
	if m.Levels[0].Files == 0 || m.Levels[1].Files == 0 {
		t.Fatalf("want tables in L0 and L1 only; tables per level: %v", levelFiles(m))
	}
	for l := 2; l < len(m.Levels); l++ {
		if m.Levels[l].Files != 0 {
			t.Fatalf("want tables in L0 and L1 only; tables per level: %v", levelFiles(m))
		}
	}
	var before uint64
	for _, l := range m.Levels {
		before += l.Bytes
	}
	mu.Lock()
	infos = nil
	mu.Unlock()
	if err := d.Compact(nil, nil); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	var merged uint64
	for _, c := range infos {
		if c.Move || !c.Manual {
			continue
		}
		if c.ToLevel != len(m.Levels)-1 {
			t.Errorf("Compact merged L%d into L%d, not into the last level", c.FromLevel, c.ToLevel)
		}
		merged += c.BytesIn
	}
	mu.Unlock()
	if merged != before {
		t.Fatalf("Compact's merges read %d bytes of tables; the store held %d: a table was read more or less than once", merged, before)
	}
	for i := range n {
		want := "new"
		if i >= 1500 {
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
