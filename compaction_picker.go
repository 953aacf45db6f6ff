package bloomkv

// Scoring the levels and picking the next automatic compaction: level
// targets, scores, level 0's depth, seek-driven and elision picks.

import (
	"bytes"
	"cmp"
	"math"
	"slices"

	"github.com/bloomkv/bloomkv/internal/manifest"
)

// levelTargets is the shape the compaction scores aim the tree at: the
// base level, into which level 0 compacts, and the size each level from
// the base down to the one above the last may reach.
type levelTargets struct {
	base     int
	maxBytes [manifest.NumLevels]float64 // +Inf where a level has no target
}

// levelTargets computes the targets from the tables in v and the running
// compactions by the shares of RocksDB's level_compaction_dynamic_level_bytes:
// the last level is to hold all but 1/LevelMultiplier of the data, each level
// above it a LevelMultiplier-th of the next, and the base is the highest
// level that needs data by that rule (never above the first level holding
// data, never below level 1); each level from the base down has its share
// by that rule as its target, the base's at least
// LBaseMaxBytes/LevelMultiplier (the levels below a base so raised
// LevelMultiplier times the one above). A small store thus keeps its data in level
// 0 and the last level alone, and each level that fills in the middle holds
// what the levels below it make room for, rather than level 1 filling to
// its fixed size first, whatever the store's size. The levels above the
// last then hold about a LevelMultiplier-th of the data, which bounds the
// older versions a store keeps beside the last level's, and what a scan
// merges and skips. (RocksDB raises every target to its base size, and
// Pebble gives the base LBaseMaxBytes and spreads the rest by a smaller
// factor: in both the levels above the last can hold a third of the data
// and more.)
func (d *DB) levelTargets(v *manifest.Version, running []*compaction) levelTargets {
	const last = manifest.NumLevels - 1
	var t levelTargets
	for l := range t.maxBytes {
		t.maxBytes[l] = math.Inf(1)
	}
	first := -1 // the first level below level 0 holding data
	var below uint64
	for l := 1; l <= last; l++ {
		if n := v.LevelSize(l); n > 0 {
			if first < 0 {
				first = l
			}
			below += n
		}
	}
	// A level-0 compaction under way into a level above it makes that the
	// base: its outputs are about to hold data.
	for _, r := range running {
		if r.level == 0 && r.outputLevel > 0 && (first < 0 || r.outputLevel < first) {
			first = r.outputLevel
		}
	}
	if below == 0 {
		t.base = last
		if first > 0 {
			t.base = first
		}
		return t
	}
	mult := float64(d.opts.LevelMultiplier)
	total := float64(below + v.LevelSize(0))
	bottom := total - total/mult
	size := bottom // what level first would hold, each level a mult-th of the next
	for l := last - 1; l >= first; l-- {
		size /= mult
	}
	lbase := float64(d.opts.LBaseMaxBytes)
	t.base = first
	for t.base > 1 && size > lbase {
		t.base--
		size /= mult
	}
	size = max(size, lbase/mult)
	for l := t.base; l < last; l++ {
		t.maxBytes[l] = size
		size *= mult
	}
	return t
}

// l0Depth returns the most tables of level 0, busy ones left out, whose key
// ranges hold one same key: the sorted runs a read of that key meets in
// level 0 (Pebble's sublevels).
func l0Depth(files []*manifest.FileMetadata, busy map[uint64]bool) int {
	type edge struct {
		key   []byte
		start bool
	}
	edges := make([]edge, 0, 2*len(files))
	for _, f := range files {
		if !busy[f.FileNum] {
			edges = append(edges, edge{f.Smallest.UserKey, true}, edge{f.Largest.UserKey, false})
		}
	}
	// Ranges are inclusive: at one key, starts count before ends.
	slices.SortFunc(edges, func(a, b edge) int {
		if c := bytes.Compare(a.key, b.key); c != 0 {
			return c
		}
		if a.start == b.start {
			return 0
		}
		if a.start {
			return -1
		}
		return 1
	})
	depth, most := 0, 0
	for _, e := range edges {
		if e.start {
			depth++
			most = max(most, depth)
		} else {
			depth--
		}
	}
	return most
}

