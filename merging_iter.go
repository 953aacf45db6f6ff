package bloomkv

// mergingIter: the memtables' and levels' iterators merged into one stream
// in internal-key order.

import (
	"encoding/binary"

	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/memtable"
	"github.com/bloomkv/bloomkv/sstable"
)

// internalIterator walks internal keys in order, in either direction. The
// seeks take user keys: SeekGE moves to the first entry of the first user
// key at or after it, SeekLT to the last entry before the user key. The
// sources are memtables (memIter), tables (sstable.Iter) and levels
// (levelIter).
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

// An sstable.Iter is an internalIterator as it is.
var _ internalIterator = (*sstable.Iter)(nil)

// memIter adapts a memtable iterator.
type memIter struct{ *memtable.Iter }

func seekKey(userKey []byte) base.InternalKey {
	return base.MakeInternalKey(userKey, base.SeqNumMax, base.KindMax)
}

func (m *memIter) SeekGE(userKey []byte) bool { return m.Iter.SeekGE(seekKey(userKey)) }

func (m *memIter) SeekLT(userKey []byte) bool { return m.Iter.SeekLT(seekKey(userKey)) }

func (m *memIter) Error() error { return nil }

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
	m.h.items, m.h.reverse, m.h.run = m.h.items[:0], reverse, 0
	if m.e != nil {
		return
	}
	for i, it := range m.iters {
		if fn(it) {
			m.h.items = append(m.h.items, makeHeapItem(it, i))
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
		if ok = top.it.Prev(); ok {
			top.key = top.it.Key()
		}
	} else {
		ok = top.next()
	}
	if ok {
		if m.h.run > 0 {
			m.h.run--
			return true
		}
		m.h.fixTop()
		if t := m.h.items[0].table(); t != nil && !m.h.reverse {
			m.h.startRun(t)
		}
		return true
	}
	m.h.run = 0
	if err := top.it.Error(); err != nil {
		m.e = err
		m.h.items = m.h.items[:0]
		return false
	}
	last := len(m.h.items) - 1
	m.h.items[0] = m.h.items[last]
	m.h.items = m.h.items[:last]
	m.h.runner = 0
	m.h.down(0)
	return m.valid()
}

// next moves forward; the last positioning must have been forward.
func (m *mergingIter) next() bool { return m.step() }

// prev moves backward; the last positioning must have been backward.
func (m *mergingIter) prev() bool { return m.step() }

func (m *mergingIter) key() base.InternalKey { return m.h.items[0].key }

func (m *mergingIter) value() []byte { return m.h.items[0].value() }

// nextKeepsKey reports whether next, going forward, leaves the current key's
// bytes as they are.
func (m *mergingIter) nextKeepsKey() bool { return m.h.items[0].nextKeepsKey() }

// top returns the child at the current key.
func (m *mergingIter) top() internalIterator { return m.h.items[0].it }

// topIndex returns the index in m.iters of the child at the current entry.
func (m *mergingIter) topIndex() int { return m.h.items[0].idx }

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
	// runner is the index (1 or 2) of the item that would rise to the top
	// were the top removed, 0 when not known. It holds while items 1 and 2
	// stay in place: a move of the top child that keeps it on top leaves
	// them be.
	runner int
	// run counts the forward moves of the top child that keep it on top
	// without a comparison: the entries of its flat block that sort below
	// the runner-up's key (startRun).
	run int
}

// heapItem is a child in the heap. Besides the interface, it holds the
// child's concrete type when it is one the forward path calls directly
// (lv, tb or mem; at most one is set), so that a step makes no interface
// call.
type heapItem struct {
	it  internalIterator
	lv  *levelIter
	tb  *sstable.Iter
	mem *memIter
	key base.InternalKey
	idx int // its index in mergingIter.iters
}

// makeHeapItem returns the item of child it, positioned at an entry, whose
// index in mergingIter.iters is idx.
func makeHeapItem(it internalIterator, idx int) heapItem {
	h := heapItem{it: it, idx: idx}
	switch c := it.(type) {
	case *levelIter:
		h.lv = c
	case *sstable.Iter:
		h.tb = c
	case *memIter:
		h.mem = c
	}
	h.key = h.it.Key()
	return h
}

// next moves the child forward and, when it is at an entry, loads its key.
func (h *heapItem) next() bool {
	var k base.InternalKey
	var ok bool
	switch {
	case h.lv != nil:
		k, ok = h.lv.nextKey()
	case h.tb != nil:
		k, ok = h.tb.NextKey()
	case h.mem != nil:
		if ok = h.mem.Iter.Next(); ok {
			k = h.mem.Iter.Key()
		}
	default:
		if ok = h.it.Next(); ok {
			k = h.it.Key()
		}
	}
	if ok {
		h.key = k
	}
	return ok
}

