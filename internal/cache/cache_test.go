package cache

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"
)

func block(n int) []byte { return make([]byte, n) }

func TestCapacityAndCounters(t *testing.T) {
	c := New(64<<10, Options{Shards: 4})
	for i := range 1000 {
		c.Set(1, uint64(i), block(1000))
	}
	m := c.Metrics()
	if m.Bytes > m.Capacity || m.Capacity != 64<<10 {
		t.Fatalf("%d bytes cached of capacity %d", m.Bytes, m.Capacity)
	}
	if m.Entries == 0 || m.Evictions != uint64(1000-m.Entries) {
		t.Fatalf("%d entries, %d evictions after 1000 inserts", m.Entries, m.Evictions)
	}
	hits := 0
	for i := range 1000 {
		if _, ok := c.Get(1, uint64(i)); ok {
			hits++
		}
	}
	m = c.Metrics()
	if int(m.Hits) != hits || int(m.Misses) != 1000-hits || hits != m.Entries {
		t.Fatalf("counters %+v after %d hits", m, hits)
	}
	// A block larger than a shard is not cached, and evicts nothing.
	c.Set(2, 0, block(1<<20))
	if _, ok := c.Get(2, 0); ok {
		t.Fatal("cached a block larger than its shard")
	}
}

// TestEvictionOrder checks CLOCK's second chance: of a, b and c inserted,
// then a hit on a, the next insert evicts b, sparing the referenced a.
func TestEvictionOrder(t *testing.T) {
	const size = 1000
	const evicted = 1
	ca := New(3*(size+entryOverhead), Options{Shards: 1})
	for i := range 3 {
		ca.Set(7, uint64(i), block(size))
	}
	if _, ok := ca.Get(7, 0); !ok {
		t.Fatal("miss on a cached block")
	}
	ca.Set(7, 3, block(size))
	for i := uint64(0); i < 4; i++ {
		_, ok := ca.Get(7, i)
		if ok == (i == evicted) {
			t.Errorf("block %d cached=%v; want block %d evicted", i, ok, evicted)
		}
	}
}

func TestConcurrentMissesLoadOnce(t *testing.T) {
	c := New(1<<20, Options{})
	var loads atomic.Int32
	gate := make(chan struct{})
	var wg sync.WaitGroup
	results := make([][]byte, 16)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := c.GetOrLoad(3, 4096, func() ([]byte, error) {
				loads.Add(1)
				<-gate
				return []byte("block"), nil
			})
			if err != nil {
				t.Error(err)
			}
			results[i] = v
		}()
	}
	// Let the goroutines reach the cache, then release the one load.
	for c.Metrics().Misses == 0 {
		runtime.Gosched()
	}
	close(gate)
	wg.Wait()
	if n := loads.Load(); n != 1 {
		t.Fatalf("%d loads for one block", n)
	}
	for _, r := range results {
		if string(r) != "block" {
			t.Fatalf("a caller got %q", r)
		}
	}
	// Each caller counts once: a miss if it arrived before the block was
	// cached (and waited for the one load), a hit after.
	if m := c.Metrics(); m.Misses+m.Hits != 16 || m.Misses == 0 {
		t.Fatalf("counters %+v, want 16 lookups with at least one miss", m)
	}
}

