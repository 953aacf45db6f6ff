package sstable

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/bloomkv/bloomkv/filterblock"
	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/rangedel"
)

// entry is one point entry of a test table.
type entry struct {
	key   base.InternalKey
	value []byte
}

// tableSpec is a random table's contents.
type tableSpec struct {
	entries []entry // sorted by internal key
	dels    []rangedel.Tombstone
}

// randomSpec returns a table of about n point entries over a small key space
// (so user keys repeat at several sequence numbers) and a few range deletions.
func randomSpec(r *rand.Rand, n int) tableSpec {
	var spec tableSpec
	seen := map[string]bool{}
	for len(spec.entries) < n {
		uk := []byte(fmt.Sprintf("key%05d", r.IntN(n)))
		if r.IntN(4) == 0 {
			uk = append(uk, bytes.Repeat([]byte{byte(r.IntN(256))}, r.IntN(40))...) // varied lengths and bytes
		}
		seq := base.SeqNum(r.IntN(1000) + 1)
		id := fmt.Sprintf("%s#%d", uk, seq)
		if seen[id] {
			continue
		}
		seen[id] = true
		kind := base.KindSet
		var value []byte
		if r.IntN(5) == 0 {
			kind = base.KindDelete
		} else {
			value = make([]byte, r.IntN(300))
			if r.IntN(20) == 0 {
				value = make([]byte, 3000+r.IntN(3000)) // larger than a block
			}
			for i := range value {
				value[i] = byte('a' + r.IntN(4)) // compressible
			}
		}
		spec.entries = append(spec.entries, entry{base.MakeInternalKey(uk, seq, kind), value})
	}
	slices.SortFunc(spec.entries, func(a, b entry) int { return base.CompareInternal(a.key, b.key) })
	for i := r.IntN(6); i > 0; i-- {
		a, b := fmt.Sprintf("key%05d", r.IntN(n)), fmt.Sprintf("key%05d", r.IntN(n))
		if a == b {
			continue
		}
		if a > b {
			a, b = b, a
		}
		spec.dels = append(spec.dels, tomb([]byte(a), []byte(b), base.SeqNum(r.IntN(1000)+1)))
	}
	return spec
}

func writeSpec(t testing.TB, spec tableSpec, opts WriterOptions) []byte {
	t.Helper()
	return writeSpecWith(t, spec, opts, nil)
}

// writeSpecWith is writeSpec with setup, when not nil, called on the Writer
// before the first entry (to set test-only options).
func writeSpecWith(t testing.TB, spec tableSpec, opts WriterOptions, setup func(*Writer)) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, opts)
	if err != nil {
		t.Fatal(err)
	}
	if setup != nil {
		setup(w)
	}
	for _, e := range spec.entries {
		if err := w.Add(e.key, e.value); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range spec.dels {
		if err := w.DeleteRange(d.Start, d.End, d.SeqNum); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if w.Size() != uint64(buf.Len()) {
		t.Fatalf("Size %d, wrote %d", w.Size(), buf.Len())
	}
	return buf.Bytes()
}

// lookup reads the newest entry for userKey written before seq as the store
// does: the filter first, whose "no" reads no block, then LookupCopy.
func lookup(rd *Reader, userKey []byte, seq base.SeqNum) (value []byte, kind base.Kind, found bool, err error) {
	if ok, err := rd.MayContainHash(filterblock.Hash(userKey)); err != nil || !ok {
		return nil, 0, false, err
	}
	value, tr, found, err := rd.LookupCopy(userKey, seq)
	return value, tr.Kind(), found, err
}

func openTable(t testing.TB, data []byte) *Reader {
	t.Helper()
	r, err := NewReader(bytes.NewReader(data), int64(len(data)), ReaderOptions{FileName: "test.sst"})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestRoundTripProperty writes random tables with random options and reads
// them back through lookup, through the iterator in both directions and through
// seeks, comparing everything with the input.
func TestRoundTripProperty(t *testing.T) {
	seeds := 60
	if testing.Short() {
		seeds = 15
	}
	for seed := range seeds {
		r := rand.New(rand.NewPCG(uint64(seed), 7))
		spec := randomSpec(r, 1+r.IntN(3000))
		opts := WriterOptions{
			BlockSize:            []int{64, 512, 4096, 32768}[r.IntN(4)],
			BlockRestartInterval: 1 + r.IntN(32),
			Compression:          compressionIf(r.IntN(2) == 0),
			BloomBitsPerKey:      []int{-1, 1, 10, 20}[r.IntN(4)],
			// Small thresholds make indexes two-level by size.
			IndexPartitionThreshold: []int{0, -1, 256, 2048}[r.IntN(4)],
		}
		if len(spec.dels) == 0 && r.IntN(3) == 0 {
			opts.TableFormat = TableFormatLevelDB
		}
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			data := writeSpec(t, spec, opts)
			checkTable(t, openTable(t, data), spec, r)
		})
	}
}

