// Package cache is bloomkv's block cache: decoded sstable blocks shared by
// every table reader, bounded in bytes, sharded so that concurrent readers
// rarely meet on a lock, and loading a missing block once however many
// readers ask for it at the same time.
//
// Replacement is CLOCK (second chance): a hit sets the entry's reference bit
// under a shared lock; eviction sweeps a ring of the shard's entries, sparing
// those referenced since the hand last passed.
//
// Blocks are handed out two ways. Get and Load return the block's bytes, which
// stay valid for as long as the caller holds them: such a block is never
// reused. GetRef and LoadRef return a Handle, a counted reference: a block
// whose memory came from Alloc goes back to Alloc once it has left the cache
// and every Handle to it is released, which spares the allocation, the
// zeroing and the garbage collection of a new block on every miss.
package cache

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
)

// entryOverhead is charged per entry on top of its value: the entry, with
// its ring and file links (136 bytes, which the allocator rounds to 144),
// its map slot and the slot others' follow hints reach it by.
const entryOverhead = 176

type key struct{ file, offset uint64 }

type entry struct {
	key        key
	value      []byte
	charge     int64
	referenced atomic.Bool // hit since the hand last passed
	prev, next *entry      // the shard's ring
	// fprev and fnext link the shard's entries of one file (shard.files).
	fprev, fnext *entry
	// refs counts the references to the block: one while the cache holds
	// it and one per unreleased Handle. At zero, an owned block that was
	// never pinned goes back to Alloc.
	refs atomic.Int32
	// free, set for an owned block (value came from the cache's Alloc),
	// is where the block goes for reuse once refs is zero.
	free *freeLists
	// pinned: Get or Load handed the block out without a Handle, so its
	// memory is never reused.
	pinned atomic.Bool
	// follow is the hint of the block GetRefAfter last found after this
	// one.
	follow Hint
	// slot is this entry's, for other entries' follow hints; nil until
	// one is needed.
	slot atomic.Pointer[slot]
	// cached is set while the entry is in its shard's map, so that a
	// follow hint to a block evicted or swapped out is not taken.
	cached atomic.Bool
	// noSwap is set once Swap refused another form of the block for want
	// of room: MaySwap then says no without the form being built again.
	noSwap atomic.Bool
}

// slot refers to an entry while it is cached, and to nothing afterwards.
type slot struct{ e atomic.Pointer[entry] }

// Hint remembers the block last found for one place in a file (a table's
// index entry, the block after another), so that the next read of it takes
// the block without a lookup while it is still the one cached there. It
// keeps no block alive: it reaches its block through the block's slot,
// which lets go when the block leaves the cache. The zero Hint remembers
// nothing; a Hint is safe for concurrent use.
type Hint struct{ s atomic.Pointer[slot] }

// take returns a reference to the block h reaches, when that is the block
// cached under k.
func (c *Cache) take(h *Hint, k key) (Handle, bool) {
	if s := h.s.Load(); s != nil {
		if e := s.e.Load(); e != nil && e.key == k && e.cached.Load() && e.tryRef() {
			e.referenced.Store(true)
			c.hits.Add(1)
			return Handle{e}, true
		}
	}
	return Handle{}, false
}

// Note records in h the block ref refers to; a nil h or a zero ref records
// nothing.
func (h *Hint) Note(ref Handle) {
	if h != nil && ref.e != nil {
		h.s.Store(ref.e.slotOf())
	}
}

// Follow returns the hint the block h refers to keeps for the block after
// it, for a reader walking blocks in order; nil for the zero Handle.
func (h Handle) Follow() *Hint {
	if h.e == nil {
		return nil
	}
	return &h.e.follow
}

// GetRefHinted is GetRef for a reader that keeps a Hint for (file, offset):
// the block h reaches is taken without a lookup while it is the one cached
// there; otherwise GetRef's lookup is made and its block noted in h. A nil
// h is GetRef.
func (c *Cache) GetRefHinted(h *Hint, file, offset uint64) (Handle, bool) {
	if h == nil {
		return c.GetRef(file, offset)
	}
	k := key{file, offset}
	if ref, ok := c.take(h, k); ok {
		return ref, true
	}
	ref, ok := c.GetRef(file, offset)
	if ok {
		h.Note(ref)
	}
	return ref, ok
}

