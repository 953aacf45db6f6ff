// Package memtable is bloomkv's in-memory write buffer: the newest writes, in
// internal-key order, until they are flushed to a table.
//
// The table is a skiplist whose nodes live in an arena: chunks of bytes
// without Go pointers, so the garbage collector never scans them. A node
// refers to its neighbours by 32-bit handles (chunk number and 8-byte unit
// within the chunk), and carries its key and value right after its header.
//
// Writers take a mutex, so one inserts at a time (the DB has a single writer
// anyway: the commit leader). A writer links a node bottom level first and
// publishes every link with an atomic store, so readers, which take no lock,
// always find a well-formed list. Each node holds an insertion number; a
// write makes its nodes visible by raising the table's visible number once
// it has linked all of them, so readers see a batch whole or not at all, and
// an iterator, which keeps the visible number of its creation, sees the table
// as it was then.
package memtable

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/bloomkv/bloomkv/filterblock"
	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/rangedel"
)

// entryOverhead is what an entry costs in the arena beyond its key and value
// bytes, on average: header, prev link, tower (2 levels) and alignment.
// Size counts it per entry. TestSizeMatchesArena keeps it honest.
const entryOverhead = 47

const (
	// maxHeight bounds a node's tower: with a 1/2 chance of each further
	// level, 32 levels serve 2^32 entries.
	maxHeight = 32
	unitShift = 3  // handles count 8-byte units
	unitBits  = 15 // the unit within a chunk: a handle's low bits
	unitMask  = 1<<unitBits - 1
	maxChunks = 1 << (32 - unitBits) // chunk numbers: a handle's high bits
	// chunkSize is the size of the largest regular chunk (256 KiB, the
	// span a handle's unit bits address); the first is firstChunk and each
	// new one twice the last, so that a small table stays small.
	chunkSize  = 1 << (unitBits + unitShift)
	firstChunk = 16 << 10
	// bigRecord is the size beyond which a node or value gets a chunk of its
	// own rather than leaving most of a regular chunk unused.
	bigRecord = chunkSize / 4
	hdrSize   = int(unsafe.Sizeof(node{}))
	valHdr    = int(unsafe.Sizeof(valueRec{}))
)

// node is the header of a skiplist node. Before it in the arena lie its
// level-0 prev link (4 bytes just below) and, below that, its tower of next
// links, level 0 highest; after it, its user key and then its value.
type node struct {
	trailer base.Trailer
	// prefix holds the user key's first 8 bytes (big-endian, zero-padded)
	// so that most comparisons are decided without reading the key.
	prefix uint64
	keyLen uint32
	valLen uint32
	// ord is the node's insertion number; readers ignore nodes at or above
	// the visible number they read.
	ord uint32
	// repl is the handle of the newest valueRec replacing the value, or 0.
	repl atomic.Uint32
}