// l0Movable returns the tables of level 0 that can move into the base
// level without a rewrite: when no two of its tables (busy ones left out)
// overlap, those that overlap no table of the base and no busy table of
// level 0, none of them busy.
//
// A busy table of level 0 that overlaps one that is not is the older of the
// two (a merge of level 0 takes all its tables, a move only tables that
// overlap no other), and it stays in level 0, above every other level, until
// its compaction ends. That compaction may be writing into a level below the
// base: the base rises as the store grows (levelTargets), and a merge of
// level 0 running into the old base does not hold it down. The newer table,
// moved into the base meanwhile, would sit below the older one, and a Get,
// which stops at the first table holding the key or a range deletion over
// it, would read the older version.
func l0Movable(v *manifest.Version, base int, busy map[uint64]bool) []*manifest.FileMetadata {
	if l0Depth(v.Files(0), busy) != 1 {
		return nil
	}
	var held []*manifest.FileMetadata
	for f := range v.Level(0) {
		if busy[f.FileNum] {
			held = append(held, f)
		}
	}
	var out []*manifest.FileMetadata
	for f := range v.Level(0) {
		lo, hi := f.Smallest.UserKey, f.Largest.UserKey
		if busy[f.FileNum] || len(v.Overlapping(base, lo, hi)) > 0 ||
			slices.ContainsFunc(held, func(h *manifest.FileMetadata) bool { return h.Overlaps(lo, hi) }) {
			continue
		}
		out = append(out, f)
	}
	return out
}

// levelScoresLocked returns each level's compaction score (levelScores).
func (d *DB) levelScoresLocked(v *manifest.Version) [manifest.NumLevels]float64 {
	return d.levelScores(v, d.levelTargets(v, d.mu.running), d.mu.busy)
}

// levelScores returns each level's compaction score, at 1 or more due for
// compaction, given the targets and the tables running compactions hold
// (busy; nil: none).
//
// The levels from the base down score their compensated bytes
// (compensatedSize: a deletion counts the bytes it is expected to free
// below), less those being compacted away, over their target; the last
// level and those above the base (empty) 0.
//
// Level 0 scores the larger of its depth (l0Depth) over
// L0CompactionThreshold and its tables over half of L0StopWritesThreshold,
// divided by the base level's score, counted against a target of at least
// LBaseMaxBytes, when that exceeds 1 and level 0 has not stopped writes (as
// Pebble weighs a level against the one it compacts into): each merge of level 0 rewrites the base tables it overlaps, all of
// them for random keys, so a base let grow while level 0 keeps the one
// compaction slot makes every later merge longer (at 8M keys the base
// reached 5.6 times its target, and a random load wrote 8.6 bytes a byte
// against 5.7 with the division). It scores at least 1 when tables of it
// can move into the base level unrewritten (l0Movable: they overlap no
// other table of level 0, busy or not, and no base table) or when iterator
// seeks have paid for its compaction (noteL0Seek).
func (d *DB) levelScores(v *manifest.Version, t levelTargets, busy map[uint64]bool) [manifest.NumLevels]float64 {
	var s [manifest.NumLevels]float64
	for l := max(t.base, 1); l < manifest.NumLevels-1; l++ {
		per := entryBytesBelow(v, l)
		st := v.LevelStats(l)
		size := float64(st.Size) + float64(st.Deletions)*per
		if len(busy) > 0 {
			for f := range v.Level(l) {
				if busy[f.FileNum] {
					size -= compensatedSize(f, per)
				}
			}
		}
		s[l] = max(size, 0) / t.maxBytes[l]
	}
	l0 := v.Files(0)
	depth := l0Depth(l0, busy)
	s[0] = max(float64(depth)/float64(d.opts.L0CompactionThreshold), float64(len(l0))/(float64(d.opts.L0StopWritesThreshold)/2))
	if t.base > 0 && t.base < manifest.NumLevels-1 && len(l0) < d.opts.L0StopWritesThreshold {
		// The base weighs on level 0 as if its target were at least
		// LBaseMaxBytes: a base target of a tenth of that, a few
		// memtables, would hold level 0 back until writes stop.
		target := t.maxBytes[t.base]
		if b := s[t.base] * target / max(target, float64(d.opts.LBaseMaxBytes)); b > 1 {
			s[0] /= b
		}
	}
	if s[0] < 1 && len(l0Movable(v, t.base, busy)) > 0 {
		s[0] = 1
	}
	if limit := d.l0SeekLimit.Load(); s[0] < 1 && len(l0) > 0 && limit > 0 && d.l0Seeks.Load() >= limit {
		s[0] = 1 // seeks have paid for its compaction (noteL0Seek)
	}
	return s
}