// slotOf returns e's slot, made on first use. A slot made as e leaves the
// cache is emptied at once: remove or slotOf sees the other's store.
func (e *entry) slotOf() *slot {
	if s := e.slot.Load(); s != nil {
		return s
	}
	s := new(slot)
	s.e.Store(e)
	if !e.slot.CompareAndSwap(nil, s) {
		return e.slot.Load()
	}
	if !e.cached.Load() {
		s.e.Store(nil)
	}
	return s
}

// tryRef takes a reference to e unless its count is zero: a block whose
// count has reached zero may already be reused, and is never referenced
// again.
func (e *entry) tryRef() bool {
	for n := e.refs.Load(); n > 0; n = e.refs.Load() {
		if e.refs.CompareAndSwap(n, n+1) {
			return true
		}
	}
	return false
}

// release drops one reference to e.
func (e *entry) release() {
	n := e.refs.Add(-1)
	if n == 0 && e.free != nil && !e.pinned.Load() {
		e.free.put(e)
	} else if n < 0 {
		panic("cache: block released more often than referenced")
	}
}

// call is a load in progress; waiters block on done. Each waiter is counted,
// so that the loader takes a reference to the block for each before anyone
// can evict it. The loaded block's entry is part of the call, which saves an
// allocation per miss.
type call struct {
	done    sync.WaitGroup
	e       *entry // the loaded block (&block), when err is nil
	err     error
	waiters int32 // under the shard's lock
	block   entry
}

type shard struct {
	mu       sync.RWMutex
	capacity int64
	used     int64
	entries  map[key]*entry
	head     *entry // the hand
	loading  map[key]*call
	// files holds the first of each file's entries, linked through fnext,
	// so that EvictFile visits only the file's blocks.
	files map[uint64]*entry
}

// Cache is a sharded block cache bounded in bytes. It is safe for concurrent
// use. Blocks are immutable once cached: callers must not modify them. A block
// Get or Load returned stays valid for as long as the caller holds it, even
// after eviction; one a Handle refers to, until the Handle is released.
type Cache struct {
	shards    []shard
	mask      uint64
	hits      atomic.Uint64
	misses    atomic.Uint64
	evictions atomic.Uint64
	free      freeLists  // released blocks, for Alloc
	door      doorkeeper // admission of point lookups' misses (Admit)
}

// Options configure a Cache.
type Options struct {
	// Shards is the number of shards, rounded up to a power of two
	// (4 × GOMAXPROCS, at least 4).
	Shards int
}

// New returns a cache of capacity bytes (at least 1).
func New(capacity int64, opts Options) *Cache {
	n := opts.Shards
	if n <= 0 {
		n = max(4*runtime.GOMAXPROCS(0), 4)
	}
	pow := 1
	for pow < n {
		pow *= 2
	}
	c := &Cache{shards: make([]shard, pow), mask: uint64(pow - 1)}
	per := max(capacity/int64(pow), 1)
	for i := range c.shards {
		c.shards[i] = shard{capacity: per, entries: map[key]*entry{}, loading: map[key]*call{}, files: map[uint64]*entry{}}
	}
	return c
}

func (c *Cache) shard(k key) *shard {
	h := k.file*0x9e3779b97f4a7c15 ^ k.offset*0xbf58476d1ce4e5b9
	h ^= h >> 29
	return &c.shards[h&c.mask]
}

// Get returns the block cached under (file, offset). The block is never
// reused: the caller may hold it for as long as it likes.
func (c *Cache) Get(file, offset uint64) ([]byte, bool) {
	h, ok := c.GetRef(file, offset)
	return h.pin(), ok
}

// GetRef returns a reference to the block cached under (file, offset), which
// the caller must release.
func (c *Cache) GetRef(file, offset uint64) (Handle, bool) {
	k := key{file, offset}
	s := c.shard(k)
	if e := s.lookup(k); e != nil {
		c.hits.Add(1)
		return Handle{e}, true
	}
	c.misses.Add(1)
	return Handle{}, false
}

// GetRefAfter is GetRef for a reader walking blocks in order, prev being a
// reference to the block before (file, offset), or the zero Handle. The
// block found after prev's the last time is taken, while it is still the
// one cached, without a lookup; otherwise GetRef's lookup is made and its
// block recorded as the one after prev's.
func (c *Cache) GetRefAfter(prev Handle, file, offset uint64) (Handle, bool) {
	return c.GetRefHinted(prev.Follow(), file, offset)
}

