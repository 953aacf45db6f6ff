package cache

import (
	"sync"
	"testing"
)

// fill sets blocks of 4 KiB into c until it has evicted one.
func fill(c *Cache) {
	b := make([]byte, 4<<10)
	for i := uint64(0); c.Metrics().Evictions == 0; i++ {
		c.Set(1<<40, i, b)
	}
}

// TestAdmit checks the doorkeeper: every block is admitted until the cache
// first evicts; from then on a block is admitted on its second miss in a
// window, and forgotten once the window has seen as many other blocks as the
// cache holds.
func TestAdmit(t *testing.T) {
	c := New(64<<10, Options{}) // 16 blocks of 4 KiB: windows of 64 blocks
	for i := range uint64(100) {
		if !c.Admit(1, i) {
			t.Fatalf("block %d refused by a cache that never evicted", i)
		}
	}
	fill(c)
	if c.Admit(1, 0) {
		t.Fatal("a block missed once is admitted")
	}
	for range 2 {
		if !c.Admit(1, 0) {
			t.Fatal("a block missed again is not admitted")
		}
	}
	if c.Admit(2, 0) || c.Admit(1, 4096) {
		t.Fatal("another file's or offset's block is admitted on its first miss")
	}
	// Fill the window with other blocks: the first is then forgotten.
	// (A hash collision admits a few on their first miss; they do not count.)
	firsts := 0
	for i := range uint64(1000) {
		if !c.Admit(3, i*4096) {
			firsts++
		}
	}
	if firsts < 900 {
		t.Fatalf("only %d of 1000 new blocks refused on their first miss", firsts)
	}
	if c.Admit(1, 0) {
		t.Fatal("a block missed before the window was cleared is still admitted")
	}
}

// TestAdmitConcurrent runs Admit from several goroutines (for the race
// detector): each block is admitted by its second ask at the latest, as
// the window (16,384 blocks) outlasts the test.
func TestAdmitConcurrent(t *testing.T) {
	c := New(64<<20, Options{})
	fill(c)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range uint64(2000) {
				c.Admit(uint64(g), i)
				if !c.Admit(uint64(g), i) {
					t.Errorf("block %d/%d not admitted on its second miss", g, i)
					return
				}
			}
		}()
	}
	wg.Wait()
}
