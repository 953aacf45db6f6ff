package sstable

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/cache"
)

// randomDataBlock returns a data block of n internal keys in order, several
// versions of some user keys, shared prefixes of every length, with restarts
// every interval entries, and values shorter than maxValue bytes (empty at
// 1).
func randomDataBlock(r *rand.Rand, n, interval, maxValue int) []byte {
	w := blockWriter{restartInterval: interval}
	uk := []byte{}
	seq := base.SeqNum(1 << 20)
	for range n {
		if len(uk) == 0 || r.IntN(4) != 0 {
			// A greater user key: keep a prefix, then a greater byte.
			keep := r.IntN(len(uk) + 1)
			next := append([]byte(nil), uk[:keep]...)
			if keep < len(uk) {
				if uk[keep] == 0xff {
					next = append(next, uk[keep:]...)
				} else {
					next = append(next, uk[keep]+1)
				}
			}
			for range r.IntN(6) {
				next = append(next, byte(r.IntN(256)))
			}
			if bytes.Compare(next, uk) <= 0 {
				next = append(uk[:len(uk):len(uk)], byte(r.IntN(256)))
			}
			uk = next
			seq = base.SeqNum(1 << 20)
		}
		seq -= base.SeqNum(1 + r.IntN(3))
		v := make([]byte, r.IntN(maxValue))
		for i := range v {
			v[i] = byte(r.IntN(256))
		}
		w.add(base.MakeInternalKey(uk, seq, base.KindSet).Append(nil), v)
	}
	return append([]byte(nil), w.finish()...)
}

// TestFlatBlock checks that a flat block's iterator moves through the same
// entries as the row block's it was made from, under random mixes of
// first, last, next, prev, seekGE and seekLT; one block in ten has only
// empty values (a flat block's values then take no bytes).
func TestFlatBlock(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	for round := range 300 {
		n := 1 + r.IntN(80)
		maxValue := 40
		if round%10 == 0 {
			maxValue = 1
		}
		block := randomDataBlock(r, n, 1+r.IntN(20), maxValue)
		if err := checkBlock(block, blockWhere{}); err != nil {
			t.Fatal(err)
		}
		flat, ok := flattenBlock(block, func(n int) []byte { return make([]byte, n) }, new(sync.Pool))
		if !ok {
			t.Fatalf("round %d: block of %d entries did not flatten", round, n)
		}
		var row, fl blockIter
		if err := row.initCached(block, blockWhere{}); err != nil {
			t.Fatal(err)
		}
		if err := fl.initCached(flat, blockWhere{}); err != nil {
			t.Fatal(err)
		}
		if row.tab != nil || fl.tab == nil || fl.n != n {
			t.Fatalf("round %d: row block read as flat %v, flat block as flat %v with %d entries of %d", round, row.tab != nil, fl.tab != nil, fl.n, n)
		}
		var keys [][]byte
		for ok := row.first(); ok; ok = row.next() {
			keys = append(keys, append([]byte(nil), row.key...))
		}
		var ops []string
		for range 200 {
			var a, b bool
			var op string
			switch c := r.IntN(6); {
			case c == 0:
				op, a, b = "first", row.first(), fl.first()
			case c == 1:
				op, a, b = "last", row.last(), fl.last()
			case c == 2:
				op, a, b = "next", row.next(), fl.next()
			case c == 3:
				op, a, b = "prev", row.prev(), fl.prev()
			default:
				k := append([]byte(nil), keys[r.IntN(len(keys))]...)
				switch r.IntN(3) {
				case 1: // between keys: a trailer above or below
					k[len(k)-8] ^= 1
				case 2:
					k = append(k[:len(k)-8:len(k)-8], 0x80)
					k = base.MakeInternalKey(k, 5, base.KindSet).Append(k)[len(k):]
					k = append(append([]byte(nil), keys[r.IntN(len(keys))][:1]...), k...)
				}
				if c == 4 {
					op, a, b = fmt.Sprintf("seekGE(%x)", k), row.seekGE(k), fl.seekGE(k)
				} else {
					op, a, b = fmt.Sprintf("seekLT(%x)", k), row.seekLT(k), fl.seekLT(k)
				}
			}
			ops = append(ops, op)
			if a != b || a && (!bytes.Equal(row.key, fl.key) || !bytes.Equal(row.value, fl.value)) {
				t.Fatalf("round %d after %v: row %v %x=%x, flat %v %x=%x", round, ops, a, row.key, row.value, b, fl.key, fl.value)
			}
			if row.err != nil || fl.err != nil {
				t.Fatalf("round %d after %v: errors %v, %v", round, ops, row.err, fl.err)
			}
		}
	}
}

