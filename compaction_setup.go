package bloomkv

// A compaction's set-up and lifecycle: the tables and levels it takes, its
// conflicts with running compactions, its start and finish, and the steps
// Compact sets up level by level.

import (
	"bytes"
	"slices"

	"github.com/bloomkv/bloomkv/internal/manifest"
)

// setupLocked builds the compaction of inputs (tables of level l) into l+1,
// or returns nil when a table it needs is busy or a running compaction
// writes into its range.
func (d *DB) setupLocked(l int, inputs []*manifest.FileMetadata) *compaction {
	return d.setupIntoLocked(l, l+1, inputs)
}

// setupIntoLocked is setupLocked into level out > l; the levels between
// must hold nothing in the inputs' range (manualSetupLocked checks).
func (d *DB) setupIntoLocked(l, out int, inputs []*manifest.FileMetadata) *compaction {
	if len(inputs) == 0 {
		return nil
	}
	lo, hi := keyRange(inputs)
	c := d.newCompactionLocked(l, out, inputs, d.mu.version.Overlapping(out, lo, hi))
	if c != nil {
		// Tables of a sorted level can move together, being disjoint;
		// those of level 0 when they are.
		c.move = len(c.inputs[1]) == 0 && (l > 0 || l0Depth(inputs, nil) <= 1)
	}
	return c
}

// newCompactionLocked builds the compaction of inputs (tables of level l)
// and below (tables of level out) into out, or returns nil when a table it
// needs is busy or a running compaction writes into its range.
func (d *DB) newCompactionLocked(l, out int, inputs, below []*manifest.FileMetadata) *compaction {
	c := &compaction{level: l, outputLevel: out}
	c.inputs[0] = inputs
	c.inputs[1] = below
	return d.finishSetupLocked(c)
}

// finishSetupLocked completes a compaction whose levels and tables are
// set: its key range, whether it is at the bottom, the snapshots it keeps
// versions for. It returns nil when a table it needs is busy or a running
// compaction writes into its range.
func (d *DB) finishSetupLocked(c *compaction) *compaction {
	c.lo, c.hi = keyRange(c.all())
	if d.conflictsLocked(c) {
		return nil
	}
	c.bottom = true
	for ll := c.outputLevel + 1; ll < manifest.NumLevels && c.bottom; ll++ {
		c.bottom = len(d.mu.version.Overlapping(ll, c.lo, c.hi)) == 0
	}
	for _, r := range d.mu.running {
		if r.outputLevel > c.outputLevel && overlaps(r.lo, r.hi, c.lo, c.hi) {
			c.bottom = false
		}
	}
	c.snapshots = slices.Clone(d.mu.snapshots)
	return c
}

// conflictsLocked reports whether c needs a table a running compaction holds,
// or would write into a range a running compaction writes into.
func (d *DB) conflictsLocked(c *compaction) bool {
	for _, f := range c.all() {
		if d.mu.busy[f.FileNum] {
			return true
		}
	}
	for _, r := range d.mu.running {
		into := r.outputLevel == c.outputLevel || slices.Contains(c.midLevels, r.outputLevel)
		if into && overlaps(r.lo, r.hi, c.lo, c.hi) {
			return true
		}
	}
	return false
}

// startLocked marks a picked compaction's tables busy.
func (d *DB) startLocked(c *compaction) {
	for _, f := range c.all() {
		d.mu.busy[f.FileNum] = true
	}
	d.mu.running = append(d.mu.running, c)
}

// finishLocked releases a compaction's tables.
func (d *DB) finishLocked(c *compaction) {
	for _, f := range c.all() {
		delete(d.mu.busy, f.FileNum)
	}
	if i := slices.Index(d.mu.running, c); i >= 0 {
		d.mu.running = slices.Delete(d.mu.running, i, i+1)
	}
}

// keyRange returns the user-key range the tables span (a range deletion's
// exclusive end counted as included).
func keyRange(files []*manifest.FileMetadata) (lo, hi []byte) {
	lo, hi = files[0].Smallest.UserKey, files[0].Largest.UserKey
	for _, f := range files[1:] {
		if bytes.Compare(f.Smallest.UserKey, lo) < 0 {
			lo = f.Smallest.UserKey
		}
		if bytes.Compare(f.Largest.UserKey, hi) > 0 {
			hi = f.Largest.UserKey
		}
	}
	return lo, hi
}

func overlaps(alo, ahi, blo, bhi []byte) bool {
	return bytes.Compare(alo, bhi) <= 0 && bytes.Compare(blo, ahi) <= 0
}