// valueRec is a value that replaced an entry's earlier one (Add of the same
// internal key twice); its bytes follow it.
type valueRec struct {
	prev uint32 // the valueRec it replaced, or 0
	ord  uint32
	len  uint32
	_    uint32
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

// MemTable is a sorted in-memory table of internal keys. It is safe for
// concurrent use: any number of readers and iterators alongside writers.
type MemTable struct {
	// Read by readers.
	dir     atomic.Pointer[[]unsafe.Pointer] // chunk bases, by chunk number
	height  atomic.Uint32                    // the tallest tower's height
	visible atomic.Uint32                    // nodes with ord below it are visible
	size    atomic.Int64
	count   atomic.Int64
	dels    atomic.Pointer[[]rangedel.Tombstone] // in the order written
	head    uint32                               // handle of the head node (no key)

	// The writer's, under mu.
	mu       sync.Mutex
	chunks   []unsafe.Pointer // what dir points to a copy of
	cur      unsafe.Pointer   // the regular chunk being filled
	curNum   uint32           // its chunk number
	curOff   int              // its first free byte
	curCap   int              // its size
	nextOrd  uint32
	wSize    int64
	wCount   int64
	wDels    []rangedel.Tombstone
	delsDone int // how many of wDels are published
	rng      uint64
	used     int64 // arena bytes taken: padding counted, unused chunk tails not
	addFn    func(base.InternalKey, []byte)
	chunkFn  func() []byte // NewSizedFrom's source of regular chunks

	// filter holds the user keys of the point entries (see keyFilter);
	// it has no words in a table made by New.
	filter keyFilter
}

// NewSized returns an empty MemTable expected to grow to about size bytes
// (Size). It keeps a filter of its user keys sized for that, so that a Get
// of a key it lacks (nearly every Get of a store whose data is mostly in
// tables) is answered without a search.
func NewSized(size int64) *MemTable { return NewSizedFrom(size, nil) }

// ChunkSize is the size of the arena chunks a MemTable takes from
// NewSizedFrom's source.
const ChunkSize = chunkSize

// NewSizedFrom returns an empty MemTable as NewSized does, whose arena
// takes its chunks of ChunkSize bytes from chunks (when not nil), as long
// as it returns one: ChunkSize bytes, zeroed, that nothing else uses. A
// table expected to reach 4 chunks starts with one, not with smaller ones.
// The source can hand out memory whose pages the process has already
// touched: a write into fresh memory takes a page fault once per page,
// which would otherwise fall on a write now and then.
func NewSizedFrom(size int64, chunks func() []byte) *MemTable {
	first := firstChunk
	if chunks != nil && size >= 4*chunkSize {
		first = chunkSize
	}
	m := newTable(first, chunks)
	m.filter = newKeyFilter(size)
	return m
}

// New returns an empty MemTable, without a key filter.
func New() *MemTable { return newTable(firstChunk, nil) }

// newTable returns an empty MemTable whose first chunk is of first bytes,
// without a key filter.
func newTable(first int, chunks func() []byte) *MemTable {
	m := &MemTable{nextOrd: 1, rng: rand.Uint64() | 1, chunkFn: chunks}
	m.addFn = m.addLocked
	m.newChunk(first)
	m.head, _ = m.alloc(4*maxHeight+4, hdrSize)
	m.height.Store(1)
	m.visible.Store(1)
	return m
}

// newChunk starts a regular chunk of size bytes.
func (m *MemTable) newChunk(size int) {
	m.cur, m.curNum = m.addChunk(size)
	m.curOff, m.curCap = 0, size
}

// addChunk allocates a chunk and publishes it in the directory before any
// node in it can be linked.
func (m *MemTable) addChunk(size int) (unsafe.Pointer, uint32) {
	if len(m.chunks) == maxChunks {
		panic("memtable: arena full (32 GiB)")
	}
	var buf []byte
	if size == chunkSize && m.chunkFn != nil {
		buf = m.chunkFn()
	}
	if len(buf) != size {
		buf = make([]byte, size)
	}
	m.chunks = append(m.chunks, unsafe.Pointer(unsafe.SliceData(buf)))
	d := m.chunks // readers use their copy's length, below what append writes
	m.dir.Store(&d)
	return m.chunks[len(m.chunks)-1], uint32(len(m.chunks) - 1)
}

// alloc reserves pre bytes before an 8-aligned point and post bytes from it,
// and returns the point's handle and address.
func (m *MemTable) alloc(pre, post int) (uint32, unsafe.Pointer) {
	need := pre + post + 7
	if need > bigRecord {
		at := (pre + 7) &^ 7
		base, num := m.addChunk(at + post)
		m.used += int64(at + post)
		return num<<unitBits | uint32(at>>unitShift), unsafe.Add(base, at)
	}
	at := (m.curOff + pre + 7) &^ 7
	if at+post > m.curCap {
		size := min(2*m.curCap, chunkSize)
		for size < need {
			size *= 2
		}
		m.newChunk(size)
		at = (pre + 7) &^ 7
	}
	m.used += int64(at + post - m.curOff)
	m.curOff = at + post
	return m.curNum<<unitBits | uint32(at>>unitShift), unsafe.Add(m.cur, at)
}

// Add inserts one entry, copying key and value. An entry with the same user
// key and trailer replaces the old one (the DB never writes one twice). A
// KindRangeDelete entry is a range deletion of [key, value).
func (m *MemTable) Add(key base.InternalKey, value []byte) {
	m.mu.Lock()
	m.addLocked(key, value)
	m.publish()
	m.mu.Unlock()
}

// Batch is a set of entries applied under one acquisition of the write lock.
type Batch interface {
	// Each calls fn for each entry, in order.
	Each(fn func(key base.InternalKey, value []byte))
}

// Apply inserts every entry of b and then makes them visible together, so a
// reader sees all of them or none.
func (m *MemTable) Apply(b Batch) {
	m.mu.Lock()
	b.Each(m.addFn)
	m.publish()
	m.mu.Unlock()
}

// publish makes what the writer added visible to readers.
func (m *MemTable) publish() {
	if m.delsDone != len(m.wDels) {
		d := m.wDels
		m.dels.Store(&d)
		m.delsDone = len(d)
	}
	m.size.Store(m.wSize)
	m.count.Store(m.wCount)
	m.visible.Store(m.nextOrd)
}

func (m *MemTable) addLocked(key base.InternalKey, value []byte) {
	if m.nextOrd == ^uint32(0) {
		panic("memtable: too many entries")
	}
	if key.Kind() == base.KindRangeDelete {
		// The key is the range's start and the value its end.
		b := make([]byte, len(key.UserKey)+len(value))
		copy(b, key.UserKey)
		copy(b[len(key.UserKey):], value)
		m.wDels = append(m.wDels, rangedel.Tombstone{
			Start: b[:len(key.UserKey):len(key.UserKey)], End: b[len(key.UserKey):], SeqNum: key.SeqNum(),
		})
		m.wSize += int64(len(key.UserKey) + len(value) + entryOverhead)
		m.wCount++
		return
	}
	if m.filter.words != nil {
		// Before the entry becomes visible (publish), so a reader that
		// can see it finds its bits set.
		m.filter.add(filterblock.Hash(key.UserKey))
	}
	m.insert(key, value)
}

// at returns the address of the node with handle h; dir is a directory at
// least as new as the link h was read from.
func at(dir []unsafe.Pointer, h uint32) unsafe.Pointer {
	return unsafe.Add(dir[h>>unitBits], uintptr(h&unitMask)<<unitShift)
}

// next returns the link of the node at p at level l.
func next(p unsafe.Pointer, l int) uint32 {
	return (*atomic.Uint32)(unsafe.Add(p, -8-4*l)).Load()
}

func setNext(p unsafe.Pointer, l int, h uint32) {
	(*atomic.Uint32)(unsafe.Add(p, -8-4*l)).Store(h)
}

// prev returns the level-0 predecessor of the node at p (the head's handle
// for the first node).
func prev(p unsafe.Pointer) uint32 {
	return (*atomic.Uint32)(unsafe.Add(p, -4)).Load()
}

func nodeKey(p unsafe.Pointer) []byte {
	n := (*node)(p)
	if n.keyLen == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Add(p, hdrSize)), n.keyLen)
}