// TestFlatBlockRefused checks that blocks a flat form cannot carry stay row
// blocks, and that a row block is never read as flat.
func TestFlatBlockRefused(t *testing.T) {
	alloc := func(n int) []byte { return make([]byte, n) }
	w := blockWriter{restartInterval: 16}
	w.add([]byte("short"), []byte("v")) // shorter than a trailer
	if _, ok := flattenBlock(append([]byte(nil), w.finish()...), alloc, new(sync.Pool)); ok {
		t.Error("a block of a key shorter than a trailer flattened")
	}
	w.reset()
	if _, ok := flattenBlock(append([]byte(nil), w.finish()...), alloc, new(sync.Pool)); ok {
		t.Error("an empty block flattened")
	}
	r := rand.New(rand.NewPCG(1, 2))
	block := randomDataBlock(r, 20, 4, 40)
	bad := append([]byte(nil), block...)
	bad[0] = 5 // the first entry shares a prefix with no key before it
	if _, ok := flattenBlock(bad, alloc, new(sync.Pool)); ok {
		t.Error("a block that does not decode flattened")
	}
	if _, ok := splitFlat(block); ok {
		t.Error("a row block read as flat")
	}
}

// TestIteratorFlattensCachedBlocks reads a table's blocks into the cache by
// point lookups, which cache them as stored, then seeks to each key, then
// iterates over the table: seeks leave the blocks as they are; while the
// cache has never evicted, the walk, past its first blocks, puts the flat
// form of each block it steps into in its place, and reads the same
// entries; once the cache has evicted, blocks stay as stored.
func TestIteratorFlattensCachedBlocks(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	spec := randomSpec(r, 3000)
	data := writeSpec(t, spec, WriterOptions{BlockSize: 512})
	for _, roomy := range []bool{true, false} {
		t.Run(fmt.Sprintf("room=%v", roomy), func(t *testing.T) {
			c := cache.New(64<<20, cache.Options{Shards: 1})
			if !roomy {
				c = cache.New(4<<10, cache.Options{Shards: 1})
			}
			rd, err := NewReader(bytes.NewReader(data), int64(len(data)), ReaderOptions{FileName: "test.sst", Cache: c, FileNum: 1})
			if err != nil {
				t.Fatal(err)
			}
			var offsets []uint64
			for _, b := range rd.Layout().Blocks {
				if b.Kind == BlockData {
					offsets = append(offsets, b.Handle.Offset)
				}
			}
			flat := func() (n int) {
				for _, off := range offsets {
					if b, ok := c.Get(1, off); ok {
						if _, isFlat := splitFlat(b); isFlat {
							n++
						}
					}
				}
				return n
			}
			for _, e := range spec.entries {
				if _, _, _, err := lookup(rd, e.key.UserKey, base.SeqNumMax); err != nil {
					t.Fatal(err)
				}
			}
			if n := flat(); n != 0 {
				t.Fatalf("%d blocks flat after point lookups", n)
			}
			// A walk from the first block into the second, on a new
			// iterator: not yet a scan.
			it := rd.NewIter()
			loads := func() uint64 { m := c.Metrics(); return m.Hits + m.Misses }
			start := loads()
			for ok := it.First(); ok && loads() < start+2; ok = it.Next() {
			}
			loaded := loads() - start
			if n := flat(); n != 0 || loaded != 2 {
				t.Fatalf("%d blocks flat after a walk into the second block (%d blocks loaded)", n, loaded)
			}
			for _, i := range r.Perm(len(spec.entries)) { // random seeks: no walk in file order
				e := spec.entries[i]
				if !it.SeekGE(e.key.UserKey) {
					t.Fatalf("SeekGE(%q): %v", e.key.UserKey, it.Error())
				}
			}
			if n := flat(); n != 0 {
				t.Fatalf("%d blocks flat after seeks", n)
			}
			i := 0
			for ok := it.First(); ok; ok = it.Next() {
				if i >= len(spec.entries) || base.CompareInternal(it.Key(), spec.entries[i].key) != 0 || !bytes.Equal(it.Value(), spec.entries[i].value) {
					t.Fatalf("entry %d: %s", i, it.Key())
				}
				i++
			}
			if err := it.Close(); err != nil || i != len(spec.entries) {
				t.Fatalf("iterated %d of %d entries: %v", i, len(spec.entries), err)
			}
			switch n := flat(); {
			case roomy && n != len(offsets)-flattenAfterBlocks:
				t.Fatalf("%d of %d blocks flat after the walk, with room for all; want all but the first %d", n, len(offsets), flattenAfterBlocks)
			case !roomy && n != 0:
				t.Fatalf("%d blocks flat in a cache that has evicted", n)
			}
		})
	}
}

