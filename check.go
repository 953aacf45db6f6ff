package bloomkv

// Consistency checks for tools and tests: Check verifies the tables and the
// levels, CheckDiffFilter measures the differential-file filter.

import (
	"bytes"
	"fmt"

	"github.com/bloomkv/bloomkv/filterblock"
	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/manifest"
	"github.com/bloomkv/bloomkv/internal/rangedel"
	"github.com/bloomkv/bloomkv/sstable"
)

// CheckStats counts what Check read.
type CheckStats struct {
	Tables, Blocks int
	// Entries counts the tables' point entries; RangeDeletions the
	// tables' range-deletion fragments and the range deletions the
	// memtables hold as written, unfragmented (those replayed from the
	// write-ahead log among them), so overlapping ones count differently
	// once flushed; LiveKeys the keys a full scan of the store returns.
	Entries, RangeDeletions, LiveKeys uint64
}

// CheckError lists the problems Check found. It wraps each of them, so
// errors.Is(err, ErrCorruption) reports a damaged store.
type CheckError struct {
	Problems []error
	// More counts the problems found beyond those listed.
	More int
}

// Error names the first problem and counts the others.
func (e *CheckError) Error() string {
	if n := len(e.Problems) - 1 + e.More; n > 0 {
		return fmt.Sprintf("%v (and %d more problems)", e.Problems[0], n)
	}
	return e.Problems[0].Error()
}

// Unwrap returns the problems.
func (e *CheckError) Unwrap() []error { return e.Problems }

// maxCheckProblems bounds the problems Check collects.
const maxCheckProblems = 1000

// Check verifies the whole store as it is now: every table of the current
// version, block by block (checksums, key order, index separators, every key
// in its table's filter, range deletions, properties), that each table's
// size, key range and sequence numbers are those the manifest records and
// that no sequence number is beyond the store's last, and, when the tables
// are sound, the level invariants (the tables of each level below 0 in key
// order without overlap; every version of a key in a shallower place newer
// than every version deeper down; level 0's order, newest first, is its
// B-tree's own) and that a full scan returns keys in strictly increasing
// order. It reads every block, does not stop at the first problem, and
// returns a *CheckError listing them.
func (d *DB) Check() (CheckStats, error) {
	var st CheckStats
	if d.closedFlag.Load() {
		return st, ErrClosed
	}
	// The state is taken under d.mu, where flushes publish theirs and mark
	// their memtables flushed, so that its flags match its version.
	d.mu.Lock()
	s := d.acquire()
	readSeq := base.SeqNum(d.visibleSeq.Load()) + 1
	lastSeq := d.mu.lastSeq // assigned, perhaps not yet visible: the bound for tables
	for _, m := range s.imm {
		if !m.flushed { // a flushed one's are counted in its table
			st.RangeDeletions += uint64(len(m.mt.RangeDels()))
		}
	}
	d.mu.Unlock()
	st.RangeDeletions += uint64(len(s.mem.mt.RangeDels()))
	var problems []error
	more := 0
	problem := func(err error) {
		if len(problems) < maxCheckProblems {
			problems = append(problems, err)
		} else {
			more++
		}
	}
	for l, f := range s.version.All() {
		st.Tables++
		r, err := d.tables.get(f)
		if err != nil {
			problem(fmt.Errorf("bloomkv: L%d table %s: %w", l, d.path(tableName(f.FileNum)), err))
			continue
		}
		rep := r.Check()
		st.Blocks += rep.Blocks
		st.Entries += rep.Entries
		st.RangeDeletions += uint64(rep.RangeDeletions)
		for _, p := range rep.Problems {
			problem(p)
		}
		more += rep.MoreProblems
		if !rep.Complete {
			continue // its ranges are partial: comparing them says nothing more
		}
		for _, err := range checkTableMeta(d.path(tableName(f.FileNum)), l, f, r, rep, lastSeq) {
			problem(err)
		}
	}
	if len(problems) == 0 {
		for _, err := range d.checkLevels(s.version) {
			problem(err)
		}
	}
	if len(problems) > 0 {
		// A damaged table would fail the scan with a problem already listed.
		d.release(s)
		return st, &CheckError{Problems: problems, More: more}
	}
	it := d.newIter(s, readSeq, nil) // owns the reference to s
	var prev []byte
	for ok := it.First(); ok; ok = it.Next() {
		if st.LiveKeys > 0 && bytes.Compare(prev, it.Key()) >= 0 {
			problem(base.CorruptionErrorf("bloomkv: %s: a full scan returns %q after %q", d.dir, it.Key(), prev))
		}
		prev = append(prev[:0], it.Key()...)
		st.LiveKeys++
	}
	if err := it.Close(); err != nil {
		problem(fmt.Errorf("bloomkv: %s: full scan: %w", d.dir, err))
	}
	if len(problems) > 0 {
		return st, &CheckError{Problems: problems, More: more}
	}
	return st, nil
}