func TestLoadErrorsAreNotCached(t *testing.T) {
	c := New(1<<20, Options{})
	boom := errors.New("disk on fire")
	if _, err := c.GetOrLoad(1, 0, func() ([]byte, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Fatalf("error %v, want %v", err, boom)
	}
	v, err := c.GetOrLoad(1, 0, func() ([]byte, error) { return []byte("ok"), nil })
	if err != nil || string(v) != "ok" {
		t.Fatalf("after a failed load: %q, %v", v, err)
	}
}

// TestEntryOverhead checks that the charge per entry covers the entry.
func TestEntryOverhead(t *testing.T) {
	if size := unsafe.Sizeof(entry{}) + unsafe.Sizeof(slot{}); size+16 > entryOverhead {
		t.Fatalf("an entry is %d bytes; entryOverhead %d leaves too little for its map slot", size, entryOverhead)
	}
}

func TestEvictFile(t *testing.T) {
	c := New(1<<20, Options{})
	for f := uint64(1); f <= 3; f++ {
		for off := range uint64(20) {
			c.Set(f, off, block(100))
		}
	}
	c.EvictFile(2)
	for f := uint64(1); f <= 3; f++ {
		for off := range uint64(20) {
			if _, ok := c.Get(f, off); ok == (f == 2) {
				t.Fatalf("file %d block %d cached=%v after EvictFile(2)", f, off, ok)
			}
		}
	}
	if m := c.Metrics(); m.Entries != 40 || m.Bytes != 40*(100+entryOverhead) {
		t.Fatalf("after EvictFile: %+v", m)
	}
}

// TestEvictFileAfterEvictions evicts blocks from the front, middle and back
// of files' lists, then a file whose blocks the ring and Set replaced in
// part: EvictFile drops exactly the file's blocks still cached.
func TestEvictFileAfterEvictions(t *testing.T) {
	const size = 100
	c := New(30*(size+entryOverhead), Options{Shards: 1})
	for off := range uint64(10) {
		for f := uint64(1); f <= 3; f++ {
			c.Set(f, off, block(size))
		}
	}
	c.Set(2, 5, block(size)) // replaces a block in the middle of file 2's list
	for off := range uint64(10) {
		c.Get(1, off) // referenced: the ring spares them once
		c.Get(3, off)
	}
	for off := range uint64(4) {
		c.Set(4, off, block(size)) // evicts file 2's oldest four
	}
	c.EvictFile(2)
	c.EvictFile(4)
	m := c.Metrics()
	if m.Entries != 20 || m.Bytes != 20*(size+entryOverhead) {
		t.Fatalf("after evicting files 2 and 4: %+v, want the 20 blocks of files 1 and 3", m)
	}
	for f := uint64(1); f <= 4; f++ {
		for off := range uint64(10) {
			if _, ok := c.Get(f, off); ok != (f == 1 || f == 3) {
				t.Fatalf("file %d block %d cached=%v", f, off, ok)
			}
		}
	}
	c.EvictFile(1)
	c.EvictFile(3)
	if m := c.Metrics(); m.Entries != 0 || m.Bytes != 0 {
		t.Fatalf("after evicting every file: %+v", m)
	}
}

// TestOffer checks that an offered block is cached while its shard has
// room and the cache has never evicted, that Offer replaces and evicts
// nothing, and that offered blocks not read since go first, the latest
// first, before a block a load cached and no one read since.
func TestOffer(t *testing.T) {
	const size = 1000
	charge := int64(sizeClass(size)*classBytes) + entryOverhead
	c := New(3*charge, Options{Shards: 1})
	want := block(size)
	want[0], want[size-1] = 1, 2
	if !c.Offer(1, 0, want) {
		t.Fatal("Offer refused a block with room for it")
	}
	want[0] = 9 // the cache holds a copy
	if got, ok := c.Get(1, 0); !ok || len(got) != size || got[0] != 1 || got[size-1] != 2 {
		t.Fatalf("offered block: %v, %d bytes", ok, len(got))
	}
	c.Set(1, 1, block(10))
	if c.Offer(1, 1, block(size)) {
		t.Fatal("Offer replaced a cached block")
	}
	if got, _ := c.Get(1, 1); len(got) != 10 {
		t.Fatalf("block 1 is %d bytes after Offer, want the 10 cached before", len(got))
	}
	if !c.Offer(1, 2, block(size)) {
		t.Fatal("Offer refused a block with room for it")
	}
	if c.Offer(1, 3, block(size)) {
		t.Fatal("Offer cached a block without room for it")
	}
	if m := c.Metrics(); m.Evictions != 0 || m.Entries != 3 {
		t.Fatalf("after Offers: %+v", m)
	}
	c.Set(1, 4, block(size)) // evicts block 2, offered and never read
	if _, ok := c.Get(1, 2); ok {
		t.Fatal("the offered block not read since was not the one evicted")
	}
	if _, ok := c.Get(1, 0); !ok {
		t.Fatal("the offered block read since was evicted")
	}
	c.EvictFile(1)
	if c.Offer(1, 5, block(10)) {
		t.Fatal("Offer cached a block in a cache that has evicted")
	}

	// Against a loaded block no one has read: the offered ones go first.
	c = New(3*charge, Options{Shards: 1})
	c.Offer(2, 0, block(size))
	if _, err := c.Load(2, 1, func() ([]byte, error) { return block(size), nil }); err != nil {
		t.Fatal(err)
	}
	c.Offer(2, 2, block(size))
	for _, gone := range []uint64{2, 0} {
		c.Set(3, gone, block(size)) // one eviction each
		if _, ok := c.GetRef(2, gone); ok {
			t.Fatalf("offered block %d outlived an eviction", gone)
		}
	}
	if _, ok := c.GetRef(2, 1); !ok {
		t.Fatal("the loaded block went before the offered ones")
	}
}

// TestSwap checks that Swap puts another form of a cached block in its
// place, leaving the old one valid to whoever holds it, and refuses when
// the block was replaced meanwhile, when the difference needs an eviction,
// and once the cache has evicted.
func TestSwap(t *testing.T) {
	c := New(3*(1024+entryOverhead), Options{Shards: 1})
	c.Set(1, 0, []byte("stored"))
	h, ok := c.GetRef(1, 0)
	if !ok {
		t.Fatal("miss on a cached block")
	}
	nh, ok := c.Swap(h, 1, 0, append(c.Alloc(4)[:0], "flat"...))
	if !ok {
		t.Fatal("Swap refused")
	}
	if string(h.Value()) != "stored" || string(nh.Value()) != "flat" {
		t.Fatalf("after Swap the held blocks are %q and %q", h.Value(), nh.Value())
	}
	h.Release()
	nh.Release()
	if v, _ := c.Get(1, 0); string(v) != "flat" {
		t.Fatalf("after Swap the cache holds %q", v)
	}
	stale, _ := c.GetRef(1, 0)
	c.Set(1, 0, []byte("newer"))
	if _, ok := c.Swap(stale, 1, 0, c.Alloc(4)); ok {
		t.Fatal("Swap replaced a block other than the one held")
	}
	stale.Release()
	h, _ = c.GetRef(1, 0)
	if !c.MaySwap(h, 1, 0) {
		t.Fatal("MaySwap says no with room to spare")
	}
	if _, ok := c.Swap(h, 1, 0, c.Alloc(4<<10)); ok {
		t.Fatal("Swap took a block the shard has no room for")
	}
	if c.MaySwap(h, 1, 0) {
		t.Fatal("MaySwap says yes for a block Swap refused for want of room")
	}
	if m := c.Metrics(); m.Evictions != 0 {
		t.Fatalf("Swap evicted: %+v", m)
	}
	c.Set(2, 0, block(1024))
	c.Set(2, 1, block(1024))
	c.Set(2, 2, block(1024)) // evicts
	h.Release()
	h, ok = c.GetRef(2, 2)
	if !ok {
		t.Fatal("miss on the block just cached")
	}
	if _, ok := c.Swap(h, 2, 2, c.Alloc(4)); ok {
		t.Fatal("Swap in a cache that has evicted")
	}
	h.Release()
}

// TestSwapReserve fills a shard with blocks as stored, then swaps each for
// a larger form: Swap stops while an eighth of the shard is still free, and
// nothing is evicted.
func TestSwapReserve(t *testing.T) {
	const blocks, size = 64, 1000
	c := New(blocks*(1024+entryOverhead)*3/2, Options{Shards: 1})
	for off := range uint64(blocks) {
		c.Set(1, off, block(size))
	}
	swapped := 0
	for off := range uint64(blocks) {
		h, _ := c.GetRef(1, off)
		if c.MaySwap(h, 1, off) {
			if nh, ok := c.Swap(h, 1, off, c.Alloc(2*size)); ok {
				swapped++
				nh.Release()
			}
		}
		h.Release()
	}
	m := c.Metrics()
	if swapped == 0 || swapped == blocks || m.Evictions != 0 || m.Bytes > m.Capacity-m.Capacity/swapReserve {
		t.Fatalf("%d of %d blocks swapped: %+v", swapped, blocks, m)
	}
}

// TestGetRefAfterSkipsSwappedOut holds the block a follow hint points at
// while it is swapped out: GetRefAfter returns the block now cached, not
// the one the hint still reaches.
func TestGetRefAfterSkipsSwappedOut(t *testing.T) {
	c := New(1<<20, Options{Shards: 1})
	c.Set(1, 0, []byte("first"))
	c.Set(1, 1, []byte("stored"))
	prev, _ := c.GetRef(1, 0)
	defer prev.Release()
	old, _ := c.GetRefAfter(prev, 1, 1) // records the hint
	defer old.Release()                 // held throughout: the hint's target stays alive
	nh, ok := c.Swap(old, 1, 1, append(c.Alloc(4)[:0], "flat"...))
	if !ok {
		t.Fatal("Swap refused")
	}
	nh.Release()
	h, ok := c.GetRefAfter(prev, 1, 1)
	if !ok || string(h.Value()) != "flat" {
		t.Fatalf("after the swap GetRefAfter returns %q, %v", h.Value(), ok)
	}
	h.Release()
	c.EvictFile(1)
	if h, ok := c.GetRefAfter(prev, 1, 1); ok {
		t.Fatalf("GetRefAfter returns %q, evicted", h.Value())
	}
}

// TestFollowHintLetsGo removes the block a follow hint reaches, by a swap
// and by eviction: the hint then reaches no entry, so it keeps no block
// alive, and the next GetRefAfter records the block cached since.
func TestFollowHintLetsGo(t *testing.T) {
	c := New(1<<20, Options{Shards: 1})
	c.Set(0, 0, []byte("first")) // in a file of its own, which stays
	c.Set(1, 1, []byte("stored"))
	prev, _ := c.GetRef(0, 0)
	defer prev.Release()
	old, _ := c.GetRefAfter(prev, 1, 1)
	target := func() *entry {
		s := prev.e.follow.s.Load()
		if s == nil {
			t.Fatal("GetRefAfter recorded no hint")
		}
		return s.e.Load()
	}
	if target() != old.e {
		t.Fatal("the hint does not reach the block found")
	}
	nh, ok := c.Swap(old, 1, 1, append(c.Alloc(4)[:0], "flat"...))
	old.Release()
	if !ok {
		t.Fatal("Swap refused")
	}
	nh.Release()
	if e := target(); e != nil {
		t.Fatalf("the hint still reaches the swapped-out block %q", e.value)
	}
	h, _ := c.GetRefAfter(prev, 1, 1)
	h.Release()
	if e := target(); e == nil || string(e.value) != "flat" {
		t.Fatal("GetRefAfter did not record the block cached after the swap")
	}
	c.EvictFile(1)
	if e := target(); e != nil {
		t.Fatalf("the hint still reaches the evicted block %q", e.value)
	}
	// A slot made for an entry already out of the cache is empty.
	if s := h.e.slotOf(); s.e.Load() != nil {
		t.Fatal("the slot of an evicted entry reaches it")
	}
}

// TestGetRefHinted reads a block through a Hint: the first read looks it
// up and notes it, the next takes it without a lookup, and after a swap or
// an eviction the hint is not taken for the block that left.
func TestGetRefHinted(t *testing.T) {
	c := New(1<<20, Options{Shards: 1})
	c.Set(1, 0, []byte("stored"))
	var hint Hint
	get := func() (string, bool) {
		h, ok := c.GetRefHinted(&hint, 1, 0)
		defer h.Release()
		return string(h.Value()), ok
	}
	if v, ok := get(); !ok || v != "stored" {
		t.Fatalf("first read: %q, %v", v, ok)
	}
	if s := hint.s.Load(); s == nil || s.e.Load() == nil {
		t.Fatal("the hint noted no block")
	}
	old, _ := c.GetRefHinted(&hint, 1, 0)
	nh, ok := c.Swap(old, 1, 0, append(c.Alloc(4)[:0], "flat"...))
	old.Release()
	if !ok {
		t.Fatal("Swap refused")
	}
	nh.Release()
	if v, ok := get(); !ok || v != "flat" {
		t.Fatalf("after the swap: %q, %v", v, ok)
	}
	if e := hint.s.Load().e.Load(); e == nil || string(e.value) != "flat" {
		t.Fatal("the hint did not note the block cached after the swap")
	}
	c.EvictFile(1)
	if v, ok := get(); ok {
		t.Fatalf("after the eviction: %q", v)
	}
	// A nil hint is GetRef and notes nothing; the zero Handle has none.
	if (Handle{}).Follow() != nil {
		t.Fatal("the zero Handle has a follow hint")
	}
	var none *Hint
	none.Note(Handle{})
	c.Set(2, 0, []byte("x"))
	if h, ok := c.GetRefHinted(nil, 2, 0); !ok || string(h.Value()) != "x" {
		t.Fatalf("nil hint: %q, %v", h.Value(), ok)
	} else {
		h.Release()
	}
}

// TestOfferConcurrent offers blocks of several files while readers check
// them and whole files are evicted (under -race in CI): every block read is
// the one offered, and evicting every file leaves the cache empty.
func TestOfferConcurrent(t *testing.T) {
	c := New(64<<20, Options{})
	content := func(f, off uint64) []byte { return []byte(fmt.Sprintf("%d/%d", f, off)) }
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(2)
		go func() { // a writer of file g, evicting it now and then
			defer wg.Done()
			for off := range uint64(3000) {
				c.Offer(uint64(g), off, content(uint64(g), off))
				if off%700 == 0 {
					c.EvictFile(uint64(g))
				}
			}
		}()
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 2))
			for range 5000 {
				f, off := uint64(r.IntN(4)), uint64(r.IntN(3000))
				if h, ok := c.GetRef(f, off); ok {
					if string(h.Value()) != string(content(f, off)) {
						t.Errorf("block %d/%d is %q", f, off, h.Value())
					}
					h.Release()
				}
			}
		}()
	}
	wg.Wait()
	if m := c.Metrics(); m.Evictions != 0 || m.Entries == 0 {
		t.Fatalf("after the Offers: %+v", m)
	}
	for f := range uint64(4) {
		c.EvictFile(f)
	}
	if m := c.Metrics(); m.Entries != 0 || m.Bytes != 0 {
		t.Fatalf("after evicting every file: %+v", m)
	}
}