// GetOrLoad returns the block cached under (file, offset), or calls load and
// caches its result: Get, then Load on a miss.
func (c *Cache) GetOrLoad(file, offset uint64, load func() ([]byte, error)) ([]byte, error) {
	if v, ok := c.Get(file, offset); ok {
		return v, nil
	}
	return c.Load(file, offset, load)
}

// Load returns the block cached under (file, offset), or calls load and caches
// its result, for a caller whose Get missed. Concurrent callers for the same
// block share one call of load. An error from load is returned to every such
// caller and not cached. Load does not count hits or misses: the Get before it
// did. Like Get's, the block is never reused.
func (c *Cache) Load(file, offset uint64, load func() ([]byte, error)) ([]byte, error) {
	h, err := c.load(file, offset, load, false)
	return h.pin(), err
}

// LoadRef is Load returning a reference to the block, which the caller must
// release. The block load returns must come from Alloc and be the cache's
// from then on: once it has left the cache and every reference is released,
// its memory goes back to Alloc.
func (c *Cache) LoadRef(file, offset uint64, load func() ([]byte, error)) (Handle, error) {
	return c.load(file, offset, load, true)
}

func (c *Cache) load(file, offset uint64, load func() ([]byte, error), owned bool) (Handle, error) {
	k := key{file, offset}
	s := c.shard(k)
	s.mu.Lock()
	if e, ok := s.entries[k]; ok { // filled since the caller's Get
		e.referenced.Store(true)
		e.refs.Add(1)
		s.mu.Unlock()
		return Handle{e}, nil
	}
	if cl, ok := s.loading[k]; ok {
		cl.waiters++
		s.mu.Unlock()
		cl.done.Wait()
		return Handle{cl.e}, cl.err
	}
	cl := &call{}
	cl.done.Add(1)
	s.loading[k] = cl
	s.mu.Unlock()

	finished := false
	defer func() {
		if !finished { // load panicked: release the waiters, then re-panic
			s.mu.Lock()
			delete(s.loading, k)
			s.mu.Unlock()
			cl.err = errLoadPanicked
			cl.done.Done()
		}
	}()
	value, err := load()
	finished = true

	s.mu.Lock()
	delete(s.loading, k)
	if err == nil {
		e := &cl.block
		e.key, e.value, e.free, e.charge = k, value, nil, int64(len(value))+entryOverhead
		if owned {
			e.free, e.charge = &c.free, allocCharge(cap(value))
		}
		// The caller's reference and one per waiter, taken before the
		// block is in the cache, where an eviction could release it.
		e.refs.Store(1 + cl.waiters)
		c.evictions.Add(s.insert(e))
		cl.e = e
	}
	cl.err = err
	s.mu.Unlock()
	cl.done.Done()
	return Handle{cl.e}, err
}

var errLoadPanicked = errors.New("cache: the load of this block panicked")

// Set caches value under (file, offset), replacing any block there. The
// cache never reuses value's memory.
func (c *Cache) Set(file, offset uint64, value []byte) {
	k := key{file, offset}
	s := c.shard(k)
	e := &entry{key: k, value: value, charge: int64(len(value)) + entryOverhead}
	s.mu.Lock()
	c.evictions.Add(s.insert(e))
	s.mu.Unlock()
}

// Offer caches a copy of block under (file, offset), for a block just
// written, while the cache has never evicted a block and the copy fits in
// its shard's free room. It evicts nothing and replaces nothing: it reports
// whether it cached the block. The block goes under the clock's hand:
// blocks offered and not read since are the first their shard evicts, the
// latest first.
func (c *Cache) Offer(file, offset uint64, block []byte) bool {
	if c.Evicted() {
		return false
	}
	k := key{file, offset}
	s := c.shard(k)
	s.mu.RLock()
	room := s.used+allocCharge(len(block)) <= s.capacity
	s.mu.RUnlock()
	if !room {
		return false
	}
	v := c.Alloc(len(block))
	copy(v, block)
	e := c.ownedEntry(k, v)
	s.mu.Lock()
	ok := s.used+e.charge <= s.capacity && s.entries[k] == nil && s.loading[k] == nil
	if ok {
		s.insert(e)
		s.head = e
	}
	s.mu.Unlock()
	if !ok {
		c.free.put(e)
	}
	return ok
}