// entryBytesBelow returns the mean bytes of an entry in the levels below
// l, over the tables whose entries are counted (0 without any): what a
// deletion in level l is expected to free when a compaction takes it down.
func entryBytesBelow(v *manifest.Version, l int) float64 {
	var size, entries uint64
	for k := l + 1; k < manifest.NumLevels; k++ {
		st := v.LevelStats(k)
		size += st.CountedSize
		entries += st.Entries
	}
	if entries == 0 {
		return 0
	}
	return float64(size) / float64(entries)
}

// compensatedSize returns f's bytes plus those its deletions are expected to
// free below (per bytes each; entryBytesBelow), as Pebble's compensated
// size does, so that a level holding deletions of much data compacts before
// its bytes alone would call for it, and frees the space.
func compensatedSize(f *manifest.FileMetadata, per float64) float64 {
	return float64(f.Size) + float64(f.Deletions)*per
}

// pickAutoLocked returns the compaction the scores call for, with its tables
// marked busy, or nil.
func (d *DB) pickAutoLocked() *compaction {
	if d.mu.manualCompacts > 0 {
		// Compact goes first, as Pebble's manual compactions do: a
		// background compaction started while it waits for the tables it
		// needs would write data it is about to rewrite.
		return nil
	}
	t := d.levelTargets(d.mu.version, d.mu.running)
	scores := d.levelScores(d.mu.version, t, d.mu.busy)
	// Every level but the last, highest score first.
	var levels [manifest.NumLevels - 1]int
	for l := range levels {
		levels[l] = l
	}
	slices.SortStableFunc(levels[:], func(a, b int) int { return cmp.Compare(scores[b], scores[a]) })
	for _, l := range levels {
		if scores[l] < 1 {
			break
		}
		var c *compaction
		if l == 0 {
			c = d.pickL0Locked(t.base)
		} else {
			c = d.pickFileLocked(l)
		}
		if c != nil {
			c.score = scores[l]
			d.startLocked(c)
			return c
		}
	}
	if c := d.pickElisionLocked(); c != nil {
		d.startLocked(c)
		return c
	}
	return nil
}

// elisionMinShare is the share of a table's entries that must be deletions
// for an elision-only or tombstone-density compaction to take it
// (pickElisionLocked).
const elisionMinShare = 0.1

// noteEditLocked keeps the picker's bookkeeping up to date with an
// installed edit: the candidates for elision-only compactions, and the seek
// count and limit of level 0 (noteL0Seek), which restart when level 0
// changes.
func (d *DB) noteEditLocked(e *manifest.VersionEdit) {
	changed := false
	for _, f := range e.DeletedFiles {
		changed = changed || f.Level == 0
	}
	for _, f := range e.NewFiles {
		changed = changed || f.Level == 0
	}
	if changed {
		d.resetL0SeeksLocked()
	}
	d.noteElisionLocked(e)
}

// resetL0SeeksLocked restarts the count of seeks that met level 0, with
// the limit its tables allow.
func (d *DB) resetL0SeeksLocked() {
	d.l0Seeks.Store(0)
	limit := int64(0)
	if d.mu.version.NumFiles(0) > 0 {
		limit = max(l0MinSeeks, int64(d.mu.version.LevelSize(0)/l0BytesPerSeek))
	}
	d.l0SeekLimit.Store(limit)
}

// A level-0 table over the base costs every seek that meets it a block
// read or more; it is compacted away once seeks have met it about once per
// l0BytesPerSeek of level 0 (at least l0MinSeeks times), LevelDB's
// allowed_seeks rule (there per table, a seek costing about as much as
// compacting 16 KiB) and the reason for Pebble's read-triggered
// compactions. Reads then stop paying for a level-0 table the writes have
// not yet pushed down.
const (
	l0BytesPerSeek = 16 << 10
	l0MinSeeks     = 100
)

// noteL0Seek counts an iterator seek that met level-0 tables; the one that
// reaches the limit wakes the compaction loop, which then finds level 0 due
// (levelScores).
func (d *DB) noteL0Seek() {
	limit := d.l0SeekLimit.Load()
	if n := d.l0Seeks.Add(1); limit > 0 && n == limit {
		d.mu.Lock()
		d.mu.cond.Broadcast()
		d.mu.Unlock()
	}
}

// noteElisionLocked keeps d.mu.elide up to date with an installed edit.
func (d *DB) noteElisionLocked(e *manifest.VersionEdit) {
	for _, f := range e.DeletedFiles {
		delete(d.mu.elide, f.FileNum)
	}
	for _, f := range e.NewFiles {
		if f.Level > 0 && f.Meta.Deletions > 0 {
			d.mu.elide[f.Meta.FileNum] = elisionCandidate{f.Level, f.Meta}
		}
	}
}

