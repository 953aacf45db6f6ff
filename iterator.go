package bloomkv

// Iterators: the public Iterator over a read state, its bounds and its
// direction.

import (
	"bytes"
	"errors"
	"sort"
	"sync"

	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/manifest"
	"github.com/bloomkv/bloomkv/internal/rangedel"
	"github.com/bloomkv/bloomkv/memtable"
	"github.com/bloomkv/bloomkv/sstable"
)

// IterOptions bound an iterator.
type IterOptions struct {
	// LowerBound, when set, is the smallest key the iterator returns
	// (inclusive); UpperBound, when set, the key every returned key sorts
	// before (exclusive).
	LowerBound, UpperBound []byte
}

// Iterator walks the keys of a point-in-time view of the store in key order,
// in either direction. Position it with First, Last, SeekGE or SeekLT, then
// move with Next and Prev; each returns whether the iterator is at a key.
// Key and Value are valid until the next move. An Iterator is not safe for
// concurrent use; Close it to release the tables it holds.
type Iterator struct {
	d      *DB
	s      *readState
	seq    base.SeqNum // entries below it are visible
	m      mergingIter
	tombs  []rangedel.Tombstone // fragmented, visible range deletions
	lower  []byte
	upper  []byte
	key    []byte
	value  []byte
	keyBuf []byte
	// seekBuf holds the key of the last seek: the caller's key may alias
	// this iterator's Key or Value, which the seek's children overwrite or
	// release as they move.
	seekBuf []byte
	valBuf  []byte
	valid   bool
	back    bool // moving backward: the merged iterator is before the key
	l0      bool // it reads level-0 tables: its seeks count (noteL0Seek)
	err     error
	closed  bool
	alloc   *iterAlloc // its memory, to leave for the next iterator
}

// NewIter returns an iterator over the store as it is now. A nil o means no
// bounds.
func (d *DB) NewIter(o *IterOptions) (*Iterator, error) {
	if d.closedFlag.Load() {
		return nil, ErrClosed
	}
	s := d.acquire() // before the sequence number, as in Get
	return d.newIter(s, base.SeqNum(d.visibleSeq.Load())+1, o), nil
}

// newIter returns an iterator reading s at seq; it owns the reference to s.
func (d *DB) newIter(s *readState, seq base.SeqNum, o *IterOptions) *Iterator {
	a, _ := d.iterAllocs.Get().(*iterAlloc)
	if a == nil {
		a = &iterAlloc{}
	}
	it := &Iterator{d: d, s: s, seq: seq, alloc: a, keyBuf: a.keyBuf, seekBuf: a.seekBuf, valBuf: a.valBuf}
	it.m.iters, it.m.h.items = a.iters[:0], a.items[:0]
	if o != nil {
		it.lower = bytes.Clone(o.LowerBound)
		it.upper = bytes.Clone(o.UpperBound)
	}
	var hi []byte // the bounds as an inclusive range, for choosing tables
	if it.upper != nil {
		hi = it.upper
	}
	tombs := a.tombs[:0]
	nmem := 1 + len(s.imm)
	if cap(a.mems) < nmem {
		a.mems, a.memIters = make([]memIter, nmem), make([]memtable.Iter, nmem)
	}
	for i := range nmem {
		m := s.mem
		if i > 0 {
			m = s.imm[i-1]
		}
		a.memIters[i] = *m.mt.NewIter()
		a.mems[i].Iter = &a.memIters[i]
		it.m.iters = append(it.m.iters, &a.mems[i])
		tombs = appendVisible(tombs, m.mt.RangeDels(), seq)
	}
	l0 := 0
	for _, f := range s.version.Overlapping(0, it.lower, hi) {
		r, err := d.tables.get(f)
		if err != nil {
			it.err = err
			break
		}
		if l0 < len(a.tables) {
			r.ResetIter(a.tables[l0])
		} else {
			a.tables = append(a.tables, r.NewIter())
		}
		it.m.iters = append(it.m.iters, a.tables[l0])
		l0++
		tombs = appendVisible(tombs, r.RangeDeletions(), seq)
		it.l0 = true
	}
	if it.err == nil {
		lv := d.levelTables(s)
		for _, b := range lv.bad {
			if b.f.Overlaps(it.lower, hi) {
				it.err = b.err
				break
			}
		}
		for _, t := range lv.tombs {
			if t.SeqNum < seq && (hi == nil || bytes.Compare(t.Start, hi) <= 0) && (it.lower == nil || bytes.Compare(t.End, it.lower) > 0) {
				tombs = append(tombs, t)
			}
		}
		for l := 1; l < manifest.NumLevels && it.err == nil; l++ {
			if files := overlapping(lv.files[l], it.lower, hi); len(files) > 0 {
				li := &a.levels[l]
				li.tables, li.files, li.idx, li.e = d.tables, files, 0, nil
				it.m.iters = append(it.m.iters, li)
			}
		}
	}
	a.tombs = tombs
	it.tombs = rangedel.Fragment(tombs)
	return it
}

