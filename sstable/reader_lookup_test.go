package sstable

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/cache"
)

// windowKey returns a random user key over a few bytes chosen to meet at
// window boundaries (0x00 pads a short window, 0xff ends the byte range),
// beginning with prefix, of a random length.
func windowKey(r *rand.Rand, prefix string) []byte {
	alphabet := []byte{0x00, 0x01, 'a', 'b', 0xfe, 0xff}
	k := []byte(prefix)
	for n := r.IntN(14); n > 0; n-- {
		k = append(k, alphabet[r.IntN(len(alphabet))])
	}
	return k
}

// TestSeekIndexByWindows checks that a lookup's seek in the index by its
// windows lands where the index block's own seek does, for keys before,
// among, equal to (at sequence numbers above, at and below) and after the
// separators, in tables whose keys share prefixes of several lengths, and
// in one where runs of separators share their window (the eight bytes past
// the common prefix) and differ after it.
func TestSeekIndexByWindows(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for round, prefix := range []string{"", "p", "common-prefix/", "\xff\xff", "w"} {
		var spec tableSpec
		seen := map[string]bool{}
		for range 3000 {
			uk := windowKey(r, prefix)
			if prefix == "w" {
				// One of two windows, then any suffix.
				uk = append([]byte(prefix), []string{"AAAAAAAA", "BBBBBBBB"}[r.IntN(2)]...)
				uk = append(uk, windowKey(r, "")...)
			}
			seq := base.SeqNum(r.IntN(5) + 1)
			if id := fmt.Sprintf("%x#%d", uk, seq); !seen[id] {
				seen[id] = true
				spec.entries = append(spec.entries, entry{base.MakeInternalKey(uk, seq, base.KindSet), []byte("v")})
			}
		}
		slices.SortFunc(spec.entries, func(a, b entry) int { return base.CompareInternal(a.key, b.key) })
		rd := openTable(t, writeSpec(t, spec, WriterOptions{BlockSize: 64 << (round % 3)}))
		if rd.windows == nil || len(rd.windows.window) < 50 {
			t.Fatalf("prefix %q: no windows, or too few index entries: %+v", prefix, rd.windows)
		}
		var targets [][]byte
		for _, e := range spec.entries {
			for _, seq := range []base.SeqNum{e.key.SeqNum() + 1, e.key.SeqNum(), e.key.SeqNum() - 1} {
				targets = append(targets, base.MakeInternalKey(e.key.UserKey, seq, base.KindMax).Append(nil))
			}
		}
		for range 3000 {
			p := prefix
			if r.IntN(5) == 0 {
				p = prefix[:r.IntN(len(prefix)+1)]
			}
			targets = append(targets, base.MakeInternalKey(windowKey(r, p), base.SeqNum(r.IntN(7)), base.KindMax).Append(nil))
		}
		targets = append(targets, base.MakeInternalKey(nil, 1, base.KindMax).Append(nil),
			base.MakeInternalKey(bytes.Repeat([]byte{0xff}, 30), 1, base.KindMax).Append(nil))
		it := rd.NewIter()
		for _, enc := range targets {
			wok := it.index.seekGE(enc)
			i, ok := rd.windows.seek(&it.index.top, enc)
			if !ok || wok != (i < rd.windows.entries) || it.index.error() != nil {
				t.Fatalf("prefix %q, seek to %x: by windows entry %d of %d (%v), by the block %v (%v)", prefix, enc,
					i, rd.windows.entries, ok, wok, it.index.error())
			}
			if wok {
				if bh, _ := decodeHandle(it.index.top.value); bh != rd.windows.handles[i] {
					t.Fatalf("prefix %q, seek to %x: by windows entry %d, %v; by the block %v", prefix, enc, i, rd.windows.handles[i], bh)
				}
			}
		}
	}
}

