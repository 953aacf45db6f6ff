package sstable

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/bloomkv/bloomkv/filterblock"
	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/cache"
)

// countingReader counts the reads a table makes of its file.
type countingReader struct {
	r     *bytes.Reader
	reads atomic.Int64
}

func (c *countingReader) ReadAt(p []byte, off int64) (int, error) {
	c.reads.Add(1)
	return c.r.ReadAt(p, off)
}

func tableOfKeys(t *testing.T, n int) []byte {
	t.Helper()
	var spec tableSpec
	for i := range n {
		spec.entries = append(spec.entries, entry{base.MakeInternalKey([]byte(fmt.Sprintf("key%06d", i)), 1, base.KindSet), []byte("value")})
	}
	return writeSpec(t, spec, WriterOptions{})
}

// TestFilterNoReadsNothing checks that a lookup the filter answers "no" for reads
// neither the index nor a data block: the file is not read at all.
func TestFilterNoReadsNothing(t *testing.T) {
	data := tableOfKeys(t, 5000)
	cr := &countingReader{r: bytes.NewReader(data)}
	rd, err := NewReader(cr, int64(len(data)), ReaderOptions{FileName: "reads.sst"})
	if err != nil {
		t.Fatal(err)
	}
	f, ok, err := rd.Filter()
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		t.Fatal("table has no filter")
	}
	rejected := 0
	for i := range 2000 {
		k := []byte(fmt.Sprintf("nokey%06d", i))
		if f.MayContain(k) {
			continue // a false positive: the filter says maybe
		}
		before := cr.reads.Load()
		if _, _, found, err := lookup(rd, k, base.SeqNumMax); err != nil || found {
			t.Fatalf("lookup(%q): found=%v, %v", k, found, err)
		}
		if n := cr.reads.Load() - before; n != 0 {
			t.Fatalf("lookup of a key the filter rejects read the file %d times", n)
		}
		rejected++
	}
	if rejected < 1900 {
		t.Fatalf("the filter rejected only %d of 2000 absent keys", rejected)
	}
	// A present key costs one read, the data block: the index is in memory.
	before := cr.reads.Load()
	if v, _, found, err := lookup(rd, []byte("key001234"), base.SeqNumMax); err != nil || !found || string(v) != "value" {
		t.Fatalf("lookup(key001234) = %q, %v, %v", v, found, err)
	}
	if n := cr.reads.Load() - before; n != 1 {
		t.Fatalf("lookup of a present key read the file %d times, want 1", n)
	}
}

// TestBlockCacheServesRepeatedReads checks that a block read once is served
// from the cache, across readers of different tables sharing it; and that
// once the cache is full (it has evicted), a lookup's block is cached on its
// second miss only (the cache's Admit).
func TestBlockCacheServesRepeatedReads(t *testing.T) {
	c := cache.New(1<<20, cache.Options{})
	var readers []*Reader
	var counters []*countingReader
	for i := range 2 {
		data := tableOfKeys(t, 3000)
		cr := &countingReader{r: bytes.NewReader(data)}
		rd, err := NewReader(cr, int64(len(data)), ReaderOptions{Cache: c, FileNum: uint64(i + 1), FileName: fmt.Sprintf("%d.sst", i+1)})
		if err != nil {
			t.Fatal(err)
		}
		readers, counters = append(readers, rd), append(counters, cr)
	}
	// reads looks key up in every table, checking the file reads each
	// makes: want[round].
	reads := func(key string, want ...int64) {
		t.Helper()
		for round, w := range want {
			for i, rd := range readers {
				before := counters[i].reads.Load()
				if v, _, found, err := lookup(rd, []byte(key), base.SeqNumMax); err != nil || !found || string(v) != "value" {
					t.Fatalf("lookup(%s): %q, %v, %v", key, v, found, err)
				}
				if n := counters[i].reads.Load() - before; n != w {
					t.Fatalf("lookup(%s), round %d, table %d: %d reads, want %d", key, round, i, n, w)
				}
			}
		}
	}
	reads("key000042", 1, 0, 0)
	if m := c.Metrics(); m.Hits != 4 || m.Misses != 2 {
		t.Fatalf("cache counters %+v, want 4 hits and 2 misses", m)
	}
	filler := make([]byte, 4<<10)
	for i := uint64(0); c.Metrics().Evictions == 0; i++ {
		c.Set(100, i, filler)
	}
	reads("key002900", 1, 1, 0, 0)
}

