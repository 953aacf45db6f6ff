package bloomkv

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/bloomkv/bloomkv/vfs"
)

// TestAbsentKeysSkipDataBlocks: in a store of 1M keys compacted to the last
// level, Gets of absent keys inside the tables' ranges consult the last
// level's filters and read a data block in at most 1.5 % of cases at 10
// bits/key, by the store's own metrics (filter passes and block-cache
// accesses: the index and filter are pinned, so every cache access is a
// data block).
func TestAbsentKeysSkipDataBlocks(t *testing.T) {
	n, probes := 1_000_000, 100_000
	if testing.Short() {
		n, probes = 100_000, 20_000
	}
	d := mustOpen(t, "/db", &Options{FS: vfs.NewMem(), Logger: quietLogger(), MemTableSize: 16 << 20})
	defer d.Close()
	fillKeys(t, d, n, 16)
	if err := d.Compact(nil, nil); err != nil {
		t.Fatal(err)
	}
	// A build of the differential-file filter holds the tables it reads
	// open until it ends.
	waitForCompactions(t, d)
	m := d.Metrics()
	for l := range 6 {
		if m.Levels[l].Files != 0 {
			t.Fatalf("after Compact, L%d holds %d tables:\n%s", l, m.Levels[l].Files, m)
		}
	}
	if m.Levels[6].Files == 0 {
		t.Fatalf("after Compact, the last level is empty:\n%s", m)
	}
	// The tables pin their filters (10 bits a key, at least) and indexes
	// outside the cache; a few index bytes a data block on top.
	if filterBytes := uint64(n) * 10 / 8; m.TableMemory < filterBytes || m.TableMemory > 2*filterBytes {
		t.Errorf("TableMemory %d bytes for %d keys' filters (%d bytes) and indexes", m.TableMemory, n, filterBytes)
	}
	r := rand.New(rand.NewPCG(7, 7))
	for range probes {
		k := levelKey(2*r.IntN(n-1) + 1) // odd: absent, inside the key range
		if _, err := d.Get(k); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Get(%s) = %v, want ErrNotFound", k, err)
		}
	}
	after := d.Metrics()
	probed := after.FilterProbes - m.FilterProbes
	passed := probed - (after.FilterNegatives - m.FilterNegatives)
	fp := after.FilterFalsePositives - m.FilterFalsePositives
	blockReads := (after.BlockCache.Hits + after.BlockCache.Misses) - (m.BlockCache.Hits + m.BlockCache.Misses)
	t.Logf("%d keys in %d last-level tables; %d absent Gets: %d filter probes, %d passed (%.3f%%), %d false positives, %d data-block reads (%.3f%%)",
		n, after.Levels[6].Files, probes, probed, passed, 100*float64(passed)/float64(probes), fp, blockReads, 100*float64(blockReads)/float64(probes))
	// One probe each, of the last level's filter, but for the rare key
	// that falls between two tables.
	if probed > uint64(probes) || probed < uint64(probes)*99/100 {
		t.Errorf("%d filter probes for %d Gets, want one each (the last level's filter)", probed, probes)
	}
	if passed != fp {
		t.Errorf("%d filter passes but %d false positives: every pass of an absent key is one", passed, fp)
	}
	if limit := uint64(probes) * 15 / 1000; passed > limit || blockReads > limit {
		t.Errorf("absent Gets read a data block %d times by the filter count and %d by the cache, over 1.5%% (%d)", passed, blockReads, limit)
	}
}

// TestGetReturnsTheCallersCopy: changing the value Get returned changes
// nothing in the store.
func TestGetReturnsTheCallersCopy(t *testing.T) {
	d := mustOpen(t, "/db", memOpts(vfs.NewMem()))
	defer d.Close()
	d.Set([]byte("d"), []byte("4"), NoSync)
	v, _ := d.Get([]byte("d"))
	v[0] = 'X'
	expect(t, d, "d", "4")
}
