// Package manifest holds the MANIFEST's version edits and the versions they
// build: which tables each level holds, the WAL that recovery starts from, the
// next file number and the last sequence number. Edits are stored one per
// record (internal/record), so a torn final edit is dropped like a torn WAL
// record.
package manifest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"iter"
	"slices"
	"sync/atomic"

	"github.com/google/btree"

	"github.com/bloomkv/bloomkv/internal/base"
)

// NumLevels is the number of LSM levels, L0 to L6.
const NumLevels = 7

// FileMetadata describes one table.
type FileMetadata struct {
	FileNum     uint64
	Size        uint64
	Smallest    base.InternalKey
	Largest     base.InternalKey
	SmallestSeq base.SeqNum
	LargestSeq  base.SeqNum
	// SeqNumOverride, when not 0, is the sequence number of every key of
	// the table, whatever it stores (keys of an ingested table are stored
	// at 0); SmallestSeq and LargestSeq are then both this number. It is
	// recorded with the table (tagNewFileOverride).
	SeqNumOverride base.SeqNum
	// Entries and Deletions count the table's entries and, of them, point
	// and range deletions, for tables written or ingested since Open; they
	// are not in the MANIFEST (0 for tables known from it alone).
	Entries, Deletions uint64
	// opened is what the store opened to read the table (SetOpened); the
	// manifest neither writes nor reads it.
	opened atomic.Pointer[any]
}

// Opened returns what SetOpened kept, or nil.
func (f *FileMetadata) Opened() any {
	if p := f.opened.Load(); p != nil {
		return *p
	}
	return nil
}

// SetOpened keeps v, what the store opened to read the table, with its
// metadata, so that a read finds it without a lookup. v must stay usable
// for as long as any version holds f.
func (f *FileMetadata) SetOpened(v any) { f.opened.Store(&v) }

// ClearOpened drops what SetOpened kept.
func (f *FileMetadata) ClearOpened() { f.opened.Store(nil) }

func (f *FileMetadata) String() string {
	return fmt.Sprintf("%06d:[%s-%s]", f.FileNum, f.Smallest, f.Largest)
}

// The tags of a version edit's fields.
const (
	tagComparer    = 1
	tagLogNumber   = 2
	tagNextFileNum = 3
	tagLastSeq     = 4
	tagNewFile     = 5
	tagDeletedFile = 6
	tagClosedLog   = 7
	// tagFormatVersion records the store's format version. It is the
	// first field of the first edit of every manifest of a store at
	// FormatVersioned or later (and of an edit that raises the version),
	// so that a decoder meets it before any tag it may not know.
	tagFormatVersion = 8
	// tagNewFileOverride is tagNewFile followed by the table's
	// sequence-number override (FormatIngest).
	tagNewFileOverride = 9
)

// The format versions as the manifest records them (the root package
// names them: bloomkv.FormatVersion). An edit with no version field leaves
// the manifest's version as it was; a manifest none of whose edits records
// one is of FormatOriginal, tags 1 to 7.
const (
	FormatOriginal  = 1
	FormatVersioned = 2
	// FormatIngest adds tagNewFileOverride.
	FormatIngest = 3
	// FormatWALSyncOffsets adds no tag: it is the write-ahead logs'
	// format that changes (bloomkv.FormatWALSyncOffsets).
	FormatWALSyncOffsets = 4
	// NewestFormat is the newest format version whose edits this package
	// decodes.
	NewestFormat = FormatWALSyncOffsets
)

// UnsupportedFormatError reports an edit that records a format version
// newer than NewestFormat: a newer build wrote it, and its other fields may
// use tags this build does not know. It wraps base.ErrUnsupportedFormat.
type UnsupportedFormatError struct {
	Version uint64
}

// Error names the edit's version and the newest this package decodes.
func (e *UnsupportedFormatError) Error() string {
	return fmt.Sprintf("manifest: version edit records format version %d, newer than the newest this build decodes (%d)", e.Version, NewestFormat)
}

// Unwrap returns base.ErrUnsupportedFormat.
func (e *UnsupportedFormatError) Unwrap() error { return base.ErrUnsupportedFormat }