func checkTable(t *testing.T, rd *Reader, spec tableSpec, r *rand.Rand) {
	t.Helper()
	// Forward.
	it := rd.NewIter()
	i := 0
	for ok := it.First(); ok; ok = it.Next() {
		if i >= len(spec.entries) {
			t.Fatalf("iterator yields more than %d entries", len(spec.entries))
		}
		if base.CompareInternal(it.Key(), spec.entries[i].key) != 0 || it.Key().Trailer != spec.entries[i].key.Trailer || !bytes.Equal(it.Value(), spec.entries[i].value) {
			t.Fatalf("entry %d: got %s, want %s", i, it.Key(), spec.entries[i].key)
		}
		i++
	}
	if it.Error() != nil || i != len(spec.entries) {
		t.Fatalf("forward: %d of %d entries, %v", i, len(spec.entries), it.Error())
	}
	// Backward.
	i = len(spec.entries) - 1
	for ok := it.Last(); ok; ok = it.Prev() {
		if base.CompareInternal(it.Key(), spec.entries[i].key) != 0 || !bytes.Equal(it.Value(), spec.entries[i].value) {
			t.Fatalf("backward entry %d: got %s, want %s", i, it.Key(), spec.entries[i].key)
		}
		i--
	}
	if it.Error() != nil || i != -1 {
		t.Fatalf("backward stopped at %d, %v", i, it.Error())
	}
	// Seeks, to present and absent user keys, with a step after each.
	for range 200 {
		target := []byte(fmt.Sprintf("key%05d", r.IntN(4000)))
		if r.IntN(3) == 0 && len(spec.entries) > 0 {
			target = spec.entries[r.IntN(len(spec.entries))].key.UserKey
		}
		ge := sortSearch(spec.entries, func(e entry) bool { return bytes.Compare(e.key.UserKey, target) >= 0 })
		if ok := it.SeekGE(target); ok != (ge < len(spec.entries)) || (ok && base.CompareInternal(it.Key(), spec.entries[ge].key) != 0) {
			t.Fatalf("SeekGE(%q): ok=%v at %v, want index %d", target, ok, it.Key(), ge)
		}
		if ge < len(spec.entries) {
			if ok := it.Prev(); ok != (ge > 0) || (ok && base.CompareInternal(it.Key(), spec.entries[ge-1].key) != 0) {
				t.Fatalf("Prev after SeekGE(%q): ok=%v", target, ok)
			}
		}
		lt := ge - 1
		if ok := it.SeekLT(target); ok != (lt >= 0) || (ok && base.CompareInternal(it.Key(), spec.entries[lt].key) != 0) {
			t.Fatalf("SeekLT(%q): ok=%v at %v, want index %d", target, ok, it.Key(), lt)
		}
		if lt >= 0 {
			if ok := it.Next(); ok != (lt+1 < len(spec.entries)) || (ok && base.CompareInternal(it.Key(), spec.entries[lt+1].key) != 0) {
				t.Fatalf("Next after SeekLT(%q): ok=%v", target, ok)
			}
		}
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	// Lookup of every user key at several sequence numbers, and of absent keys.
	for range 300 {
		var uk []byte
		if r.IntN(4) == 0 || len(spec.entries) == 0 {
			uk = []byte(fmt.Sprintf("absent%05d", r.IntN(100000)))
		} else {
			uk = spec.entries[r.IntN(len(spec.entries))].key.UserKey
		}
		seq := base.SeqNum(r.IntN(1100))
		var want *entry
		for i := range spec.entries {
			e := &spec.entries[i]
			if bytes.Equal(e.key.UserKey, uk) && e.key.SeqNum() < seq {
				want = e
				break
			}
		}
		value, kind, found, err := lookup(rd, uk, seq)
		if err != nil {
			t.Fatal(err)
		}
		if found != (want != nil) || (found && (kind != want.key.Kind() || !bytes.Equal(value, want.value))) {
			t.Fatalf("lookup(%q, %d): found=%v kind=%v, want %v", uk, seq, found, kind, want)
		}
	}
	// Range deletions: the fragments cover exactly what the input covers.
	frags := rd.RangeDeletions()
	for i := 1; i < len(frags); i++ {
		a, b := frags[i-1], frags[i]
		if c := bytes.Compare(a.Start, b.Start); c > 0 || (c == 0 && (!bytes.Equal(a.End, b.End) || a.SeqNum <= b.SeqNum)) || (c < 0 && bytes.Compare(a.End, b.Start) > 0) {
			t.Fatalf("fragments %d and %d overlap or are out of order: %q-%q#%d, %q-%q#%d", i-1, i, a.Start, a.End, a.SeqNum, b.Start, b.End, b.SeqNum)
		}
	}
	for range 200 {
		k := []byte(fmt.Sprintf("key%05d", r.IntN(4000)))
		for _, seq := range []base.SeqNum{1, 500, 1001} {
			want := false
			for _, d := range spec.dels {
				if d.SeqNum < seq && bytes.Compare(d.Start, k) <= 0 && bytes.Compare(k, d.End) < 0 {
					want = true
				}
			}
			got := false
			for _, f := range frags {
				if f.SeqNum < seq && bytes.Compare(f.Start, k) <= 0 && bytes.Compare(k, f.End) < 0 {
					got = true
				}
			}
			if got != want {
				t.Fatalf("key %q at %d: fragments say deleted=%v, input %v", k, seq, got, want)
			}
		}
	}
	p := rd.Properties()
	if p.NumEntries != uint64(len(spec.entries)+len(frags)) || p.NumRangeDeletions != uint64(len(frags)) {
		t.Fatalf("properties: %d entries, %d range deletions; want %d, %d", p.NumEntries, p.NumRangeDeletions, len(spec.entries)+len(frags), len(frags))
	}
}

func sortSearch(es []entry, f func(entry) bool) int {
	i, _ := slices.BinarySearchFunc(es, true, func(e entry, _ bool) int {
		if f(e) {
			return 1
		}
		return -1
	})
	return i
}

func tomb(start, end []byte, seq base.SeqNum) rangedel.Tombstone {
	return rangedel.Tombstone{Start: start, End: end, SeqNum: seq}
}

// TestTablesWithoutPointKeys reads tables that hold no point keys, with and
// without range deletions and a filter: every read finds nothing, cleanly.
func TestTablesWithoutPointKeys(t *testing.T) {
	for _, withDels := range []bool{false, true} {
		for _, bpk := range []int{-1, 10} {
			var spec tableSpec
			if withDels {
				spec.dels = []rangedel.Tombstone{tomb([]byte("b"), []byte("m"), 5)}
			}
			rd := openTable(t, writeSpec(t, spec, WriterOptions{BloomBitsPerKey: bpk}))
			if _, _, found, err := lookup(rd, []byte("c"), base.SeqNumMax); err != nil || found {
				t.Fatalf("dels=%v bpk=%d: lookup = %v, %v", withDels, bpk, found, err)
			}
			it := rd.NewIter()
			for name, ok := range map[string]bool{"First": it.First(), "Last": it.Last(), "SeekGE": it.SeekGE([]byte("c")), "SeekLT": it.SeekLT([]byte("c"))} {
				if ok || it.Error() != nil {
					t.Fatalf("dels=%v bpk=%d: %s = %v, %v", withDels, bpk, name, ok, it.Error())
				}
			}
			if got := len(rd.RangeDeletions()); got != map[bool]int{false: 0, true: 1}[withDels] {
				t.Fatalf("%d range deletions", got)
			}
		}
	}
}