// appendVisible appends the tombstones of ts visible at seq to tombs.
func appendVisible(tombs, ts []rangedel.Tombstone, seq base.SeqNum) []rangedel.Tombstone {
	for _, t := range ts {
		if t.SeqNum < seq {
			tombs = append(tombs, t)
		}
	}
	return tombs
}

// iterAlloc is the memory an iterator leaves for the next when it closes:
// its children, their buffers and its own, so that opening an iterator
// allocates little. The Iterator itself is not reused: a closed one stays
// closed.
type iterAlloc struct {
	iters    []internalIterator
	items    []heapItem
	mems     []memIter
	memIters []memtable.Iter
	tables   []*sstable.Iter // level 0's
	levels   [manifest.NumLevels]levelIter
	tombs    []rangedel.Tombstone

	keyBuf, seekBuf, valBuf []byte
}

// release takes back the memory of a closed iterator, whose children are
// closed, dropping what would keep the store's memory reachable, and puts
// it in pool.
func (a *iterAlloc) release(pool *sync.Pool) {
	clear(a.iters[:cap(a.iters)])
	clear(a.items[:cap(a.items)])
	clear(a.tombs[:cap(a.tombs)])
	a.iters, a.items, a.tombs = a.iters[:0], a.items[:0], a.tombs[:0]
	for i := range a.mems {
		a.mems[i].Iter = nil
		a.memIters[i] = memtable.Iter{}
	}
	for i := range a.levels {
		a.levels[i].tables, a.levels[i].files = nil, nil
	}
	a.keyBuf, a.seekBuf, a.valBuf = a.keyBuf[:0], a.seekBuf[:0], a.valBuf[:0]
	pool.Put(a)
}

// levelTables is what the iterators of one read state share, below level 0:
// each level's tables in key order, and the range deletions of them all. The
// first iterator of the state builds it (DB.levelTables), so that an
// iterator costs no table-cache lookup nor slice per table of the store.
type levelTables struct {
	files [manifest.NumLevels][]*manifest.FileMetadata // shared: read only
	tombs []rangedel.Tombstone
	// bad holds the tables that did not open, with the error: an iterator
	// whose bounds meet one fails with it, as it would opening the table.
	bad []badTable
}

// badTable is a table that did not open, and why.
type badTable struct {
	f   *manifest.FileMetadata
	err error
}

// levelTables returns s's levelTables, building them if no iterator has.
// Tables that do not open are listed in bad, and the result is not kept,
// so that the next iterator tries them again.
func (d *DB) levelTables(s *readState) *levelTables {
	if lv := s.levels.Load(); lv != nil {
		return lv
	}
	lv := &levelTables{}
	for l := 1; l < manifest.NumLevels; l++ {
		lv.files[l] = s.version.Files(l)
		for _, f := range lv.files[l] {
			r, err := d.tables.get(f)
			if err != nil {
				lv.bad = append(lv.bad, badTable{f, err})
				continue
			}
			lv.tombs = append(lv.tombs, r.RangeDeletions()...)
		}
	}
	if len(lv.bad) > 0 {
		return lv
	}
	// Iterators racing to build them build the same; the first kept wins.
	s.levels.CompareAndSwap(nil, lv)
	return s.levels.Load()
}

// overlapping returns the tables of files, a level below L0 in key order,
// whose key ranges meet [lo, hi] (inclusive; nil for an open side), as a
// subslice: Version.Overlapping without its walk and its copy.
func overlapping(files []*manifest.FileMetadata, lo, hi []byte) []*manifest.FileMetadata {
	i, j := 0, len(files)
	if lo != nil {
		i = sort.Search(len(files), func(k int) bool { return !files[k].Before(lo) })
	}
	if hi != nil {
		j = sort.Search(len(files), func(k int) bool { return bytes.Compare(files[k].Smallest.UserKey, hi) > 0 })
	}
	if i >= j {
		return nil
	}
	return files[i:j:j]
}

