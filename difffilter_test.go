package bloomkv

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/bloomkv/bloomkv/filterblock"
	"github.com/bloomkv/bloomkv/vfs"
)

// diffViolations lists the versions above s's base that the filter s
// carries answers "no" for: every point entry of its memtables and of its
// tables above the base must pass. A state without a filter has none.
// Callers hold a reference to s (or d.mu, from onPublish).
func diffViolations(d *DB, s *readState) []string {
	if s.diff == nil {
		return nil
	}
	var bad []string
	note := func(where string, key []byte) {
		if len(bad) < 10 {
			bad = append(bad, fmt.Sprintf("%s: key %q", where, key))
		}
	}
	for i, m := range append([]*memEntry{s.mem}, s.imm...) {
		it := m.mt.NewIter()
		for ok := it.First(); ok; ok = it.Next() {
			if k := it.Key(); !s.diff.MayContainHash(filterblock.Hash(k.UserKey)) {
				note(fmt.Sprintf("memtable %d", i), k.UserKey)
			}
		}
	}
	for l := range s.diffBase {
		for f := range s.version.Level(l) {
			r, err := d.tables.get(f)
			if err != nil {
				bad = append(bad, fmt.Sprintf("L%d table %d: %v", l, f.FileNum, err))
				continue
			}
			it := r.NewCompactionIter()
			for ok := it.First(); ok; ok = it.Next() {
				if k := it.Key(); !s.diff.MayContainHash(filterblock.Hash(k.UserKey)) {
					note(fmt.Sprintf("L%d table %06d", l, f.FileNum), k.UserKey)
				}
			}
			it.Close()
		}
	}
	return bad
}

// checkDiffFilter fails the test if the filter of d's current read state
// misses a version above its base.
func checkDiffFilter(t testing.TB, d *DB) {
	t.Helper()
	s := d.acquire()
	defer d.release(s)
	if bad := diffViolations(d, s); len(bad) > 0 {
		t.Fatalf("the differential-file filter misses versions above base L%d: %v", s.diffBase, bad)
	}
}

// raceDiffCheckEvery is how many read states apart checkDiffAtEveryPublish
// checks under the race detector. The check walks every version above the
// base, so a test's checks grow with the square of its writes, and the
// detector makes that walk about 30 times slower; the race run looks for
// data races, and the normal run checks every state.
const raceDiffCheckEvery = 8

// checkDiffAtEveryPublish makes every read state d publishes from now on
// pass diffViolations (under the race detector, every raceDiffCheckEvery-th
// from the first); the first failure is reported by the returned
// function, which the test calls at its end (and after each step it likes).
func checkDiffAtEveryPublish(d *DB) (firstProblem func() string) {
	var problem string
	published := 0
	d.mu.Lock()
	d.mu.onPublish = func(s *readState) {
		published++
		if problem != "" || (raceBuild && (published-1)%raceDiffCheckEvery != 0) {
			return
		}
		if bad := diffViolations(d, s); len(bad) > 0 {
			problem = fmt.Sprintf("state %d (base L%d) published with a filter missing versions above the base: %v", s.epoch, s.diffBase, bad)
		}
	}
	d.mu.Unlock()
	return func() string {
		d.mu.Lock()
		defer d.mu.Unlock()
		return problem
	}
}

// waitForDiffFilter waits until reads consult a built filter.
func waitForDiffFilter(t testing.TB, d *DB) {
	t.Helper()
	waitFor(t, "the differential-file filter to be built", func() bool { return d.Metrics().DiffFilter.On })
}

func diffKey(i int) []byte { return fmt.Appendf(nil, "key%06d", i) }

// baseStore returns a store of n keys (value "base-i") compacted into the
// last level, with the filter built over it.
func baseStore(t *testing.T, o *Options, n int) *DB {
	t.Helper()
	d := mustOpen(t, "/db", o)
	b := d.NewBatch()
	for i := range n {
		b.Set(diffKey(i), fmt.Appendf(nil, "base-%d", i))
	}
	if err := d.Apply(b, NoSync); err != nil {
		t.Fatal(err)
	}
	if err := d.Compact(nil, nil); err != nil {
		t.Fatal(err)
	}
	waitForDiffFilter(t, d)
	return d
}