// compare orders the node at p against the internal key (prefix, key,
// trailer), as base.CompareInternal does.
func compare(p unsafe.Pointer, prefix uint64, key []byte, trailer base.Trailer) int {
	n := (*node)(p)
	if n.prefix != prefix {
		if n.prefix < prefix {
			return -1
		}
		return 1
	}
	nk := nodeKey(p)
	if len(nk) >= 16 && len(key) >= 16 {
		// Keys that share their first 8 bytes (zero-padded numbers, common
		// prefixes) often differ in the next 8: compare them inline.
		a, b := binary.BigEndian.Uint64(nk[8:]), binary.BigEndian.Uint64(key[8:])
		if a != b {
			if a < b {
				return -1
			}
			return 1
		}
		nk, key = nk[16:], key[16:]
	}
	if c := bytes.Compare(nk, key); c != 0 {
		return c
	}
	switch {
	case n.trailer > trailer:
		return -1
	case n.trailer < trailer:
		return 1
	}
	return 0
}

// seek descends from the top level to the last node before the key at each
// level, recording it in preds when preds is not nil, and returns the
// level-0 one (the head when there is none) and its successor (0 when there
// is none). dir is updated when a link leads to a newer chunk.
func (m *MemTable) seek(dir *[]unsafe.Pointer, key base.InternalKey, preds *[maxHeight]uint32) (pred, succ uint32, found bool) {
	prefix := keyPrefix(key.UserKey)
	x := m.head
	xp := at(*dir, x)
	var ge uint32 // a node known not to be before the key
	for l := int(m.height.Load()) - 1; l >= 0; l-- {
		for {
			nx := next(xp, l)
			if nx == 0 || nx == ge {
				succ = nx
				break
			}
			if nx>>unitBits >= uint32(len(*dir)) {
				*dir = *m.dir.Load()
			}
			np := at(*dir, nx)
			c := compare(np, prefix, key.UserKey, key.Trailer)
			if c >= 0 {
				ge, found, succ = nx, c == 0, nx
				break
			}
			x, xp = nx, np
		}
		if preds != nil {
			preds[l] = x
		}
	}
	// succ is the node the bottom level's search stopped at. Reading x's
	// next link again would be wrong: a writer may have linked a node
	// after x since, one that sorts before the key.
	return x, succ, found
}