// ClosedLog records a WAL's size when the store closed cleanly, synced: a
// WAL found shorter at the next Open lost synced writes, which a log cut
// short at a record boundary would otherwise hide.
type ClosedLog struct {
	Num, Size uint64
}

// DeletedFile names a table removed from a level.
type DeletedFile struct {
	Level   int
	FileNum uint64
}

// NewFile is a table added to a level.
type NewFile struct {
	Level int
	Meta  *FileMetadata
}

// VersionEdit is one change to the version: fields set to zero are absent.
type VersionEdit struct {
	// FormatVersion, when set, is the store's format version from this
	// edit on; it is encoded first.
	FormatVersion uint64
	ComparerName  string
	// LogNumber: the WALs numbered below it are wholly in tables.
	LogNumber    uint64
	NextFileNum  uint64
	LastSeq      base.SeqNum
	NewFiles     []NewFile
	DeletedFiles []DeletedFile
	ClosedLog    ClosedLog // Num 0: absent
}

func appendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

// Encode returns the edit's encoding: each present field as a tag and its
// value (varints, or varint-prefixed bytes).
func (e *VersionEdit) Encode() []byte {
	var b []byte
	if e.FormatVersion != 0 {
		b = binary.AppendUvarint(binary.AppendUvarint(b, tagFormatVersion), e.FormatVersion)
	}
	if e.ComparerName != "" {
		b = binary.AppendUvarint(b, tagComparer)
		b = appendBytes(b, []byte(e.ComparerName))
	}
	if e.LogNumber != 0 {
		b = binary.AppendUvarint(binary.AppendUvarint(b, tagLogNumber), e.LogNumber)
	}
	if e.NextFileNum != 0 {
		b = binary.AppendUvarint(binary.AppendUvarint(b, tagNextFileNum), e.NextFileNum)
	}
	if e.LastSeq != 0 {
		b = binary.AppendUvarint(binary.AppendUvarint(b, tagLastSeq), uint64(e.LastSeq))
	}
	if e.ClosedLog.Num != 0 {
		b = binary.AppendUvarint(b, tagClosedLog)
		b = binary.AppendUvarint(b, e.ClosedLog.Num)
		b = binary.AppendUvarint(b, e.ClosedLog.Size)
	}
	for _, d := range e.DeletedFiles {
		b = binary.AppendUvarint(b, tagDeletedFile)
		b = binary.AppendUvarint(b, uint64(d.Level))
		b = binary.AppendUvarint(b, d.FileNum)
	}
	for _, n := range e.NewFiles {
		m := n.Meta
		tag := uint64(tagNewFile)
		if m.SeqNumOverride != 0 {
			tag = tagNewFileOverride
		}
		b = binary.AppendUvarint(b, tag)
		b = binary.AppendUvarint(b, uint64(n.Level))
		b = binary.AppendUvarint(b, m.FileNum)
		b = binary.AppendUvarint(b, m.Size)
		b = appendBytes(b, m.Smallest.Append(nil))
		b = appendBytes(b, m.Largest.Append(nil))
		b = binary.AppendUvarint(b, uint64(m.SmallestSeq))
		b = binary.AppendUvarint(b, uint64(m.LargestSeq))
		if m.SeqNumOverride != 0 {
			b = binary.AppendUvarint(b, uint64(m.SeqNumOverride))
		}
	}
	return b
}

type decoder struct {
	data []byte
	off  int
	err  error
}

func (d *decoder) uvarint(what string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.data[d.off:])
	if n <= 0 {
		d.err = fmt.Errorf("bad varint for %s at offset %d", what, d.off)
		return 0
	}
	d.off += n
	return v
}

func (d *decoder) bytes(what string) []byte {
	n := d.uvarint(what + " length")
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.data)-d.off) {
		d.err = fmt.Errorf("%s of %d bytes at offset %d overruns the edit", what, n, d.off)
		return nil
	}
	b := append([]byte(nil), d.data[d.off:d.off+int(n)]...)
	d.off += int(n)
	return b
}

func (d *decoder) level() int {
	l := d.uvarint("level")
	if d.err == nil && l >= NumLevels {
		d.err = fmt.Errorf("level %d out of range at offset %d", l, d.off)
	}
	return int(l)
}