// TestIteratorFlattenKeepsReserve caches a table's blocks as stored by point
// lookups in a cache with 5 % more room than they take, and in one with
// 28 % more, then iterates over it several times: no flat form takes the
// room the cache keeps for reads, so nothing is evicted, and once the
// blocks that fit are flat, no walk builds a flat form only to drop it.
func TestIteratorFlattenKeepsReserve(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	spec := randomSpec(r, 3000)
	data := writeSpec(t, spec, WriterOptions{BlockSize: 512})
	open := func(capacity int64) (*Reader, *cache.Cache) {
		c := cache.New(capacity, cache.Options{Shards: 1})
		rd, err := NewReader(bytes.NewReader(data), int64(len(data)), ReaderOptions{FileName: "test.sst", Cache: c, FileNum: 1})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range spec.entries {
			if _, _, _, err := lookup(rd, e.key.UserKey, base.SeqNumMax); err != nil {
				t.Fatal(err)
			}
		}
		return rd, c
	}
	_, big := open(64 << 20)
	stored := big.Metrics().Bytes
	for _, room := range []int64{105, 128} {
		t.Run(fmt.Sprintf("room=%d%%", room), func(t *testing.T) {
			rd, c := open(stored * room / 100)
			if m := c.Metrics(); m.Evictions != 0 || m.Bytes != stored {
				t.Fatalf("after the lookups: %+v, want the %d bytes stored", m, stored)
			}
			walk := func() {
				it := rd.NewIter()
				n := 0
				for ok := it.First(); ok; ok = it.Next() {
					n++
				}
				if err := it.Close(); err != nil || n != len(spec.entries) {
					t.Fatalf("walked %d of %d entries: %v", n, len(spec.entries), err)
				}
			}
			walk() // loads the blocks holding only older versions, which no lookup read
			walk()
			first := c.Metrics()
			if allocs := testing.AllocsPerRun(2, walk); allocs > 20 {
				t.Errorf("a walk over cached blocks allocates %.0f times", allocs)
			}
			if m := c.Metrics(); m.Evictions != 0 || m.Misses != first.Misses {
				t.Fatalf("after the walks: %+v; after the first: %+v", m, first)
			}
		})
	}
}

