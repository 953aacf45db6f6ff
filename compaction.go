package bloomkv

// Running a compaction: merging its inputs, dropping what no snapshot needs,
// writing and installing its outputs.

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/bloomkv/bloomkv/filterblock"
	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/manifest"
	"github.com/bloomkv/bloomkv/internal/rangedel"
)

// compaction is one merge of tables from a level into the next.
type compaction struct {
	level, outputLevel int
	// inputs are the tables read from level and from outputLevel; mid,
	// when set, those of levels between, midLevels[i] the level of mid[i]
	// (a compaction of three levels or more, which Compact runs where it
	// saves rewriting the upper levels' data once per level below them).
	inputs    [2][]*manifest.FileMetadata
	mid       []*manifest.FileMetadata
	midLevels []int
	lo, hi    []byte // the inputs' user-key range, inclusive
	// bottom: no level below outputLevel holds keys in [lo, hi], so
	// deletions visible to every snapshot can go.
	bottom bool
	// snapshots are the read sequence numbers of the snapshots open when the
	// compaction was picked, ascending.
	snapshots []base.SeqNum
	// move: the inputs change level without being rewritten (no table of
	// outputLevel overlaps them).
	move   bool
	manual bool
	score  float64
	// The hashes of the user keys of the versions the compaction wrote
	// from its inputs of level (written0; for a move, every version of the
	// tables moved) and dropped from each input (dropped0, dropped1), for
	// the differential-file filter; gathered only when track is set
	// (diffTrackingLocked, when the compaction starts).
	track                        bool
	written0, dropped0, dropped1 []uint64
}

// all returns the compaction's tables, level by level, top first.
func (c *compaction) all() []*manifest.FileMetadata {
	return slices.Concat(c.inputs[0], c.mid, c.inputs[1])
}

// above returns the number of the compaction's tables (in all's order)
// from levels above the output level.
func (c *compaction) above() int { return len(c.inputs[0]) + len(c.mid) }

// eachInput calls fn with each input table and its level.
func (c *compaction) eachInput(fn func(level int, f *manifest.FileMetadata)) {
	for _, f := range c.inputs[0] {
		fn(c.level, f)
	}
	for i, f := range c.mid {
		fn(c.midLevels[i], f)
	}
	for _, f := range c.inputs[1] {
		fn(c.outputLevel, f)
	}
}

// stripe returns the number of open snapshots that cannot see seq: entries
// in the same stripe are seen by the same snapshots, so within a stripe only
// the newest version of a key matters. Stripe 0 is seen by every snapshot.
func (c *compaction) stripe(seq base.SeqNum) int { return snapshotStripe(c.snapshots, seq) }

// snapshotStripe returns the number of the read sequence numbers snaps
// (ascending) that cannot see seq: its snapshot stripe.
func snapshotStripe(snaps []base.SeqNum, seq base.SeqNum) int {
	return sort.Search(len(snaps), func(i int) bool { return seq < snaps[i] })
}

// stripeCeiling returns the read sequence number below which entries share
// seq's stripe and above seq (the newest snapshot not seeing it), or
// SeqNumMax+1.
func (c *compaction) stripeCeiling(seq base.SeqNum) base.SeqNum {
	i := c.stripe(seq)
	if i == len(c.snapshots) {
		return base.SeqNumMax + 1
	}
	return c.snapshots[i]
}

// compactLoop runs the compactions the level scores call for, one at a time,
// until the DB closes or fails; MaxConcurrentCompactions of them run.
func (d *DB) compactLoop() {
	defer d.bgWG.Done()
	d.mu.Lock()
	defer d.mu.Unlock()
	for {
		var c *compaction
		for !d.mu.closed {
			// Not while an edit is being written: the picker would read
			// the version it is about to replace, without the tables an
			// ingest adds, and could write over their key range in
			// their level.
			if d.mu.bgErr == nil && !d.mu.editing {
				if c = d.pickAutoLocked(); c != nil {
					break
				}
			}
			d.mu.cond.Wait()
		}
		if d.mu.closed {
			return
		}
		if gate := d.mu.compactionGate; gate != nil {
			d.mu.Unlock()
			<-gate
			d.mu.Lock()
			if d.mu.closed {
				d.finishLocked(c)
				return
			}
		}
		d.runLocked(c)
		d.mu.cond.Broadcast()
	}
}

