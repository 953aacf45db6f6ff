// Package cache is bloomkv's block cache: decoded sstable blocks shared by
// every table reader, bounded in bytes, sharded so that concurrent readers
// rarely meet on a lock, and loading a missing block once however many
// readers ask for it at the same time.
package cache

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
)

// Policy is a replacement policy.
type Policy uint8

const (
	// CLOCK (second chance): a hit sets a reference bit under a shared
	// lock; eviction sweeps a ring, sparing entries referenced since the
	// last sweep. The default (see BenchmarkPolicies).
	CLOCK Policy = iota
	// LRU evicts the least recently used entry; every hit takes the shard's
	// lock exclusively to move the entry to the front.
	LRU
)

func (p Policy) String() string {
	switch p {
	case CLOCK:
		return "CLOCK"
	case LRU:
		return "LRU"
	}
	return fmt.Sprintf("Policy(%d)", uint8(p))
}

// entryOverhead is charged per entry on top of its value, for the map slot,
// the entry and the ring or list links.
const entryOverhead = 96

type key struct{ file, offset uint64 }

type entry struct {
	key        key
	value      []byte
	charge     int64
	referenced atomic.Bool // CLOCK
	prev, next *entry      // LRU list, or the CLOCK ring
}

// call is a load in progress; waiters block on done.
type call struct {
	done  chan struct{}
	value []byte
	err   error
}

type shard struct {
	mu       sync.RWMutex
	policy   Policy
	capacity int64
	used     int64
	entries  map[key]*entry
	head     *entry // LRU: most recent; CLOCK: the hand
	loading  map[key]*call
}

// Cache is a sharded block cache bounded in bytes. It is safe for concurrent
// use. Blocks are immutable once cached: callers must not modify them, and the
// cache never reuses their memory, so a block stays valid for as long as a
// caller holds it, even after eviction.
type Cache struct {
	shards    []shard
	mask      uint64
	hits      atomic.Uint64
	misses    atomic.Uint64
	evictions atomic.Uint64
}

// Options configure a Cache.
type Options struct {
	// Policy is the replacement policy (CLOCK).
	Policy Policy
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
		c.shards[i] = shard{policy: opts.Policy, capacity: per, entries: map[key]*entry{}, loading: map[key]*call{}}
	}
	return c
}

func (c *Cache) shard(k key) *shard {
	h := k.file*0x9e3779b97f4a7c15 ^ k.offset*0xbf58476d1ce4e5b9
	h ^= h >> 29
	return &c.shards[h&c.mask]
}

// Get returns the block cached under (file, offset).
func (c *Cache) Get(file, offset uint64) ([]byte, bool) {
	k := key{file, offset}
	s := c.shard(k)
	if v, ok := s.lookup(k); ok {
		c.hits.Add(1)
		return v, true
	}
	c.misses.Add(1)
	return nil, false
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
// did.
func (c *Cache) Load(file, offset uint64, load func() ([]byte, error)) ([]byte, error) {
	k := key{file, offset}
	s := c.shard(k)
	s.mu.Lock()
	if e, ok := s.entries[k]; ok { // filled since the caller's Get
		s.touch(e)
		s.mu.Unlock()
		return e.value, nil
	}
	if cl, ok := s.loading[k]; ok {
		s.mu.Unlock()
		<-cl.done
		return cl.value, cl.err
	}
	cl := &call{done: make(chan struct{})}
	s.loading[k] = cl
	s.mu.Unlock()

	finished := false
	defer func() {
		if !finished { // load panicked: release the waiters, then re-panic
			cl.err = errLoadPanicked
			s.mu.Lock()
			delete(s.loading, k)
			s.mu.Unlock()
			close(cl.done)
		}
	}()
	cl.value, cl.err = load()
	finished = true

	s.mu.Lock()
	delete(s.loading, k)
	if cl.err == nil {
		c.evictions.Add(s.insert(k, cl.value))
	}
	s.mu.Unlock()
	close(cl.done)
	return cl.value, cl.err
}

var errLoadPanicked = errors.New("cache: the load of this block panicked")

// Set caches value under (file, offset), replacing any block there.
func (c *Cache) Set(file, offset uint64, value []byte) {
	k := key{file, offset}
	s := c.shard(k)
	s.mu.Lock()
	c.evictions.Add(s.insert(k, value))
	s.mu.Unlock()
}

// EvictFile drops every block of file, for a table that was deleted. A load of
// one of its blocks under way may still insert it afterwards; the block then
// just waits for eviction, since file numbers are never reused.
func (c *Cache) EvictFile(file uint64) {
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		for k, e := range s.entries {
			if k.file == file {
				s.remove(e)
			}
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

func (s *shard) lookup(k key) ([]byte, bool) {
	if s.policy == CLOCK {
		s.mu.RLock()
		e, ok := s.entries[k]
		if ok {
			e.referenced.Store(true)
		}
		s.mu.RUnlock()
		if !ok {
			return nil, false
		}
		return e.value, true
	}
	s.mu.Lock()
	e, ok := s.entries[k]
	if ok {
		s.touch(e)
	}
	s.mu.Unlock()
	if !ok {
		return nil, false
	}
	return e.value, true
}

// touch records a hit on e; the shard's lock is held exclusively.
func (s *shard) touch(e *entry) {
	if s.policy == CLOCK {
		e.referenced.Store(true)
		return
	}
	if s.head != e {
		s.unlink(e)
		s.pushFront(e)
	}
}

// insert adds (k, value), evicting as needed, and returns the number of
// evictions. A value larger than the shard is not cached.
func (s *shard) insert(k key, value []byte) uint64 {
	if old, ok := s.entries[k]; ok {
		s.remove(old)
	}
	charge := int64(len(value)) + entryOverhead
	if charge > s.capacity {
		return 0
	}
	var evicted uint64
	for s.used+charge > s.capacity {
		s.remove(s.victim())
		evicted++
	}
	e := &entry{key: k, value: value, charge: charge}
	s.entries[k] = e
	s.used += charge
	s.pushFront(e)
	return evicted
}

// victim returns the entry to evict; the shard is not empty.
func (s *shard) victim() *entry {
	if s.policy == LRU {
		return s.head.prev // the tail of the circular list
	}
	for {
		e := s.head
		s.head = e.next
		if !e.referenced.Swap(false) {
			return e
		}
	}
}

func (s *shard) remove(e *entry) {
	delete(s.entries, e.key)
	s.used -= e.charge
	s.unlink(e)
}

// pushFront links e into the circular list: for LRU before the head (as the
// new head); for CLOCK just behind the hand, so it is swept last.
func (s *shard) pushFront(e *entry) {
	if s.head == nil {
		e.prev, e.next = e, e
		s.head = e
		return
	}
	tail := s.head.prev
	e.prev, e.next = tail, s.head
	tail.next = e
	s.head.prev = e
	if s.policy == LRU {
		s.head = e
	}
}

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
