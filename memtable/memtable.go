// Package memtable is bloomkv's in-memory write buffer: the newest writes, in
// internal-key order, until they are flushed to a table. It is a B-tree
// (github.com/google/btree) of internal keys. Writers insert under a lock;
// point reads search under a shared lock; an iterator walks a copy-on-write
// clone of the tree, a consistent snapshot that writers do not disturb.
package memtable

import (
	"bytes"
	"encoding/binary"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/google/btree"

	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/rangedel"
)

// entryOverhead approximates the memory an entry costs beyond its key and
// value bytes (tree slot, slice headers, node share), for size accounting.
const entryOverhead = 56

// chunkSize is the size of the arena chunks that hold keys and values.
const chunkSize = 64 << 10

// entry is a tree item. prefix holds the user key's first 8 bytes
// (big-endian, zero-padded) inline, so that most comparisons are decided
// without following the key's pointer, a likely cache miss.
type entry struct {
	prefix uint64
	key    base.InternalKey
	value  []byte
}

// keyPrefix returns the first 8 bytes of k as a big-endian integer, padded
// with zeros. Where two prefixes differ they order as the keys do; where they
// are equal the keys must be compared in full.
func keyPrefix(k []byte) uint64 {
	if len(k) >= 8 {
		return binary.BigEndian.Uint64(k)
	}
	var b [8]byte
	copy(b[:], k)
	return binary.BigEndian.Uint64(b[:])
}

func makeEntry(key base.InternalKey, value []byte) entry {
	return entry{prefix: keyPrefix(key.UserKey), key: key, value: value}
}

func less(a, b entry) bool {
	if a.prefix != b.prefix {
		return a.prefix < b.prefix
	}
	return base.CompareInternal(a.key, b.key) < 0
}

// MemTable is a sorted in-memory table of internal keys. It is safe for
// concurrent use: any number of readers and iterators alongside writers.
type MemTable struct {
	mu    sync.RWMutex
	tree  *btree.BTreeG[entry]
	chunk []byte // arena: the unused tail of the current chunk
	size  atomic.Int64
	count atomic.Int64
	// rangeDels are the range deletions, in the order written; numDels
	// mirrors their count for lock-free checks.
	rangeDels []rangedel.Tombstone
	numDels   atomic.Int32
}

// New returns an empty MemTable.
func New() *MemTable {
	return &MemTable{tree: btree.NewG[entry](32, less)}
}

// copyIn copies b into the arena; the caller holds the write lock.
func (m *MemTable) copyIn(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	if len(b) > chunkSize/4 { // large values get their own allocation
		return append([]byte(nil), b...)
	}
	if len(m.chunk) < len(b) {
		m.chunk = make([]byte, chunkSize)
	}
	out := m.chunk[:len(b):len(b)]
	copy(out, b)
	m.chunk = m.chunk[len(b):]
	return out
}

// Add inserts one entry, copying key and value. An entry with the same user
// key and trailer replaces the old one (the DB never writes one twice). A
// KindRangeDelete entry is a range deletion of [key, value).
func (m *MemTable) Add(key base.InternalKey, value []byte) {
	m.mu.Lock()
	m.addLocked(key, value)
	m.mu.Unlock()
}

// Batch is a set of entries applied under one acquisition of the write lock.
type Batch interface {
	// Each calls fn for each entry, in order.
	Each(fn func(key base.InternalKey, value []byte))
}

// Apply inserts every entry of b while holding the write lock once, so a
// reader sees all of them or none.
func (m *MemTable) Apply(b Batch) {
	m.mu.Lock()
	b.Each(m.addLocked)
	m.mu.Unlock()
}

func (m *MemTable) addLocked(key base.InternalKey, value []byte) {
	if key.Kind() == base.KindRangeDelete {
		// The key is the range's start and the value its end.
		m.rangeDels = append(m.rangeDels, rangedel.Tombstone{
			Start: m.copyIn(key.UserKey), End: m.copyIn(value), SeqNum: key.SeqNum(),
		})
		m.numDels.Add(1)
		m.size.Add(int64(len(key.UserKey) + len(value) + entryOverhead))
		m.count.Add(1)
		return
	}
	e := makeEntry(base.InternalKey{UserKey: m.copyIn(key.UserKey), Trailer: key.Trailer}, m.copyIn(value))
	if old, replaced := m.tree.ReplaceOrInsert(e); replaced {
		m.size.Add(-int64(len(old.key.UserKey) + len(old.value) + entryOverhead))
		m.count.Add(-1)
	}
	m.size.Add(int64(len(key.UserKey) + len(value) + entryOverhead))
	m.count.Add(1)
}

// Size returns the approximate memory the entries take, in bytes.
func (m *MemTable) Size() int64 { return m.size.Load() }

// Len returns the number of entries, range deletions included.
func (m *MemTable) Len() int { return int(m.count.Load()) }

// Empty reports whether the table holds no entries.
func (m *MemTable) Empty() bool { return m.Len() == 0 }