func (d *decoder) key(what string) base.InternalKey {
	b := d.bytes(what)
	if d.err != nil {
		return base.InternalKey{}
	}
	k, ok := base.DecodeInternalKey(b)
	if !ok {
		d.err = fmt.Errorf("%s of %d bytes is shorter than a trailer", what, len(b))
	}
	return k
}

// Decode parses an encoded edit; errors wrap ErrCorruption and name the
// offset within the edit. An edit whose first field records a format
// version newer than NewestFormat is refused, before any other field is
// read, with an *UnsupportedFormatError (wrapping
// base.ErrUnsupportedFormat, not ErrCorruption).
func Decode(data []byte) (*VersionEdit, error) {
	e := &VersionEdit{}
	d := &decoder{data: data}
	for d.off < len(data) && d.err == nil {
		tagOff := d.off
		switch tag := d.uvarint("tag"); tag {
		case tagFormatVersion:
			v := d.uvarint("format version")
			switch {
			case d.err != nil:
			case tagOff != 0:
				d.err = fmt.Errorf("format version at offset %d is not the edit's first field", tagOff)
			case v == 0:
				d.err = fmt.Errorf("format version 0 at offset %d", tagOff)
			case v > NewestFormat:
				return nil, &UnsupportedFormatError{Version: v}
			}
			e.FormatVersion = v
		case tagComparer:
			e.ComparerName = string(d.bytes("comparer name"))
		case tagLogNumber:
			e.LogNumber = d.uvarint("log number")
		case tagNextFileNum:
			e.NextFileNum = d.uvarint("next file number")
		case tagLastSeq:
			e.LastSeq = base.SeqNum(d.uvarint("last sequence number"))
		case tagClosedLog:
			e.ClosedLog = ClosedLog{Num: d.uvarint("closed log number"), Size: d.uvarint("closed log size")}
			if d.err == nil && e.ClosedLog.Num == 0 {
				d.err = fmt.Errorf("closed log number 0 at offset %d", tagOff)
			}
		case tagDeletedFile:
			l := d.level()
			e.DeletedFiles = append(e.DeletedFiles, DeletedFile{Level: l, FileNum: d.uvarint("file number")})
		case tagNewFile, tagNewFileOverride:
			l := d.level()
			m := &FileMetadata{FileNum: d.uvarint("file number"), Size: d.uvarint("size")}
			m.Smallest = d.key("smallest key")
			m.Largest = d.key("largest key")
			m.SmallestSeq = base.SeqNum(d.uvarint("smallest sequence number"))
			m.LargestSeq = base.SeqNum(d.uvarint("largest sequence number"))
			if tag == tagNewFileOverride {
				m.SeqNumOverride = base.SeqNum(d.uvarint("sequence-number override"))
				if o := m.SeqNumOverride; d.err == nil && (o == 0 || o > base.SeqNumMax || m.SmallestSeq != o || m.LargestSeq != o) {
					d.err = fmt.Errorf("table %d: sequence-number override %d at offset %d with sequence numbers %d-%d", m.FileNum, o, tagOff, m.SmallestSeq, m.LargestSeq)
				}
			}
			if d.err == nil && base.CompareInternal(m.Smallest, m.Largest) > 0 {
				d.err = fmt.Errorf("table %d: smallest key %s above largest %s", m.FileNum, m.Smallest, m.Largest)
			}
			e.NewFiles = append(e.NewFiles, NewFile{Level: l, Meta: m})
		default:
			if d.err == nil {
				d.err = fmt.Errorf("unknown tag %d at offset %d", tag, tagOff)
			}
		}
	}
	if d.err != nil {
		return nil, base.CorruptionErrorf("manifest: version edit: %w", d.err)
	}
	return e, nil
}

