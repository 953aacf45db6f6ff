package bloomkv

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"

	"github.com/bloomkv/bloomkv/difffile"
	"github.com/bloomkv/bloomkv/filterblock"
	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/batchrepr"
	"github.com/bloomkv/bloomkv/internal/manifest"
	"github.com/bloomkv/bloomkv/internal/rangedel"
	"github.com/bloomkv/bloomkv/memtable"
	"github.com/bloomkv/bloomkv/sstable"
)

// The differential-file filter (Severance and Lohman's differential files,
// Gremillion's Bloom filter of them; the survey's §3.2).
//
// The base is the last level (baseLevel says why); the differential is
// every version above it: in the memtables and in the levels above. A
// counting filter (difffile.Filter) counts, per user key, the point
// versions (sets and deletions) in the differential. A Get whose key it
// answers "no" for, and that no range deletion above the base covers, reads
// the base level only.
//
// It never answers "no" for a key with a version above the base, in any
// read state:
//
//   - Adds. The commit leader adds every point entry of a batch to the
//     filters before it applies the batch to the memtable, so before any
//     read can see it. A flush moves versions from a memtable into level 0:
//     they stay in the differential, and in the filter.
//   - Ingestions. Ingest, as a step of the commit pipeline, adds the keys
//     of the tables it puts above the base to the filters commits add to,
//     before it publishes the state that reads them, and records their
//     range deletions; a compaction later takes them out as it does any
//     version. A table it puts in the base overlaps nothing above it (no
//     memtable, no level), so its keys have no version in the
//     differential and the filter's "no" for them stays right.
//   - Removals. A compaction into the base takes its inputs' versions out
//     of the differential, and any compaction drops versions that are
//     shadowed; a move of tables into the base takes theirs. Their hashes
//     are removed from the filter only once no read state older than the
//     compaction's is alive (diffRemoval): an older state still reads the
//     levels the versions were in. A flush drops shadowed versions too;
//     their keys keep their newest versions, in the memtable and its
//     table, and their hashes are queued for removal from the filters
//     that counted them: those commits add to when the flush publishes its
//     table (builds after it count the table, not the memtable).
//   - Read states. Each carries the filter it may consult (readState.diff),
//     set when it is published, or nil, meaning "maybe" for every key:
//     while the filter is disabled, while the base is empty, and from a
//     change of base level until a filter for the new base is built.
//   - Builds. A filter is built at Open, when the base level changes, and
//     when the differential outgrows the filter (difffile's NeedsGrowth) or
//     shrinks far below it. The build starts as a step of the commit
//     pipeline (so no commit is under way): from then on commits add to the
//     new filter too, and the build counts what the state of that moment
//     holds, up to its last sequence number. Removals queued after the
//     start apply to the new filter once it is built; those queued before
//     concern versions that state no longer holds.
//   - Retirement. Commits add to every filter a live read state carries:
//     such a state reads the mutable memtable, which takes new writes.
//   - Upkeep that pays. Builds wait for calls of Compact to end. A filter
//     the writes outgrow is built larger only if it answered "no" to as
//     many Gets since its build as it counts versions; otherwise it is
//     dropped (idle) until Gets come back (diffPaysLocked).
//
// The filter lives in memory only; Open builds it again.

// diffMinCapacity is the smallest capacity a filter is built with: 64 Ki
// keys, 256 KiB at difffile's default density.
const diffMinCapacity = 64 << 10