// TestIndexWindowsOnlyWhereSound checks which readers build windows: a
// single-level index of a bytewise table does, past the prefix its
// separators but the last (a short successor of the last key) share, and a
// two-level one does not.
func TestIndexWindowsOnlyWhereSound(t *testing.T) {
	data := tableOfKeys(t, 3000)
	rd := openTable(t, data)
	if w := rd.windows; w == nil || rd.PinnedBytes() != uint64(len(rd.index))+w.bytes()+rd.filterBH.Length || string(w.common) != "key00" ||
		len(w.window) != w.entries-1 || len(w.handles) != w.entries {
		t.Fatalf("single-level index: windows %+v, pinned %d", w, rd.PinnedBytes())
	}
	var spec tableSpec
	for i := range 3000 {
		spec.entries = append(spec.entries, entry{base.MakeInternalKey([]byte(fmt.Sprintf("key%06d", i)), 1, base.KindSet), []byte("value")})
	}
	rd = openTable(t, writeSpec(t, spec, WriterOptions{IndexPartitionThreshold: 256}))
	if rd.parts == nil || rd.windows != nil {
		t.Fatalf("two-level index: partitions %v, windows %v", rd.parts != nil, rd.windows)
	}
	for i := range 3000 {
		k := fmt.Sprintf("key%06d", i)
		if v, _, found, err := rd.LookupCopy([]byte(k), base.SeqNumMax); err != nil || !found || string(v) != "value" {
			t.Fatalf("lookup(%s) in a two-level index: %q, %v, %v", k, v, found, err)
		}
	}
}

// TestLookupDropsLargeBuffers checks that a lookup that read a large block
// into its own buffers (the cache full, the block not admitted) leaves no
// such buffer in the reader's pool of lookup iterators.
func TestLookupDropsLargeBuffers(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), (maxPooledRaw+1)/16+1)
	var spec tableSpec
	for i := range 100 { // blocks of small values before the large one
		spec.entries = append(spec.entries, entry{base.MakeInternalKey([]byte(fmt.Sprintf("a%03d", i)), 1, base.KindSet), make([]byte, 100)})
	}
	spec.entries = append(spec.entries, entry{base.MakeInternalKey([]byte("b"), 1, base.KindSet), big})
	data := writeSpec(t, spec, WriterOptions{Compression: NoCompression})
	c := cache.New(64<<10, cache.Options{Shards: 1})
	for i := uint64(0); c.Metrics().Evictions == 0; i++ {
		c.Set(100, i, make([]byte, 4<<10))
	}
	full := c.Metrics().Entries
	rd, err := NewReader(bytes.NewReader(data), int64(len(data)), ReaderOptions{Cache: c, FileNum: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a000", "b"} {
		v, _, found, err := rd.LookupCopy([]byte(k), base.SeqNumMax)
		if err != nil || !found || (k == "b") != bytes.Equal(v, big) {
			t.Fatalf("lookup(%s): %d bytes, %v, %v", k, len(v), found, err)
		}
		if m := c.Metrics(); m.Entries != full {
			t.Fatalf("lookup(%s) cached its block: %+v", k, m)
		}
		if it, ok := rd.iters.Get().(*Iter); ok { // the pool may drop it (with -race)
			if n := max(cap(it.bufs.raw), cap(it.bufs.dec)); k == "b" && n > maxPooledRaw || k == "a000" && n == 0 {
				t.Fatalf("after lookup(%s): the pooled iterator's buffers hold %d bytes", k, n)
			}
			rd.iters.Put(it)
		}
	}
}

// TestLookupByWindowsMatchesIndexSeek compares lookups through the windows
// and the cache (a full one, admitting on the second miss, and one that
// holds the table) with lookups of a reader without a cache, which seek the
// index block: random tables, every user key at sequence numbers around its
// versions', and absent keys.
func TestLookupByWindowsMatchesIndexSeek(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 9))
	for round := range 6 {
		spec := randomSpec(r, 2000)
		data := writeSpec(t, spec, WriterOptions{BlockSize: 256 << (round % 3)})
		plain := openTable(t, data)
		for _, capacity := range []int64{8 << 10, 64 << 20} {
			c := cache.New(capacity, cache.Options{Shards: 1})
			rd, err := NewReader(bytes.NewReader(data), int64(len(data)), ReaderOptions{Cache: c, FileNum: 1, FileName: "1.sst"})
			if err != nil {
				t.Fatal(err)
			}
			if rd.windows == nil {
				t.Fatal("no windows")
			}
			for _, e := range spec.entries {
				for _, uk := range [][]byte{e.key.UserKey, append(slices.Clip(e.key.UserKey), 0), e.key.UserKey[:len(e.key.UserKey)-1]} {
					for _, seq := range []base.SeqNum{e.key.SeqNum() + 1, e.key.SeqNum(), base.SeqNumMax} {
						wv, wtr, wfound, werr := plain.LookupCopy(uk, seq)
						v, tr, found, err := rd.LookupCopy(uk, seq)
						if werr != nil || err != nil || found != wfound || tr != wtr || !bytes.Equal(v, wv) {
							t.Fatalf("round %d, cache %d, lookup(%q, %d): %v %v %d bytes %v; without a cache: %v %v %d bytes %v",
								round, capacity, uk, seq, found, tr, len(v), err, wfound, wtr, len(wv), werr)
						}
					}
				}
			}
		}
	}
}