// ownedEntry returns an entry, not yet cached, for value, a block from
// Alloc that goes back to it once the entry is released.
func (c *Cache) ownedEntry(k key, value []byte) *entry {
	return &entry{key: k, value: value, free: &c.free, charge: allocCharge(cap(value))}
}

// allocCharge is what a block of n bytes from Alloc is charged: Alloc's
// capacity for it, and the entry.
func allocCharge(n int) int64 {
	if class := sizeClass(n); class <= maxClassBytes/classBytes {
		n = class * classBytes
	}
	return int64(n) + entryOverhead
}

// swapReserve is the share of a shard Swap leaves free (1/swapReserve), for
// the blocks reads will load: a block's other form must not take the room
// the next miss needs, which would make the cache evict.
const swapReserve = 8

// MaySwap reports whether Swap might take another form of the block h
// refers to, cached under (file, offset): the cache has never evicted, the
// shard is below its reserve, and neither Swap nor MaySwap has refused the
// block for want of room, nor KeepForm marked it. It is the check to make
// before building that form.
func (c *Cache) MaySwap(h Handle, file, offset uint64) bool {
	if h.e == nil || c.Evicted() || h.e.noSwap.Load() {
		return false
	}
	s := c.shard(key{file, offset})
	s.mu.RLock()
	ok := s.used < s.capacity-s.capacity/swapReserve
	s.mu.RUnlock()
	if !ok {
		h.e.noSwap.Store(true) // asked again, say no without the lock
	}
	return ok
}

// KeepForm marks the block h refers to as one whose other form is not to be
// built (it cannot be): MaySwap says no for it from then on.
func (c *Cache) KeepForm(h Handle) {
	if h.e != nil {
		h.e.noSwap.Store(true)
	}
}

// Swap replaces the block h refers to, cached under (file, offset), with
// value, another form of it from Alloc, while h's block is still the one
// cached there, the cache has never evicted, and the shard keeps its
// reserve with the difference: it evicts nothing. It returns a reference
// to the new block, which the caller must release, as it must still
// release h. Either way value is the cache's: refused, it goes back to
// Alloc.
func (c *Cache) Swap(h Handle, file, offset uint64, value []byte) (Handle, bool) {
	k := key{file, offset}
	s := c.shard(k)
	e := c.ownedEntry(k, value)
	e.refs.Store(1) // the caller's; insert adds the cache's
	e.referenced.Store(true)
	s.mu.Lock()
	old := s.entries[k]
	ok := h.e != nil && old == h.e && !c.Evicted()
	if ok && s.used-old.charge+e.charge > s.capacity-s.capacity/swapReserve {
		old.noSwap.Store(true)
		ok = false
	}
	if ok {
		s.insert(e)
	}
	s.mu.Unlock()
	if !ok {
		c.free.put(e)
		return Handle{}, false
	}
	return Handle{e}, true
}

// Handle is a reference to a cached block, from GetRef or LoadRef. The zero
// Handle refers to nothing.
type Handle struct{ e *entry }

// Value returns the block; it is valid until the Handle is released.
func (h Handle) Value() []byte {
	if h.e == nil {
		return nil
	}
	return h.e.value
}

// Release drops the reference; the block must not be used afterwards.
// Releasing the zero Handle does nothing.
func (h Handle) Release() {
	if h.e != nil {
		h.e.release()
	}
}

// pin releases the reference, marking the block never to be reused, and
// returns it: memory handed out without a Handle stays valid.
func (h Handle) pin() []byte {
	if h.e == nil {
		return nil
	}
	h.e.pinned.Store(true)
	h.e.release()
	return h.e.value
}

// Alloc returns n bytes for a block to be loaded with LoadRef, reusing the
// memory of a block the cache released when it can. The bytes are not
// zeroed.
func (c *Cache) Alloc(n int) []byte {
	class := sizeClass(n)
	if class >= len(c.free) {
		return make([]byte, n)
	}
	if e, ok := c.free[class].Get().(*entry); ok {
		return e.value[:n]
	}
	return make([]byte, n, class*classBytes)
}

// Blocks are reused by size class: multiples of classBytes up to
// maxClassBytes; larger blocks are not reused.
const (
	classBytes    = 256
	maxClassBytes = 64 << 10
)

