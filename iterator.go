package bloomkv

import (
	"bytes"
	"errors"
	"slices"

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
	err     error
	closed  bool
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
	it := &Iterator{d: d, s: s, seq: seq}
	if o != nil {
		it.lower = bytes.Clone(o.LowerBound)
		it.upper = bytes.Clone(o.UpperBound)
	}
	var hi []byte // the bounds as an inclusive range, for choosing tables
	if it.upper != nil {
		hi = it.upper
	}
	var tombs []rangedel.Tombstone
	visible := func(ts []rangedel.Tombstone) {
		for _, t := range ts {
			if t.SeqNum < seq {
				tombs = append(tombs, t)
			}
		}
	}
	for _, m := range append([]*memEntry{s.mem}, s.imm...) {
		it.m.iters = append(it.m.iters, &memIter{m.mt.NewIter()})
		visible(m.mt.RangeDels())
	}
	for _, f := range s.version.Overlapping(0, it.lower, hi) {
		r, err := d.tables.get(f.FileNum)
		if err != nil {
			it.err = err
			break
		}
		it.m.iters = append(it.m.iters, r.NewIter())
		visible(r.RangeDeletions())
	}
	for l := 1; l < manifest.NumLevels && it.err == nil; l++ {
		files := s.version.Overlapping(l, it.lower, hi)
		if len(files) == 0 {
			continue
		}
		for _, f := range files {
			r, err := d.tables.get(f.FileNum)
			if err != nil {
				it.err = err
				break
			}
			visible(r.RangeDeletions())
		}
		it.m.iters = append(it.m.iters, &levelIter{tables: d.tables, files: files})
	}
	it.tombs = rangedel.Fragment(tombs)
	return it
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
	it.back = false
	it.seekBuf = append(it.seekBuf[:0], key...)
	it.m.seekGE(it.seekBuf)
	return it.findNext()
}

func (it *Iterator) seekLT(key []byte) bool {
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
	}
	it.skipUserKey()
	return it.findNext()
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
	it.m.close()
	it.d.release(it.s)
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
	it.keyBuf = append(it.keyBuf[:0], it.m.key().UserKey...)
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

// internalIterator walks internal keys in order, in either direction. The
// seeks take user keys: SeekGE moves to the first entry of the first user
// key at or after it, SeekLT to the last entry before the user key.
type internalIterator interface {
	First() bool
	Last() bool
	SeekGE(userKey []byte) bool
	SeekLT(userKey []byte) bool
	Next() bool
	Prev() bool
	Key() base.InternalKey
	Value() []byte
	Error() error
	Close() error
}

var _ internalIterator = (*sstable.Iter)(nil)

// memIter adapts a memtable iterator.
type memIter struct{ *memtable.Iter }

func seekKey(userKey []byte) base.InternalKey {
	return base.MakeInternalKey(userKey, base.SeqNumMax, base.KindMax)
}

func (m *memIter) SeekGE(userKey []byte) bool { return m.Iter.SeekGE(seekKey(userKey)) }
func (m *memIter) SeekLT(userKey []byte) bool { return m.Iter.SeekLT(seekKey(userKey)) }
func (m *memIter) Error() error               { return nil }

// levelIter walks the tables of one level ≥ 1 (sorted, disjoint) as one
// sequence, opening each as it is reached.
type levelIter struct {
	tables *tableCache
	files  []*manifest.FileMetadata
	idx    int
	it     *sstable.Iter
	spare  *sstable.Iter // a closed iterator to reuse for the next table
	e      error
}

// open positions on table i, closing the current one unless it is table i;
// false past either end or on an error.
func (l *levelIter) open(i int) bool {
	if l.it != nil {
		if i == l.idx && l.e == nil && l.it.Error() == nil {
			return true // a seek within the table already open
		}
		if err := l.it.Error(); err != nil && l.e == nil {
			l.e = err
		}
		l.it.Close()
		l.spare, l.it = l.it, nil
	}
	l.idx = i
	if l.e != nil || i < 0 || i >= len(l.files) {
		return false
	}
	r, err := l.tables.get(l.files[i].FileNum)
	if err != nil {
		l.e = err
		return false
	}
	if l.spare != nil {
		l.it, l.spare = l.spare, nil
		r.ResetIter(l.it)
	} else {
		l.it = r.NewIter()
	}
	return true
}

// settle moves on to the following (forward) or preceding tables while the
// current one has no more entries.
func (l *levelIter) settle(ok, forward bool) bool {
	for !ok {
		if l.it != nil && l.it.Error() != nil {
			return false
		}
		if forward {
			if !l.open(l.idx + 1) {
				return false
			}
			ok = l.it.First()
		} else {
			if !l.open(l.idx - 1) {
				return false
			}
			ok = l.it.Last()
		}
	}
	return true
}

func (l *levelIter) First() bool { return l.open(0) && l.settle(l.it.First(), true) }
func (l *levelIter) Last() bool {
	return l.open(len(l.files)-1) && l.settle(l.it.Last(), false)
}