// manualSetupLocked picks the next step of Compact at level l, whose
// tables in the range are inputs. Levels that hold nothing in the inputs'
// range are skipped: the inputs go into the first level below l holding
// keys in their range, or into the last level. And when that level's
// tables in the range have nothing below them, they first move to the last
// level (a manifest edit; the returned compaction is then of their level,
// not l), so that the inputs merge with them there, once. A store whose
// data sits in level 0 and level 1 is then rewritten once, into the last
// level, rather than into level 1 and then again into the last level.
// It returns nil when a table it needs is busy or a running compaction
// writes into its range.
func (d *DB) manualSetupLocked(l int, inputs []*manifest.FileMetadata) *compaction {
	const last = manifest.NumLevels - 1
	lo, hi := keyRange(inputs)
	out := l + 1
	for out < last && d.levelClearLocked(out, lo, hi) {
		out++
	}
	if out < last {
		if below := d.mu.version.Overlapping(out, lo, hi); len(below) > 0 {
			blo, bhi := keyRange(below)
			if d.levelsClearLocked(out+1, last+1, blo, bhi) {
				c := &compaction{level: out, outputLevel: last, move: true, lo: blo, hi: bhi}
				c.inputs[0] = below
				if d.conflictsLocked(c) {
					return nil
				}
				return c
			}
		}
	}
	if c, ok := d.multiLevelsLocked(l, out, inputs); ok {
		return c
	}
	c := d.setupIntoLocked(l, out, inputs)
	if c != nil && !d.levelsClearLocked(l+1, out, c.lo, c.hi) {
		// The tables of out widened the range onto a level between.
		return d.setupLocked(l, inputs)
	}
	return c
}

// multiLevelsLocked returns, for a step of Compact whose inputs (tables of
// level l) go into level mid, the compaction that merges them with mid's
// tables in their range and with those of the levels below holding keys in
// it, straight into the lowest of those levels (ok), when there is one below
// mid: the one merge writes each level's data once, where merging into mid,
// then mid into the next level, and so on, would write the data of the
// upper levels again at each step (at 8M keys after an overwrite, Compact
// wrote nearly three times the store). The range widens with the tables
// taken in, level by level. It returns ok false when no level below mid
// holds keys in range, or the widened range meets tables of the levels read
// or between that the compaction leaves out; then a merge of mid and only
// the next level holding keys in range is tried, and failing that none. It
// returns a nil compaction with ok true when a table it needs is busy or a
// running compaction writes into its range.
func (d *DB) multiLevelsLocked(l, mid int, inputs []*manifest.FileMetadata) (*compaction, bool) {
	if c, ok := d.levelsBelowLocked(l, mid, inputs, manifest.NumLevels); ok {
		return c, true
	}
	return d.levelsBelowLocked(l, mid, inputs, 1)
}

// levelsBelowLocked is multiLevelsLocked taking in at most most levels
// below mid.
func (d *DB) levelsBelowLocked(l, mid int, inputs []*manifest.FileMetadata, most int) (*compaction, bool) {
	const last = manifest.NumLevels - 1
	if mid == last {
		return nil, false
	}
	all := slices.Clone(inputs)
	lo, hi := keyRange(all)
	var taken [manifest.NumLevels][]*manifest.FileMetadata
	out := -1
	for k, n := mid, 0; k <= last && n <= most; k++ {
		files := d.mu.version.Overlapping(k, lo, hi)
		if len(files) == 0 {
			if k == mid {
				return nil, false
			}
			continue
		}
		taken[k], out = files, k
		all = append(all, files...)
		lo, hi = keyRange(all)
		n++
	}
	if out == mid {
		return nil, false
	}
	// The widened range must take in no table the compaction leaves out,
	// and cross no level between that a running compaction writes into.
	if l > 0 && len(d.mu.version.Overlapping(l, lo, hi)) != len(inputs) {
		return nil, false
	}
	for k := l + 1; k <= out; k++ {
		if len(taken[k]) == 0 {
			if !d.levelClearLocked(k, lo, hi) {
				return nil, false
			}
		} else if len(d.mu.version.Overlapping(k, lo, hi)) != len(taken[k]) {
			return nil, false
		}
	}
	c := &compaction{level: l, outputLevel: out}
	for k := mid; k < out; k++ {
		for _, f := range taken[k] {
			c.mid = append(c.mid, f)
			c.midLevels = append(c.midLevels, k)
		}
	}
	c.inputs[0], c.inputs[1] = inputs, taken[out]
	return d.finishSetupLocked(c), true
}

// levelClearLocked reports whether level l holds no table overlapping
// [lo, hi] and no running compaction writes into that range of it.
func (d *DB) levelClearLocked(l int, lo, hi []byte) bool {
	if len(d.mu.version.Overlapping(l, lo, hi)) > 0 {
		return false
	}
	for _, r := range d.mu.running {
		if r.outputLevel == l && overlaps(r.lo, r.hi, lo, hi) {
			return false
		}
	}
	return true
}

// levelsClearLocked is levelClearLocked for every level in [from, to).
func (d *DB) levelsClearLocked(from, to int, lo, hi []byte) bool {
	for l := from; l < to; l++ {
		if !d.levelClearLocked(l, lo, hi) {
			return false
		}
	}
	return true
}
