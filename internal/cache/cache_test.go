package cache

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
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

// TestConcurrentUse runs readers, loaders and evictions together (under -race
// in CI) and checks every returned block is the one asked for.
func TestConcurrentUse(t *testing.T) {
	c := New(200<<10, Options{})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for range 5000 {
				off := uint64(r.IntN(2000))
				v, err := c.GetOrLoad(9, off, func() ([]byte, error) { return []byte(fmt.Sprint(off)), nil })
				if err != nil || string(v) != fmt.Sprint(off) {
					t.Errorf("block %d is %q, %v", off, v, err)
					return
				}
				if r.IntN(500) == 0 {
					c.EvictFile(9)
				}
			}
		}()
	}
	wg.Wait()
	if m := c.Metrics(); m.Bytes > m.Capacity {
		t.Fatalf("%d bytes over capacity %d", m.Bytes, m.Capacity)
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
	// One still referenced may be: it has not been reused.
	e := loadFilled(t, c, 2, 0, 1000)
	f := loadFilled(t, c, 2, 1000, 1000)
	if g, ok := c.GetRefAfter(e, 2, 1000); !ok {
		t.Fatal("GetRefAfter missed a cached block")
	} else {
		g.Release()
	}
	c.EvictFile(2)
	if g, ok := c.GetRefAfter(e, 2, 1000); !ok || g.e != f.e {
		t.Fatal("GetRefAfter did not take a recorded block still referenced")
	} else {
		g.Release()
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
