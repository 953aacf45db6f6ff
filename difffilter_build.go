package bloomkv

// Building a differential-file filter: the builder goroutine, the build's
// start in the commit pipeline, and the count of the differential it fills
// in.

import (
	"errors"
	"fmt"

	"github.com/bloomkv/bloomkv/difffile"
	"github.com/bloomkv/bloomkv/filterblock"
	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/manifest"
	"github.com/bloomkv/bloomkv/internal/rangedel"
	"github.com/bloomkv/bloomkv/memtable"
	"github.com/bloomkv/bloomkv/sstable"
)

// diffMinCapacity is the smallest capacity a filter is built with: 64 Ki
// keys, 256 KiB at difffile's default density.
const diffMinCapacity = 64 << 10

// requestDiffBuildLocked wakes the builder unless a build runs or the last
// one failed. d.mu is held.
func (d *DB) requestDiffBuildLocked() {
	if d.mu.diff.building != nil || d.mu.diff.buildFailed || d.opts.ReadOnly {
		return
	}
	d.mu.diff.wantBuild = true
	d.mu.cond.Broadcast()
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
		for !d.mu.closed && !(d.mu.diff.wantBuild && d.mu.bgErr == nil && d.mu.manualCompacts == 0) {
			d.mu.cond.Wait()
		}
		if d.mu.closed {
			return
		}
		d.mu.diff.wantBuild, d.mu.diff.buildRunning = false, true
		d.mu.Unlock()
		err := d.buildDiff()
		d.mu.Lock()
		d.mu.diff.buildRunning = false
		d.mu.cond.Broadcast() // for those waiting for background work to end
		if err != nil && !errors.Is(err, ErrClosed) {
			d.mu.diff.buildFailed = true
			d.opts.Logger.Warn(diffBuildFailedMessage, "err", err)
		}
	}
}

// waitDiffBuildLocked waits for the filter build a version asked for, so
// that a Compact returns with the filter of its new base in use. It stops
// waiting when the store closes or fails, or when another Compact starts
// (builds wait for those). d.mu is held.
func (d *DB) waitDiffBuildLocked() {
	for !d.mu.closed && d.mu.bgErr == nil && d.mu.manualCompacts == 0 && (d.mu.diff.wantBuild || d.mu.diff.buildRunning) {
		d.mu.cond.Wait()
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
	d.mu.diff.building = nil
	if err != nil || baseLevel(d.mu.version) != b.base {
		d.retireFiltersLocked()
		// Removals queued for the abandoned filter no longer wait for it.
		d.applyRemovalsLocked()
		if err == nil {
			d.requestDiffBuildLocked() // the base moved on meanwhile
		}
		return err
	}
	d.mu.diff.cur, d.mu.diff.base = b.filter, b.base
	d.mu.diff.skipsAtInstall = d.mu.diff.skips.Load()
	d.mu.diff.windowAdds, d.mu.diff.windowSkips = d.mu.diff.adds.Load(), d.mu.diff.skipsAtInstall
	d.mu.diff.buildFailed = false
	d.mu.diff.rebuilds.Add(1)
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
// to d.mu.lastSeq is in the memtables, and commits from now on add to the new
// filter.
func (d *DB) beginDiffBuildLocked(n int) *diffBuild {
	b := baseLevel(d.mu.version)
	if !d.mu.diff.enabled || b < 0 || d.mu.diff.building != nil {
		return nil
	}
	f, err := difffile.New(diffCapacity(n), 0)
	if err != nil {
		d.opts.Logger.Warn("bloomkv: sizing the differential-file filter", "err", err)
		return nil
	}
	d.mu.diff.building, d.mu.diff.buildBase = f, b
	d.mu.diff.baseOf[f] = b
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
	return &diffBuild{filter: f, state: s, mems: mems, base: b, seq: d.mu.lastSeq}
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
		d.mu.diff.tableDels[num] = ts
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