// diffState is the store's differential-file filter. Its fields are guarded
// by d.mu, except writers and the counters.
type diffState struct {
	enabled bool
	// cur is the filter the states published now carry (nil: none), for the
	// base level base.
	cur  *difffile.Filter
	base int
	// building is the filter a build is filling (nil: none), for base level
	// buildBase.
	building  *difffile.Filter
	buildBase int
	// wantBuild asks the builder for a build; buildRunning is set while
	// it makes one; buildFailed stops retries after a failed build until
	// the version changes.
	wantBuild, buildRunning, buildFailed bool
	// idle is set while the filter is dropped for not paying
	// (diffPaysLocked): no build is asked for until wakeAt Gets have met
	// no filter (idleGets counts them). strikes counts the drops since a
	// filter last paid; each doubles wakeAt. skipsAtInstall is skips when
	// cur was installed.
	idle             bool
	idleGets, wakeAt atomic.Uint32
	strikes          int
	skipsAtInstall   uint64
	// adds counts the versions commits added to the filters; windowAdds
	// and windowSkips are adds and skips when the current window of
	// diffWindowAdds versions began (diffWindowLostLocked).
	adds                    atomic.Uint64
	windowAdds, windowSkips uint64
	// seqAtIdle is the last sequence number when the filter went idle, or
	// when noteIdleGet last found writes outrunning the Gets.
	seqAtIdle base.SeqNum
	// manual counts the calls of Compact under way. Builds wait for them
	// to end: Compact moves the differential into the base, so a filter
	// built meanwhile would count versions about to leave, reading every
	// table above the base to do so.
	manual int
	// writers are the filters commits add to: cur, building, and the older
	// filters live read states carry. The commit leader reads it without
	// d.mu.
	writers atomic.Pointer[[]*difffile.Filter]
	// carried counts the live read states carrying each filter; baseOf
	// holds the base level each filter of writers counts for.
	carried map[*difffile.Filter]int
	baseOf  map[*difffile.Filter]int
	// live holds the epochs of the live read states, ascending.
	live      []uint64
	nextEpoch uint64
	// pending are the removals waiting for older read states to go.
	pending []diffRemoval
	// tableDels holds the range deletions of the tables that have any, by
	// file number: tables built by this process, and those a build read.
	tableDels map[uint64][]rangedel.Tombstone

	skips, maybes, falseMaybes, rebuilds atomic.Uint64

	// Adaptive probing (consultDiff): bypass is set while the filter's
	// recent skip rate is under diffMinSkipRate; then only one Get in
	// diffBypassSample asks it. winProbes and winSkips count the current
	// window of diffWindow probes.
	bypass              atomic.Bool
	winProbes, winSkips atomic.Uint32
}

// A Get the filter answers "maybe" pays one probe for nothing; one it
// answers "no" saves a probe per memtable, per level-0 table and per level
// in between. Under diffMinSkipRate of skips the probes cost more than they
// save, so the filter is asked by one Get in diffBypassSample only,
// enough to see the skip rate come back; a window is diffWindow probes
// (diffBypassWindow while bypassed).
const (
	diffMinSkipRate  = 0.30
	diffBypassSample = 64
	diffWindow       = 1024
	diffBypassWindow = 64
)

// consultDiff reports whether this Get asks the filter: always, unless it
// is bypassed (its recent skip rate is too low to pay); then one Get in
// diffBypassSample, drawn at random (the runtime's per-thread generator: no
// shared counter for every Get to update).
func (ds *diffState) consultDiff() bool {
	return !ds.bypass.Load() || rand.Uint32N(diffBypassSample) == 0
}

// noteProbe counts a probe's answer in the window, and at the window's end
// sets bypass from its skip rate.
func (ds *diffState) noteProbe(skipped bool) {
	if skipped {
		ds.skips.Add(1)
		ds.winSkips.Add(1)
	} else {
		ds.maybes.Add(1)
	}
	// While bypassed, probes come one Get in diffBypassSample: a window of
	// diffBypassWindow of them (about 4,000 Gets) judges whether to return.
	window := uint32(diffWindow)
	if ds.bypass.Load() {
		window = diffBypassWindow
	}
	if ds.winProbes.Add(1) >= window {
		skips := ds.winSkips.Swap(0)
		ds.winProbes.Store(0)
		ds.bypass.Store(float64(skips) < diffMinSkipRate*float64(window))
	}
}

// diffRemoval is the hashes of versions that left the differential in the
// read state of epoch epoch, to remove from filters once no older state is
// alive.
type diffRemoval struct {
	epoch   uint64
	hashes  []uint64
	filters []*difffile.Filter
}

// baseLevel returns the base level of v, the last level, or -1 while it
// holds no table.
//
// The base is the last level, not the deepest one holding tables: a store
// being filled has its deepest tables in level 1 or 2, whose differential
// (level 0 and the memtables) turns over with every compaction, and whose
// filter would be rebuilt again and again, at the cost of the writes, for
// reads that gain little. The last level holds data after Compact, and
// holds most of it once the level targets put it there; from then on the
// differential is the recent changes, the case the filter serves.
func baseLevel(v *manifest.Version) int {
	if v.NumFiles(manifest.NumLevels-1) > 0 {
		return manifest.NumLevels - 1
	}
	return -1
}

