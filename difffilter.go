package bloomkv

// The differential-file filter's state, the filter each published read
// state carries, and the upkeep that decides whether a filter pays.

import (
	"sync/atomic"

	"github.com/bloomkv/bloomkv/difffile"
	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/manifest"
	"github.com/bloomkv/bloomkv/internal/rangedel"
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
//     table (builds after it count the table, not the memtable). One step
//     removes nothing: a Compact step that takes every table above the
//     base into it (diffEmptiedLocked) leaves the filter counting those
//     versions and asks for a build; counts only too high turn a "no" into
//     a "maybe", never the reverse.
//   - Read states. Each carries the filter it may consult (readState.diff),
//     set when it is published, or nil, meaning "maybe" for every key:
//     while the filter is disabled, while the base is empty, and from a
//     change of base level until a filter for the new base is built.
//   - Builds. A filter is built at Open, when the base level changes, when
//     the differential outgrows the filter (difffile's NeedsGrowth) or
//     shrinks far below it, and after a Compact step that emptied the
//     levels above the base. The build starts as a step of the commit
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
	// when noteIdleGets last found writes outrunning the Gets.
	seqAtIdle base.SeqNum
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

	rebuilds atomic.Uint64

	// The counters each Get that asks the filter adds to, apart from the
	// fields commits and builds write (adds above all), so that readers
	// share their cache line with no writer.
	probeCounts
}

// probeCounts are the counters of the filter's answers to Gets, and its
// adaptive probing (consultDiff, noteProbe), padded to cache lines of
// their own.
type probeCounts struct {
	_ [64]byte
	// skips, maybes and falseMaybes count the answers (DiffFilterMetrics).
	skips, maybes, falseMaybes atomic.Uint64
	// bypass is set while the filter does not pay (diffMinGain); then only
	// Gets of the keys sampledKey picks with sampleSalt (one in
	// diffBypassSample; stepped before bypass is first set) ask it. win counts
	// the current window's probes (low 32 bits) and skips (high 32).
	bypass     atomic.Bool
	sampleSalt atomic.Uint64
	win        atomic.Uint64
	// readsOff is set while Gets do not consult the filter
	// (SetDiffFilterReads); it is maintained all the same.
	readsOff atomic.Bool
	_        [64]byte
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
	ds := &d.mu.diff
	return ds.enabled && (ds.cur != nil || ds.building != nil || c.outputLevel == manifest.NumLevels-1 && d.mu.manualCompacts == 0 && !ds.idle)
}

// initDiff sets up the filter's bookkeeping at Open.
func (d *DB) initDiff() {
	d.mu.diff.enabled = !d.opts.DisableDiffFilter
	d.mu.diff.base = -1
	d.mu.diff.carried = map[*difffile.Filter]int{}
	d.mu.diff.baseOf = map[*difffile.Filter]int{}
	d.mu.diff.tableDels = map[uint64][]rangedel.Tombstone{}
}

// diffForStateLocked fills in the filter fields of a state about to be
// published: its epoch, the filter it may consult, and the range deletions
// above the base. It asks for a build when the state's base calls for one.
// d.mu is held.
func (d *DB) diffForStateLocked(s *readState) {
	ds := &d.mu.diff
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
	ds.nextSampleSalt()
	s.diffSaves = len(s.imm) + 1 + s.version.NumFiles(0)
	for l := 1; l < b; l++ {
		if s.version.NumFiles(l) > 0 {
			s.diffSaves++
		}
	}
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
	ds := &d.mu.diff
	ds.cur, ds.idle = nil, true
	ds.wakeAt.Store(diffWakeGets << min(ds.strikes, diffMaxStrikes))
	ds.idleGets.Store(0)
	ds.seqAtIdle = d.mu.lastSeq
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
	ds := &d.mu.diff
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
	ds := &d.mu.diff
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

// noteIdleGets counts n Gets of a state whose filter is idle, and asks for
// a build when enough have come.
func (d *DB) noteIdleGets(n uint32) {
	if n == 0 {
		return
	}
	after, at := d.mu.diff.idleGets.Add(n), d.mu.diff.wakeAt.Load()
	if after < at || after-n >= at {
		return // the count did not reach wakeAt with these Gets
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.mu.diff.idle {
		return
	}
	if written := uint64(d.mu.lastSeq - d.mu.diff.seqAtIdle); written > uint64(d.mu.diff.wakeAt.Load()) {
		// More versions were written than Gets came meanwhile: a filter
		// would lose its next window (diffWindowLostLocked). Watch the
		// next stretch instead of building one.
		d.mu.diff.seqAtIdle = d.mu.lastSeq
		d.mu.diff.idleGets.Store(0)
		return
	}
	d.mu.diff.idle = false
	d.requestDiffBuildLocked()
}
