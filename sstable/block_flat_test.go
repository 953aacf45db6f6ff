package sstable

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"sync"
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

// TestBlockRest: an iterator at any entry of a block cached flat reports
// the entries after it in the block, and RestKey(j) is the key the j-th
// Next reaches; in a block cached as stored it reports none.
func TestBlockRest(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	spec := randomSpec(r, 3000)
	data := writeSpec(t, spec, WriterOptions{BlockSize: 512})
	c := cache.New(64<<20, cache.Options{Shards: 1})
	rd, err := NewReader(bytes.NewReader(data), int64(len(data)), ReaderOptions{FileName: "test.sst", Cache: c, FileNum: 1})
	if err != nil {
		t.Fatal(err)
	}
	it := rd.NewIter()
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() { // caches the blocks flat
	}
	// A second iterator walks beside it, checking each RestKey ahead.
	ahead := rd.NewIter()
	defer ahead.Close()
	rests, stored := 0, 0
	for ok := it.First(); ok; ok = it.Next() {
		n := it.BlockRest()
		if _, isFlat := splitFlat(it.h.Value()); !isFlat {
			stored++
			if n != 0 {
				t.Fatalf("a rest of %d in a block cached as stored", n)
			}
			continue
		}
		if want := it.data.n - 1 - it.data.i; n != want {
			t.Fatalf("a rest of %d at entry %d of %d", n, it.data.i, it.data.n)
		}
		if n == 0 {
			continue
		}
		rests++
		if !ahead.SeekGE(it.Key().UserKey) {
			t.Fatal(ahead.Error())
		}
		for base.CompareInternal(ahead.Key(), it.Key()) < 0 && ahead.Next() {
		}
		for j := 1; j <= n; j++ {
			if !ahead.Next() {
				t.Fatalf("the table ended within a block's rest: %v", ahead.Error())
			}
			if k := it.RestKey(j); base.CompareInternal(k, ahead.Key()) != 0 {
				t.Fatalf("RestKey(%d) at entry %d is %s, Next reaches %s", j, it.data.i, k, ahead.Key())
			}
		}
	}
	if rests == 0 || stored != 0 {
		t.Fatalf("%d entries with a rest, %d blocks stored", rests, stored)
	}
	// A block a point lookup cached, as stored.
	c = cache.New(64<<20, cache.Options{Shards: 1})
	if rd, err = NewReader(bytes.NewReader(data), int64(len(data)), ReaderOptions{FileName: "test.sst", Cache: c, FileNum: 1}); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := lookup(rd, spec.entries[0].key.UserKey, base.SeqNumMax); err != nil {
		t.Fatal(err)
	}
	st := rd.NewIter()
	defer st.Close()
	if !st.First() {
		t.Fatal(st.Error())
	}
	if _, isFlat := splitFlat(st.h.Value()); isFlat {
		t.Fatal("the block a point lookup cached is flat")
	}
	if n := st.BlockRest(); n != 0 {
		t.Fatalf("a rest of %d in a block cached as stored", n)
	}
	// A reader that rewrites sequence numbers reports none, flat or not.
	c = cache.New(64<<20, cache.Options{Shards: 1})
	ov, err := NewReader(bytes.NewReader(data), int64(len(data)), ReaderOptions{FileName: "test.sst", Cache: c, FileNum: 1, SeqNumOverride: 7})
	if err != nil {
		t.Fatal(err)
	}
	oi := ov.NewIter()
	defer oi.Close()
	for ok := oi.First(); ok; ok = oi.Next() { // caches the blocks flat
	}
	flat := 0
	for ok := oi.First(); ok; ok = oi.Next() {
		if _, isFlat := splitFlat(oi.h.Value()); isFlat {
			flat++
		}
		if n := oi.BlockRest(); n != 0 {
			t.Fatalf("a rest of %d where the reader overrides sequence numbers", n)
		}
	}
	if flat == 0 {
		t.Fatal("no block cached flat under the override")
	}
}