// runLocked runs a started compaction and releases it; a failure becomes the
// store's background error. d.mu is held on entry and on return, and
// released while tables are written and while listeners run (compactLocked,
// and BackgroundError for a failure).
func (d *DB) runLocked(c *compaction) error {
	err := d.compactLocked(c)
	d.finishLocked(c)
	if err != nil && d.mu.bgErr == nil && !errors.Is(err, ErrClosed) { // stopped by Close: no failure
		bgErr := fmt.Errorf("bloomkv: compaction failed; the store takes no more writes until reopened: %w", err)
		d.mu.bgErr = bgErr
		d.unlocked(func() { d.opts.EventListener.BackgroundError(bgErr) })
	}
	return err
}

// compactLocked merges (or moves) the compaction's inputs into its output
// level and installs the result. d.mu is held on entry and on return, and
// released while the CompactionBegin listener runs and the tables are
// merged, while the edit is written and synced (logAndApplyLocked), and
// while the CompactionEnd listener runs, after the result is installed. The inputs stay busy throughout (startLocked), so no other
// compaction takes them meanwhile.
func (d *DB) compactLocked(c *compaction) error {
	info := CompactionInfo{FromLevel: c.level, ToLevel: c.outputLevel, Move: c.move, Manual: c.manual, Score: c.score}
	for _, f := range c.all() {
		info.Inputs = append(info.Inputs, f.FileNum)
	}
	var outputs []*manifest.FileMetadata
	var bytesIn uint64
	var err error
	c.track = d.diffTrackingLocked(c)
	rebuild := c.track && d.diffEmptiedLocked(c)
	if rebuild {
		c.track = false
	}
	needHashes := c.track && c.move && c.level < c.outputLevel && c.outputLevel >= baseLevel(d.mu.version)
	d.mu.Unlock()
	d.opts.EventListener.CompactionBegin(info)
	start := time.Now()
	if c.move {
		outputs = c.inputs[0]
		if needHashes {
			// Moved into the base, these versions leave the
			// differential: the filter needs their keys. Without them
			// it only keeps counting them (a "maybe" for those keys
			// until the next build), which does not fail the move.
			var herr error
			if c.written0, herr = d.tableHashes(c.inputs[0]); herr != nil {
				c.written0 = nil
				d.opts.Logger.Warn(diffMoveReadFailedMessage, "err", herr)
			}
		}
	} else {
		outputs, bytesIn, err = d.mergeTables(c)
	}
	d.mu.Lock()

	end := func(err error) error {
		info.Duration, info.Err, info.BytesIn = time.Since(start), err, bytesIn
		if !c.move {
			for _, m := range outputs {
				info.Outputs = append(info.Outputs, m.FileNum)
				info.BytesOut += m.Size
			}
		}
		d.unlocked(func() { d.opts.EventListener.CompactionEnd(info) })
		return err
	}
	if err != nil {
		for _, m := range outputs {
			d.removeTableLocked(m.FileNum, "an output of a failed compaction")
		}
		return end(err)
	}
	edit := &manifest.VersionEdit{}
	c.eachInput(func(l int, f *manifest.FileMetadata) {
		edit.DeletedFiles = append(edit.DeletedFiles, manifest.DeletedFile{Level: l, FileNum: f.FileNum})
	})
	var bytesOut uint64
	for _, m := range outputs {
		edit.NewFiles = append(edit.NewFiles, manifest.NewFile{Level: c.outputLevel, Meta: m})
		bytesOut += m.Size
	}
	if err := d.logAndApplyLocked(edit); err != nil {
		// The edit may have reached the manifest even though the call
		// failed (a failed sync): the outputs stay. The store now takes no
		// more edits, and the next Open removes whichever tables the
		// version it replays does not hold.
		return end(err)
	}
	d.publishLocked()
	d.diffCompactedLocked(c)
	if rebuild && d.mu.diff.cur != nil && !d.mu.diff.idle {
		// (A filter publishLocked dropped for not paying stays dropped.)
		d.requestDiffBuildLocked()
	}
	lm := &d.metrics.levels
	if c.move {
		d.metrics.moves.Add(1)
		lm[c.outputLevel].bytesMoved.Add(bytesOut)
	} else {
		d.metrics.compactions.Add(1)
		d.metrics.compactBytesIn.Add(bytesIn)
		d.metrics.compactBytesOut.Add(bytesOut)
		lm[c.outputLevel].compactions.Add(1)
		lm[c.outputLevel].bytesWritten.Add(bytesOut)
		c.eachInput(func(l int, f *manifest.FileMetadata) { lm[l].bytesRead.Add(f.Size) })
	}
	d.opts.Logger.Debug("bloomkv: compacted", "from", c.level, "to", c.outputLevel, "move", c.move, "inputs", len(info.Inputs), "outputs", len(outputs), "bytes_in", bytesIn, "bytes_out", bytesOut, "duration", time.Since(start))
	return end(nil)
}