// TestDiffFilterSkipsUnchangedKeys: after a full compaction and a
// differential of overwrites, deletions and a range deletion spread over
// the memtable and level 0, Gets of unchanged keys read the base alone
// (the filter said no), and every Get answers as the store's data says.
func TestDiffFilterSkipsUnchangedKeys(t *testing.T) {
	const n = 20_000
	o := memOpts(vfs.NewMem())
	// Level 0 keeps its tables: every key written stays above the base.
	o.L0CompactionThreshold, o.L0StopWritesThreshold = 100, 200
	d := baseStore(t, o, n)
	defer d.Close()
	problem := checkDiffAtEveryPublish(d)
	if m := d.Metrics().DiffFilter; m.LastLevel != 6 || m.Keys != 0 {
		t.Fatalf("after Compact(nil, nil): base L%d, %d keys counted; want L6 and none", m.LastLevel, m.Keys)
	}

	want := map[int]string{}
	for i := range n {
		want[i] = fmt.Sprintf("base-%d", i)
	}
	changed := map[int]bool{}
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 4 {
		for range 50 {
			i := r.IntN(n)
			changed[i] = true
			if r.IntN(5) == 0 {
				delete(want, i)
				if err := d.Delete(diffKey(i), NoSync); err != nil {
					t.Fatal(err)
				}
				continue
			}
			want[i] = fmt.Sprintf("round-%d", round)
			if err := d.Set(diffKey(i), []byte(want[i]), NoSync); err != nil {
				t.Fatal(err)
			}
		}
		if round < 3 {
			if err := d.Flush(); err != nil { // level 0, and the last round in the memtable
				t.Fatal(err)
			}
		}
	}
	// A range deletion above the base: its keys are not in the filter.
	if err := d.DeleteRange(diffKey(100), diffKey(150), NoSync); err != nil {
		t.Fatal(err)
	}
	for i := 100; i < 150; i++ {
		delete(want, i)
		changed[i] = true
	}

	before := d.Metrics().DiffFilter
	for i := range n {
		got, err := d.Get(diffKey(i))
		switch w, ok := want[i]; {
		case !ok && !errors.Is(err, ErrNotFound):
			t.Fatalf("Get(%s) = %q, %v; want ErrNotFound", diffKey(i), got, err)
		case ok && (err != nil || string(got) != w):
			t.Fatalf("Get(%s) = %q, %v; want %q", diffKey(i), got, err, w)
		}
		if changed[i] && !d.MayHaveChanged(diffKey(i)) {
			t.Fatalf("MayHaveChanged(%s) = false for a key written since the compaction", diffKey(i))
		}
	}
	after := d.Metrics().DiffFilter
	skips, maybes := after.Skips-before.Skips, after.Maybes-before.Maybes
	unchanged := uint64(n - len(changed))
	if skips+maybes != n {
		t.Fatalf("%d skips + %d maybes for %d Gets", skips, maybes, n)
	}
	if float64(skips) < 0.985*float64(unchanged) {
		t.Errorf("%d of %d Gets of unchanged keys skipped the differential (want ≥ 98.5%%)", skips, unchanged)
	}
	if maybes < uint64(len(changed)) {
		t.Errorf("%d maybes for %d changed keys", maybes, len(changed))
	}
	t.Logf("%d Gets: %d skipped, %d maybes (%d false); the filter counts %d keys in %d bytes",
		n, skips, maybes, after.FalseMaybes-before.FalseMaybes, after.Keys, after.Bytes)
	if p := problem(); p != "" {
		t.Fatal(p)
	}
	checkDiffFilter(t, d)

	// CheckDiffFilter tells the changed keys of the base from the
	// unchanged by searching above the base, and probes the filter.
	chk, err := d.CheckDiffFilter(0)
	if err != nil {
		t.Fatal(err)
	}
	if !chk.On || chk.LastLevel != 6 || chk.BaseKeys != n || chk.Changed != int64(len(changed)) || chk.Missed != 0 ||
		chk.Unchanged != n-int64(len(changed)) || chk.FPRate() > 0.015 {
		t.Fatalf("CheckDiffFilter = %+v (false-positive rate %.4f); want base L6, %d keys, %d changed, none missed",
			chk, chk.FPRate(), n, len(changed))
	}
	if chk, err := d.CheckDiffFilter(100); err != nil || chk.BaseKeys != 100 {
		t.Fatalf("CheckDiffFilter(100) = %+v, %v; want 100 keys probed", chk, err)
	}
}