// randomHeight draws a tower height: each level beyond the first with
// probability 1/2, which, with comparisons the search knows the outcome of
// skipped, visits fewer nodes than 1/4 or 1/e for little more memory.
func (m *MemTable) randomHeight() int {
	// xorshift64*, whose high bits are the good ones
	m.rng ^= m.rng >> 12
	m.rng ^= m.rng << 25
	m.rng ^= m.rng >> 27
	return min(1+bits.LeadingZeros64(m.rng*2685821657736338717), maxHeight)
}

// insert adds a point entry; the caller holds mu.
func (m *MemTable) insert(key base.InternalKey, value []byte) {
	var preds [maxHeight]uint32
	dir := m.chunks
	pred, succ, found := m.seek(&dir, key, &preds)
	if found {
		m.replace(succ, value)
		return
	}
	h := m.randomHeight()
	if top := int(m.height.Load()); h > top {
		for l := top; l < h; l++ {
			preds[l] = m.head
		}
		m.height.Store(uint32(h))
	}
	if uint64(len(key.UserKey))+uint64(len(value)) > 1<<32-1-uint64(hdrSize) {
		panic("memtable: key and value too large")
	}
	nh, p := m.alloc(4*h+4, hdrSize+len(key.UserKey)+len(value))
	dir = m.chunks
	n := (*node)(p)
	n.trailer = key.Trailer
	n.prefix = keyPrefix(key.UserKey)
	n.keyLen = uint32(len(key.UserKey))
	n.valLen = uint32(len(value))
	n.ord = m.nextOrd
	m.nextOrd++
	body := unsafe.Slice((*byte)(unsafe.Add(p, hdrSize)), len(key.UserKey)+len(value))
	copy(body, key.UserKey)
	copy(body[len(key.UserKey):], value)
	// The new node's links, before it is reachable: plain stores.
	*(*uint32)(unsafe.Add(p, -4)) = pred
	for l := range h {
		*(*uint32)(unsafe.Add(p, -8-4*l)) = next(at(dir, preds[l]), l)
	}
	// Link it, level 0 first, so that a node found at a level is in every
	// level below; then point its successor back at it.
	for l := range h {
		setNext(at(dir, preds[l]), l, nh)
	}
	if succ != 0 {
		(*atomic.Uint32)(unsafe.Add(at(dir, succ), -4)).Store(nh)
	}
	m.wSize += int64(len(key.UserKey) + len(value) + entryOverhead)
	m.wCount++
}

// replace gives the node h a new value.
func (m *MemTable) replace(h uint32, value []byte) {
	n := (*node)(at(m.chunks, h))
	old := n.valLen
	if r := n.repl.Load(); r != 0 {
		old = (*valueRec)(at(m.chunks, r)).len
	}
	rh, p := m.alloc(0, valHdr+len(value))
	rec := (*valueRec)(p)
	rec.prev, rec.ord, rec.len = n.repl.Load(), m.nextOrd, uint32(len(value))
	m.nextOrd++
	copy(unsafe.Slice((*byte)(unsafe.Add(p, valHdr)), len(value)), value)
	n.repl.Store(rh)
	m.wSize += int64(len(value)) - int64(old)
}