// TestLookupAfterIteration checks that point lookups read the blocks an
// iterator left in the cache, which it keeps flat (flattenBlock), as they
// read the blocks stored as written: every key found with its value, and
// keys between them not found.
func TestLookupAfterIteration(t *testing.T) {
	var spec tableSpec
	for i := range 3000 {
		spec.entries = append(spec.entries, entry{base.MakeInternalKey([]byte(fmt.Sprintf("key%06d", 2*i)), 1, base.KindSet), []byte(fmt.Sprintf("value%d", i))})
	}
	data := writeSpec(t, spec, WriterOptions{})
	c := cache.New(64<<20, cache.Options{})
	rd, err := NewReader(bytes.NewReader(data), int64(len(data)), ReaderOptions{Cache: c, FileNum: 1})
	if err != nil {
		t.Fatal(err)
	}
	it := rd.NewIter()
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		n++
	}
	if err := it.Close(); err != nil || n != 3000 {
		t.Fatalf("iterated %d entries: %v", n, err)
	}
	if bh := rd.windows.handles[0]; bh.Length == 0 {
		t.Fatal("no first data block")
	} else if h, ok := c.GetRef(1, bh.Offset); !ok {
		t.Fatal("the iteration left its first block out of the cache")
	} else {
		_, flat := splitFlat(h.Value())
		h.Release()
		if !flat {
			t.Fatal("the iteration left its first block in the cache as stored, not flat")
		}
	}
	for i := range 3000 {
		k := fmt.Sprintf("key%06d", 2*i)
		if v, _, found, err := rd.LookupCopy([]byte(k), base.SeqNumMax); err != nil || !found || string(v) != fmt.Sprintf("value%d", i) {
			t.Fatalf("lookup(%s) after the iteration: %q, %v, %v", k, v, found, err)
		}
		k = fmt.Sprintf("key%06d", 2*i+1)
		if v, _, found, err := rd.LookupCopy([]byte(k), base.SeqNumMax); err != nil || found {
			t.Fatalf("lookup(%s), absent, after the iteration: %q, %v, %v", k, v, found, err)
		}
	}
}

// TestIterationFlattensOnlyUntilEviction checks that an iterator caches its
// blocks flat while the cache has never evicted a block, and as stored
// once it has: a block walked once and evicted is not worth flattening.
func TestIterationFlattensOnlyUntilEviction(t *testing.T) {
	var spec tableSpec
	for i := range 3000 {
		spec.entries = append(spec.entries, entry{base.MakeInternalKey([]byte(fmt.Sprintf("key%06d", i)), 1, base.KindSet), make([]byte, 100)})
	}
	data := writeSpec(t, spec, WriterOptions{})
	for _, size := range []int64{64 << 20, 64 << 10} {
		c := cache.New(size, cache.Options{Shards: 1})
		rd, err := NewReader(bytes.NewReader(data), int64(len(data)), ReaderOptions{Cache: c, FileNum: 1})
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			it := rd.NewIter()
			for ok := it.First(); ok; ok = it.Next() {
			}
			if err := it.Close(); err != nil {
				t.Fatal(err)
			}
		}
		last := rd.windows.handles[len(rd.windows.handles)-1]
		h, ok := c.GetRef(1, last.Offset)
		if !ok {
			t.Fatalf("cache of %d bytes: the last block walked is not in it", size)
		}
		_, flat := splitFlat(h.Value())
		h.Release()
		if evicted := c.Evicted(); flat == evicted || evicted != (size == 64<<10) {
			t.Errorf("cache of %d bytes: evicted %v, last block flat %v", size, evicted, flat)
		}
	}
}