// diffTrackingLocked reports whether compaction c, starting now, must
// record the versions it takes out of the differential: a filter is in use
// or being built, or c writes into the last level, whose data a build that
// begins while c runs may count from the levels above (the first table in
// the last level makes it the base and starts that build), unless a call
// of Compact is under way (builds wait for it to end) or the filter is idle
// (a build waits for Gets to come back; the writes that idled it pay
// nothing). A compaction that records nothing leaves a filter counting
// versions it no longer needs to: never a miss, but a "maybe" for their
// keys until the next build. d.mu is held.
func (d *DB) diffTrackingLocked(c *compaction) bool {
	ds := &d.diff
	return ds.enabled && (ds.cur != nil || ds.building != nil || c.outputLevel == manifest.NumLevels-1 && ds.manual == 0 && !ds.idle)
}

// initDiff sets up the filter's bookkeeping at Open.
func (d *DB) initDiff() {
	d.diff.enabled = !d.opts.DisableDiffFilter
	d.diff.base = -1
	d.diff.carried = map[*difffile.Filter]int{}
	d.diff.baseOf = map[*difffile.Filter]int{}
	d.diff.tableDels = map[uint64][]rangedel.Tombstone{}
}

// diffForStateLocked fills in the filter fields of a state about to be
// published: its epoch, the filter it may consult, and the range deletions
// above the base. It asks for a build when the state's base calls for one.
// d.mu is held.
func (d *DB) diffForStateLocked(s *readState) {
	ds := &d.diff
	s.epoch = ds.nextEpoch
	ds.nextEpoch++
	ds.live = append(ds.live, s.epoch)
	if !ds.enabled {
		return
	}
	if prev := d.state.Load(); prev == nil || prev.version != s.version {
		ds.buildFailed = false // a new version: a failed build may try again
	}
	b := baseLevel(s.version)
	if ds.cur != nil && b != ds.base {
		// The base moved: the versions the filter counts are not the
		// differential of the new base. States from here on read without
		// it; older ones keep it, and nothing is removed from it again.
		ds.cur = nil
	}
	switch {
	case b < 0:
		ds.idle = false
	case ds.cur == nil:
		if !ds.idle {
			d.requestDiffBuildLocked()
		}
	case d.diffWindowLostLocked():
		d.idleDiffLocked()
	case ds.cur.NeedsGrowth() || float64(ds.cur.Count()) > diffGrowLoad*float64(ds.cur.Capacity()):
		if !d.diffPaysLocked() {
			d.idleDiffLocked()
			break
		}
		ds.strikes = 0
		d.requestDiffBuildLocked()
	case float64(ds.cur.Count()) < diffShrinkLoad*float64(ds.cur.Capacity()) && diffCapacity(int(ds.cur.Count())) < ds.cur.Capacity():
		d.requestDiffBuildLocked() // down to diffMinCapacity
	}
	if ds.cur == nil {
		s.diffIdle = ds.idle
		return
	}
	s.diff, s.diffBase = ds.cur, ds.base
	ds.carried[ds.cur]++
	var dels []rangedel.Tombstone
	for l := range b {
		for f := range s.version.Level(l) {
			dels = append(dels, ds.tableDels[f.FileNum]...)
		}
	}
	if len(dels) > 0 {
		s.diffDels = rangedel.Fragment(dels)
	}
}

// idleDiffLocked drops the current filter for not paying: states from
// here on read without it, and commits stop adding to it once the states
// that carry it are gone; a build waits until Gets meeting no filter call
// for one (wakeAt, doubled with each drop since the last filter paid).
// d.mu is held.
func (d *DB) idleDiffLocked() {
	ds := &d.diff
	ds.cur, ds.idle = nil, true
	ds.wakeAt.Store(diffWakeGets << min(ds.strikes, diffMaxStrikes))
	ds.idleGets.Store(0)
	ds.seqAtIdle = d.lastSeq
	ds.strikes++
}

// diffWindowAdds is the length, in versions added by commits, of the
// windows over which the current filter must pay its way.
const diffWindowAdds = 1 << 16

// diffWindowLostLocked reports, once the commits have added diffWindowAdds
// versions since the window began (starting the next), whether the filter
// answered "no" to fewer Gets than that meanwhile: its adds then cost the
// writes more than it saved the reads, as in a run of deletions or
// updates that no Get asks about, or reads of the keys just written
// (readwhilewriting at 500k keys: 47,650 "no"s to 394,526 adds, each add
// up to eight atomic updates of a cache line of a 6 MB filter; deletions
// ran at 0.6 of their speed without the filter). diffPaysLocked judges a
// filter only when writes outgrow it. d.mu is held.
func (d *DB) diffWindowLostLocked() bool {
	ds := &d.diff
	adds, skips := ds.adds.Load(), ds.skips.Load()
	if adds-ds.windowAdds < diffWindowAdds {
		return false
	}
	lost := skips-ds.windowSkips < adds-ds.windowAdds
	ds.windowAdds, ds.windowSkips = adds, skips
	return lost
}