// Version is an immutable view of the tables in each level. L0 is ordered
// newest first (by largest sequence number, then file number); other levels
// by key, without overlap. Each level is a B-tree (github.com/google/btree),
// which Apply clones lazily (copy-on-write), so a new version shares all
// but the nodes an edit changes with the old one. The zero Version is
// empty.
//
// Beside the tree, a level of at most flatMax tables is also kept as a
// slice in the level's order, which Find and Containing search: a binary
// search of a slice compares fewer keys, through no function values, than a
// walk of the tree, and L0's tables are listed without one. Apply
// rebuilds only the slices of the levels an edit changes, so an install
// stays O(log tables) for larger levels and O(flatMax) at most for the rest.
//
// Reads of a version may run concurrently with each other and with Apply;
// Apply marks the trees it clones shared (it writes their copy-on-write
// context), so two Applies of one version, or of versions that share an
// untouched level, must not run at once.
type Version struct {
	levels [NumLevels]*btree.BTreeG[entry]
	// flat holds each level of at most flatMax tables in its order
	// (non-nil, if empty), and nil for the other levels; L0's entries have
	// no keys.
	flat  [NumLevels]*flatLevel
	byNum *btree.BTreeG[numbered] // every table, by file number
	stats [NumLevels]LevelStats
}

// flatMax is the most tables of a level that Apply also keeps in a sorted
// slice: 1,024 entries are 56 KiB, copied when an edit changes the level
// (a few microseconds), and a store of 2 GiB in 2 MiB tables.
const flatMax = 1024

// flatLevel is a level's tables in key order, for a binary search: the
// largest user keys share prefix, and each table's largest and smallest
// user keys are also held as the eight bytes that follow it, as integers,
// so that a search compares integers in one contiguous array and decides
// most lookups without reading a table's metadata or keys.
type flatLevel struct {
	prefix  []byte
	nexts   []uint64 // the window of each entry's key: its eight bytes after prefix
	entries []flatEntry
}

type flatEntry struct {
	// first is the smallest user key's window, as nexts holds the largest's,
	// or zero if it lacks prefix (it then sorts below every key that has
	// it).
	first uint64
	// exclusive says the largest key is a range deletion's exclusive end:
	// the table holds nothing at it.
	exclusive bool
	key       []byte // the largest user key
	f         *FileMetadata
}

// setFlat rebuilds v.flat[l] from its tree.
func (v *Version) setFlat(l int) {
	v.flat[l] = nil
	t := v.levels[l]
	if t == nil || t.Len() > flatMax {
		return
	}
	fl := &flatLevel{entries: make([]flatEntry, 0, t.Len())}
	t.Ascend(func(e entry) bool {
		fl.entries = append(fl.entries, flatEntry{key: e.key, f: e.f})
		return true
	})
	if n := len(fl.entries); n > 0 && l > 0 {
		// The sorted keys' common prefix is that of the first and last.
		first, last := fl.entries[0].key, fl.entries[n-1].key
		i := 0
		for i < len(first) && i < len(last) && first[i] == last[i] {
			i++
		}
		fl.prefix = first[:i:i]
		fl.nexts = make([]uint64, n)
		for j := range fl.entries {
			e := &fl.entries[j]
			fl.nexts[j] = base.KeyWindow(e.key, i)
			e.exclusive = e.f.Largest.IsExclusiveSentinel()
			if small := e.f.Smallest.UserKey; bytes.HasPrefix(small, fl.prefix) {
				e.first = base.KeyWindow(small, i)
			}
		}
	}
	v.flat[l] = fl
}

// find returns the index of the first entry whose key is not below userKey
// (len(entries) if none), and, if userKey has prefix (ok), its eight bytes
// after it.
func (fl *flatLevel) find(userKey []byte) (i int, next uint64, ok bool) {
	e := fl.entries
	p := len(fl.prefix)
	if !bytes.HasPrefix(userKey, fl.prefix) {
		// Every key begins with prefix, which userKey sorts before or after.
		if bytes.Compare(userKey, fl.prefix) < 0 {
			return 0, 0, false
		}
		return len(e), 0, false
	}
	next = base.KeyWindow(userKey, p)
	i = base.SearchWindows(fl.nexts, 0, len(fl.nexts), next)
	// Equal windows: the keys decide, among the run of them.
	for hi := base.WindowRunEnd(fl.nexts, i, next); i < hi; {
		mid := int(uint(i+hi) >> 1)
		if bytes.Compare(e[mid].key[p:], userKey[p:]) < 0 {
			i = mid + 1
		} else {
			hi = mid
		}
	}
	return i, next, true
}

// LevelStats sums a level's tables: their bytes, and, over the tables whose
// entries are counted (FileMetadata.Entries, not 0), their bytes, entries
// and deletions.
type LevelStats struct {
	Size, CountedSize, Entries, Deletions uint64
}