// TestLookupUncachedBlocks checks the lookups whose blocks the cache does not
// admit, read into the lookup's own buffers: every key of a table is found
// with its value, in a cache that holds a few blocks and in one that holds
// them all, the table mapped or read, its blocks compressed or not; and a
// damaged block is reported on each read, naming the file and the block's
// offset.
func TestLookupUncachedBlocks(t *testing.T) {
	const n = 3000
	var spec tableSpec
	for i := range n {
		spec.entries = append(spec.entries, entry{base.MakeInternalKey([]byte(fmt.Sprintf("key%06d", i)), 1, base.KindSet), []byte("value")})
	}
	for _, cfg := range []struct {
		c        Compression
		capacity int64
		mapped   bool
	}{{SnappyCompression, 16 << 10, false}, {SnappyCompression, 16 << 10, true}, {SnappyCompression, 8 << 20, false}, {SnappyCompression, 8 << 20, true},
		{NoCompression, 16 << 10, false}, {NoCompression, 16 << 10, true}, {NoCompression, 8 << 20, true}} {
		data := writeSpec(t, spec, WriterOptions{Compression: cfg.c})
		capacity, mapped := cfg.capacity, cfg.mapped
		t.Run(fmt.Sprintf("%v/cache=%d/mapped=%v", cfg.c, capacity, mapped), func(t *testing.T) {
			c := cache.New(capacity, cache.Options{Shards: 1})
			var r io.ReaderAt = bytes.NewReader(data)
			if mapped {
				r = &fakeMapped{data: data}
			}
			rd, err := NewReader(r, int64(len(data)), ReaderOptions{Cache: c, FileNum: 1, FileName: "1.sst"})
			if err != nil {
				t.Fatal(err)
			}
			for round := range 2 {
				for i := range n {
					k := fmt.Sprintf("key%06d", (i*7919)%n)
					v, _, found, err := rd.LookupCopy([]byte(k), base.SeqNumMax)
					if err != nil || !found || string(v) != "value" {
						t.Fatalf("round %d: lookup(%s) = %q, %v, %v", round, k, v, found, err)
					}
					if _, _, found, err := rd.LookupCopy([]byte(k+"x"), base.SeqNumMax); err != nil || found {
						t.Fatalf("round %d: lookup(%sx) found %v, %v", round, k, found, err)
					}
				}
			}
			// Every miss of a cache that never evicted cached its block;
			// a full cache cached some misses' blocks only.
			m := c.Metrics()
			if inserted := m.Evictions + uint64(m.Entries); (m.Evictions == 0) != (inserted == m.Misses) {
				t.Fatalf("%d misses, %d evictions, %d blocks cached", m.Misses, m.Evictions, m.Entries)
			}
			if capacity == 16<<10 && m.Evictions == 0 {
				t.Fatalf("a cache of 16 KiB never evicted: %+v", m)
			}
		})
	}
	// A flipped byte in the first data block: every lookup of its keys
	// fails, cached or not, however often it is asked.
	bad := tableOfKeys(t, n)
	bad[10] ^= 0x40
	c := cache.New(8<<20, cache.Options{})
	rd, err := NewReader(bytes.NewReader(bad), int64(len(bad)), ReaderOptions{Cache: c, FileNum: 1, FileName: "1.sst"})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		_, _, _, err := rd.LookupCopy([]byte("key000000"), base.SeqNumMax)
		if !errors.Is(err, base.ErrCorruption) || !strings.Contains(err.Error(), "1.sst") || !strings.Contains(err.Error(), "offset") {
			t.Fatalf("lookup in a damaged block: %v", err)
		}
	}
}