func TestPanickingLoadReleasesWaiters(t *testing.T) {
	c := New(1<<20, Options{})
	func() {
		defer func() { recover() }()
		c.Load(1, 0, func() ([]byte, error) { panic("boom") })
	}()
	done := make(chan struct{})
	go func() {
		defer close(done)
		v, err := c.Load(1, 0, func() ([]byte, error) { return []byte("ok"), nil })
		if err != nil || string(v) != "ok" {
			t.Errorf("Load after a panicking load: %q, %v", v, err)
		}
	}()
	<-done
}

// loadOwned loads a block of n bytes of fill through LoadRef.
func loadOwned(t *testing.T, c *Cache, file, offset uint64, n int, fill byte) Handle {
	t.Helper()
	h, err := c.LoadRef(file, offset, func() ([]byte, error) {
		b := c.Alloc(n)
		for i := range b {
			b[i] = fill
		}
		return b, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func filledWith(b []byte, fill byte) bool {
	for _, x := range b {
		if x != fill {
			return false
		}
	}
	return len(b) > 0
}

// churn allocates and overwrites blocks of n bytes from c, as loads after
// an eviction do.
func churn(c *Cache, n int) {
	for range 100 {
		b := c.Alloc(n)
		for i := range b {
			b[i] = 0xee
		}
	}
}

// TestHeldBlocksAreNotReused: a block evicted while a Handle holds it, or
// after Get or Load handed it out, keeps its bytes.
func TestHeldBlocksAreNotReused(t *testing.T) {
	c := New(1<<20, Options{})
	h := loadOwned(t, c, 1, 0, 1000, 'a')
	c.EvictFile(1)
	churn(c, 1000)
	if !filledWith(h.Value(), 'a') {
		t.Fatal("a held block was reused after its eviction")
	}
	h.Release()

	h = loadOwned(t, c, 2, 0, 1000, 'b')
	h.Release()
	pinned, ok := c.Get(2, 0)
	if !ok {
		t.Fatal("miss on a cached block")
	}
	c.EvictFile(2)
	churn(c, 1000)
	if !filledWith(pinned, 'b') {
		t.Fatal("a block Get returned was reused after its eviction")
	}

	h, ok = c.GetRef(3, 0)
	if ok || h.Value() != nil {
		t.Fatal("GetRef of an absent block")
	}
	h.Release() // the zero Handle
}

// TestReleasedBlocksAreReused: once evicted and released, an Alloc'd block's
// memory comes back from Alloc.
func TestReleasedBlocksAreReused(t *testing.T) {
	c := New(1<<20, Options{})
	for i := range uint64(50) { // sync.Pool may drop some (always, under -race, a quarter)
		h := loadOwned(t, c, 1, i, 4100, 'a')
		addr := &h.Value()[0]
		if m := c.Metrics(); m.Bytes != int64(cap(h.Value()))+entryOverhead {
			t.Fatalf("an owned block is charged %d bytes, its capacity is %d", m.Bytes, cap(h.Value()))
		}
		h.Release()
		c.EvictFile(1)
		if b := c.Alloc(4100); &b[0] == addr {
			return
		}
	}
	t.Fatal("released blocks never came back from Alloc")
}

// TestRefsUnderConcurrency: readers holding handles while other goroutines
// load, evict and churn always see their own block's bytes.
func TestRefsUnderConcurrency(t *testing.T) {
	c := New(64<<10, Options{})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 2))
			for range 3000 {
				off := uint64(r.IntN(200))
				fill := byte(off)
				h, ok := c.GetRef(5, off)
				if !ok {
					var err error
					h, err = c.LoadRef(5, off, func() ([]byte, error) {
						b := c.Alloc(1000 + int(off))
						for i := range b {
							b[i] = fill
						}
						return b, nil
					})
					if err != nil {
						t.Error(err)
						return
					}
				}
				runtime.Gosched()
				if v := h.Value(); len(v) != 1000+int(off) || !filledWith(v, fill) {
					t.Errorf("block %d changed while held", off)
					h.Release()
					return
				}
				h.Release()
				if r.IntN(300) == 0 {
					c.EvictFile(5)
				}
			}
		}()
	}
	wg.Wait()
}