// diffPaysLocked reports whether the current filter has paid for its
// upkeep: since it was installed it answered "no" to at least as many Gets
// as it counts versions. Each version costs an add at its commit, a removal
// when it leaves the differential and its share of the builds; each "no"
// saves the Get a probe of every memtable, of every level-0 table and of
// each level above the base. A filter outgrown by writes no Get asks about
// (loads, deletions, updates of keys read back at once) would cost a build
// and the commits' adds for nothing: it is dropped instead (idle) until
// Gets come back. d.mu is held.
func (d *DB) diffPaysLocked() bool {
	ds := &d.diff
	return ds.skips.Load()-ds.skipsAtInstall >= uint64(max(ds.cur.Count(), 0))
}

// diffWakeGets is how many Gets meeting no filter end its first idleness:
// enough to show reads have come back, few next to the Gets a filter
// serves. Each further drop before a filter pays doubles it, up to
// diffMaxStrikes times (16 Mi Gets), so that Gets that keep waking a
// filter that never pays (reads of the keys just written) wake it ever
// more rarely.
const (
	diffWakeGets   = 16 << 10
	diffMaxStrikes = 10
)

// noteIdleGet counts a Get of a state whose filter is idle, and asks for a
// build when enough have come.
func (d *DB) noteIdleGet() {
	if d.diff.idleGets.Add(1) != d.diff.wakeAt.Load() {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.diff.idle {
		return
	}
	if written := uint64(d.lastSeq - d.diff.seqAtIdle); written > uint64(d.diff.wakeAt.Load()) {
		// More versions were written than Gets came meanwhile: a filter
		// would lose its next window (diffWindowLostLocked). Watch the
		// next stretch instead of building one.
		d.diff.seqAtIdle = d.lastSeq
		d.diff.idleGets.Store(0)
		return
	}
	d.diff.idle = false
	d.requestDiffBuildLocked()
}

// requestDiffBuildLocked wakes the builder unless a build runs or the last
// one failed. d.mu is held.
func (d *DB) requestDiffBuildLocked() {
	if d.diff.building != nil || d.diff.buildFailed || d.opts.ReadOnly {
		return
	}
	d.diff.wantBuild = true
	d.cond.Broadcast()
}

// diffReleasedLocked forgets a released state: its epoch, and its hold on
// the filter it carried, retiring filters no state carries. Removals that
// were waiting for it are applied. d.mu is held.
func (d *DB) diffReleasedLocked(s *readState) {
	ds := &d.diff
	if i, ok := slices.BinarySearch(ds.live, s.epoch); ok {
		ds.live = slices.Delete(ds.live, i, i+1)
	}
	if s.diff != nil {
		if ds.carried[s.diff]--; ds.carried[s.diff] <= 0 {
			delete(ds.carried, s.diff)
		}
	}
	d.retireFiltersLocked()
	d.applyRemovalsLocked()
}

// retireFiltersLocked drops from writers the filters that are neither
// current, nor being built, nor carried by a live state. d.mu is held.
func (d *DB) retireFiltersLocked() {
	ds := &d.diff
	old := ds.writers.Load()
	if old == nil {
		return
	}
	keep := make([]*difffile.Filter, 0, len(*old))
	for _, f := range *old {
		if f == ds.cur || f == ds.building || ds.carried[f] > 0 {
			keep = append(keep, f)
		} else {
			delete(ds.baseOf, f)
		}
	}
	if len(keep) != len(*old) {
		ds.writers.Store(&keep)
	}
}

// addWriterLocked makes commits add to f as well. d.mu is held, and no
// commit is under way (the caller leads the commit queue).
func (d *DB) addWriterLocked(f *difffile.Filter) {
	var ws []*difffile.Filter
	if old := d.diff.writers.Load(); old != nil {
		ws = slices.Clone(*old)
	}
	ws = append(ws, f)
	d.diff.writers.Store(&ws)
}

// queueRemovalLocked removes hashes from the filters of base level b that
// count them, once every read state older than the one just published is
// gone. d.mu is held.
func (d *DB) queueRemovalLocked(hashes []uint64, b int) {
	ds := &d.diff
	ws := ds.writers.Load()
	if len(hashes) == 0 || ws == nil {
		return
	}
	// Every filter commits add to counts these versions, from their
	// commits or its build (which read a state holding them). A filter of
	// another base counts another differential; older states read it, and
	// nothing is removed from it.
	var fs []*difffile.Filter
	for _, f := range *ws {
		if ds.baseOf[f] == b {
			fs = append(fs, f)
		}
	}
	if len(fs) == 0 {
		return
	}
	ds.pending = append(ds.pending, diffRemoval{epoch: d.state.Load().epoch, hashes: hashes, filters: fs})
	d.applyRemovalsLocked()
}

// applyRemovalsLocked applies the pending removals no older live state
// needs, in order; one that names a filter still being built waits for the
// build. d.mu is held.
func (d *DB) applyRemovalsLocked() {
	ds := &d.diff
	oldest := uint64(0)
	if len(ds.live) > 0 {
		oldest = ds.live[0]
	}
	n := 0
	for _, r := range ds.pending {
		if r.epoch > oldest || slices.Contains(r.filters, ds.building) {
			break
		}
		for _, f := range r.filters {
			for _, h := range r.hashes {
				f.RemoveHash(h)
			}
		}
		n++
	}
	if n > 0 {
		clear(ds.pending[:n])
		ds.pending = ds.pending[n:]
	}
}

// addBatchToDiff adds the point entries of a batch to the filters commits
// add to, and returns how many it added. The caller leads the commit queue,
// before the batch reaches the memtable.
func addBatchToDiff(ws []*difffile.Filter, data []byte) (added uint64) {
	batchrepr.Decode(data, func(_ base.SeqNum, e batchrepr.Entry) {
		if e.Kind == base.KindSet || e.Kind == base.KindDelete {
			h := filterblock.Hash(e.Key)
			for _, f := range ws {
				f.AddHash(h)
			}
			added++
		}
	})
	return added
}

// The log messages of the filter's failures, which affect no call: a failed
// build, and a failed read of tables moved into the base.
const (
	diffBuildFailedMessage    = "bloomkv: building the differential-file filter failed; Gets read every level until the next version tries again"
	diffMoveReadFailedMessage = "bloomkv: reading tables moved into the base for the differential-file filter failed; it answers maybe for their keys until its next build"
)

// diffBuilder builds filters as diffForStateLocked asks, until the store
// closes.
func (d *DB) diffBuilder() {
	defer d.bgWG.Done()
	d.mu.Lock()
	defer d.mu.Unlock()
	for {
		for !d.closed && !(d.diff.wantBuild && d.bgErr == nil && d.diff.manual == 0) {
			d.cond.Wait()
		}
		if d.closed {
			return
		}
		d.diff.wantBuild, d.diff.buildRunning = false, true
		d.mu.Unlock()
		err := d.buildDiff()
		d.mu.Lock()
		d.diff.buildRunning = false
		d.cond.Broadcast() // for those waiting for background work to end
		if err != nil && !errors.Is(err, ErrClosed) {
			d.diff.buildFailed = true
			d.opts.Logger.Warn(diffBuildFailedMessage, "err", err)
		}
	}
}

// waitDiffBuildLocked waits for the filter build a version asked for, so
// that a Compact returns with the filter of its new base in use. It stops
// waiting when the store closes or fails, or when another Compact starts
// (builds wait for those). d.mu is held.
func (d *DB) waitDiffBuildLocked() {
	for !d.closed && d.bgErr == nil && d.diff.manual == 0 && (d.diff.wantBuild || d.diff.buildRunning) {
		d.cond.Wait()
	}
}

// buildDiff builds a filter of the differential, through the commit
// pipeline (a commitWaiter with diffBuild), and installs it. d.mu is not
// held.
func (d *DB) buildDiff() error {
	n, err := d.diffEntries()
	if err != nil {
		return err
	}
	w := &commitWaiter{diffBuild: true, buildEntries: n}
	if err := d.commit(w); err != nil {
		return err
	}
	if w.build == nil {
		return nil // nothing to build: no base, or disabled
	}
	return d.finishDiffBuild(w.build)
}

// diffEntries counts the point versions above the base of the current read
// state, from its memtables and its tables' properties, to size a filter.
// It runs without d.mu: it may open tables.
func (d *DB) diffEntries() (int, error) {
	s := d.acquire()
	defer d.release(s)
	n := s.mem.mt.Len()
	for _, m := range s.imm {
		n += m.mt.Len()
	}
	for l := range max(baseLevel(s.version), 0) {
		for f := range s.version.Level(l) {
			r, err := d.tables.get(f)
			if err != nil {
				return 0, err
			}
			n += int(r.Properties().NumEntries)
		}
	}
	return n, nil
}

// A filter is built for 1.75 times the versions it will count (load
// 0.57: 7 bytes a version at difffile's default density, 0.40 % false
// positives); it is built again larger once its load passes diffGrowLoad
// (0.83 % false positives: Gets of unchanged keys skip the differential 99
// times in 100 or more) or difffile's NeedsGrowth says saturated counters
// call for it, and smaller once its load falls under diffShrinkLoad (over 8
// bytes a version). A build lands between the two, so builds do not follow
// one another for nothing.
const (
	diffGrowLoad   = 0.70
	diffShrinkLoad = 0.50
)

// diffCapacity is the capacity a filter for n versions is built with.
func diffCapacity(n int) int { return max(diffMinCapacity, n*7/4) }

// finishDiffBuild fills the filter of a build begun by
// beginDiffBuildLocked and installs it, unless the base level moved
// meanwhile (then it asks for another). d.mu is not held.
func (d *DB) finishDiffBuild(b *diffBuild) error {
	err := d.fillDiff(b.filter, b.mems, b.state.version, b.base, b.seq)
	d.release(b.state)
	d.mu.Lock()
	defer d.mu.Unlock()
	d.diff.building = nil
	if err != nil || baseLevel(d.version) != b.base {
		d.retireFiltersLocked()
		// Removals queued for the abandoned filter no longer wait for it.
		d.applyRemovalsLocked()
		if err == nil {
			d.requestDiffBuildLocked() // the base moved on meanwhile
		}
		return err
	}
	d.diff.cur, d.diff.base = b.filter, b.base
	d.diff.skipsAtInstall = d.diff.skips.Load()
	d.diff.windowAdds, d.diff.windowSkips = d.diff.adds.Load(), d.diff.skipsAtInstall
	d.diff.buildFailed = false
	d.diff.rebuilds.Add(1)
	d.publishLocked() // the next reads consult it
	d.retireFiltersLocked()
	d.applyRemovalsLocked()
	return nil
}

// diffBuild is a build begun in the commit pipeline: the filter to fill,
// for base level base, with what state holds up to sequence number seq:
// the entries of the memtables mems and of its tables above the base.
type diffBuild struct {
	filter *difffile.Filter
	state  *readState
	mems   []*memEntry
	base   int
	seq    base.SeqNum
}

// beginDiffBuildLocked starts a build of a filter for the current base,
// sized for n versions (diffEntries, counted just before), or returns nil
// when there is nothing to build. d.mu is held and the
// caller leads the commit queue: no commit is under way, so every entry up
// to d.lastSeq is in the memtables, and commits from now on add to the new
// filter.
func (d *DB) beginDiffBuildLocked(n int) *diffBuild {
	b := baseLevel(d.version)
	if !d.diff.enabled || b < 0 || d.diff.building != nil {
		return nil
	}
	f, err := difffile.New(diffCapacity(n), 0)
	if err != nil {
		d.opts.Logger.Warn("bloomkv: sizing the differential-file filter", "err", err)
		return nil
	}
	d.diff.building, d.diff.buildBase = f, b
	d.diff.baseOf[f] = b
	d.addWriterLocked(f)
	s := d.state.Load()
	s.refs.Add(1) // the current state holds a reference, so it is live
	// A flushed memtable's entries are in a level-0 table of s.version as
	// well (a flush publishes the state holding both before it lets go of
	// the memtable): the build counts them there, once.
	var mems []*memEntry
	for _, m := range append([]*memEntry{s.mem}, s.imm...) {
		if !m.flushed {
			mems = append(mems, m)
		}
	}
	return &diffBuild{filter: f, state: s, mems: mems, base: b, seq: d.lastSeq}
}

// fillDiff adds to f the point versions above level baseLevel: the entries
// of mems up to seq, and every entry of the tables of v above the base,
// recording the range deletions of those tables. It runs without d.mu.
func (d *DB) fillDiff(f *difffile.Filter, mems []*memEntry, v *manifest.Version, baseLevel int, seq base.SeqNum) error {
	for _, m := range mems {
		addMemtableToDiff(f, m.mt, seq)
	}
	dels := map[uint64][]rangedel.Tombstone{}
	for l := range baseLevel {
		for meta := range v.Level(l) {
			if d.closedFlag.Load() {
				return ErrClosed // Close waits for the builder: stop here
			}
			r, err := d.eachKeyHash(meta, f.AddHash)
			if err != nil {
				return err
			}
			if rd := r.RangeDeletions(); len(rd) > 0 {
				dels[meta.FileNum] = rd
			}
		}
	}
	d.mu.Lock()
	for num, ts := range dels {
		d.diff.tableDels[num] = ts
	}
	d.mu.Unlock()
	return nil
}

// addMemtableToDiff adds mt's point entries up to seq to f.
func addMemtableToDiff(f *difffile.Filter, mt *memtable.MemTable, seq base.SeqNum) {
	it := mt.NewIter()
	for ok := it.First(); ok; ok = it.Next() {
		if k := it.Key(); k.SeqNum() <= seq {
			f.AddHash(filterblock.Hash(k.UserKey))
		}
	}
}

// MayHaveChanged reports whether key may have a version above the base, the
// last level: in a memtable or in a level above it. False is certain: the key's newest version, or its absence, is
// then the base's, and a Get of it reads the base level only. True may be
// wrong at the filter's false-positive rate (Metrics().DiffFilter), and is
// the answer whenever the filter is off: disabled (Options.DisableDiffFilter),
// while the last level holds no table, or while the filter is being built.
//
// After Compact(nil, nil) the last level holds every key the store had;
// MayHaveChanged is then false for all of them until they are written
// again. After a Compact of a range, the last level holds that range's keys,
// and MayHaveChanged is false for them likewise.
func (d *DB) MayHaveChanged(key []byte) bool {
	if d.closedFlag.Load() {
		return true
	}
	s := d.acquire()
	defer d.release(s)
	return s.diffMaybe(key, filterblock.Hash(key), base.SeqNumMax)
}

// diffMaybe reports whether key (of the given hash) may have a version
// above s's base visible at seq: the filter says maybe, or a range deletion
// above the base covers it, or s carries no filter.
func (s *readState) diffMaybe(key []byte, hash uint64, seq base.SeqNum) bool {
	if s.diff == nil || s.diff.MayContainHash(hash) {
		return true
	}
	if len(s.diffDels) > 0 && rangedel.Cover(s.diffDels, key, seq) != 0 {
		return true
	}
	for _, m := range s.imm {
		if m.mt.RangeDelCover(key, seq) != 0 {
			return true
		}
	}
	return s.mem.mt.RangeDelCover(key, seq) != 0
}

// diffMetrics describes the filter s carries.
func (d *DB) diffMetrics(s *readState) DiffFilterMetrics {
	m := DiffFilterMetrics{
		LastLevel:   baseLevel(s.version),
		Skips:       d.diff.skips.Load(),
		Maybes:      d.diff.maybes.Load(),
		FalseMaybes: d.diff.falseMaybes.Load(),
		Rebuilds:    d.diff.rebuilds.Load(),
		Idle:        s.diffIdle,
	}
	if f := s.diff; f != nil {
		m.On = true
		m.Keys = f.Count()
		m.Capacity = f.Capacity()
		m.Bytes = f.SizeBytes()
		m.DesignFPRate = f.DesignFPRate()
		m.FPRate = f.ExpectedFPRate(float64(max(m.Keys, 0)))
	}
	return m
}

// diffCompactedLocked queues the removal of the versions compaction c, just
// installed and published, took out of the differential: those it dropped
// from inputs above the base, and those it wrote or moved into the base. It
// concerns the filters of the base of the new version. d.mu is held.
func (d *DB) diffCompactedLocked(c *compaction) {
	b := baseLevel(d.version)
	var hs []uint64
	if c.level < b {
		hs = append(hs, c.dropped0...)
		if c.outputLevel == b {
			hs = append(hs, c.written0...)
		}
	}
	if c.outputLevel < b {
		hs = append(hs, c.dropped1...)
	}
	d.queueRemovalLocked(hs, b)
}

// tableHashes returns the hashes of the user keys of every point version
// in the tables. It runs without d.mu.
func (d *DB) tableHashes(files []*manifest.FileMetadata) ([]uint64, error) {
	var hs []uint64
	for _, meta := range files {
		if _, err := d.eachKeyHash(meta, func(h uint64) { hs = append(hs, h) }); err != nil {
			return nil, err
		}
	}
	return hs, nil
}

// eachKeyHash calls fn with the hash of the user key of every point version
// of a table, and returns the table's reader. It runs without d.mu.
func (d *DB) eachKeyHash(meta *manifest.FileMetadata, fn func(uint64)) (*sstable.Reader, error) {
	r, err := d.tables.get(meta)
	if err != nil {
		return nil, err
	}
	it := r.NewCompactionIter()
	for ok := it.First(); ok; ok = it.Next() {
		fn(filterblock.Hash(it.Key().UserKey))
	}
	err = it.Error()
	it.Close()
	if err != nil {
		return nil, fmt.Errorf("bloomkv: reading %s for the differential-file filter: %w", d.path(tableName(meta.FileNum)), err)
	}
	return r, nil
}

// DiffFilterCheck is what CheckDiffFilter measured.
type DiffFilterCheck struct {
	// On says the read state checked carried a filter; LastLevel is its
	// base, the last level (-1: none).
	On        bool
	LastLevel int
	// BaseKeys counts the distinct user keys of the base level's tables
	// probed; Unchanged those of them with no version above the base, and
	// FalseMaybes those of the Unchanged the filter answered "maybe" for.
	BaseKeys, Unchanged, FalseMaybes int64
	// Changed counts the probed keys with a version above the base, and
	// Missed those the filter answered "no" for: a false negative, which
	// must never happen.
	Changed, Missed int64
}

// FPRate is the share of the unchanged keys the filter answered maybe for.
func (c DiffFilterCheck) FPRate() float64 {
	if c.Unchanged == 0 {
		return 0
	}
	return float64(c.FalseMaybes) / float64(c.Unchanged)
}

// CheckDiffFilter measures the differential-file filter on the keys of the
// base level: for each of its distinct user keys (the first limit of them,
// in the order of the base's tables; 0: all) it finds whether the key has a
// version above the base by searching the memtables and every level above
// the base without the filter, and asks the filter. It reads every table
// above the base a key falls in, so it is for inspection tools, not a hot
// path. With no filter on, it only counts the base's keys.
func (d *DB) CheckDiffFilter(limit int) (DiffFilterCheck, error) {
	if d.closedFlag.Load() {
		return DiffFilterCheck{}, ErrClosed
	}
	s := d.acquire()
	defer d.release(s)
	c := DiffFilterCheck{On: s.diff != nil, LastLevel: baseLevel(s.version)}
	if c.LastLevel < 0 {
		return c, nil
	}
	var prev []byte
	havePrev := false // not prev != nil: the empty key is a key
	for meta := range s.version.Level(c.LastLevel) {
		r, err := d.tables.get(meta)
		if err != nil {
			return c, err
		}
		it := r.NewCompactionIter()
		for ok := it.First(); ok && (limit == 0 || c.BaseKeys < int64(limit)); ok = it.Next() {
			key := it.Key().UserKey
			if havePrev && string(prev) == string(key) {
				continue
			}
			prev, havePrev = append(prev[:0], key...), true
			c.BaseKeys++
			if s.diff == nil {
				continue
			}
			hash := filterblock.Hash(key)
			above, err := d.versionAboveBase(s, c.LastLevel, key, hash)
			if err != nil {
				it.Close()
				return c, err
			}
			maybe := s.diffMaybe(key, hash, base.SeqNumMax)
			switch {
			case above:
				c.Changed++
				if !maybe {
					c.Missed++
				}
			default:
				c.Unchanged++
				if maybe {
					c.FalseMaybes++
				}
			}
		}
		err = it.Error()
		it.Close()
		if err != nil {
			return c, fmt.Errorf("bloomkv: reading %s: %w", d.path(tableName(meta.FileNum)), err)
		}
	}
	return c, nil
}

// versionAboveBase reports whether s holds a version of key, or a range
// deletion over it, in a memtable or a level above baseLevel, searching
// without the differential-file filter.
func (d *DB) versionAboveBase(s *readState, baseLevel int, key []byte, hash uint64) (bool, error) {
	for _, m := range append([]*memEntry{s.mem}, s.imm...) {
		if _, _, ok := m.mt.GetHash(key, hash, base.SeqNumMax); ok || m.mt.RangeDelCover(key, base.SeqNumMax) != 0 {
			return true, nil
		}
	}
	for l := range baseLevel {
		for f := range s.version.Containing(l, key) {
			r, err := d.tables.get(f)
			if err != nil {
				return false, err
			}
			if rangedel.Cover(r.RangeDeletions(), key, base.SeqNumMax) != 0 {
				return true, nil
			}
			if _, _, ok, err := r.LookupCopy(key, base.SeqNumMax); err != nil || ok {
				return ok, err
			}
		}
	}
	return false, nil
}