// First moves to the first key.
func (it *Iterator) First() bool {
	if !it.usable() {
		return false
	}
	if it.lower != nil {
		return it.seekGE(it.lower)
	}
	it.back = false
	it.m.first()
	return it.findNext()
}

// Last moves to the last key.
func (it *Iterator) Last() bool {
	if !it.usable() {
		return false
	}
	if it.upper != nil {
		return it.seekLT(it.upper)
	}
	it.back = true
	it.m.last()
	return it.findPrev()
}

// SeekGE moves to the first key at or after key (and at or after the lower
// bound).
func (it *Iterator) SeekGE(key []byte) bool {
	if !it.usable() {
		return false
	}
	if it.lower != nil && bytes.Compare(key, it.lower) < 0 {
		key = it.lower
	}
	return it.seekGE(key)
}

// SeekLT moves to the last key before key (and before the upper bound).
func (it *Iterator) SeekLT(key []byte) bool {
	if !it.usable() {
		return false
	}
	if it.upper != nil && bytes.Compare(key, it.upper) > 0 {
		key = it.upper
	}
	return it.seekLT(key)
}

func (it *Iterator) seekGE(key []byte) bool {
	if it.l0 {
		it.d.noteL0Seek()
	}
	it.back = false
	it.seekBuf = append(it.seekBuf[:0], key...)
	it.m.seekGE(it.seekBuf)
	return it.findNext()
}

func (it *Iterator) seekLT(key []byte) bool {
	if it.l0 {
		it.d.noteL0Seek()
	}
	it.back = true
	it.seekBuf = append(it.seekBuf[:0], key...)
	it.m.seekLT(it.seekBuf)
	return it.findPrev()
}

// Next moves to the next key.
func (it *Iterator) Next() bool {
	if !it.valid || !it.usable() {
		it.valid = false
		return false
	}
	if it.back {
		// The merged iterator is before the current key: return to its
		// first entry, then step past its versions as going forward does.
		it.keyBuf = append(it.keyBuf[:0], it.key...)
		it.back = false
		it.m.seekGE(it.keyBuf)
	} else if it.m.h.run > 0 {
		return it.nextInRun()
	}
	it.skipUserKey()
	return it.findNext()
}

// nextInRun is Next where the merged iterator's top child steps through a
// run of its flat block (iterHeap.run): no other child's entry comes
// between, and the current key's bytes, in that block, stay valid. The
// next entry is the next key when it is a visible set of another user key
// below the upper bound and the iterator sees no range deletion; otherwise
// the usual checks settle from it.
func (it *Iterator) nextInRun() bool {
	u := it.key
	if !it.m.next() {
		return it.findNext()
	}
	k := it.m.key()
	if bytes.Equal(k.UserKey, u) {
		// An older version of the current key: skip its versions.
		it.keyBuf = append(it.keyBuf[:0], u...)
		for it.m.next() && bytes.Equal(it.m.key().UserKey, it.keyBuf) {
		}
		return it.findNext()
	}
	if k.Kind() != base.KindSet || k.SeqNum() >= it.seq || len(it.tombs) > 0 ||
		(it.upper != nil && bytes.Compare(k.UserKey, it.upper) >= 0) {
		return it.findNext()
	}
	it.key, it.value, it.valid = k.UserKey, it.m.value(), true
	return true
}

// Prev moves to the previous key.
func (it *Iterator) Prev() bool {
	if !it.valid || !it.usable() {
		it.valid = false
		return false
	}
	if !it.back {
		it.keyBuf = append(it.keyBuf[:0], it.key...)
		it.back = true
		it.m.seekLT(it.keyBuf)
	}
	return it.findPrev()
}

// Valid reports whether the iterator is at a key.
func (it *Iterator) Valid() bool { return it.valid }

// Key returns the current key. It is valid until the next move or Close;
// copy it to keep it.
func (it *Iterator) Key() []byte { return it.key }

// Value returns the current value. It is valid until the next move or
// Close; copy it to keep it.
func (it *Iterator) Value() []byte { return it.value }

