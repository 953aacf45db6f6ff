package cache

// Admission of blocks missed by point lookups. Until the cache first evicts,
// every block is admitted: it takes room no other block needs. From then on a
// doorkeeper (TinyLFU's) remembers the blocks missed recently, so that a
// block is cached on its second miss within a window of about as many misses
// as the cache holds blocks. A block read once and not again before the
// cache would have evicted it gains nothing from being cached; inserting it
// costs an eviction, and its memory is cold.

import (
	"sync"
	"sync/atomic"
)

// admitBlockBytes is the block size assumed to turn the capacity into the
// number of blocks the cache holds.
const admitBlockBytes = 4 << 10

// admitBitsPerBlock is the doorkeeper's bits per block the cache holds: its
// false "seen" answers, which admit a block on its first miss, are then
// under one in eight by the end of a window.
const admitBitsPerBlock = 8

// doorkeeper is a bit set of the blocks missed in the current window, keyed
// by a hash of (file, offset); it is cleared once window new bits are set.
type doorkeeper struct {
	once   sync.Once
	bits   []atomic.Uint64
	mask   uint64 // bit index mask: len(bits)*64 - 1
	window int64
	set    atomic.Int64 // bits set since the last clear
}

// init sizes d for a cache of capacity bytes.
func (d *doorkeeper) init(capacity int64) {
	d.window = max(capacity/admitBlockBytes, 64)
	n := uint64(64)
	for n < uint64(d.window)*admitBitsPerBlock {
		n *= 2
	}
	d.bits = make([]atomic.Uint64, n/64)
	d.mask = n - 1
}

// Admit reports whether a block that a point lookup missed should be cached:
// true while the cache has never evicted a block, and afterwards when the
// same block was missed, and Admit asked, in the current window (or when
// another block's hash collides with it). Otherwise it remembers the block
// and returns false: the caller reads the block without caching it.
// Iterators' blocks are cached whatever Admit says. It is safe for
// concurrent use.
func (c *Cache) Admit(file, offset uint64) bool {
	if !c.Evicted() {
		return true
	}
	d := &c.door
	d.once.Do(func() { d.init(c.capacity()) })
	h := file*0x9e3779b97f4a7c15 ^ offset*0xbf58476d1ce4e5b9
	h ^= h >> 31
	h *= 0x94d049bb133111eb
	h ^= h >> 29
	i := h & d.mask
	w, bit := &d.bits[i/64], uint64(1)<<(i%64)
	if w.Load()&bit != 0 {
		return true
	}
	if w.Or(bit)&bit != 0 {
		return true // set meanwhile by a concurrent miss
	}
	if d.set.Add(1) >= d.window {
		d.set.Store(0)
		for j := range d.bits {
			d.bits[j].Store(0)
		}
	}
	return false
}

// capacity returns the cache's capacity in bytes.
func (c *Cache) capacity() int64 {
	var n int64
	for i := range c.shards {
		n += c.shards[i].capacity
	}
	return n
}

// Evicted reports whether the cache has ever evicted a block to make room:
// until it has, it holds every block it was given.
func (c *Cache) Evicted() bool { return c.evictions.Load() != 0 }