// TestCacheIndexAndFilterBlocks checks the option that keeps index and filter
// blocks in the block cache instead of pinning them: they are cached at open,
// a filter "no" then reads nothing, and lookups stay correct when the cache
// is too small to keep them.
func TestCacheIndexAndFilterBlocks(t *testing.T) {
	data := tableOfKeys(t, 5000)
	for _, capacity := range []int64{8 << 20, 4 << 10} {
		c := cache.New(capacity, cache.Options{Shards: 1})
		cr := &countingReader{r: bytes.NewReader(data)}
		rd, err := NewReader(cr, int64(len(data)), ReaderOptions{Cache: c, FileNum: 7, FileName: "cif.sst", CacheIndexAndFilterBlocks: true})
		if err != nil {
			t.Fatal(err)
		}
		if rd.index != nil {
			t.Fatal("the index is pinned despite the option")
		}
		if capacity > 1<<20 {
			if m := c.Metrics(); m.Entries != 2 {
				t.Fatalf("%d blocks cached after open, want the index and the filter", m.Entries)
			}
		}
		before := cr.reads.Load()
		for i := range 300 {
			k := []byte(fmt.Sprintf("key%06d", i*13))
			if v, _, found, err := lookup(rd, k, base.SeqNumMax); err != nil || !found || string(v) != "value" {
				t.Fatalf("capacity %d: lookup(%q) = %q, %v, %v", capacity, k, v, found, err)
			}
			if _, _, found, err := lookup(rd, []byte(fmt.Sprintf("nokey%06d", i)), base.SeqNumMax); err != nil || found {
				t.Fatalf("capacity %d: absent key: %v, %v", capacity, found, err)
			}
		}
		if capacity > 1<<20 {
			// Warm: every read above was a data block of a present key.
			absentReads := cr.reads.Load() - before
			f, _, _ := rd.Filter()
			if absentReads > 300+5 || !f.MayContain([]byte("key000013")) {
				t.Fatalf("%d reads for 300 present and 300 absent keys", absentReads)
			}
		}
	}
	if _, err := NewReader(bytes.NewReader(data), int64(len(data)), ReaderOptions{CacheIndexAndFilterBlocks: true}); err == nil {
		t.Fatal("the option without a cache was accepted")
	}
}