// Error returns the error that stopped the iterator, if any.
func (it *Iterator) Error() error {
	if it.err != nil {
		return it.err
	}
	return it.m.err()
}

// Close releases the iterator. Later calls return ErrClosed.
func (it *Iterator) Close() error {
	if it.closed {
		return ErrClosed
	}
	it.closed, it.valid = true, false
	err := it.err
	if err == nil {
		err = it.m.err()
	}
	a := it.alloc
	a.iters, a.items = it.m.iters, it.m.h.items
	a.keyBuf, a.seekBuf, a.valBuf = it.keyBuf, it.seekBuf, it.valBuf
	it.m.close()
	it.d.release(it.s)
	it.alloc, it.key, it.value, it.keyBuf, it.seekBuf, it.valBuf = nil, nil, nil, nil, nil, nil
	a.release(&it.d.iterAllocs)
	if errors.Is(err, ErrClosed) {
		return nil
	}
	return err
}

func (it *Iterator) usable() bool {
	it.valid = false
	if it.closed {
		it.err = ErrClosed
		return false
	}
	if it.d.closedFlag.Load() {
		it.err = ErrClosed
		return false
	}
	return it.err == nil
}

// deleted reports whether a range deletion hides the entry.
func (it *Iterator) deleted(k base.InternalKey) bool {
	return len(it.tombs) > 0 && rangedel.Cover(it.tombs, k.UserKey, it.seq) > k.SeqNum()
}

// skipUserKey moves the merged iterator past the versions of its current
// user key.
func (it *Iterator) skipUserKey() {
	if !it.m.valid() {
		return
	}
	if !it.m.h.reverse && it.m.nextKeepsKey() {
		// The key stays valid across the step: compare it in place, and
		// copy it only when the next entry shares it.
		u := it.m.key().UserKey
		if !it.m.next() || !bytes.Equal(it.m.key().UserKey, u) {
			return
		}
		it.keyBuf = append(it.keyBuf[:0], u...)
	} else {
		it.keyBuf = append(it.keyBuf[:0], it.m.key().UserKey...)
	}
	for it.m.next() && bytes.Equal(it.m.key().UserKey, it.keyBuf) {
	}
}

// findNext settles forward on the first live key at or after the merged
// iterator's position: its newest visible version must be a set that no
// range deletion hides.
func (it *Iterator) findNext() bool {
	for it.m.valid() {
		k := it.m.key()
		if it.upper != nil && bytes.Compare(k.UserKey, it.upper) >= 0 {
			break
		}
		if k.SeqNum() >= it.seq {
			it.m.next()
			continue
		}
		switch k.Kind() {
		case base.KindSet:
			if !it.deleted(k) {
				it.key, it.value, it.valid = k.UserKey, it.m.value(), true
				return true
			}
		case base.KindDelete:
		default:
			it.err = base.CorruptionErrorf("bloomkv: iterator met an entry of unknown kind %v", k)
			return false
		}
		it.skipUserKey()
	}
	it.valid = false
	return false
}

// findPrev settles backward on the last live key before the merged
// iterator's position, reading each user key's versions (oldest first in
// this direction) and keeping the newest visible one.
func (it *Iterator) findPrev() bool {
	for it.m.valid() {
		k := it.m.key()
		if it.lower != nil && bytes.Compare(k.UserKey, it.lower) < 0 {
			break
		}
		it.keyBuf = append(it.keyBuf[:0], k.UserKey...)
		var newest base.InternalKey
		have := false
		for ; it.m.valid(); it.m.prev() {
			e := it.m.key()
			if !bytes.Equal(e.UserKey, it.keyBuf) {
				break
			}
			if e.SeqNum() >= it.seq {
				continue
			}
			newest, have = base.InternalKey{UserKey: it.keyBuf, Trailer: e.Trailer}, true
			if e.Kind() == base.KindSet {
				it.valBuf = append(it.valBuf[:0], it.m.value()...)
			}
		}
		if !have {
			continue
		}
		switch newest.Kind() {
		case base.KindSet:
			if !it.deleted(newest) {
				it.key, it.value, it.valid = it.keyBuf, it.valBuf, true
				return true
			}
		case base.KindDelete:
		default:
			it.err = base.CorruptionErrorf("bloomkv: iterator met an entry of unknown kind %v", newest)
			return false
		}
	}
	it.valid = false
	return false
}