// freeLists holds a cache's released blocks by size class, each block in
// its (now dead) entry, so that putting it back allocates nothing.
type freeLists [maxClassBytes/classBytes + 1]sync.Pool

func sizeClass(n int) int { return (n + classBytes - 1) / classBytes }

// put returns a dead entry's block to Alloc, when its capacity is a class's.
func (f *freeLists) put(e *entry) {
	c := cap(e.value) / classBytes
	if c*classBytes != cap(e.value) || c >= len(f) || c == 0 {
		return
	}
	e.prev, e.next = nil, nil
	f[c].Put(e)
}

// EvictFile drops every block of file, for a table that was deleted. A load of
// one of its blocks under way may still insert it afterwards; the block then
// just waits for eviction, since file numbers are never reused.
func (c *Cache) EvictFile(file uint64) {
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		for e := s.files[file]; e != nil; {
			next := e.fnext // remove may hand e's memory to Alloc
			s.remove(e)
			e = next
		}
		s.mu.Unlock()
	}
}

// Metrics are a cache's counters.
type Metrics struct {
	Hits, Misses, Evictions uint64
	Entries                 int
	Bytes, Capacity         int64
}

// Metrics returns the cache's counters and size.
func (c *Cache) Metrics() Metrics {
	m := Metrics{Hits: c.hits.Load(), Misses: c.misses.Load(), Evictions: c.evictions.Load()}
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.RLock()
		m.Entries += len(s.entries)
		m.Bytes += s.used
		m.Capacity += s.capacity
		s.mu.RUnlock()
	}
	return m
}

// lookup returns the entry under k with a reference taken, or nil. An entry
// in the map holds the cache's reference, so under the lock its count is at
// least one and may be raised.
func (s *shard) lookup(k key) *entry {
	s.mu.RLock()
	e := s.entries[k]
	if e != nil {
		e.referenced.Store(true)
		e.refs.Add(1)
	}
	s.mu.RUnlock()
	return e
}

// insert adds e, evicting as needed, and returns the number of evictions. An
// entry larger than the shard is not cached. The cache's reference to e is
// taken here.
func (s *shard) insert(e *entry) uint64 {
	if old, ok := s.entries[e.key]; ok {
		s.remove(old)
	}
	if e.charge > s.capacity {
		return 0
	}
	var evicted uint64
	for s.used+e.charge > s.capacity {
		s.remove(s.victim())
		evicted++
	}
	e.refs.Add(1)
	e.cached.Store(true)
	s.entries[e.key] = e
	s.used += e.charge
	s.link(e)
	if first := s.files[e.key.file]; first != nil {
		first.fprev = e
		e.fnext = first
	}
	s.files[e.key.file] = e
	return evicted
}

// victim sweeps the hand over the ring, clearing reference bits, and returns
// the first entry whose bit was already clear; the shard is not empty.
func (s *shard) victim() *entry {
	for {
		e := s.head
		s.head = e.next
		if !e.referenced.Swap(false) {
			return e
		}
	}
}

// remove drops e from the cache, and the cache's reference to it.
func (s *shard) remove(e *entry) {
	e.cached.Store(false)
	if sl := e.slot.Load(); sl != nil {
		sl.e.Store(nil)
	}
	e.follow.s.Store(nil)
	delete(s.entries, e.key)
	s.used -= e.charge
	s.unlink(e)
	switch {
	case e.fprev != nil:
		e.fprev.fnext = e.fnext
	case e.fnext != nil:
		s.files[e.key.file] = e.fnext
	default:
		delete(s.files, e.key.file)
	}
	if e.fnext != nil {
		e.fnext.fprev = e.fprev
	}
	e.fprev, e.fnext = nil, nil
	e.release()
}

// link puts e into the ring just behind the hand, so that it is swept last.
func (s *shard) link(e *entry) {
	if s.head == nil {
		e.prev, e.next = e, e
		s.head = e
		return
	}
	tail := s.head.prev
	e.prev, e.next = tail, s.head
	tail.next = e
	s.head.prev = e
}

// unlink takes e out of the ring, moving the hand on if it was on e.
func (s *shard) unlink(e *entry) {
	if e.next == e {
		s.head = nil
	} else {
		e.prev.next = e.next
		e.next.prev = e.prev
		if s.head == e {
			s.head = e.next
		}
	}
	e.prev, e.next = nil, nil
}