// add adds f to s.
func (s *LevelStats) add(f *FileMetadata) {
	s.Size += f.Size
	if f.Entries > 0 {
		s.CountedSize += f.Size
		s.Entries += f.Entries
		s.Deletions += f.Deletions
	}
}

// remove takes f, which add added, away from s.
func (s *LevelStats) remove(f *FileMetadata) {
	s.Size -= f.Size
	if f.Entries > 0 {
		s.CountedSize -= f.Size
		s.Entries -= f.Entries
		s.Deletions -= f.Deletions
	}
}

// entry is a table as its level's tree holds it. key is the user key of
// the table's largest key (unset in L0), kept in the item so that a search
// compares keys without loading each table's metadata. A search's pivot has
// a nil f.
type entry struct {
	key []byte
	f   *FileMetadata
}

// lessL0 orders L0 newest first: largest sequence number, then file number,
// descending.
func lessL0(a, b entry) bool {
	if a.f.LargestSeq != b.f.LargestSeq {
		return a.f.LargestSeq > b.f.LargestSeq
	}
	return a.f.FileNum > b.f.FileNum
}

// lessByKey orders the other levels by largest key (then by file number,
// which only tables that overlap would need). For tables that do not
// overlap that is their order by smallest key too, and it lets a search for
// the table holding a key ascend from the key. A pivot sorts before the
// tables whose largest user key is its own.
func lessByKey(a, b entry) bool {
	if c := bytes.Compare(a.key, b.key); c != 0 {
		return c < 0
	}
	if a.f == nil || b.f == nil {
		return a.f == nil && b.f != nil
	}
	if c := base.CompareInternal(a.f.Largest, b.f.Largest); c != 0 {
		return c < 0
	}
	return a.f.FileNum < b.f.FileNum
}

// numbered is a table as the version's index by file number holds it.
type numbered struct {
	num   uint64
	level int
	f     *FileMetadata
}

func newNumTree() *btree.BTreeG[numbered] {
	return btree.NewG(treeDegree, func(a, b numbered) bool { return a.num < b.num })
}

// treeDegree is the B-trees' degree: nodes of up to 63 items (2 KB). A
// lookup among 100k tables visits three or four nodes; an edit copies the
// nodes on its path. Wider nodes mean fewer nodes visited per lookup and
// more bytes copied per edit; BenchmarkFind and BenchmarkApply weigh the
// two.
const treeDegree = 32

func newLevelTree(l int) *btree.BTreeG[entry] {
	if l == 0 {
		return btree.NewG(treeDegree, lessL0)
	}
	return btree.NewG(treeDegree, lessByKey)
}

func entryOf(l int, f *FileMetadata) entry {
	if l == 0 {
		return entry{f: f}
	}
	return entry{key: f.Largest.UserKey, f: f}
}

// pivot sorts before every table of a level ≥ 1 whose largest user key is
// userKey or after, and after every other.
func pivot(userKey []byte) entry {
	return entry{key: userKey}
}