// Get returns the newest point entry for userKey written before seq
// (sequence number below seq): its internal key and value (aliasing the
// table's memory; the caller must not modify them). found is false when
// there is none. Range deletions are not applied (RangeDelCover).
func (m *MemTable) Get(userKey []byte, seq base.SeqNum) (value []byte, key base.InternalKey, found bool) {
	if seq == 0 {
		return nil, key, false
	}
	seq = min(seq, base.SeqNumMax+1)
	pivot := makeEntry(base.MakeInternalKey(userKey, seq-1, base.KindMax), nil)
	m.mu.RLock()
	m.tree.AscendGreaterOrEqual(pivot, func(e entry) bool {
		if bytes.Equal(e.key.UserKey, userKey) {
			value, key, found = e.value, e.key, true
		}
		return false
	})
	m.mu.RUnlock()
	return value, key, found
}

// RangeDelCover returns the highest sequence number below seq of the range
// deletions covering userKey, or 0 when none does.
func (m *MemTable) RangeDelCover(userKey []byte, seq base.SeqNum) base.SeqNum {
	if m.numDels.Load() == 0 {
		return 0
	}
	var cover base.SeqNum
	m.mu.RLock()
	for _, t := range m.rangeDels {
		if t.SeqNum < seq && t.SeqNum > cover && t.Covers(userKey) {
			cover = t.SeqNum
		}
	}
	m.mu.RUnlock()
	return cover
}

// RangeDels returns the range deletions written so far, unfragmented. The
// slice is the caller's; the keys alias the table's memory.
func (m *MemTable) RangeDels() []rangedel.Tombstone {
	if m.numDels.Load() == 0 {
		return nil
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	return slices.Clone(m.rangeDels)
}

// NewIter returns an iterator over a snapshot of the table: entries added
// after NewIter are not seen.
func (m *MemTable) NewIter() *Iter {
	m.mu.Lock() // Clone must not run concurrently with a writer
	snap := m.tree.Clone()
	m.mu.Unlock()
	return &Iter{tree: snap}
}

// refill is the number of entries an iterator takes from the tree at a time.
const refill = 64

// Iter walks a MemTable snapshot in internal-key order: First, Last, SeekGE,
// SeekLT, Next, Prev. Keys and values alias the table's memory. It is not
// safe for concurrent use.
type Iter struct {
	tree    *btree.BTreeG[entry]
	buf     []entry // entries around the position, in the direction of travel
	pos     int
	forward bool
}

// fill loads up to refill entries in the direction of travel: from pivot on
// (ascending) or back from it (descending), pivot itself included when incl;
// from the start or the end of the table when pivot is nil.
func (it *Iter) fill(forward bool, pivot *entry, incl bool) bool {
	it.buf, it.pos, it.forward = it.buf[:0], 0, forward
	fn := func(e entry) bool {
		if pivot != nil && !incl && base.CompareInternal(e.key, pivot.key) == 0 {
			return true
		}
		it.buf = append(it.buf, e)
		return len(it.buf) < refill
	}
	switch {
	case forward && pivot == nil:
		it.tree.Ascend(fn)
	case forward:
		it.tree.AscendGreaterOrEqual(*pivot, fn)
	case pivot == nil:
		it.tree.Descend(fn)
	default:
		it.tree.DescendLessOrEqual(*pivot, fn)
	}
	return len(it.buf) > 0
}

// First moves to the first entry.
func (it *Iter) First() bool { return it.fill(true, nil, false) }

// Last moves to the last entry.
func (it *Iter) Last() bool { return it.fill(false, nil, false) }

// SeekGE moves to the first entry whose internal key is ≥ key.
func (it *Iter) SeekGE(key base.InternalKey) bool {
	e := makeEntry(key, nil)
	return it.fill(true, &e, true)
}

// SeekLT moves to the last entry whose internal key is < key.
func (it *Iter) SeekLT(key base.InternalKey) bool {
	e := makeEntry(key, nil)
	return it.fill(false, &e, false)
}

// Valid reports whether the iterator is at an entry.
func (it *Iter) Valid() bool { return it.pos < len(it.buf) }

// Next moves to the next entry.
func (it *Iter) Next() bool {
	if !it.Valid() {
		return false
	}
	cur := it.buf[it.pos]
	if it.forward {
		if it.pos++; it.pos < len(it.buf) {
			return true
		}
	}
	return it.fill(true, &cur, false)
}

// Prev moves to the previous entry.
func (it *Iter) Prev() bool {
	if !it.Valid() {
		return false
	}
	cur := it.buf[it.pos]
	if !it.forward {
		if it.pos++; it.pos < len(it.buf) {
			return true
		}
	}
	return it.fill(false, &cur, false)
}

// Key returns the current entry's internal key.
func (it *Iter) Key() base.InternalKey { return it.buf[it.pos].key }

// Value returns the current entry's value.
func (it *Iter) Value() []byte { return it.buf[it.pos].value }

// Close releases the iterator.
func (it *Iter) Close() error {
	it.buf, it.tree = nil, nil
	return nil
}