// TestCompactionIterBypassesCache: a compaction iterator reads every entry
// of the table, in order, without looking up or filling the block cache,
// which keeps its blocks for reads; a plain iterator fills it.
func TestCompactionIterBypassesCache(t *testing.T) {
	data := tableOfKeys(t, 5000)
	c := cache.New(8<<20, cache.Options{})
	cr := &countingReader{r: bytes.NewReader(data)}
	rd, err := NewReader(cr, int64(len(data)), ReaderOptions{Cache: c, FileNum: 1, FileName: "1.sst"})
	if err != nil {
		t.Fatal(err)
	}
	walk := func(it *Iter) int {
		n := 0
		for ok := it.First(); ok; ok = it.Next() {
			if want := fmt.Sprintf("key%06d", n); string(it.Key().UserKey) != want || string(it.Value()) != "value" {
				t.Fatalf("entry %d: %s=%q, want %s=value", n, it.Key(), it.Value(), want)
			}
			n++
		}
		if err := it.Close(); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := cr.reads.Load()
	if n := walk(rd.NewCompactionIter()); n != 5000 {
		t.Fatalf("compaction iterator saw %d entries, want 5000", n)
	}
	if m := c.Metrics(); m.Hits != 0 || m.Misses != 0 || m.Entries != 0 {
		t.Fatalf("compaction iterator touched the cache: %+v", m)
	}
	// It reads ahead: the data blocks in reads of up to raMax bytes each,
	// not one read per block.
	blocks := rd.Properties().NumDataBlocks
	reads := uint64(cr.reads.Load() - before)
	if blocks < 10 || reads == 0 || reads > rd.Properties().DataSize/raMax+1 {
		t.Fatalf("compaction iterator made %d reads of a table of %d data blocks (%d bytes)", reads, blocks, rd.Properties().DataSize)
	}
	if n := walk(rd.NewIter()); n != 5000 {
		t.Fatalf("iterator saw %d entries, want 5000", n)
	}
	if m := c.Metrics(); m.Misses != uint64(blocks) || m.Entries != int(blocks) {
		t.Fatalf("a plain iterator over %d data blocks left cache counters %+v", blocks, m)
	}
}

// TestValuesSurviveCacheChurn: with a cache far smaller than the table, an
// iterator's current value stays intact while lookups and other iterators
// evict blocks and reuse their memory, and LookupCopy's values are the
// caller's.
func TestValuesSurviveCacheChurn(t *testing.T) {
	const n = 20000
	var spec tableSpec
	val := func(i int) []byte { return bytes.Repeat([]byte{byte('a' + i%26)}, 20+i%50) }
	key := func(i int) []byte { return []byte(fmt.Sprintf("key%06d", i)) }
	for i := range n {
		spec.entries = append(spec.entries, entry{base.MakeInternalKey(key(i), 1, base.KindSet), val(i)})
	}
	data := writeSpec(t, spec, WriterOptions{})
	c := cache.New(32<<10, cache.Options{Shards: 1})
	rd, err := NewReader(bytes.NewReader(data), int64(len(data)), ReaderOptions{Cache: c, FileNum: 1})
	if err != nil {
		t.Fatal(err)
	}
	it := rd.NewIter()
	other := rd.NewIter()
	var copies [][]byte
	i := 0
	for ok := it.First(); ok; ok = it.Next() {
		v := it.Value()
		// Churn: lookups and a second iterator far from it.
		for j := range 3 {
			k := (i*7919 + j*104729) % n
			got, tr, found, err := rd.LookupCopy(key(k), base.SeqNumMax)
			if err != nil || !found || tr.Kind() != base.KindSet || !bytes.Equal(got, val(k)) {
				t.Fatalf("LookupCopy(%s) = %q, %v, %v, %v", key(k), got, tr, found, err)
			}
			if j == 0 {
				copies = append(copies, got)
			}
			if !other.SeekGE(key((k + n/2) % n)) {
				t.Fatalf("SeekGE: %v", other.Error())
			}
		}
		if !bytes.Equal(v, val(i)) || !bytes.Equal(it.Key().UserKey, key(i)) {
			t.Fatalf("entry %d changed while the iterator was on it: %s = %q", i, it.Key().UserKey, v)
		}
		i++
	}
	if err := it.Close(); err != nil || i != n {
		t.Fatalf("iterated %d of %d entries: %v", i, n, err)
	}
	if err := other.Close(); err != nil {
		t.Fatal(err)
	}
	for i, v := range copies {
		if k := (i * 7919) % n; !bytes.Equal(v, val(k)) {
			t.Fatalf("the copy of %s's value changed to %q", key(k), v)
		}
	}
	if m := c.Metrics(); m.Evictions == 0 {
		t.Fatalf("no evictions: %+v", m)
	}
}

// failingAfter fails every read of the data blocks longer than limit bytes.
type failingAfter struct {
	r       *bytes.Reader
	limit   int
	dataEnd int64
}

func (f *failingAfter) ReadAt(p []byte, off int64) (int, error) {
	if len(p) > f.limit && off < f.dataEnd {
		return 0, fmt.Errorf("read of %d bytes refused", len(p))
	}
	return f.r.ReadAt(p, off)
}

// TestReadAhead: a scan through a cache that keeps nothing reads the file a
// few times, not once a block; a read-ahead that fails leaves each block to
// its own read, which succeeds.
func TestReadAhead(t *testing.T) {
	data := tableOfKeys(t, 50000)
	cr := &countingReader{r: bytes.NewReader(data)}
	rd, err := NewReader(cr, int64(len(data)), ReaderOptions{Cache: cache.New(1, cache.Options{Shards: 1}), FileNum: 1})
	if err != nil {
		t.Fatal(err)
	}
	blocks, dataEnd := 0, int64(len(data))
	for _, b := range rd.Blocks().Blocks {
		if b.Kind == BlockData {
			blocks++
		} else {
			dataEnd = min(dataEnd, int64(b.Handle.Offset))
		}
	}
	scan := func(rd *Reader) {
		t.Helper()
		it := rd.NewIter()
		n := 0
		for ok := it.First(); ok; ok = it.Next() {
			if want := fmt.Sprintf("key%06d", n); string(it.Key().UserKey) != want || string(it.Value()) != "value" {
				t.Fatalf("entry %d: %s = %q", n, it.Key().UserKey, it.Value())
			}
			n++
		}
		if err := it.Close(); err != nil || n != 50000 {
			t.Fatalf("scanned %d entries: %v", n, err)
		}
	}
	before := cr.reads.Load()
	scan(rd)
	if reads := cr.reads.Load() - before; reads*4 > int64(blocks) {
		t.Fatalf("a scan of %d data blocks read the file %d times", blocks, reads)
	}

	fr := &failingAfter{r: bytes.NewReader(data), limit: 8 << 10, dataEnd: dataEnd}
	rd, err = NewReader(fr, int64(len(data)), ReaderOptions{Cache: cache.New(1, cache.Options{Shards: 1}), FileNum: 1})
	if err != nil {
		t.Fatal(err)
	}
	scan(rd)
}

// TestCompactionIterReportsReadErrors: a compaction iterator's read-ahead
// that fails is the iteration's error, naming the file and offset; it does
// not fall back to reading each block, which would hide a failing disk.
func TestCompactionIterReportsReadErrors(t *testing.T) {
	data := tableOfKeys(t, 5000)
	dataEnd := int64(len(data))
	rd := openTable(t, data)
	for _, b := range rd.Blocks().Blocks {
		if b.Kind != BlockData {
			dataEnd = min(dataEnd, int64(b.Handle.Offset))
		}
	}
	fr := &failingAfter{r: bytes.NewReader(data), limit: 8 << 10, dataEnd: dataEnd}
	rd, err := NewReader(fr, int64(len(data)), ReaderOptions{FileName: "7.sst"})
	if err != nil {
		t.Fatal(err)
	}
	it := rd.NewCompactionIter()
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		n++
	}
	err = it.Close()
	if err == nil || !strings.Contains(err.Error(), "read of") || !strings.Contains(err.Error(), "7.sst") || !strings.Contains(err.Error(), "at offset 0") {
		t.Fatalf("after %d entries: %v, want the failed read-ahead naming 7.sst and offset 0", n, err)
	}
}