// valueOf returns the value of the node at p as a reader with visible number
// vis sees it.
func valueOf(dir *[]unsafe.Pointer, m *MemTable, p unsafe.Pointer, vis uint32) []byte {
	n := (*node)(p)
	for r := n.repl.Load(); r != 0; {
		if r>>unitBits >= uint32(len(*dir)) {
			*dir = *m.dir.Load()
		}
		rec := (*valueRec)(at(*dir, r))
		if rec.ord < vis {
			if rec.len == 0 {
				return nil
			}
			return unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(rec), valHdr)), rec.len)
		}
		r = rec.prev
	}
	if n.valLen == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Add(p, hdrSize+int(n.keyLen))), n.valLen)
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
	return m.GetHash(userKey, filterblock.Hash(userKey), seq)
}

// GetHash is Get for a caller that has hashed userKey with filterblock.Hash.
func (m *MemTable) GetHash(userKey []byte, hash uint64, seq base.SeqNum) (value []byte, key base.InternalKey, found bool) {
	if seq == 0 || !m.filter.mayContain(hash) {
		return nil, key, false
	}
	seq = min(seq, base.SeqNumMax+1)
	vis := m.visible.Load()
	dir := *m.dir.Load()
	_, h, _ := m.seek(&dir, base.MakeInternalKey(userKey, seq-1, base.KindMax), nil)
	for h != 0 {
		if h>>unitBits >= uint32(len(dir)) {
			dir = *m.dir.Load()
		}
		p := at(dir, h)
		n := (*node)(p)
		k := nodeKey(p)
		if !bytes.Equal(k, userKey) {
			break
		}
		if n.ord < vis {
			return valueOf(&dir, m, p, vis), base.InternalKey{UserKey: k, Trailer: n.trailer}, true
		}
		h = next(p, 0)
	}
	return nil, key, false
}

// RangeDelCover returns the highest sequence number below seq of the range
// deletions covering userKey, or 0 when none does.
func (m *MemTable) RangeDelCover(userKey []byte, seq base.SeqNum) base.SeqNum {
	d := m.dels.Load()
	if d == nil {
		return 0
	}
	var cover base.SeqNum
	for _, t := range *d {
		if t.SeqNum < seq && t.SeqNum > cover && t.Covers(userKey) {
			cover = t.SeqNum
		}
	}
	return cover
}

// RangeDels returns the range deletions written so far, unfragmented. The
// slice is the caller's; the keys alias the table's memory.
func (m *MemTable) RangeDels() []rangedel.Tombstone {
	d := m.dels.Load()
	if d == nil {
		return nil
	}
	return slices.Clone(*d)
}

// NewIter returns an iterator over a snapshot of the table: entries added
// after NewIter are not seen.
func (m *MemTable) NewIter() *Iter {
	return &Iter{m: m, vis: m.visible.Load(), dir: *m.dir.Load()}
}

// Iter walks a MemTable snapshot in internal-key order: First, Last, SeekGE,
// SeekLT, Next, Prev. Keys and values alias the table's memory. It is not
// safe for concurrent use.
type Iter struct {
	m   *MemTable
	vis uint32 // the visible number when the iterator was made
	dir []unsafe.Pointer
	h   uint32 // the current node, or 0
	p   unsafe.Pointer
}

// node returns the address of node h, refreshing the directory if h lies in
// a chunk newer than it.
func (it *Iter) node(h uint32) unsafe.Pointer {
	if h>>unitBits >= uint32(len(it.dir)) {
		it.dir = *it.m.dir.Load()
	}
	return at(it.dir, h)
}

// forward settles on the first visible node from h on.
func (it *Iter) forward(h uint32) bool {
	for h != 0 {
		p := it.node(h)
		if (*node)(p).ord < it.vis {
			it.h, it.p = h, p
			return true
		}
		h = next(p, 0)
	}
	it.h, it.p = 0, nil
	return false
}