// diffEmptiedLocked reports whether compaction c, a step of Compact, takes
// every table above the last level into it while the current filter counts
// for that base, no build is under way or can start before c ends (builds
// wait for Compact), and the last build did not fail (a failed build is
// not asked for again). Then c records no versions for removal: once it is
// installed the differential is the memtables and whatever flushes add
// meanwhile, and a build of a filter for that, asked for at once, costs
// less than removing every version c takes in from the filter one by one;
// the filter keeps counting them until that build replaces it, which only
// turns "no" into "maybe" for their keys. d.mu is held.
func (d *DB) diffEmptiedLocked(c *compaction) bool {
	const last = manifest.NumLevels - 1
	ds := &d.mu.diff
	if !c.manual || c.move || c.outputLevel != last || c.level == last || d.mu.manualCompacts == 0 ||
		ds.cur == nil || ds.base != last || ds.building != nil || ds.buildRunning || ds.buildFailed {
		return false
	}
	above := 0
	for l := range last {
		above += d.mu.version.NumFiles(l)
	}
	return c.above() == above
}

// errCompactionStopped is the error of a compaction Close stopped: its
// outputs are deleted (compactLocked), and the store has not failed.
var errCompactionStopped = fmt.Errorf("bloomkv: compaction stopped by Close: %w", ErrClosed)