// elisionCandidate is a table below level 0 holding deletions, and its
// level (DB.elide).
type elisionCandidate struct {
	level int
	f     *manifest.FileMetadata
}

// pickElisionLocked returns, when no level is due, a compaction of the
// table below level 0 densest in deletions, of which at least
// elisionMinShare of the entries are deletions that every open snapshot
// sees. A last-level table is rewritten alone (an elision-only compaction),
// which drops the deletions with the versions they hide; a table above it
// is compacted into the next level with the tables it overlaps there (a
// tombstone-density compaction), which takes the deletions to the versions
// they hide, and drops both at the last level, when that frees enough of
// what it rewrites (worthRewriting). Pebble and RocksDB do the
// same. Deletions reach the last level where a snapshot kept them through
// a compaction, or with a table moved there whole; they stay above it while
// their level is under its target. It returns nil when no table qualifies.
func (d *DB) pickElisionLocked() *compaction {
	const last = manifest.NumLevels - 1
	var cands []elisionCandidate
	for _, c := range d.mu.elide {
		f := c.f
		if d.mu.busy[f.FileNum] || float64(f.Deletions) < elisionMinShare*float64(f.Entries) {
			continue
		}
		if len(d.mu.snapshots) > 0 && d.mu.snapshots[0] <= f.LargestSeq {
			continue // an open snapshot does not see every deletion
		}
		cands = append(cands, c)
	}
	// Densest first; then by file number, for a stable choice.
	slices.SortFunc(cands, func(a, b elisionCandidate) int {
		if c := cmp.Compare(b.f.Deletions*a.f.Entries, a.f.Deletions*b.f.Entries); c != 0 {
			return c
		}
		return cmp.Compare(a.f.FileNum, b.f.FileNum)
	})
	for _, cand := range cands {
		var c *compaction
		if cand.level == last {
			c = d.newCompactionLocked(last, last, []*manifest.FileMetadata{cand.f}, nil)
		} else {
			c = d.setupLocked(cand.level, []*manifest.FileMetadata{cand.f})
			if c != nil && !worthRewriting(c, entryBytesBelow(d.mu.version, cand.level)) {
				c = nil
			}
		}
		if c != nil {
			c.score = float64(cand.f.Deletions) / float64(cand.f.Entries)
			return c
		}
	}
	return nil
}

// worthRewriting reports whether c, the compaction of a table dense in
// deletions into the next level, is expected to free at least a quarter of
// the bytes it rewrites there (per bytes an entry below). A table of
// deletions spread over the whole key space, as a flush of random deletes
// moved down whole makes, would otherwise rewrite all of the level below
// for a few megabytes, and hold the one compaction slot while level 0
// fills; its deletions wait until level 0's merges have cut them into
// narrower tables.
func worthRewriting(c *compaction, per float64) bool {
	var over uint64
	for _, f := range c.inputs[1] {
		over += f.Size
	}
	var freed float64
	for _, f := range c.inputs[0] {
		freed += float64(f.Deletions) * per
	}
	return 4*freed >= float64(over)
}

// pickL0Locked returns the compaction of level 0 into base: a move of the
// tables that can go unrewritten (l0Movable), if any, or else a merge of
// all its tables with those of base they overlap. Level 0 goes down whole
// but for moves: an older table left behind would shadow newer data moved
// below it, and level 0's tables are few.
func (d *DB) pickL0Locked(base int) *compaction {
	if m := l0Movable(d.mu.version, base, d.mu.busy); len(m) > 0 {
		c := d.newCompactionLocked(0, base, m, nil)
		if c != nil {
			c.move = true
		}
		return c
	}
	return d.setupIntoLocked(0, base, d.mu.version.Files(0))
}

// pickFileLocked picks the table of level l whose compaction rewrites the
// fewest bytes of level l+1 per byte it moves down (its compensated size:
// deletions count the bytes they free), among those free to go.
func (d *DB) pickFileLocked(l int) *compaction {
	var best *compaction
	bestRatio := 0.0
	per := entryBytesBelow(d.mu.version, l)
	for f := range d.mu.version.Level(l) {
		c := d.setupLocked(l, []*manifest.FileMetadata{f})
		if c == nil {
			continue
		}
		var over uint64
		for _, g := range c.inputs[1] {
			over += g.Size
		}
		ratio := float64(over) / max(compensatedSize(f, per), 1)
		if best == nil || ratio < bestRatio {
			best, bestRatio = c, ratio
		}
	}
	return best
}