// TestPooledIteratorForgetsErrors checks that resetting a pooled iterator
// clears the errors of its last use.
func TestPooledIteratorForgetsErrors(t *testing.T) {
	rd := openTable(t, tableOfKeys(t, 100))
	var it Iter
	it.reset(rd, false)
	boom := corruptionf("earlier failure")
	it.err, it.data.err, it.index.part.err, it.index.err = boom, boom, boom, boom
	it.reset(rd, false)
	if it.err != nil || it.data.err != nil || it.index.error() != nil {
		t.Fatalf("reset kept an error: %v %v %v", it.err, it.data.err, it.index.error())
	}
	if !it.SeekGE([]byte("key000050")) || string(it.Key().UserKey) != "key000050" {
		t.Fatal("iterator unusable after reset")
	}
}

// TestLookupWithHugeSequenceNumber checks that a read at any sequence number
// above the largest sees every entry.
func TestLookupWithHugeSequenceNumber(t *testing.T) {
	rd := openTable(t, tableOfKeys(t, 10))
	for _, seq := range []base.SeqNum{base.SeqNumMax, base.SeqNumMax + 1, base.SeqNumMax + 2, 1<<64 - 1} {
		if _, _, found, err := lookup(rd, []byte("key000003"), seq); err != nil || !found {
			t.Fatalf("lookup at %d: %v, %v", seq, found, err)
		}
	}
}