// backward settles on the last visible node from h back.
func (it *Iter) backward(h uint32) bool {
	for h != it.m.head {
		p := it.node(h)
		if (*node)(p).ord < it.vis {
			it.h, it.p = h, p
			return true
		}
		h = prev(p)
	}
	it.h, it.p = 0, nil
	return false
}

// First moves to the first entry. Like every positioning method, it
// reports false on a closed iterator.
func (it *Iter) First() bool {
	if it.m == nil {
		return false
	}
	return it.forward(next(it.node(it.m.head), 0))
}

// Last moves to the last entry.
func (it *Iter) Last() bool {
	if it.m == nil {
		return false
	}
	x := it.m.head
	xp := it.node(x)
	for l := int(it.m.height.Load()) - 1; l >= 0; l-- {
		for nx := next(xp, l); nx != 0; nx = next(xp, l) {
			x, xp = nx, it.node(nx)
		}
	}
	return it.backward(x)
}

// SeekGE moves to the first entry whose internal key is ≥ key.
func (it *Iter) SeekGE(key base.InternalKey) bool {
	if it.m == nil {
		return false
	}
	_, succ, _ := it.m.seek(&it.dir, key, nil)
	return it.forward(succ)
}

// SeekLT moves to the last entry whose internal key is < key.
func (it *Iter) SeekLT(key base.InternalKey) bool {
	if it.m == nil {
		return false
	}
	pred, _, _ := it.m.seek(&it.dir, key, nil)
	return it.backward(pred)
}

// Valid reports whether the iterator is at an entry.
func (it *Iter) Valid() bool { return it.h != 0 }

// Next moves to the next entry.
func (it *Iter) Next() bool {
	if it.h == 0 {
		return false
	}
	return it.forward(next(it.p, 0))
}

// Prev moves to the previous entry.
func (it *Iter) Prev() bool {
	if it.h == 0 {
		return false
	}
	return it.backward(prev(it.p))
}

// Key returns the current entry's internal key.
func (it *Iter) Key() base.InternalKey {
	return base.InternalKey{UserKey: nodeKey(it.p), Trailer: (*node)(it.p).trailer}
}

// Value returns the current entry's value.
func (it *Iter) Value() []byte { return valueOf(&it.dir, it.m, it.p, it.vis) }

// Close releases the iterator; it then reports no entry.
func (it *Iter) Close() error {
	*it = Iter{}
	return nil
}

// keyFilter is a Bloom filter of the user keys added to a MemTable, blocked
// to one 64-bit word per key: the hash's high half picks the word and its
// low bits keyFilterProbes bits in it. The writer sets bits with atomic ORs
// under the write lock, before the entry is published; readers load words
// without a lock. Every point entry is added, deletions included, since a
// deletion here hides older versions in tables.
type keyFilter struct {
	words []atomic.Uint64
}

// keyFilterProbes is the number of bits a key sets in its word.
const keyFilterProbes = 4

// newKeyFilter sizes a filter for a table of about size bytes: a bit per 8
// bytes, so 16 bits or more per key for entries of 128 bytes or more, whose
// false positives stay under about 1%.
func newKeyFilter(size int64) keyFilter {
	n := min(max(size/8/64, 64), 1<<24)
	return keyFilter{words: make([]atomic.Uint64, n)}
}

func (f *keyFilter) mask(hash uint64) (*atomic.Uint64, uint64) {
	w := &f.words[(hash>>32)*uint64(len(f.words))>>32]
	var m uint64
	for i := range keyFilterProbes {
		m |= 1 << ((hash >> (6 * i)) & 63)
	}
	return w, m
}

func (f *keyFilter) add(hash uint64) {
	w, m := f.mask(hash)
	w.Or(m)
}

// mayContain reports whether a key of this hash may have been added; a
// filter without words (New) always answers yes.
func (f *keyFilter) mayContain(hash uint64) bool {
	if f.words == nil {
		return true
	}
	w, m := f.mask(hash)
	return w.Load()&m == m
}
