package bloomkv

import (
	"bytes"
	"cmp"
	"slices"

	"github.com/bloomkv/bloomkv/internal/manifest"
)

// levelMaxBytes returns the size level l ≥ 1 may reach before it is
// compacted into the next.
func (d *DB) levelMaxBytes(l int) float64 {
	n := float64(d.opts.LBaseMaxBytes)
	for i := 1; i < l; i++ {
		n *= float64(d.opts.LevelMultiplier)
	}
	return n
}

// levelScoresLocked returns each level's compaction score: level 0's table
// count over L0CompactionThreshold, the others' bytes (less those being
// compacted away) over their target. The last level scores 0.
func (d *DB) levelScoresLocked(v *manifest.Version) [manifest.NumLevels]float64 {
	return d.levelScores(v, d.busy)
}

// levelScores is levelScoresLocked with the busy tables given (nil: none).
func (d *DB) levelScores(v *manifest.Version, busy map[uint64]bool) [manifest.NumLevels]float64 {
	var s [manifest.NumLevels]float64
	s[0] = float64(v.NumFiles(0)) / float64(d.opts.L0CompactionThreshold)
	for l := 1; l < manifest.NumLevels-1; l++ {
		var size uint64
		for f := range v.Level(l) {
			if !busy[f.FileNum] {
				size += f.Size
			}
		}
		s[l] = float64(size) / d.levelMaxBytes(l)
	}
	return s
}

// pickAutoLocked returns the compaction the scores call for, with its tables
// marked busy, or nil.
func (d *DB) pickAutoLocked() *compaction {
	scores := d.levelScoresLocked(d.version)
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
			c = d.setupLocked(0, d.version.Files(0))
		} else {
			c = d.pickFileLocked(l)
		}
		if c != nil {
			c.score = scores[l]
			d.startLocked(c)
			return c
		}
	}
	return nil
}

// pickFileLocked picks the table of level l whose compaction rewrites the
// fewest bytes of level l+1 per byte it moves down, among those free to go.
func (d *DB) pickFileLocked(l int) *compaction {
	var best *compaction
	bestRatio := 0.0
	for f := range d.version.Level(l) {
		c := d.setupLocked(l, []*manifest.FileMetadata{f})
		if c == nil {
			continue
		}
		var over uint64
		for _, g := range c.inputs[1] {
			over += g.Size
		}
		ratio := float64(over) / float64(max(f.Size, 1))
		if best == nil || ratio < bestRatio {
			best, bestRatio = c, ratio
		}
	}
	return best
}

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
	c := &compaction{level: l, outputLevel: out}
	c.inputs[0] = inputs
	c.lo, c.hi = keyRange(inputs)
	c.inputs[1] = d.version.Overlapping(out, c.lo, c.hi)
	if len(c.inputs[1]) > 0 {
		c.lo, c.hi = keyRange(c.all())
	}
	if d.conflictsLocked(c) {
		return nil
	}
	c.bottom = true
	for ll := c.outputLevel + 1; ll < manifest.NumLevels && c.bottom; ll++ {
		c.bottom = len(d.version.Overlapping(ll, c.lo, c.hi)) == 0
	}
	for _, r := range d.running {
		if r.outputLevel > c.outputLevel && overlaps(r.lo, r.hi, c.lo, c.hi) {
			c.bottom = false
		}
	}
	// A level-0 table can move alone; tables of a sorted level can move
	// together, being disjoint.
	c.move = len(c.inputs[1]) == 0 && (l > 0 || len(inputs) == 1)
	c.snapshots = slices.Clone(d.snapshots)
	return c
}

// conflictsLocked reports whether c needs a table a running compaction holds,
// or would write into a range a running compaction writes into.
func (d *DB) conflictsLocked(c *compaction) bool {
	for _, f := range c.all() {
		if d.busy[f.FileNum] {
			return true
		}
	}
	for _, r := range d.running {
		if r.outputLevel == c.outputLevel && overlaps(r.lo, r.hi, c.lo, c.hi) {
			return true
		}
	}
	return false
}

// startLocked marks a picked compaction's tables busy.
func (d *DB) startLocked(c *compaction) {
	for _, f := range c.all() {
		d.busy[f.FileNum] = true
	}
	d.running = append(d.running, c)
}

// finishLocked releases a compaction's tables.
func (d *DB) finishLocked(c *compaction) {
	for _, f := range c.all() {
		delete(d.busy, f.FileNum)
	}
	if i := slices.Index(d.running, c); i >= 0 {
		d.running = slices.Delete(d.running, i, i+1)
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
		if below := d.version.Overlapping(out, lo, hi); len(below) > 0 {
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
	c := d.setupIntoLocked(l, out, inputs)
	if c != nil && !d.levelsClearLocked(l+1, out, c.lo, c.hi) {
		// The tables of out widened the range onto a level between.
		return d.setupLocked(l, inputs)
	}
	return c
}

// levelClearLocked reports whether level l holds no table overlapping
// [lo, hi] and no running compaction writes into that range of it.
func (d *DB) levelClearLocked(l int, lo, hi []byte) bool {
	if len(d.version.Overlapping(l, lo, hi)) > 0 {
		return false
	}
	for _, r := range d.running {
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
