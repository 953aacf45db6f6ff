package bloomkv

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/bloomkv/bloomkv/vfs"
)

// iterTrace runs a fixed random mix of iterator moves (a scan each way, then
// seeks followed by nexts and prevs, some with bounds) on d and returns what
// each move saw.
func iterTrace(t *testing.T, d *DB, seed uint64, keys int) string {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 1))
	var b strings.Builder
	see := func(it *Iterator, ok bool) {
		if ok {
			fmt.Fprintf(&b, "%s=%x ", it.Key(), it.Value())
		} else {
			b.WriteString(". ")
		}
	}
	it, err := d.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	for ok := it.First(); ok; ok = it.Next() {
		see(it, ok)
	}
	for ok := it.Last(); ok; ok = it.Prev() {
		see(it, ok)
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	for range 300 {
		var o *IterOptions
		if r.IntN(3) == 0 {
			lo := r.IntN(keys)
			o = &IterOptions{LowerBound: levelKey(lo), UpperBound: levelKey(lo + 1 + r.IntN(keys/4))}
		}
		it, err := d.NewIter(o)
		if err != nil {
			t.Fatal(err)
		}
		k := levelKey(r.IntN(keys + 2))
		var ok bool
		if r.IntN(2) == 0 {
			ok = it.SeekGE(k)
		} else {
			ok = it.SeekLT(k)
		}
		see(it, ok)
		for range r.IntN(40) {
			if r.IntN(3) == 0 {
				ok = it.Prev()
			} else {
				ok = it.Next()
			}
			see(it, ok)
		}
		if err := it.Close(); err != nil {
			t.Fatal(err)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// TestIteratorFlatBlocksMatchRowBlocks checks that iterators reading data
// blocks that iterators cached (flat) see what iterators reading blocks
// that point reads cached (as stored) see, on random stores with
// overwrites, deletions and range deletions: one of several levels, whose
// blocks most hold keys from above, and one of a compacted sorted run and
// a few writes above it, through most of whose blocks the merge runs
// without comparing (startRun).
func TestIteratorFlatBlocksMatchRowBlocks(t *testing.T) {
	const keys = 4000
	write := func(d *DB, r *rand.Rand) error {
		k := levelKey(r.IntN(keys))
		switch c := r.IntN(100); {
		case c < 80:
			v := make([]byte, r.IntN(60))
			for j := range v {
				v[j] = byte(r.Uint32())
			}
			return d.Set(k, v, nil)
		case c < 97:
			return d.Delete(k, nil)
		default:
			lo := r.IntN(keys)
			return d.DeleteRange(levelKey(lo), levelKey(lo+1+r.IntN(20)), nil)
		}
	}
	for _, shape := range []struct {
		name   string
		writes int  // random writes
		base   bool // every key written and compacted first
	}{{"levels", 30_000, false}, {"one run", 12, true}} {
		t.Run(shape.name, func(t *testing.T) {
			o := &Options{FS: vfs.NewMem(), MemTableSize: 64 << 10, LBaseMaxBytes: 256 << 10, TargetFileSize: 64 << 10, Logger: quietLogger()}
			d := mustOpen(t, "db", o)
			r := rand.New(rand.NewPCG(5, 6))
			if shape.base {
				for i := range keys {
					if err := d.Set(levelKey(i), []byte(fmt.Sprint(i)), nil); err != nil {
						t.Fatal(err)
					}
				}
				if err := d.Compact(nil, levelKey(keys)); err != nil {
					t.Fatal(err)
				}
			}
			for i := range shape.writes {
				if err := write(d, r); err != nil {
					t.Fatal(err)
				}
				if i%7000 == 0 || i == shape.writes/2 {
					if err := d.Flush(); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := d.Close(); err != nil {
				t.Fatal(err)
			}
			flatMatchesRow(t, o, keys)
		})
	}
}

// flatMatchesRow reopens the store in "db" twice: iterators first, which
// cache its blocks flat, then point reads first, which cache them as
// stored; the same moves see the same keys each time.
func flatMatchesRow(t *testing.T, o *Options, keys int) {
	t.Helper()
	d := mustOpen(t, "db", o)
	flat := iterTrace(t, d, 9, keys)
	if again := iterTrace(t, d, 9, keys); again != flat {
		t.Fatal("a second pass over cached flat blocks differs from the first")
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d = mustOpen(t, "db", o)
	defer d.Close()
	for i := range keys {
		if _, err := d.Get(levelKey(i)); err != nil && !errors.Is(err, ErrNotFound) {
			t.Fatal(err)
		}
	}
	if row := iterTrace(t, d, 9, keys); row != flat {
		t.Fatalf("iterators over row blocks and over flat blocks differ:\nrow:  %.300s\nflat: %.300s", row, flat)
	}
}

// TestMergeRunsThroughBlocks scans a store of one compacted table and a
// memtable holding a few keys: some new, some newer versions of the table's
// keys, its first and last keys among them. The merge steps
// through blocks no memtable key falls in without comparing (startRun),
// and the scan, forward and after seeks, sees what a model of the writes
// holds.
func TestMergeRunsThroughBlocks(t *testing.T) {
	d := mustOpen(t, "db", &Options{FS: vfs.NewMem(), Logger: quietLogger()})
	defer d.Close()
	const keys = 20_000
	model := make(map[string]string)
	set := func(i int, v string) {
		if err := d.Set(levelKey(i), []byte(v), nil); err != nil {
			t.Fatal(err)
		}
		model[string(levelKey(i))] = v
	}
	for i := 0; i < keys; i += 2 {
		set(i, fmt.Sprintf("old%d", i))
	}
	if err := d.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := d.Compact(nil, levelKey(keys)); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 10 {
		i := r.IntN(keys)
		set(i, fmt.Sprintf("new%d", i)) // an odd key is new, an even one overwrites
	}
	set(0, "first")
	set(keys-2, "last")
	want := make([]string, 0, len(model))
	for k := range model {
		want = append(want, k)
	}
	slices.Sort(want)
	scan := func(from int) (runs int) {
		it, err := d.NewIter(nil)
		if err != nil {
			t.Fatal(err)
		}
		defer it.Close()
		ok := it.First()
		if from > 0 {
			ok = it.SeekGE([]byte(want[from]))
		}
		for i := from; i < len(want); i++ {
			if !ok || string(it.Key()) != want[i] || string(it.Value()) != model[want[i]] {
				t.Fatalf("entry %d: got %q=%q (%v), want %q=%q", i, it.Key(), it.Value(), ok, want[i], model[want[i]])
			}
			if it.m.h.run > 0 {
				runs++
			}
			ok = it.Next()
		}
		if ok || it.Error() != nil {
			t.Fatalf("past the last key: %v, %v", ok, it.Error())
		}
		return runs
	}
	scan(0) // caches the blocks flat
	// The table has about 90 blocks, 12 of which hold a memtable key.
	if runs := scan(0); runs < len(want)/2 {
		t.Fatalf("the merge ran through blocks at %d of %d keys", runs, len(want))
	}
	for range 20 {
		scan(r.IntN(len(want)))
	}
}

// TestRunsKeepVersionsAndBounds scans a table holding two versions of half
// its keys and deletions of others (a snapshot kept the older versions
// through the compaction), cached flat, with a memtable holding a few keys
// above it, and every key of one range, so that some falls between two
// blocks: the merge runs through the table's blocks between the
// memtable's keys. An iterator of the snapshot sees the older versions,
// one of now the newer ones and no deleted key, and bounded iterators stop
// at their bound wherever in a block it falls.
func TestRunsKeepVersionsAndBounds(t *testing.T) {
	// Blocks of a few keys, fewer than lie between two memtable keys, so
	// that a memtable key often sorts between two blocks.
	d := mustOpen(t, "db", &Options{FS: vfs.NewMem(), BlockSize: 256, Logger: quietLogger()})
	defer d.Close()
	const keys = 6000
	set := func(i int, v string) {
		if err := d.Set(levelKey(i), []byte(v), nil); err != nil {
			t.Fatal(err)
		}
	}
	for i := range keys {
		set(i, fmt.Sprint("old", i))
	}
	snap, err := d.NewSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	for i := 0; i < keys; i += 2 {
		set(i, fmt.Sprint("new", i))
	}
	deleted := func(i int) bool { return i%14 == 8 }
	for i := 8; i < keys; i += 14 { // even keys, whose one-version odd neighbour a run steps from
		if err := d.Delete(levelKey(i), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Compact(nil, levelKey(keys)); err != nil {
		t.Fatal(err)
	}
	inMem := func(i int) bool { return i%11 == 5 }
	for i := range keys {
		if inMem(i) {
			set(i, fmt.Sprint("mem", i))
		}
	}
	// want returns key i's value, "" when it is deleted.
	want := func(i int, old bool) string {
		switch {
		case old:
			return fmt.Sprint("old", i)
		case inMem(i):
			return fmt.Sprint("mem", i)
		case deleted(i):
			return ""
		case i%2 == 0:
			return fmt.Sprint("new", i)
		}
		return fmt.Sprint("old", i)
	}
	check := func(name string, newIter func(*IterOptions) (*Iterator, error), old bool, upper int) {
		t.Helper()
		var o *IterOptions
		if upper < keys {
			o = &IterOptions{UpperBound: levelKey(upper)}
		}
		it, err := newIter(o)
		if err != nil {
			t.Fatal(err)
		}
		i := 0
		for ok := it.First(); ok; ok = it.Next() {
			for i < upper && want(i, old) == "" {
				i++
			}
			if i >= upper || !bytes.Equal(it.Key(), levelKey(i)) || string(it.Value()) != want(i, old) {
				t.Fatalf("%s: at %d: %q = %q", name, i, it.Key(), it.Value())
			}
			i++
		}
		if err := it.Close(); err != nil {
			t.Fatal(err)
		}
		for i < upper && want(i, old) == "" {
			i++
		}
		if i != upper {
			t.Fatalf("%s: stopped before key %d, want %d", name, i, upper)
		}
	}
	for pass := range 2 { // the first pass caches the blocks flat
		for _, upper := range []int{keys, 4321, 17} {
			check(fmt.Sprint("now, pass ", pass, ", upper ", upper), d.NewIter, false, upper)
			check(fmt.Sprint("snapshot, pass ", pass, ", upper ", upper), snap.NewIter, true, upper)
		}
	}
}