// loadFilled caches a block of n bytes from c's Alloc under (file, off),
// every byte set to the low byte of off, and returns a reference to it.
func loadFilled(t *testing.T, c *Cache, file, off uint64, n int) Handle {
	t.Helper()
	h, err := c.LoadRef(file, off, func() ([]byte, error) {
		b := c.Alloc(n)
		for i := range b {
			b[i] = byte(off)
		}
		return b, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestGetRefAfter(t *testing.T) {
	c := New(1<<20, Options{Shards: 4})
	a := loadFilled(t, c, 1, 0, 1000)
	loadFilled(t, c, 1, 1000, 1000).Release()
	loadFilled(t, c, 1, 2000, 1000).Release()

	// The first walk looks the block up and records it; the second takes
	// it from the record: the same block, counted as a hit.
	b1, ok := c.GetRefAfter(a, 1, 1000)
	if !ok || b1.Value()[0] != byte(1000%256) {
		t.Fatalf("GetRefAfter = %v, %v", b1.Value(), ok)
	}
	hits := c.Metrics().Hits
	b2, ok := c.GetRefAfter(a, 1, 1000)
	if !ok || b2.e != b1.e || c.Metrics().Hits != hits+1 {
		t.Fatalf("the recorded block was not taken: %v, same entry %v, hits %d -> %d", ok, b2.e == b1.e, hits, c.Metrics().Hits)
	}
	b1.Release()
	b2.Release()

	// Another block after a: looked up, not the recorded one.
	if d, ok := c.GetRefAfter(a, 1, 2000); !ok || d.Value()[0] != byte(2000%256) {
		t.Fatalf("GetRefAfter for another block = %v, %v", d.Value(), ok)
	} else {
		d.Release()
	}

	// A block that left the cache and whose references are all released
	// is not taken from the record, even while its entry is reachable.
	c.EvictFile(1)
	if d, ok := c.GetRefAfter(a, 1, 2000); ok {
		t.Fatalf("GetRefAfter returned an evicted block: %v", d.Value())
	}
	// Nor is one still referenced: it is no longer the cached block.
	e := loadFilled(t, c, 2, 0, 1000)
	f := loadFilled(t, c, 2, 1000, 1000)
	if g, ok := c.GetRefAfter(e, 2, 1000); !ok {
		t.Fatal("GetRefAfter missed a cached block")
	} else {
		g.Release()
	}
	c.EvictFile(2)
	if g, ok := c.GetRefAfter(e, 2, 1000); ok {
		t.Fatalf("GetRefAfter took a recorded block no longer cached: %v", g.Value())
	}
	f.Release()
	if g, ok := c.GetRefAfter(e, 2, 1000); ok {
		t.Fatalf("GetRefAfter returned a released, evicted block: %v", g.Value())
	}
	e.Release()
	a.Release()
}

// TestGetRefAfterConcurrent walks blocks in order from several goroutines
// in a cache too small for them, so that blocks are evicted and their
// memory reused while walkers follow records to them; every block taken
// must hold its own bytes for as long as it is held.
func TestGetRefAfterConcurrent(t *testing.T) {
	c := New(64<<10, Options{Shards: 2})
	const blocks, size = 200, 1024
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for range 200 {
				var prev Handle
				for i := r.IntN(blocks / 2); i < blocks; i++ {
					off := uint64(i) * size
					h, ok := c.GetRefAfter(prev, 1, off)
					if !ok {
						var err error
						h, err = c.LoadRef(1, off, func() ([]byte, error) {
							b := c.Alloc(size)
							for j := range b {
								b[j] = byte(i)
							}
							return b, nil
						})
						if err != nil {
							errs <- err
							return
						}
					}
					for _, x := range h.Value() {
						if x != byte(i) {
							errs <- fmt.Errorf("block %d holds byte %d", i, x)
							return
						}
					}
					prev.Release()
					prev = h
				}
				prev.Release()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