// mergeTables merges the compaction's tables (newest first among a key's
// versions, which internal-key order gives) into new tables of about
// TargetFileSize, split only between user keys. Of each key's versions it
// keeps the newest in each snapshot stripe, drops versions a range deletion
// of the same stripe hides, and at the bottom drops deletions every snapshot
// sees and writes the versions every snapshot sees with sequence number 0.
// Range deletions are kept likewise, each output holding the parts in its
// own key range. Once Close has begun it stops at the next user key with
// errCompactionStopped, returning the outputs finished so far for the
// caller to delete.
func (d *DB) mergeTables(c *compaction) ([]*manifest.FileMetadata, uint64, error) {
	var bytesIn uint64
	mi := &mergingIter{}
	defer mi.close()
	var tombs []rangedel.Tombstone
	for _, f := range c.all() {
		r, err := d.tables.get(f)
		if err != nil {
			return nil, 0, err
		}
		bytesIn += f.Size
		mi.iters = append(mi.iters, r.NewCompactionIter())
		tombs = append(tombs, r.RangeDeletions()...)
	}
	frags := rangedel.Fragment(tombs)
	kept := c.keepTombstones(frags)

	var outputs []*manifest.FileMetadata
	var out *tableBuilder
	var splitLo []byte // where the current output's range starts (nil: unbounded)
	// An output is synced on a goroutine of its own while the merge goes
	// on into the next, one sync at a time: the device then writes back an
	// output while the next is merged, compressed and written, where a
	// sync in line would leave the merge waiting for it. Every sync ends,
	// and must have succeeded, before mergeTables returns outputs for an
	// edit to name.
	var syncing chan error // the last output's sync, under way (nil: none)
	waitSync := func() error {
		if syncing == nil {
			return nil
		}
		err := <-syncing
		syncing = nil
		return err
	}
	open := func() error {
		if d.closedFlag.Load() {
			return errCompactionStopped
		}
		d.mu.Lock()
		num := d.allocFileNumLocked()
		d.mu.Unlock()
		var err error
		out, err = d.newTableBuilder(num)
		return err
	}
	// finish completes the current output with the range deletions of
	// [splitLo, hi) (hi nil: unbounded).
	finish := func(hi []byte) error {
		ts := rangedel.Clip(kept, splitLo, hi)
		if out == nil && len(ts) == 0 {
			return nil
		}
		if out == nil {
			if err := open(); err != nil {
				return err
			}
		}
		for _, t := range ts {
			if err := out.addRangeDel(t); err != nil {
				out.abandon()
				out = nil
				return err
			}
		}
		b := out
		out = nil
		m, err := b.complete()
		if err != nil {
			return err
		}
		outputs = append(outputs, m)
		if err := waitSync(); err != nil {
			b.f.Close() // the caller removes every output
			return err
		}
		ch := make(chan error, 1)
		go func() { ch <- b.sync() }()
		syncing = ch
		return nil
	}
	fail := func(err error) ([]*manifest.FileMetadata, uint64, error) {
		if out != nil {
			out.abandon()
		}
		// The outputs' files are closed before the caller removes them;
		// a sync that failed as well is reported beside err.
		if serr := waitSync(); serr != nil {
			err = errors.Join(err, serr)
		}
		return outputs, 0, err
	}

	// For the differential-file filter (c.track): into the base, every
	// version of the level-above inputs leaves the differential, so each
	// version's input and key hash matter; elsewhere only the versions
	// dropped do, all of them above the base (recorded in dropped0).
	toBase := c.track && c.level < c.outputLevel && c.outputLevel == manifest.NumLevels-1
	n0 := c.above()
	var hash uint64
	var in0 bool
	dropped := func(userKey []byte) {
		switch {
		case !c.track:
		case !toBase:
			c.dropped0 = append(c.dropped0, filterblock.Hash(userKey))
		case in0:
			c.dropped0 = append(c.dropped0, hash)
		default:
			c.dropped1 = append(c.dropped1, hash)
		}
	}

	var prevUser []byte
	havePrev := false // not prevUser != nil: the empty key is a key
	lastStripe := -1
	for ok := mi.first(); ok; ok = mi.next() {
		k := mi.key()
		if toBase {
			if !havePrev || !bytes.Equal(k.UserKey, prevUser) {
				hash = filterblock.Hash(k.UserKey)
			}
			in0 = mi.topIndex() < n0
		}
		if !havePrev || !bytes.Equal(k.UserKey, prevUser) {
			if d.closedFlag.Load() {
				return fail(errCompactionStopped)
			}
			if out != nil && int64(out.size()) >= d.opts.TargetFileSize {
				if err := finish(k.UserKey); err != nil {
					return fail(err)
				}
				splitLo = bytes.Clone(k.UserKey)
			}
			prevUser, havePrev, lastStripe = append(prevUser[:0], k.UserKey...), true, -1
		}
		stripe := c.stripe(k.SeqNum())
		if stripe == lastStripe {
			dropped(k.UserKey)
			continue // a newer version hides it from every snapshot that sees it
		}
		lastStripe = stripe
		if len(frags) > 0 && rangedel.Cover(frags, k.UserKey, c.stripeCeiling(k.SeqNum())) > k.SeqNum() {
			dropped(k.UserKey)
			continue // a range deletion of the same stripe hides it
		}
		if c.bottom && stripe == 0 {
			if k.Kind() == base.KindDelete {
				dropped(k.UserKey)
				continue // nothing older below; every snapshot sees the deletion
			}
			// The oldest version every snapshot sees, with nothing of
			// its key below: its sequence number orders it against no
			// other entry, so it is written as 0. Random sequence
			// numbers are bytes Snappy cannot compress; a constant
			// trailer is one it can (about 4 bytes an entry). Every
			// kept range deletion is of a later stripe, so newer than
			// the key before and after.
			k.Trailer = base.MakeTrailer(0, k.Kind())
		}
		if out == nil {
			if err := open(); err != nil {
				return fail(err)
			}
		}
		if err := out.add(k, mi.value()); err != nil {
			return fail(err)
		}
		if toBase && in0 {
			c.written0 = append(c.written0, hash)
		}
	}
	if err := mi.err(); err != nil {
		return fail(err)
	}
	if err := finish(nil); err != nil {
		return fail(err)
	}
	if err := waitSync(); err != nil {
		return outputs, 0, err
	}
	if len(outputs) > 0 {
		if err := d.fs.SyncDir(d.dir); err != nil {
			return outputs, 0, fmt.Errorf("bloomkv: syncing %s: %w", d.dir, err)
		}
	}
	return outputs, bytesIn, nil
}

// keepTombstones returns the fragments a compaction must write: of each
// span's sequence numbers the newest in each snapshot stripe, without those
// every snapshot sees when the compaction is at the bottom.
func (c *compaction) keepTombstones(frags []rangedel.Tombstone) []rangedel.Tombstone {
	var out []rangedel.Tombstone
	for i := 0; i < len(frags); {
		j := i
		last := -1
		for ; j < len(frags) && bytes.Equal(frags[j].Start, frags[i].Start); j++ {
			s := c.stripe(frags[j].SeqNum)
			if s == last || (c.bottom && s == 0) {
				continue
			}
			last = s
			out = append(out, frags[j])
		}
		i = j
	}
	return out
}