// TestDiffFilterForgetsWhatReachesTheBase: a compaction into the base takes
// the versions it moves out of the filter, once no older read can need
// them: a read state from before the compaction still finds the key above
// the base through its filter, and the key's count goes only after that
// state is released.
func TestDiffFilterForgetsWhatReachesTheBase(t *testing.T) {
	d := baseStore(t, memOpts(vfs.NewMem()), 1000)
	defer d.Close()
	k := diffKey(7)
	if err := d.Set(k, []byte("new"), NoSync); err != nil {
		t.Fatal(err)
	}
	if err := d.Flush(); err != nil {
		t.Fatal(err)
	}
	if !d.MayHaveChanged(k) {
		t.Fatal("MayHaveChanged = false for a key just written")
	}
	old := d.acquire() // k in level 0, above the base
	if err := d.Compact(nil, nil); err != nil {
		t.Fatal(err)
	}
	if !old.diff.MayContainHash(filterblock.Hash(k)) {
		t.Fatal("a removal reached the filter while a read state from before the compaction was alive")
	}
	if v, err := d.get(old, k, old.version.Files(0)[0].LargestSeq+1); err != nil || string(v) != "new" {
		t.Fatalf("Get through the old state = %q, %v; want new", v, err)
	}
	d.release(old)
	if m := d.Metrics().DiffFilter; m.Keys != 0 {
		t.Fatalf("after the compaction and the old state's release the filter counts %d keys, want 0", m.Keys)
	}
	if v, err := d.Get(k); err != nil || string(v) != "new" {
		t.Fatalf("Get = %q, %v; want new", v, err)
	}
}

// TestDiffFilterGrows: a differential far larger than the first filter's
// capacity makes the store build larger filters, and the expected
// false-positive rate stays within 1.5 times the design rate.
func TestDiffFilterGrows(t *testing.T) {
	o := memOpts(vfs.NewMem())
	// Level 0 keeps its tables: the differential grows with the writes.
	o.L0CompactionThreshold, o.L0StopWritesThreshold = 1000, 2000
	d := baseStore(t, o, 100)
	defer d.Close()
	problem := checkDiffAtEveryPublish(d)
	first := d.Metrics().DiffFilter
	b := d.NewBatch()
	for i := range 3 * diffMinCapacity {
		// Between the base's keys, so that no level-0 table moves there.
		b.Set(fmt.Appendf(diffKey(i%99), "-new%07d", i), nil)
		if b.Len() > 32<<10 {
			// Gets of unchanged keys, eight for each version written, so
			// that the filter pays for its growth (diffPaysLocked: as
			// many "no"s since a build as the versions it counts).
			for j := range 8 * int(b.Count()) {
				if _, err := d.Get(diffKey(j % 100)); err != nil {
					t.Fatal(err)
				}
			}
			if err := d.Apply(b, NoSync); err != nil {
				t.Fatal(err)
			}
			b.Reset()
		}
	}
	if err := d.Apply(b, NoSync); err != nil {
		t.Fatal(err)
	}
	// Writes outrun a build (sized for the count it starts at); once they
	// stop, the builds catch up.
	waitFor(t, "a filter rebuilt larger, within 1.5 × its design false-positive rate", func() bool {
		for j := range 10_000 {
			if _, err := d.Get(diffKey(j % 100)); err != nil {
				t.Fatal(err)
			}
		}
		m := d.Metrics().DiffFilter
		return m.On && m.Capacity > first.Capacity && m.FPRate <= 1.5*m.DesignFPRate
	})
	m := d.Metrics().DiffFilter
	if m.Bytes > 8*int(max(m.Keys, diffMinCapacity)) {
		t.Errorf("%d bytes for %d keys: more than 8 bytes a key", m.Bytes, m.Keys)
	}
	t.Logf("capacity %d → %d after %d rebuilds; %d keys, %d bytes, expected FP %.4f (design %.4f)",
		first.Capacity, m.Capacity, m.Rebuilds, m.Keys, m.Bytes, m.FPRate, m.DesignFPRate)
	if p := problem(); p != "" {
		t.Fatal(p)
	}
	checkDiffFilter(t, d)
}

// TestDiffFilterIdlesWhileNoGetAsksIt: writes that outgrow a filter no Get
// has asked drop it rather than build it larger (Metrics says Idle); Gets
// bring it back, and a second drop in a row waits for twice as many. Keys
// read by MultiGet count as Gets do, a batch reaching the count mid-way.
func TestDiffFilterIdlesWhileNoGetAsksIt(t *testing.T) {
	t.Run("get", func(t *testing.T) { testDiffFilterIdles(t, false) })
	t.Run("multiget", func(t *testing.T) { testDiffFilterIdles(t, true) })
}