// Apply returns the version after e, checking that it deletes only tables
// present, that it adds none already present and that no level but L0
// overlaps. It costs O(log tables) for each table e adds or deletes: v's
// trees are cloned lazily, and only the new tables' neighbours are checked
// for overlap.
func (v *Version) Apply(e *VersionEdit) (*Version, error) {
	nv := *v
	var cloned [NumLevels]bool
	level := func(l int) *btree.BTreeG[entry] {
		if !cloned[l] {
			cloned[l] = true
			if nv.levels[l] == nil {
				nv.levels[l] = newLevelTree(l)
			} else {
				nv.levels[l] = nv.levels[l].Clone()
			}
		}
		return nv.levels[l]
	}
	if nv.byNum == nil {
		nv.byNum = newNumTree()
	} else {
		nv.byNum = nv.byNum.Clone()
	}
	for i, d := range e.DeletedFiles {
		got, ok := nv.byNum.Get(numbered{num: d.FileNum})
		if !ok || got.level != d.Level {
			if slices.Contains(e.DeletedFiles[:i], d) {
				continue // deleted twice by one edit
			}
			return nil, base.CorruptionErrorf("manifest: edit deletes table %d from L%d, which does not hold it", d.FileNum, d.Level)
		}
		nv.byNum.Delete(got)
		level(d.Level).Delete(entryOf(d.Level, got.f))
		nv.stats[d.Level].remove(got.f)
	}
	for _, n := range e.NewFiles {
		if old, dup := nv.byNum.ReplaceOrInsert(numbered{n.Meta.FileNum, n.Level, n.Meta}); dup {
			return nil, base.CorruptionErrorf("manifest: edit adds table %d to L%d, which L%d already holds", n.Meta.FileNum, n.Level, old.level)
		}
		level(n.Level).ReplaceOrInsert(entryOf(n.Level, n.Meta))
		nv.stats[n.Level].add(n.Meta)
	}
	for _, n := range e.NewFiles {
		if n.Level == 0 {
			continue
		}
		// The tables were disjoint: only a new table and its neighbours
		// can overlap.
		prev, next := neighbours(nv.levels[n.Level], entryOf(n.Level, n.Meta))
		if prev != nil && !prev.Before(n.Meta.Smallest.UserKey) {
			return nil, base.CorruptionErrorf("manifest: L%d tables %s and %s overlap", n.Level, prev, n.Meta)
		}
		if next != nil && !n.Meta.Before(next.Smallest.UserKey) {
			return nil, base.CorruptionErrorf("manifest: L%d tables %s and %s overlap", n.Level, n.Meta, next)
		}
	}
	for l, c := range cloned {
		if c {
			nv.setFlat(l)
		}
	}
	return &nv, nil
}

// neighbours returns the tables before and after at, which t holds (nil at
// either end).
func neighbours(t *btree.BTreeG[entry], at entry) (prev, next *FileMetadata) {
	t.DescendLessOrEqual(at, func(e entry) bool {
		if e.f == at.f {
			return true
		}
		prev = e.f
		return false
	})
	t.AscendGreaterOrEqual(at, func(e entry) bool {
		if e.f == at.f {
			return true
		}
		next = e.f
		return false
	})
	return prev, next
}

// NewVersionForTesting returns a version holding the tables of levels as
// given, without Apply's checks (L0 is still ordered newest first, each
// other level by key), so that tests can build versions Apply would refuse.
func NewVersionForTesting(levels [NumLevels][]*FileMetadata) *Version {
	v := &Version{byNum: newNumTree()}
	for l, files := range levels {
		v.levels[l] = newLevelTree(l)
		for _, f := range files {
			v.levels[l].ReplaceOrInsert(entryOf(l, f))
			v.byNum.ReplaceOrInsert(numbered{f.FileNum, l, f})
			v.stats[l].add(f)
		}
		v.setFlat(l)
	}
	return v
}

// Before reports whether every key of f (and of its range deletions) sorts
// before userKey.
func (f *FileMetadata) Before(userKey []byte) bool {
	c := bytes.Compare(f.Largest.UserKey, userKey)
	return c < 0 || (c == 0 && f.Largest.IsExclusiveSentinel())
}

// Overlaps reports whether f's key range meets the user keys in [lo, hi]
// (inclusive); a nil lo or hi leaves that side open.
func (f *FileMetadata) Overlaps(lo, hi []byte) bool {
	if lo != nil && f.Before(lo) {
		return false
	}
	return hi == nil || bytes.Compare(f.Smallest.UserKey, hi) <= 0
}

// Overlapping returns the tables of level l whose key ranges meet [lo, hi]
// (inclusive; nil for an open side), in the level's order.
func (v *Version) Overlapping(l int, lo, hi []byte) []*FileMetadata {
	var buf [8]*FileMetadata // on the stack: one allocation, for the result
	out := buf[:0]
	if l == 0 {
		for f := range v.Level(0) {
			if f.Overlaps(lo, hi) {
				out = append(out, f)
			}
		}
	} else {
		v.ascendFrom(l, lo, func(f *FileMetadata) bool {
			if hi != nil && bytes.Compare(f.Smallest.UserKey, hi) > 0 {
				return false
			}
			out = append(out, f)
			return true
		})
	}
	if len(out) == 0 {
		return nil
	}
	return slices.Clone(out)
}