// checkTableMeta compares a table's contents with what the manifest says of
// it.
func checkTableMeta(name string, level int, f *manifest.FileMetadata, r *sstable.Reader, rep *sstable.CheckReport, lastSeq base.SeqNum) []error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, base.CorruptionErrorf("bloomkv: L%d table %s: "+format, append([]any{level, name}, args...)...))
	}
	if r.Size() != f.Size {
		bad("%d bytes, the manifest records %d", r.Size(), f.Size)
	}
	// The bounds a table of these contents gets when written (tableBuilder).
	lo, hi, err := r.KeyRange()
	if err != nil {
		return append(errs, err)
	}
	have := lo != nil
	switch {
	case !have:
		bad("holds no entries")
	case base.CompareInternal(*lo, f.Smallest) != 0 || base.CompareInternal(*hi, f.Largest) != 0:
		bad("holds keys %s to %s, the manifest records %s to %s", *lo, *hi, f.Smallest, f.Largest)
	}
	smallest, largest := rep.SmallestSeq, rep.LargestSeq // as stored
	if o := f.SeqNumOverride; o != 0 && have {
		// Ingested: stored at 0, read at the number the ingestion gave.
		if smallest != 0 || largest != 0 {
			bad("ingested at sequence number %d, stores sequence numbers %d to %d, not 0", o, smallest, largest)
		}
		smallest, largest = o, o
	}
	if have && (smallest != f.SmallestSeq || largest != f.LargestSeq) {
		bad("holds sequence numbers %d to %d, the manifest records %d to %d", smallest, largest, f.SmallestSeq, f.LargestSeq)
	}
	if have && largest > lastSeq {
		bad("holds sequence number %d, beyond the store's last, %d", largest, lastSeq)
	}
	return errs
}

// placeIter is one place of the LSM in checkLevels' merge: a level-0 table,
// or a whole deeper level.
type placeIter struct {
	internalIterator
	place, level int
	table        func() uint64 // the table the iterator is in
}

// checkLevels verifies the level invariants of v (see Check). The ordering
// of versions across levels is what lets a Get stop at the first level that
// holds a key; it is checked by merging every place's entries (the read
// path's mergingIter) and requiring that the versions of each key come from
// places ever deeper as they get older. Level 0's order, newest first, is
// its tree's own (manifest.Version), which needs no check.
func (d *DB) checkLevels(v *manifest.Version) []error {
	var errs []error
	bad := func(format string, args ...any) {
		if len(errs) < maxCheckProblems {
			errs = append(errs, base.CorruptionErrorf("bloomkv: "+format, args...))
		}
	}
	name := func(num uint64) string { return d.path(tableName(num)) }
	var levels [manifest.NumLevels][]*manifest.FileMetadata
	for l := 1; l < manifest.NumLevels; l++ {
		files := v.Files(l)
		levels[l] = files
		for i, f := range files {
			if base.CompareInternal(f.Smallest, f.Largest) > 0 {
				bad("L%d table %s: smallest key %s sorts after its largest, %s", l, name(f.FileNum), f.Smallest, f.Largest)
			}
			if i > 0 && !files[i-1].Before(f.Smallest.UserKey) {
				bad("L%d tables %s and %s overlap or are out of order", l, name(files[i-1].FileNum), name(f.FileNum))
			}
		}
	}
	if len(errs) > 0 {
		return errs
	}

	m := &mergingIter{}
	for f := range v.Level(0) {
		r, err := d.tables.get(f)
		if err != nil {
			m.close()
			return append(errs, err)
		}
		num := f.FileNum
		m.iters = append(m.iters, &placeIter{internalIterator: r.NewIter(), place: len(m.iters), table: func() uint64 { return num }})
	}
	for l := 1; l < manifest.NumLevels; l++ {
		if len(levels[l]) == 0 {
			continue
		}
		li := &levelIter{tables: d.tables, files: levels[l]}
		m.iters = append(m.iters, &placeIter{internalIterator: li, place: len(m.iters), level: l, table: func() uint64 { return li.files[li.idx].FileNum }})
	}
	defer m.close()
	var prevKey []byte
	var prev *placeIter
	var prevTable uint64
	var prevSeq base.SeqNum
	for ok := m.first(); ok; ok = m.next() {
		p, k := m.top().(*placeIter), m.key()
		if prev != nil && p.place < prev.place && bytes.Equal(k.UserKey, prevKey) {
			bad("%q#%d in L%d table %s is older than %q#%d in L%d table %s, which lies deeper",
				k.UserKey, k.SeqNum(), p.level, name(p.table()), prevKey, prevSeq, prev.level, name(prevTable))
		}
		prevKey = append(prevKey[:0], k.UserKey...)
		prev, prevTable, prevSeq = p, p.table(), k.SeqNum()
	}
	if err := m.err(); err != nil {
		errs = append(errs, err)
	}
	return errs
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