func (l *levelIter) SeekGE(userKey []byte) bool {
	i, _ := slices.BinarySearchFunc(l.files, userKey, func(f *manifest.FileMetadata, k []byte) int {
		if f.Before(k) {
			return -1
		}
		return 1
	})
	return l.open(i) && l.settle(l.it.SeekGE(userKey), true)
}

func (l *levelIter) SeekLT(userKey []byte) bool {
	// The last table starting before userKey.
	i, _ := slices.BinarySearchFunc(l.files, userKey, func(f *manifest.FileMetadata, k []byte) int {
		if bytes.Compare(f.Smallest.UserKey, k) < 0 {
			return -1
		}
		return 1
	})
	return l.open(i-1) && l.settle(l.it.SeekLT(userKey), false)
}

func (l *levelIter) Next() bool {
	return l.it != nil && l.settle(l.it.Next(), true)
}

func (l *levelIter) Prev() bool {
	return l.it != nil && l.settle(l.it.Prev(), false)
}

func (l *levelIter) Key() base.InternalKey { return l.it.Key() }
func (l *levelIter) Value() []byte         { return l.it.Value() }

func (l *levelIter) Error() error {
	if l.e != nil {
		return l.e
	}
	if l.it != nil {
		return l.it.Error()
	}
	return nil
}

func (l *levelIter) Close() error {
	err := l.Error()
	if l.it != nil {
		l.it.Close()
		l.it = nil
	}
	return err
}

// mergingIter merges internal iterators in internal-key order. It moves in
// the direction of its last positioning call: first and seekGE go forward
// (next), last and seekLT backward (prev).
type mergingIter struct {
	iters []internalIterator
	h     iterHeap
	e     error
}

// position repositions every child with fn and rebuilds the heap.
func (m *mergingIter) position(reverse bool, fn func(internalIterator) bool) {
	m.h.items, m.h.reverse = m.h.items[:0], reverse
	if m.e != nil {
		return
	}
	for _, it := range m.iters {
		if fn(it) {
			m.h.items = append(m.h.items, heapItem{it: it, key: it.Key()})
		} else if err := it.Error(); err != nil {
			m.e = err
			m.h.items = m.h.items[:0]
			return
		}
	}
	m.h.init()
}

func (m *mergingIter) first() bool {
	m.position(false, internalIterator.First)
	return m.valid()
}

func (m *mergingIter) last() bool {
	m.position(true, internalIterator.Last)
	return m.valid()
}

func (m *mergingIter) seekGE(userKey []byte) bool {
	m.position(false, func(it internalIterator) bool { return it.SeekGE(userKey) })
	return m.valid()
}

func (m *mergingIter) seekLT(userKey []byte) bool {
	m.position(true, func(it internalIterator) bool { return it.SeekLT(userKey) })
	return m.valid()
}

func (m *mergingIter) valid() bool { return len(m.h.items) > 0 }

// step moves the top child on (Next forward, Prev backward).
func (m *mergingIter) step() bool {
	if !m.valid() {
		return false
	}
	top := &m.h.items[0]
	var ok bool
	if m.h.reverse {
		ok = top.it.Prev()
	} else {
		ok = top.it.Next()
	}
	if ok {
		top.key = top.it.Key()
		m.h.down(0)
	} else {
		if err := top.it.Error(); err != nil {
			m.e = err
			m.h.items = m.h.items[:0]
			return false
		}
		last := len(m.h.items) - 1
		m.h.items[0] = m.h.items[last]
		m.h.items = m.h.items[:last]
		m.h.down(0)
	}
	return m.valid()
}

// next moves forward; the last positioning must have been forward.
func (m *mergingIter) next() bool { return m.step() }

// prev moves backward; the last positioning must have been backward.
func (m *mergingIter) prev() bool { return m.step() }

func (m *mergingIter) key() base.InternalKey { return m.h.items[0].key }
func (m *mergingIter) value() []byte         { return m.h.items[0].it.Value() }

// top returns the child at the current key.
func (m *mergingIter) top() internalIterator { return m.h.items[0].it }

func (m *mergingIter) err() error {
	if m.e != nil {
		return m.e
	}
	for _, it := range m.iters {
		if err := it.Error(); err != nil {
			return err
		}
	}
	return nil
}

// close closes the children.
func (m *mergingIter) close() {
	for _, it := range m.iters {
		it.Close()
	}
	m.iters, m.h.items = nil, nil
}

// iterHeap orders children by their current keys: smallest on top going
// forward, largest going backward. Each item keeps its child's key, valid
// until that child moves, so comparisons make no interface calls.
type iterHeap struct {
	items   []heapItem
	reverse bool
}

type heapItem struct {
	it  internalIterator
	key base.InternalKey
}

func (h *iterHeap) less(i, j int) bool {
	c := base.CompareInternal(h.items[i].key, h.items[j].key)
	if h.reverse {
		return c > 0
	}
	return c < 0
}

func (h *iterHeap) init() {
	for i := len(h.items)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

// down moves item i down to its place.
func (h *iterHeap) down(i int) {
	n := len(h.items)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		j := l
		if r := l + 1; r < n && h.less(r, l) {
			j = r
		}
		if !h.less(j, i) {
			return
		}
		h.items[i], h.items[j] = h.items[j], h.items[i]
		i = j
	}
}