// TestDeferFilter: a reader opened with DeferFilter reads no filter block
// until LoadFilter, answering "maybe" to every probe meanwhile; LoadFilter
// may run while lookups and probes do; a damaged filter block is refused by
// LoadFilter alone, and the table reads on without a filter.
func TestDeferFilter(t *testing.T) {
	var spec tableSpec
	for i := range 3000 {
		spec.entries = append(spec.entries, entry{base.MakeInternalKey(fmt.Appendf(nil, "key%06d", 2*i), 0, base.KindSet), []byte("v")})
	}
	clean := writeSpec(t, spec, WriterOptions{BlockSize: 512})
	absent := func(i int) []byte { return fmt.Appendf(nil, "key%06d", 2*i+1) }
	negatives := func(r *Reader) int {
		n := 0
		for i := range 3000 {
			if ok, err := r.MayContainHash(filterblock.Hash(absent(i))); err != nil {
				t.Fatal(err)
			} else if !ok {
				n++
			}
		}
		return n
	}
	open := func(data []byte, o ReaderOptions) *Reader {
		t.Helper()
		o.FileName = "t.sst"
		r, err := NewReader(bytes.NewReader(data), int64(len(data)), o)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	eager := open(clean, ReaderOptions{})
	r := open(clean, ReaderOptions{DeferFilter: true})
	if r.HasFilter() || negatives(r) != 0 || r.PinnedBytes() != eager.PinnedBytes()-eager.filterBH.Length {
		t.Fatalf("before LoadFilter: HasFilter %v, %d negatives, %d pinned bytes (eager reader: %d)", r.HasFilter(), negatives(r), r.PinnedBytes(), eager.PinnedBytes())
	}
	// Probes and lookups while it loads (run with -race).
	var wg sync.WaitGroup
	for g := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < 3000; i += 2 {
				if ok, err := r.MayContainHash(filterblock.Hash(spec.entries[i].key.UserKey)); !ok || err != nil {
					t.Errorf("a present key's probe: %v, %v", ok, err)
					return
				}
				if _, _, found, err := r.LookupCopy(spec.entries[i].key.UserKey, base.SeqNumMax); !found || err != nil {
					t.Errorf("lookup: %v, %v", found, err)
					return
				}
			}
		}()
	}
	for range 3 {
		if err := r.LoadFilter(); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	if !r.HasFilter() || negatives(r) != negatives(eager) || r.PinnedBytes() != eager.PinnedBytes() {
		t.Fatalf("after LoadFilter: HasFilter %v, %d negatives (eager reader: %d), %d pinned bytes (eager: %d)",
			r.HasFilter(), negatives(r), negatives(eager), r.PinnedBytes(), eager.PinnedBytes())
	}
	if negatives(r) < 2900 {
		t.Fatalf("the filter rules out %d of 3,000 absent keys", negatives(r))
	}
	if _, ok, err := r.Filter(); !ok || err != nil {
		t.Fatalf("Filter: %v, %v", ok, err)
	}

	// Filter loads a deferred filter itself.
	r = open(clean, ReaderOptions{DeferFilter: true})
	if f, ok, err := r.Filter(); !ok || err != nil || !r.HasFilter() || f.MayContainHash(filterblock.Hash(absent(0))) != eager.filter.MayContainHash(filterblock.Hash(absent(0))) {
		t.Fatalf("Filter on a deferred filter: %v, %v; HasFilter %v", ok, err, r.HasFilter())
	}

	// With the cache holding filters, DeferFilter changes nothing.
	r = open(clean, ReaderOptions{DeferFilter: true, CacheIndexAndFilterBlocks: true, Cache: cache.New(1<<20, cache.Options{}), FileNum: 1})
	if !r.HasFilter() || negatives(r) != negatives(eager) {
		t.Fatalf("with CacheIndexAndFilterBlocks: HasFilter %v, %d negatives", r.HasFilter(), negatives(r))
	}

	// A damaged filter block.
	damaged := bytes.Clone(clean)
	fb := eager.filterBH
	damaged[fb.Offset+fb.Length/2] ^= 0x5a
	if _, err := NewReader(bytes.NewReader(damaged), int64(len(damaged)), ReaderOptions{FileName: "t.sst"}); !errors.Is(err, ErrCorruption) {
		t.Fatalf("opened eagerly: %v", err)
	}
	r = open(damaged, ReaderOptions{DeferFilter: true})
	err := r.LoadFilter()
	if !errors.Is(err, ErrCorruption) || !strings.Contains(err.Error(), "t.sst") || !strings.Contains(err.Error(), fb.String()) {
		t.Fatalf("LoadFilter of a damaged block: %v; want ErrCorruption naming t.sst and block %s", err, fb)
	}
	if r.HasFilter() || negatives(r) != 0 {
		t.Fatalf("after a failed LoadFilter: HasFilter %v, %d negatives", r.HasFilter(), negatives(r))
	}
	if _, _, err := r.Filter(); !errors.Is(err, ErrCorruption) {
		t.Fatalf("Filter of a damaged block: %v", err)
	}
	for _, e := range spec.entries {
		if _, _, found, err := r.LookupCopy(e.key.UserKey, base.SeqNumMax); !found || err != nil {
			t.Fatalf("lookup without the damaged filter: %v, %v", found, err)
		}
	}
}