func testDiffFilterIdles(t *testing.T, multi bool) {
	o := memOpts(vfs.NewMem())
	d := baseStore(t, o, 100)
	defer d.Close()
	problem := checkDiffAtEveryPublish(d)
	writeNew := func(round int) {
		t.Helper()
		b := d.NewBatch()
		for i := range diffMinCapacity {
			b.Set(fmt.Appendf(nil, "new%d-%07d", round, i), nil)
		}
		if err := d.Apply(b, NoSync); err != nil {
			t.Fatal(err)
		}
		if err := d.Flush(); err != nil {
			t.Fatal(err)
		}
		waitForCompactions(t, d)
	}
	getBase := func(n int) {
		t.Helper()
		const batch = 37 // not a divisor of the wake count
		for i := 0; multi && i < n; i += batch {
			var keys [][]byte
			for j := i; j < min(i+batch, n); j++ {
				keys = append(keys, diffKey(j%100))
			}
			vals, errs := d.MultiGet(keys)
			for j := range keys {
				if want := fmt.Sprintf("base-%d", (i+j)%100); errs[j] != nil || string(vals[j]) != want {
					t.Fatalf("MultiGet: %s = %q, %v; want %q", keys[j], vals[j], errs[j], want)
				}
			}
		}
		for i := 0; !multi && i < n; i++ {
			if v, err := d.Get(diffKey(i % 100)); err != nil || string(v) != fmt.Sprintf("base-%d", i%100) {
				t.Fatalf("Get(%s) = %q, %v", diffKey(i%100), v, err)
			}
		}
	}

	first := d.Metrics().DiffFilter
	writeNew(0)
	m := d.Metrics().DiffFilter
	if !m.Idle || m.On || m.Rebuilds != first.Rebuilds {
		t.Fatalf("after writes outgrew a filter no Get asked: idle %v, on %v, %d builds (before: %d); want idle, off, no build",
			m.Idle, m.On, m.Rebuilds, first.Rebuilds)
	}
	getBase(diffWakeGets)
	waitForDiffFilter(t, d)
	m = d.Metrics().DiffFilter
	if m.Idle || m.Rebuilds != first.Rebuilds+1 {
		t.Fatalf("after %d Gets: idle %v, %d builds; want one more build (%d), not idle", diffWakeGets, m.Idle, m.Rebuilds, first.Rebuilds+1)
	}
	getBase(1000)
	if skips := d.Metrics().DiffFilter.Skips - m.Skips; skips != 1000 {
		t.Fatalf("the filter built again answered no to %d of 1000 Gets of unchanged keys", skips)
	}
	checkDiffFilter(t, d)

	writeNew(1) // 1000 skips pay for less than 64 Ki versions: dropped again
	if m := d.Metrics().DiffFilter; !m.Idle {
		t.Fatalf("not idle after a second growth unpaid for")
	}
	d.mu.Lock()
	wakeAt := d.mu.diff.wakeAt.Load()
	d.mu.Unlock()
	if wakeAt != 2*diffWakeGets {
		t.Fatalf("a second drop in a row wakes after %d Gets, want %d", wakeAt, 2*diffWakeGets)
	}
	getBase(diffWakeGets)
	if m := d.Metrics().DiffFilter; !m.Idle {
		t.Fatalf("woken after %d Gets, want %d", diffWakeGets, 2*diffWakeGets)
	}
	if p := problem(); p != "" {
		t.Fatal(p)
	}
}

// TestDiffFilterOff: disabled, or before the base holds data, the filter
// answers "may have changed" for every key and Gets read every level.
func TestDiffFilterOff(t *testing.T) {
	t.Run("disabled", func(t *testing.T) {
		o := memOpts(vfs.NewMem())
		o.DisableDiffFilter = true
		d := baseStore2(t, o)
		defer d.Close()
		if m := d.Metrics().DiffFilter; m.On || m.Skips != 0 || m.Rebuilds != 0 {
			t.Fatalf("disabled filter: %+v", m)
		}
		if !d.MayHaveChanged(diffKey(1)) {
			t.Fatal("MayHaveChanged = false with the filter disabled")
		}
	})
	t.Run("no base yet", func(t *testing.T) {
		d := mustOpen(t, "/db", memOpts(vfs.NewMem()))
		defer d.Close()
		if err := d.Set(diffKey(1), []byte("v"), NoSync); err != nil {
			t.Fatal(err)
		}
		if !d.MayHaveChanged(diffKey(2)) || d.Metrics().DiffFilter.On {
			t.Fatal("a store with no table consulted a filter")
		}
	})
}