// table returns the table iterator of a table or level child, nil for any
// other.
func (h *heapItem) table() *sstable.Iter {
	switch {
	case h.lv != nil:
		return h.lv.it
	case h.tb != nil:
		return h.tb
	}
	return nil
}

// nextKeepsKey reports whether the child's next forward move leaves its
// current key's bytes as they are: a memtable's keys never move, and a
// table's stay while it stays within a flat block.
func (h *heapItem) nextKeepsKey() bool {
	switch {
	case h.lv != nil:
		return h.lv.it.NextKeepsKey()
	case h.tb != nil:
		return h.tb.NextKeepsKey()
	}
	return h.mem != nil
}

// value returns the child's current value.
func (h *heapItem) value() []byte {
	switch {
	case h.lv != nil:
		return h.lv.it.Value()
	case h.tb != nil:
		return h.tb.Value()
	case h.mem != nil:
		return h.mem.Iter.Value()
	}
	return h.it.Value()
}

func (h *iterHeap) less(i, j int) bool {
	c := compareInternal(h.items[i].key, h.items[j].key)
	if h.reverse {
		return c > 0
	}
	return c < 0
}

func (h *iterHeap) init() {
	h.runner = 0
	for i := len(h.items)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

// fixTop restores the order after the top child moved. While the top stays
// below the runner-up it stays on top, and items 1 and 2 keep their places,
// at the cost of one comparison.
func (h *iterHeap) fixTop() {
	if len(h.items) < 2 {
		return
	}
	r := h.runnerUp()
	if !h.less(r, 0) {
		return
	}
	h.items[0], h.items[r] = h.items[r], h.items[0]
	h.runner = 0
	h.down(r)
}

// runnerUp returns runner, finding it first when not known; there are at
// least two items.
func (h *iterHeap) runnerUp() int {
	if h.runner == 0 {
		h.runner = 1
		if len(h.items) > 2 && h.less(2, 1) {
			h.runner = 2
		}
	}
	return h.runner
}

// startRun sets run, when the top child, whose table iterator is top, is
// going forward in a flat block, to the entries after its current one in
// the block whose keys sort below the runner-up's: they come before any
// other child's, and the top steps through them without comparing. At a
// block's first entry it costs one comparison where the block's last key
// sorts below the runner-up's; otherwise a search from the current entry
// out, in steps that double, costs about two comparisons per doubling of
// the run. A merge of one sorted run with a few keys from above, a store's
// usual shape, walks most of each block so, between the keys from above.
func (h *iterHeap) startRun(top *sstable.Iter) {
	if len(h.items) < 2 {
		return // fixTop makes no comparison
	}
	rest := top.BlockRest()
	if rest == 0 {
		return
	}
	r := h.items[h.runnerUp()].key
	lastAbove := false // the block's last key is known to sort at or above r
	if top.AtBlockStart() {
		if compareInternal(top.RestKey(rest), r) < 0 {
			h.run = rest // the whole block
			return
		}
		lastAbove = true
	}
	// The run stops before the first entry of the rest at or above the
	// runner-up's key: probe the 1st, 2nd, 4th, ... entries, the lines a
	// walk reads next, then bisect between the last two probed.
	lo, hi := 0, 1 // lo: an entry below r (0: the current one); hi: one probed next
	for {
		if hi >= rest {
			hi = rest
			if !lastAbove && compareInternal(top.RestKey(rest), r) < 0 {
				h.run = rest
				return
			}
			break
		}
		if compareInternal(top.RestKey(hi), r) >= 0 {
			break
		}
		lo, hi = hi, 2*hi
	}
	for lo+1 < hi { // RestKey(hi) sorts at or above r, lo's entry below it
		if mid := int(uint(lo+hi) >> 1); compareInternal(top.RestKey(mid), r) < 0 {
			lo = mid
		} else {
			hi = mid
		}
	}
	h.run = hi - 1
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

// compareInternal is base.CompareInternal, comparing the user keys eight
// bytes at a time in line rather than by a call.
func compareInternal(a, b base.InternalKey) int {
	x, y := a.UserKey, b.UserKey
	for len(x) >= 8 && len(y) >= 8 {
		if u, v := binary.BigEndian.Uint64(x), binary.BigEndian.Uint64(y); u != v {
			if u < v {
				return -1
			}
			return 1
		}
		x, y = x[8:], y[8:]
	}
	for i := 0; i < len(x) && i < len(y); i++ {
		if x[i] != y[i] {
			if x[i] < y[i] {
				return -1
			}
			return 1
		}
	}
	switch {
	case len(x) < len(y):
		return -1
	case len(x) > len(y):
		return 1
	case a.Trailer > b.Trailer:
		return -1
	case a.Trailer < b.Trailer:
		return 1
	}
	return 0
}