// Compact compacts the keys in [start, end) down to the last level, end
// exclusive as in DeleteRange and iterator bounds: shadowed versions and
// deletions no snapshot needs are dropped. A nil start or end leaves that
// side open. The memtable is flushed first. A table that holds end itself
// may be compacted too, which changes no answer. The tables it replaced
// are deleted by the time it returns, but for those a read under way or
// an open iterator or snapshot still reads, deleted once released.
func (d *DB) Compact(start, end []byte) error {
	if d.closedFlag.Load() {
		return ErrClosed
	}
	if d.opts.ReadOnly {
		return ErrReadOnly
	}
	if start != nil && end != nil {
		if err := checkRange(start, end); err != nil {
			return err
		}
	}
	if err := d.Flush(); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.mu.closed {
		return ErrClosed
	}
	// Close waits for background work, this call included.
	d.bgWG.Add(1)
	defer d.bgWG.Done()
	d.mu.manualCompacts++
	err := d.compactRangeLocked(start, end)
	d.mu.manualCompacts--
	d.mu.cond.Broadcast() // the filter's builder waits for the end
	if err == nil {
		d.waitDiffBuildLocked()
		d.waitRemovedLocked() // the space the compaction freed is free on return
	}
	return err
}

// compactRangeLocked is Compact's work once the memtable is flushed: each
// level's tables in [start, end] go down in turn, then the last level's
// are rewritten. d.mu is held on entry and on return.
func (d *DB) compactRangeLocked(start, end []byte) error {
	for l := 0; l < manifest.NumLevels-1; l++ {
		for {
			d.waitEditLocked() // as compactLoop: set up from the version an edit leaves
			if d.mu.closed {
				return ErrClosed
			}
			if d.mu.bgErr != nil {
				return d.mu.bgErr
			}
			inputs := d.mu.version.Overlapping(l, start, end)
			if l == 0 && len(inputs) > 0 {
				// Level 0 goes down whole: an older table left behind
				// would shadow newer data moved below it.
				inputs = d.mu.version.Files(0)
			}
			if len(inputs) == 0 {
				break
			}
			c := d.manualSetupLocked(l, inputs)
			if c == nil {
				d.mu.cond.Wait() // a background compaction holds a table
				continue
			}
			c.manual = true
			if c.outputLevel == manifest.NumLevels-1 && c.level == l {
				c.move = false // rewrite into the last level to drop deletions
			}
			d.startLocked(c)
			err := d.runLocked(c)
			d.mu.cond.Broadcast()
			if err != nil {
				return err
			}
			if c.level != l {
				continue // tables below moved down; now level l's
			}
			break
		}
	}
	return d.compactLastLevelLocked(start, end)
}

// compactLastLevelLocked rewrites the last level's tables in [start, end]
// that hold deletions (kept there for snapshots since closed, or moved there
// whole), so that Compact leaves none that no snapshot needs. d.mu is held
// on entry and on return, and released while it waits for a compaction
// holding its tables and while it runs its own (runLocked).
func (d *DB) compactLastLevelLocked(start, end []byte) error {
	const last = manifest.NumLevels - 1
	for {
		d.waitEditLocked()
		if d.mu.closed {
			return ErrClosed
		}
		if d.mu.bgErr != nil {
			return d.mu.bgErr
		}
		// All the range's tables or none: outputs cover the inputs' whole
		// span, which must not take in a table left out.
		inputs := d.mu.version.Overlapping(last, start, end)
		deletions := false
		for _, f := range inputs {
			r, err := d.tables.get(f)
			if err != nil {
				return err
			}
			deletions = deletions || r.Properties().NumDeletions > 0
		}
		if !deletions {
			return nil
		}
		c := &compaction{level: last, outputLevel: last, manual: true, bottom: true}
		c.inputs[0] = inputs
		c.lo, c.hi = keyRange(inputs)
		if d.conflictsLocked(c) {
			d.mu.cond.Wait()
			continue
		}
		c.snapshots = slices.Clone(d.mu.snapshots)
		d.startLocked(c)
		err := d.runLocked(c)
		d.mu.cond.Broadcast()
		return err
	}
}