// baseStore2 is a compacted store of 100 keys with the filter as o says.
func baseStore2(t *testing.T, o *Options) *DB {
	d := mustOpen(t, "/db", o)
	for i := range 100 {
		if err := d.Set(diffKey(i), []byte("v"), NoSync); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Compact(nil, nil); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestDiffFilterAfterReopen: Open builds the filter again from the levels
// above the base and the replayed WAL; a read-only Open builds it before it
// returns.
func TestDiffFilterAfterReopen(t *testing.T) {
	fs := vfs.NewMem()
	d := baseStore(t, memOpts(fs), 5000)
	for i := range 300 {
		if err := d.Set(diffKey(i*7), []byte("changed"), NoSync); err != nil {
			t.Fatal(err)
		}
		if i == 150 {
			if err := d.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	for _, readOnly := range []bool{false, true} {
		o := memOpts(fs)
		o.ReadOnly = readOnly
		d := mustOpen(t, "/db", o)
		if readOnly && !d.Metrics().DiffFilter.On {
			t.Fatal("a read-only Open returned before building the filter")
		}
		waitForDiffFilter(t, d)
		checkDiffFilter(t, d)
		for i := range 300 {
			if !d.MayHaveChanged(diffKey(i * 7)) {
				t.Fatalf("read-only %v: MayHaveChanged(%s) = false for a key changed before the reopen", readOnly, diffKey(i*7))
			}
			expect(t, d, string(diffKey(i*7)), "changed")
		}
		expect(t, d, string(diffKey(1)), "base-1")
		d.Close()
	}
}

// TestDiffFilterCountsNothingAfterCompact: a store with no filter (its
// last level empty, as static level targets left it) and then compacted whole is left with a filter
// that counts no version: the merge into the last level records the
// versions it takes there even when it starts before the filter's build
// (Compact moves level 1 down first, which starts the build).
func TestDiffFilterCountsNothingAfterCompact(t *testing.T) {
	o := memOpts(vfs.NewMem())
	o.L0CompactionThreshold, o.L0StopWritesThreshold = 8, 16
	d := mustOpen(t, "/db", o)
	defer d.Close()
	fillKeysOrder(t, d, 50_000, 32, true)
	waitForCompactions(t, d)
	// The shape a store of static level targets was left in: its data in
	// level 1, the last level empty. (This version puts a small store's
	// data in the last level.)
	moveTables(t, d, 6, 1, func(int) bool { return true })
	// Held until Compact: the three tables below overlap no other, and
	// would otherwise move down at once (level 0 tables that overlap
	// nothing do).
	release := holdCompactions(t, d)
	for i := range 3 { // level-0 tables for Compact to merge into the last level
		for j := range 2000 {
			if err := d.Set(diffKey(i*2000+j), []byte("later"), NoSync); err != nil {
				t.Fatal(err)
			}
		}
		if err := d.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if m := d.Metrics(); m.Levels[6].Files != 0 || m.Levels[0].Files == 0 || m.DiffFilter.On {
		t.Fatalf("before Compact: %d tables in level 0, %d in the last level, filter on %v", m.Levels[0].Files, m.Levels[6].Files, m.DiffFilter.On)
	}
	release()
	// Builds wait for Compact: a filter built while it runs would count
	// the versions it is about to move into the base.
	var builtDuring, published int
	d.mu.Lock()
	d.mu.onPublish = func(*readState) {
		if d.mu.manualCompacts > 0 {
			published++
			if d.mu.diff.building != nil || d.mu.diff.cur != nil {
				builtDuring++
			}
		}
	}
	d.mu.Unlock()
	rebuilds := d.Metrics().DiffFilter.Rebuilds
	if err := d.Compact(nil, nil); err != nil {
		t.Fatal(err)
	}
	waitForCompactions(t, d)
	waitForDiffFilter(t, d)
	d.mu.Lock()
	d.mu.onPublish = nil
	d.mu.Unlock()
	if published == 0 || builtDuring != 0 {
		t.Fatalf("a filter was built or in use at %d of the %d states Compact published", builtDuring, published)
	}
	if m := d.Metrics().DiffFilter; m.Keys != 0 || m.Rebuilds != rebuilds+1 {
		t.Fatalf("after Compact(nil, nil) the filter counts %d versions after %d builds, want 0 after 1", m.Keys, m.Rebuilds-rebuilds)
	}
}

// TestDiffFilterStepsAsideWhenItDoesNotPay: while most Gets are of keys
// that changed since the base, the filter answers maybe to nearly all and
// is asked by one Get in diffBypassSample only; once Gets of unchanged keys
// return, the sampled probes see the skips and it is asked by every Get
// again. Every answer stays right either way.
func TestDiffFilterStepsAsideWhenItDoesNotPay(t *testing.T) {
	const n = 2000
	d := baseStore(t, memOpts(vfs.NewMem()), n)
	defer d.Close()
	for i := range n / 2 {
		if err := d.Set(diffKey(i), []byte("changed"), NoSync); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Flush(); err != nil {
		t.Fatal(err)
	}
	asked := func() uint64 { m := d.Metrics().DiffFilter; return m.Skips + m.Maybes }
	const gets = 20 * diffWindow
	before := asked()
	for i := range gets {
		expect(t, d, string(diffKey(i%(n/2))), "changed")
	}
	if got := asked() - before; got > gets/4 {
		t.Fatalf("%d Gets of changed keys asked the filter %d times: it kept probing with nothing to skip", gets, got)
	}
	if !d.mu.diff.bypass.Load() {
		t.Fatal("the filter is not bypassed after Gets of changed keys only")
	}
	for i := range gets {
		expect(t, d, string(diffKey(n/2+i%(n/2))), fmt.Sprintf("base-%d", n/2+i%(n/2)))
	}
	if d.mu.diff.bypass.Load() {
		t.Fatal("the filter is still bypassed after Gets of unchanged keys only")
	}
	before = asked()
	for i := range diffWindow {
		expect(t, d, string(diffKey(n/2+i%(n/2))), fmt.Sprintf("base-%d", n/2+i%(n/2)))
	}
	if got := asked() - before; got != diffWindow {
		t.Fatalf("%d Gets of unchanged keys asked the filter %d times, want every one", diffWindow, got)
	}
}

// TestDiffBuildDuringFlushCountsOnce: a build that begins while a flush has
// published the state holding its memtable and the memtable's new level-0
// table both (the flush's FlushEnd runs then) counts those versions once,
// not twice. Counted twice, they stayed in the filter's count after a
// compaction took them into the base ("403 versions above" a one-table
// store, seen under load in bench's TestReadBaseAlone).
func TestDiffBuildDuringFlushCountsOnce(t *testing.T) {
	const n = 300
	o := memOpts(vfs.NewMem())
	o.L0CompactionThreshold, o.L0StopWritesThreshold = 100, 200 // level 0 keeps the table
	var hook func()
	o.EventListener.FlushEnd = func(FlushInfo) {
		if hook != nil {
			h := hook
			hook = nil
			h()
		}
	}
	d := baseStore(t, o, 1000)
	defer d.Close()
	for i := range n {
		if err := d.Set(diffKey(100_000+i), []byte("new"), NoSync); err != nil {
			t.Fatal(err)
		}
	}
	var count int64 = -1
	var inWindow bool
	hook = func() {
		d.mu.Lock()
		s := d.state.Load()
		inWindow = len(s.imm) == 1 && s.version.NumFiles(0) == 1
		b := d.beginDiffBuildLocked(n)
		d.mu.Unlock()
		if b == nil {
			t.Error("no build began")
			return
		}
		if err := d.finishDiffBuild(b); err != nil {
			t.Error(err)
			return
		}
		count = b.filter.Count()
	}
	if err := d.Flush(); err != nil {
		t.Fatal(err)
	}
	if !inWindow {
		t.Fatal("the build did not begin with the memtable and its table both in the state")
	}
	if count != n {
		t.Fatalf("the build counted %d versions above the base, want %d", count, n)
	}
	if err := d.Compact(nil, nil); err != nil {
		t.Fatal(err)
	}
	if m := d.Metrics().DiffFilter; m.Keys != 0 {
		t.Fatalf("after a full compaction the filter counts %d versions, want 0", m.Keys)
	}
}

// TestDiffFilterIdlesUnderWrites: a stretch of diffWindowAdds versions that
// no Get is answered "no" for drops the filter (its adds cost the writes
// more than it saved reads); Gets that come while writes outrun them do
// not build it again; Gets alone do. Every answer stays right throughout.
func TestDiffFilterIdlesUnderWrites(t *testing.T) {
	const n = 2000
	d := baseStore(t, memOpts(vfs.NewMem()), n)
	defer d.Close()
	problem := checkDiffAtEveryPublish(d)
	set := func(i int) {
		t.Helper()
		if err := d.Set(diffKey(i%n), fmt.Appendf(nil, "w-%d", i), NoSync); err != nil {
			t.Fatal(err)
		}
	}
	get := func(i int) {
		t.Helper()
		if _, err := d.Get(diffKey(i % n)); err != nil {
			t.Fatal(err)
		}
	}
	if m := d.Metrics().DiffFilter; !m.On || m.Idle {
		t.Fatalf("before the writes: %+v", m)
	}
	// Writes only, then a flush to publish a state.
	for i := range diffWindowAdds + 1000 {
		set(i)
	}
	if err := d.Flush(); err != nil {
		t.Fatal(err)
	}
	if m := d.Metrics().DiffFilter; m.On || !m.Idle {
		t.Fatalf("after %d writes and no Get: %+v, want the filter idle", diffWindowAdds+1000, m)
	}
	rebuilds := d.Metrics().DiffFilter.Rebuilds
	// Gets, four writes to each: well past the Gets that would wake it.
	for i := range 4 * diffWakeGets {
		get(i)
		for j := range 4 {
			set(4*i + j)
		}
	}
	if err := d.Flush(); err != nil {
		t.Fatal(err)
	}
	if m := d.Metrics().DiffFilter; m.On || m.Rebuilds != rebuilds {
		t.Fatalf("with writes outrunning the Gets: %+v, want no build (%d before)", m, rebuilds)
	}
	// Gets alone wake it.
	for i := range 4 * diffWakeGets {
		get(i)
	}
	waitForDiffFilter(t, d)
	if m := d.Metrics().DiffFilter; m.Idle || m.Rebuilds <= rebuilds {
		t.Fatalf("after Gets alone: %+v", m)
	}
	if p := problem(); p != "" {
		t.Fatal(p)
	}
	checkDiffFilter(t, d)
}

// TestSetDiffFilterReads: with the filter's reads off, Gets answer as with
// them on, for unchanged, overwritten, deleted, range-deleted and absent
// keys, and ask the filter nothing (no skip, no maybe); the filter is kept
// up to date meanwhile, so that a key written while they were off is a
// "maybe" once they are back on, and unchanged keys are skipped again.
func TestSetDiffFilterReads(t *testing.T) {
	const n = 5_000
	d := baseStore(t, keepL0Opts(), n)
	defer d.Close()
	// Level 0 holds the sets and the deletions in a table each: enough
	// sources above the base for the filter to pay (diffMinGain).
	for i := 0; i < n; i += 20 {
		if err := d.Set(diffKey(i), []byte("new"), NoSync); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Flush(); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < n; i += 20 {
		if err := d.Delete(diffKey(i), NoSync); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := d.DeleteRange(diffKey(200), diffKey(250), NoSync); err != nil {
		t.Fatal(err)
	}
	type answer struct {
		value string
		err   error
	}
	// Keys 0 to n-1 and n absent ones past them.
	gets := func() []answer {
		out := make([]answer, 2*n)
		for i := range out {
			v, err := d.Get(diffKey(i))
			out[i] = answer{string(v), err}
		}
		return out
	}
	probes := func() uint64 {
		m := d.Metrics().DiffFilter
		return m.Skips + m.Maybes
	}

	before := probes()
	on := gets()
	if p := probes() - before; p != 2*n {
		t.Fatalf("reads on: %d probes for %d Gets", p, 2*n)
	}
	d.SetDiffFilterReads(false)
	before = probes()
	off := gets()
	if p := probes() - before; p != 0 {
		t.Fatalf("reads off: %d probes", p)
	}
	for i := range on {
		if on[i] != off[i] {
			t.Fatalf("Get(%s): %+v with the filter's reads on, %+v off", diffKey(i), on[i], off[i])
		}
	}
	if on[5] != (answer{value: fmt.Sprint("base-", 5)}) || on[20] != (answer{value: "new"}) || !errors.Is(on[21].err, ErrNotFound) ||
		!errors.Is(on[230].err, ErrNotFound) || !errors.Is(on[n+5].err, ErrNotFound) {
		t.Fatalf("answers %+v %+v %+v %+v %+v", on[5], on[20], on[21], on[230], on[n+5])
	}

	// Written while the reads are off, and still in the filter once they
	// are back on.
	if err := d.Set(diffKey(7), []byte("while off"), NoSync); err != nil {
		t.Fatal(err)
	}
	d.SetDiffFilterReads(true)
	if !d.MayHaveChanged(diffKey(7)) {
		t.Fatal("a key written while the filter's reads were off is not in it")
	}
	before = d.Metrics().DiffFilter.Maybes
	if v, err := d.Get(diffKey(7)); err != nil || string(v) != "while off" {
		t.Fatalf("Get = %q, %v", v, err)
	}
	if d.Metrics().DiffFilter.Maybes != before+1 {
		t.Fatal("the Get of a key written while the reads were off was not a maybe")
	}
	beforeSkips := d.Metrics().DiffFilter.Skips
	if _, err := d.Get(diffKey(5)); err != nil {
		t.Fatal(err)
	}
	if d.Metrics().DiffFilter.Skips != beforeSkips+1 {
		t.Fatal("an unchanged key is not skipped once the reads are back on")
	}
	checkDiffFilter(t, d)
}

// TestDiffFilterPaysBySourcesSkipped: with nothing above the base but the
// memtable, a "no" saves a Get no more than the probe it costs, and the
// filter steps aside however many keys it rules out; once level-0 tables
// lie above the base, each "no" saves their lookups, and every Get asks it
// again.
func TestDiffFilterPaysBySourcesSkipped(t *testing.T) {
	const n = 2000
	d := baseStore(t, keepL0Opts(), n)
	defer d.Close()
	asked := func() uint64 { m := d.Metrics().DiffFilter; return m.Skips + m.Maybes }
	unchanged := func(gets int) uint64 {
		before := asked()
		for i := range gets {
			k := n/2 + i%(n/2)
			expect(t, d, string(diffKey(k)), fmt.Sprintf("base-%d", k))
		}
		return asked() - before
	}
	const gets = 20 * diffWindow
	if got := unchanged(gets); got > gets/4 || !d.mu.diff.bypass.Load() {
		t.Fatalf("only the memtable above the base: %d Gets asked the filter %d times (bypassed: %v)", gets, got, d.mu.diff.bypass.Load())
	}
	for round := range 2 {
		for i := range 10 {
			if err := d.Set(diffKey(round*10+i), []byte("changed"), NoSync); err != nil {
				t.Fatal(err)
			}
		}
		if err := d.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	unchanged(gets) // long enough for a sampled window to end the bypass
	if d.mu.diff.bypass.Load() {
		t.Fatal("still bypassed with level-0 tables above the base")
	}
	if got := unchanged(diffWindow); got != diffWindow {
		t.Fatalf("%d Gets of unchanged keys asked the filter %d times, want every one", diffWindow, got)
	}
}

// keepL0Opts are in-memory options under which level 0 keeps its tables.
func keepL0Opts() *Options {
	o := memOpts(vfs.NewMem())
	o.L0CompactionThreshold, o.L0StopWritesThreshold = 100, 200
	return o
}

// TestSampledKey: a bypassed filter asks about one key in diffBypassSample
// under each salt, a different share of the keys under each next salt, so
// that over a few windows most keys have been asked about; the salt stays
// odd.
func TestSampledKey(t *testing.T) {
	const keys = 64 * diffBypassSample
	hashes := make([]uint64, keys)
	for i := range hashes {
		hashes[i] = filterblock.Hash(diffKey(i))
	}
	var ds diffState
	ever := make([]bool, keys)
	const salts = 4 * diffBypassSample
	for range salts {
		ds.nextSampleSalt()
		salt := ds.sampleSalt.Load()
		if salt&1 == 0 {
			t.Fatalf("salt %#x is even", salt)
		}
		n := 0
		for i, h := range hashes {
			if sampledKey(h, salt) {
				n++
				ever[i] = true
			}
		}
		// 64 expected (a standard deviation of 8): the keys and the
		// salts are fixed, so this holds or fails the same every run.
		if n < 34 || n > 94 {
			t.Fatalf("salt %#x samples %d of %d keys, want about %d", salt, n, keys, keys/diffBypassSample)
		}
	}
	// (63/64)^256: about 2 % of the keys are never drawn.
	never := 0
	for _, e := range ever {
		if !e {
			never++
		}
	}
	if never > keys/20 {
		t.Fatalf("%d of %d keys were never sampled under %d salts", never, keys, salts)
	}
}