// ascendFrom calls fn on the tables of level l ≥ 1 in key order, from the
// first whose range does not end before userKey (from the first if userKey
// is nil), while fn returns true.
func (v *Version) ascendFrom(l int, userKey []byte, fn func(*FileMetadata) bool) {
	t := v.levels[l]
	if t == nil {
		return
	}
	if userKey == nil {
		t.Ascend(func(e entry) bool { return fn(e.f) })
		return
	}
	// From the first table ending at userKey or after; the one ending at it
	// with a range deletion's exclusive end (if any) ends before it.
	t.AscendGreaterOrEqual(pivot(userKey), func(e entry) bool {
		return e.f.Before(userKey) || fn(e.f)
	})
}

// Find returns the table of level l ≥ 1 whose key range holds userKey.
func (v *Version) Find(l int, userKey []byte) *FileMetadata {
	if fl := v.flat[l]; fl != nil {
		// The first table whose largest user key is not below userKey, or
		// the one after it if it ends at userKey with a range deletion's
		// exclusive end (tables do not overlap: one at most).
		e := fl.entries
		i, next, ok := fl.find(userKey)
		if i < len(e) && e[i].exclusive && bytes.Equal(e[i].key, userKey) {
			i++ // e[i] ends where userKey begins: Before(userKey)
		}
		if i == len(e) {
			return nil
		}
		// Is the table's smallest key at or below userKey? Where userKey
		// has the prefix, integers that differ decide.
		x := &e[i]
		if ok {
			switch {
			case x.first < next:
				return x.f
			case x.first > next:
				return nil
			}
		}
		if bytes.Compare(x.f.Smallest.UserKey, userKey) <= 0 {
			return x.f
		}
		return nil
	}
	t := v.levels[l]
	if t == nil {
		return nil
	}
	var found *FileMetadata
	t.AscendGreaterOrEqual(pivot(userKey), func(e entry) bool {
		if e.f.Before(userKey) {
			return true
		}
		if bytes.Compare(e.f.Smallest.UserKey, userKey) <= 0 {
			found = e.f
		}
		return false
	})
	return found
}

// Containing returns the tables of level l whose key ranges hold userKey:
// in L0 newest first, in the other levels the one table Find returns, if
// any.
func (v *Version) Containing(l int, userKey []byte) iter.Seq[*FileMetadata] {
	return func(yield func(*FileMetadata) bool) {
		if l > 0 {
			if f := v.Find(l, userKey); f != nil {
				yield(f)
			}
			return
		}
		if fl := v.flat[0]; fl != nil {
			for _, e := range fl.entries {
				if e.f.Overlaps(userKey, userKey) && !yield(e.f) {
					return
				}
			}
			return
		}
		for f := range v.Level(0) {
			if f.Overlaps(userKey, userKey) && !yield(f) {
				return
			}
		}
	}
}

// Level returns the tables of level l in the level's order.
func (v *Version) Level(l int) iter.Seq[*FileMetadata] {
	return func(yield func(*FileMetadata) bool) {
		if t := v.levels[l]; t != nil {
			t.Ascend(func(e entry) bool { return yield(e.f) })
		}
	}
}

// HasFile reports whether the version holds the table numbered num.
func (v *Version) HasFile(num uint64) bool {
	return v.byNum != nil && v.byNum.Has(numbered{num: num})
}

// Files returns the tables of level l in the level's order, as a new slice:
// for callers that need one (and can afford building it).
func (v *Version) Files(l int) []*FileMetadata {
	return slices.AppendSeq(make([]*FileMetadata, 0, v.NumFiles(l)), v.Level(l))
}

// All returns every table of the version with its level, level by level.
func (v *Version) All() iter.Seq2[int, *FileMetadata] {
	return func(yield func(int, *FileMetadata) bool) {
		for l := range NumLevels {
			for f := range v.Level(l) {
				if !yield(l, f) {
					return
				}
			}
		}
	}
}

// NumFiles returns the number of tables in level l.
func (v *Version) NumFiles(l int) int {
	if v.levels[l] == nil {
		return 0
	}
	return v.levels[l].Len()
}

// LevelSize returns the bytes of the tables in level l.
func (v *Version) LevelSize(l int) uint64 { return v.stats[l].Size }

// LevelStats returns the sums over the tables of level l.
func (v *Version) LevelStats(l int) LevelStats { return v.stats[l] }