// TestIteratorLooksAhead walks a table whose blocks the cache holds flat: a
// walk by NextKey takes each next block ahead of reaching it
// (Iter.lookAhead), moves to the block it took, and reads the same entries
// as before; a seek elsewhere, a walk backward, Close and ResetIter let the
// block taken ahead go; a block taken, then swapped for its flat form by
// another reader, is not the one the walk moves to.
func TestIteratorLooksAhead(t *testing.T) {
	spec, rd, c := aheadTable(t)
	var offsets []uint64
	for _, b := range rd.Layout().Blocks {
		if b.Kind == BlockData {
			offsets = append(offsets, b.Handle.Offset)
		}
	}
	// unheld checks that no reader holds a block: each has the cache's
	// reference only.
	unheld := func(when string) {
		t.Helper()
		for _, off := range offsets {
			if n := c.Refs(1, off); n > 1 {
				t.Fatalf("%s: %d references to the block at %d", when, n, off)
			}
		}
	}
	// walk checks every entry of a walk by NextKey from the first, and
	// returns the moves to a block and those to a block taken ahead.
	walk := func(it *Iter) (moves, used int) {
		t.Helper()
		used = it.aheadUsed
		i := 0
		k, ok := it.Key(), it.First()
		for ; ok; k, ok = it.NextKey() {
			if i > 0 && base.CompareInternal(k, it.Key()) != 0 {
				t.Fatalf("NextKey returned %s at %s", k, it.Key())
			}
			if i >= len(spec.entries) || base.CompareInternal(it.Key(), spec.entries[i].key) != 0 || !bytes.Equal(it.Value(), spec.entries[i].value) {
				t.Fatalf("entry %d: %s", i, it.Key())
			}
			if it.data.i == 0 && i > 0 {
				moves++
			}
			i++
		}
		if err := it.Error(); err != nil || i != len(spec.entries) {
			t.Fatalf("walked %d of %d entries: %v", i, len(spec.entries), err)
		}
		return moves, it.aheadUsed - used
	}
	// holding moves it from its first entry until it holds a block taken
	// ahead.
	holding := func(it *Iter) {
		t.Helper()
		it.First()
		for it.next == (cache.Handle{}) {
			if _, ok := it.NextKey(); !ok {
				t.Fatal("no block taken ahead")
			}
		}
	}
	it := rd.NewIter()
	walk(it) // caches the blocks flat and notes each one's follow hint
	// Every move but the first: a walk looks ahead from a block it moved
	// into from the one before.
	if moves, used := walk(it); moves != len(offsets)-1 || used != moves-1 {
		t.Fatalf("%d of %d moves to a block taken ahead", used, moves)
	}
	last := spec.entries[len(spec.entries)-1].key.UserKey
	for _, away := range []struct {
		name string
		move func() bool
	}{
		{"SeekGE elsewhere", func() bool { return it.SeekGE(last) }},
		{"Last", it.Last},
		{"Prev into the block before", func() bool {
			for it.data.i > 0 {
				it.Prev()
			}
			return it.Prev()
		}},
	} {
		holding(it)
		if !away.move() || it.next != (cache.Handle{}) {
			t.Fatalf("%s kept the block taken ahead (%v)", away.name, it.Error())
		}
	}
	holding(it)
	rd.ResetIter(it)
	unheld("after ResetIter")
	holding(it)
	if err := it.Close(); err != nil || it.next != (cache.Handle{}) || it.ahead != (cache.Lookahead{}) {
		t.Fatalf("Close kept the block taken ahead (%v)", err)
	}
	unheld("after Close")

	// A walk takes a block ahead; another reader swaps in a copy of it
	// before the walk comes to it: the walk moves to the copy cached.
	it = rd.NewIter()
	holding(it)
	off := it.nextOff
	h, _ := c.GetRef(1, off)
	cp := append(c.Alloc(len(h.Value()))[:0], h.Value()...)
	nh, ok := c.Swap(h, 1, off, cp)
	h.Release()
	if !ok {
		t.Fatal("Swap refused")
	}
	nh.Release()
	used := it.aheadUsed
	for it.next != (cache.Handle{}) {
		if _, ok := it.NextKey(); !ok {
			t.Fatal("the walk never reached the block swapped")
		}
	}
	if bh, _ := decodeHandle(it.index.cur().value); bh.Offset != off || it.data.i != 0 {
		t.Fatalf("the walk let the block taken go at entry %d of the block at %d", it.data.i, bh.Offset)
	}
	if &it.h.Value()[0] != &cp[0] || it.aheadUsed != used {
		t.Fatal("the walk moved to the block it took, not the copy cached since")
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	unheld("after the swap and Close")
}

// TestIteratorLooksAheadConcurrent runs walks, seeks and walks backward on
// iterators of one table while its blocks are evicted and cached again
// (under -race in CI): every walk reads the table's entries in order, and
// once the iterators are closed no block is held.
func TestIteratorLooksAheadConcurrent(t *testing.T) {
	spec, rd, c := aheadTable(t)
	errs := make(chan error, 4)
	var wg sync.WaitGroup
	var used atomic.Int64 // moves to a block taken ahead
	for g := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 13))
			it := rd.NewIter()
			defer func() { used.Add(int64(it.aheadUsed)); it.Close() }()
			for range 20 {
				i := 0
				for ok := it.First(); ok; _, ok = it.NextKey() {
					if !bytes.Equal(it.Key().UserKey, spec.entries[i].key.UserKey) || !bytes.Equal(it.Value(), spec.entries[i].value) {
						errs <- fmt.Errorf("walk: entry %d is %s", i, it.Key())
						return
					}
					i++
					if r.IntN(500) == 0 { // a seek and a step back midway
						j := r.IntN(len(spec.entries)-1) + 1
						if !it.SeekGE(spec.entries[j].key.UserKey) || !it.Prev() || !bytes.Equal(it.Key().UserKey, spec.entries[j-1].key.UserKey) {
							errs <- fmt.Errorf("seek to %d then Prev: %s, %v", j, it.Key(), it.Error())
							return
						}
						break
					}
				}
				if err := it.Error(); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	stop := make(chan struct{})
	evicted := make(chan struct{})
	go func() {
		defer close(evicted)
		for {
			select {
			case <-stop:
				return
			default:
				c.EvictFile(1)
			}
		}
	}()
	wg.Wait()
	close(stop)
	<-evicted
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if used.Load() == 0 {
		t.Fatal("no walk moved to a block taken ahead")
	}
	for _, b := range rd.Layout().Blocks {
		if n := c.Refs(1, b.Handle.Offset); b.Kind == BlockData && n > 1 {
			t.Fatalf("%d references to the block at %d with every iterator closed", n, b.Handle.Offset)
		}
	}
}

// aheadTable returns a table of entries of one size, about 15 to a block,
// so that each block has room for a look-ahead's steps, with a reader of it
// through a cache with room for every block.
func aheadTable(t *testing.T) (tableSpec, *Reader, *cache.Cache) {
	var spec tableSpec
	for i := range 3000 {
		spec.entries = append(spec.entries, entry{base.MakeInternalKey([]byte(fmt.Sprintf("key%06d", i)), 1, base.KindSet), bytes.Repeat([]byte{byte(i)}, 20)})
	}
	data := writeSpec(t, spec, WriterOptions{BlockSize: 512})
	c := cache.New(64<<20, cache.Options{Shards: 1})
	rd, err := NewReader(bytes.NewReader(data), int64(len(data)), ReaderOptions{FileName: "test.sst", Cache: c, FileNum: 1})
	if err != nil {
		t.Fatal(err)
	}
	return spec, rd, c
}
