package bloomkv

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/bloomkv/bloomkv/internal/manifest"
	"github.com/bloomkv/bloomkv/vfs"
)

// pointReader is what DB and Snapshot share for point reads.
type pointReader interface {
	Get(key []byte) ([]byte, error)
	MultiGet(keys [][]byte) ([][]byte, []error)
}

// sameAnswer reports how one key's MultiGet answer differs from its Get
// answer, or "" when they agree (value and error: the same sentinel, or
// the same text).
func sameAnswer(v []byte, err error, wv []byte, werr error) string {
	same := errors.Is(err, werr) || (err != nil && werr != nil && err.Error() == werr.Error())
	if (err == nil) != (werr == nil) || !same && werr != nil || !bytes.Equal(v, wv) || (err == nil) != (v != nil) {
		return fmt.Sprintf("MultiGet %q, %v; Get %q, %v", v, err, wv, werr)
	}
	return ""
}

// checkMultiGet reads keys by MultiGet and one by one by Get from r, which
// nothing writes to meanwhile, and fails t where they differ.
func checkMultiGet(t testing.TB, what string, r pointReader, keys [][]byte) {
	t.Helper()
	vals, errs := r.MultiGet(keys)
	if len(vals) != len(keys) || len(errs) != len(keys) || vals == nil || errs == nil {
		t.Fatalf("%s: MultiGet of %d keys returned %d values and %d errors (nil: %v, %v)", what, len(keys), len(vals), len(errs), vals == nil, errs == nil)
	}
	for i, k := range keys {
		wv, werr := r.Get(k)
		if d := sameAnswer(vals[i], errs[i], wv, werr); d != "" {
			t.Fatalf("%s: key %d of %d, %q: %s", what, i, len(keys), k, d)
		}
	}
}

// multiGetStore returns a store of n keys compacted into the last level,
// then changed in level-0 tables (sets, deletions, a range deletion), an
// ingested table and the memtable (sets, deletions, a range deletion), and
// the differential filter built. level 0 keeps its tables.
func multiGetStore(t *testing.T, n int) *DB {
	fs := vfs.NewMem()
	o := memOpts(fs)
	o.L0CompactionThreshold, o.L0StopWritesThreshold = 100, 200
	d := baseStore(t, o, n)
	closeAtCleanup(t, d)
	r := rand.New(rand.NewPCG(4, 4))
	change := func(round int) {
		for range n / 50 {
			i := r.IntN(n + n/10) // some beyond the base's keys
			var err error
			if r.IntN(5) == 0 {
				err = d.Delete(diffKey(i), NoSync)
			} else {
				err = d.Set(diffKey(i), fmt.Appendf(nil, "round-%d-%d", round, i), NoSync)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	for round := range 3 {
		change(round)
		if round == 1 {
			if err := d.DeleteRange(diffKey(n/4), diffKey(n/4+n/20), NoSync); err != nil {
				t.Fatal(err)
			}
		}
		if err := d.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	var entries []ingestEntry
	for i := n / 2; i < n/2+n/20; i += 3 {
		entries = append(entries, ingestEntry{key: string(diffKey(i)), value: fmt.Sprintf("ingested-%d", i), del: i%2 == 0})
	}
	name := filepath.Join("/ingest", "t.sst")
	writeIngestTable(t, fs, name, entries, [2]string{string(diffKey(n/2 + 1)), string(diffKey(n/2 + 40))})
	if err := d.Ingest([]string{name}); err != nil {
		t.Fatal(err)
	}
	change(3)
	if err := d.DeleteRange(diffKey(3*n/4), diffKey(3*n/4+n/20), NoSync); err != nil {
		t.Fatal(err)
	}
	change(4)
	m := d.Metrics()
	if m.Levels[0].Files < 3 || m.Levels[6].Files < 1 || !m.DiffFilter.On {
		t.Fatalf("want several level-0 tables above the last level, the filter on:\n%s", m)
	}
	return d
}

// allAndAbsent returns every key i < n+n/5 and keys between them.
func allAndAbsent(n int) [][]byte {
	var keys [][]byte
	for i := range n + n/5 {
		keys = append(keys, diffKey(i), append(diffKey(i), '.'))
	}
	return keys
}

// TestMultiGetMatchesGet: on a store whose keys lie in the memtable, level
// 0, an ingested table and the last level, with deletions and range
// deletions in each, MultiGet answers as Get does key by key, for batches
// of 0, 1 and 10,000 keys, sorted, shuffled and with duplicates, and counts
// the filters' answers as the Gets do.
func TestMultiGetMatchesGet(t *testing.T) {
	const n = 5000
	d := multiGetStore(t, n)
	keys := allAndAbsent(n)
	r := rand.New(rand.NewPCG(8, 8))

	vals, errs := d.MultiGet(nil)
	if vals == nil || errs == nil || len(vals) != 0 || len(errs) != 0 {
		t.Fatalf("MultiGet(nil) = %v, %v; want empty slices", vals, errs)
	}
	checkMultiGet(t, "one key", d, keys[:1])
	checkMultiGet(t, "one absent key", d, keys[1:2])
	checkMultiGet(t, "sorted", d, keys[:10_000])
	shuffled := append([][]byte(nil), keys...)
	r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	checkMultiGet(t, "shuffled", d, shuffled[:10_000])
	dups := make([][]byte, 0, 10_000)
	for range 10_000 {
		dups = append(dups, keys[r.IntN(200)*r.IntN(len(keys)/200)])
	}
	checkMultiGet(t, "duplicates", d, dups)
	for range 50 {
		batch := shuffled[r.IntN(len(shuffled)-100):][:r.IntN(100)]
		checkMultiGet(t, "small batch", d, batch)
	}

	// The same keys counted alike by either read.
	batch := shuffled[:10_000]
	before := d.Metrics()
	for _, k := range batch {
		d.Get(k)
	}
	mid := d.Metrics()
	d.MultiGet(batch)
	after := d.Metrics()
	type counts struct{ probes, negatives, fps, skips, maybes, falseMaybes uint64 }
	count := func(a, b *Metrics) counts {
		return counts{b.FilterProbes - a.FilterProbes, b.FilterNegatives - a.FilterNegatives, b.FilterFalsePositives - a.FilterFalsePositives,
			b.DiffFilter.Skips - a.DiffFilter.Skips, b.DiffFilter.Maybes - a.DiffFilter.Maybes, b.DiffFilter.FalseMaybes - a.DiffFilter.FalseMaybes}
	}
	gets, multi := count(before, mid), count(mid, after)
	if gets != multi || gets.skips == 0 || gets.maybes == 0 || gets.negatives == 0 {
		t.Fatalf("filter answers counted by Gets %+v, by MultiGet %+v; want equal, with skips, maybes and negatives", gets, multi)
	}
}

// TestMultiGetValuesAreCopies: the values are the caller's, each its own,
// duplicates too.
func TestMultiGetValuesAreCopies(t *testing.T) {
	d := multiGetStore(t, 2000)
	keys := [][]byte{diffKey(7), diffKey(7), diffKey(1999)}
	vals, errs := d.MultiGet(keys)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("key %q: %v", keys[i], err)
		}
	}
	want := string(vals[0])
	vals[0][0] ^= 0xff
	vals, _ = d.MultiGet(keys)
	if string(vals[0]) != want || string(vals[1]) != want {
		t.Fatalf("after changing a returned value: %q, %q; want %q", vals[0], vals[1], want)
	}
}

// TestMultiGetSnapshot: a snapshot's MultiGet sees the values of its time,
// as its Get does, after overwrites, deletions, a flush and a compaction.
func TestMultiGetSnapshot(t *testing.T) {
	const n = 3000
	d := multiGetStore(t, n)
	keys := allAndAbsent(n)
	snap, err := d.NewSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	oldVals, oldErrs := snap.MultiGet(keys)
	for i := 0; i < n; i += 2 {
		if err := d.Set(diffKey(i), []byte("new"), NoSync); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.DeleteRange(diffKey(0), diffKey(n/3), NoSync); err != nil {
		t.Fatal(err)
	}
	checkMultiGet(t, "snapshot, memtable changed", snap, keys)
	if err := d.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := d.Compact(nil, nil); err != nil {
		t.Fatal(err)
	}
	checkMultiGet(t, "snapshot, compacted", snap, keys)
	checkMultiGet(t, "DB, compacted", d, keys)
	vals, errs := snap.MultiGet(keys)
	for i := range keys {
		if d := sameAnswer(vals[i], errs[i], oldVals[i], oldErrs[i]); d != "" {
			t.Fatalf("snapshot, key %q: now %s before", keys[i], d)
		}
	}
	if v, err := d.MultiGet([][]byte{diffKey(n/3 + 1 - (n/3+1)%2)}); err[0] != nil || string(v[0]) != "new" {
		t.Fatalf("DB sees %q, %v; want the new value", v[0], err[0])
	}
	if err := snap.Close(); err != nil {
		t.Fatal(err)
	}
	if _, errs := snap.MultiGet(keys[:3]); !errors.Is(errs[0], ErrClosed) || !errors.Is(errs[2], ErrClosed) {
		t.Fatalf("closed snapshot: %v", errs)
	}
}

// TestMultiGetClosedAndInvalid: after Close every key's error is ErrClosed;
// an invalid key fails alone.
func TestMultiGetClosedAndInvalid(t *testing.T) {
	d := mustOpen(t, "/db", memOpts(vfs.NewMem()))
	if err := d.Set([]byte("a"), []byte("1"), NoSync); err != nil {
		t.Fatal(err)
	}
	big := make([]byte, MaxKeySize+1)
	vals, errs := d.MultiGet([][]byte{[]byte("a"), big, []byte("b"), {}})
	if string(vals[0]) != "1" || errs[0] != nil || !errors.Is(errs[1], ErrTooLarge) || vals[1] != nil ||
		!errors.Is(errs[2], ErrNotFound) || !errors.Is(errs[3], ErrNotFound) {
		t.Fatalf("MultiGet(a, too large, b, empty) = %q, %v", vals, errs)
	}
	checkMultiGet(t, "invalid key", d, [][]byte{big, []byte("a")})
	snap, err := d.NewSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	for _, r := range []pointReader{d, snap} {
		vals, errs = r.MultiGet([][]byte{[]byte("a"), big})
		if vals[0] != nil || !errors.Is(errs[0], ErrClosed) || !errors.Is(errs[1], ErrClosed) {
			t.Fatalf("after Close: %q, %v", vals, errs)
		}
		if vals, errs := r.MultiGet(nil); len(vals) != 0 || len(errs) != 0 {
			t.Fatalf("after Close, no keys: %v, %v", vals, errs)
		}
	}
}

// TestMultiGetRandomized compares MultiGet with Get on random stores of
// random writes (sets, deletions, range deletions, flushes, compactions)
// at random moments, with random batches.
func TestMultiGetRandomized(t *testing.T) {
	for seed := range uint64(trials(3, 6, 20)) {
		r := rand.New(rand.NewPCG(seed, 99))
		o := memOpts(vfs.NewMem())
		o.L0CompactionThreshold = 2 + r.IntN(4)
		d := mustOpen(t, "/db", o)
		const space = 3000
		key := func() []byte { return fmt.Appendf(nil, "k%05d", r.IntN(space)) }
		for step := range 4000 {
			var err error
			switch p := r.IntN(1000); {
			case p < 700:
				err = d.Set(key(), fmt.Appendf(nil, "v%d-%d", seed, step), NoSync)
			case p < 900:
				err = d.Delete(key(), NoSync)
			case p < 910:
				a, b := key(), key()
				if bytes.Compare(a, b) > 0 {
					a, b = b, a
				}
				err = d.DeleteRange(a, b, NoSync)
			case p < 925:
				err = d.Flush()
			case p < 927:
				err = d.Compact(nil, nil)
			case p < 960:
				batch := make([][]byte, r.IntN(300))
				for i := range batch {
					batch[i] = key()
				}
				checkMultiGet(t, fmt.Sprintf("seed %d step %d", seed, step), d, batch)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestMultiGetConcurrent: MultiGets under concurrent writes, flushes and
// compactions see one consistent view: a writer sets every key of a group
// to one value in one batch, so a batch read of the group finds them all
// equal. Run with -race.
func TestMultiGetConcurrent(t *testing.T) {
	o := memOpts(vfs.NewMem())
	o.L0CompactionThreshold = 2
	d := mustOpen(t, "/db", o)
	closeAtCleanup(t, d)
	const groups, size = 50, 20
	groupKey := func(g, i int) []byte { return fmt.Appendf(nil, "g%03d-%03d", g, i) }
	errc := make(chan error, 4)
	stop := make(chan struct{})
	var bg, readers sync.WaitGroup
	bg.Add(2)
	go func() { // the writer, flushing now and then
		defer bg.Done()
		for round := 0; ; round++ {
			select {
			case <-stop:
				return
			default:
			}
			b := d.NewBatch()
			g := round % groups
			for i := range size {
				b.Set(groupKey(g, i), fmt.Appendf(make([]byte, 0, 200), "%0200d", round))
			}
			err := d.Apply(b, NoSync)
			if err == nil && round%300 == 299 {
				err = d.Flush()
			}
			if err != nil {
				errc <- err
				return
			}
		}
	}()
	go func() { // whole-store compactions
		defer bg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := d.Compact(nil, nil); err != nil {
				errc <- err
				return
			}
		}
	}()
	reads := trials(300, 1000, 5000)
	for reader := range 2 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			r := rand.New(rand.NewPCG(uint64(reader), 1))
			keys := make([][]byte, 0, size+1)
			for range reads {
				g := r.IntN(groups)
				keys = keys[:0]
				for i := range size {
					keys = append(keys, groupKey(g, size-1-i)) // unsorted
				}
				keys = append(keys, groupKey(g, 0)) // a duplicate
				vals, errs := d.MultiGet(keys)
				for i := range keys {
					if errs[i] != nil && !errors.Is(errs[i], ErrNotFound) {
						errc <- errs[i]
						return
					}
					if !bytes.Equal(vals[i], vals[0]) || (errs[i] == nil) != (errs[0] == nil) {
						errc <- fmt.Errorf("group %d: key %q holds %.12q (%v), key %q %.12q (%v): not one view",
							g, keys[i], vals[i], errs[i], keys[0], vals[0], errs[0])
						return
					}
				}
			}
		}()
	}
	readers.Wait()
	close(stop)
	bg.Wait()
	select {
	case err := <-errc:
		t.Fatal(err)
	default:
	}
}

// TestSortWindows: sortWindows sorts windows of every length it takes a
// path for (insertion, buckets, pdqsort), random, equal in all but the
// tie-break bits, or crowded into one bucket by an outlier, and commonPrefix measures prefixes across word bounds.
func TestSortWindows(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	var tmp []uint64
	for _, n := range []int{0, 1, 2, 5, maxInsertionSort, maxInsertionSort + 1, 100, maxBucketSort, maxBucketSort + 1, 3000} {
		for _, shape := range []string{"random", "narrow", "equal", "outlier"} {
			ws := make([]uint64, n)
			for i := range ws {
				switch shape {
				case "random":
					ws[i] = r.Uint64()
				case "narrow":
					ws[i] = uint64(r.IntN(10)) << 20
				case "outlier": // one high bit sets the buckets: all in one
					ws[i] = uint64(r.IntN(1<<20)) << 12
					if i == 0 {
						ws[i] |= 1 << 63
					}
				}
				ws[i] = ws[i]&^0xfff | uint64(i)
			}
			want := slices.Sorted(slices.Values(ws))
			var got []uint64
			got, tmp = sortWindows(ws, tmp, 0xfff)
			if !slices.Equal(got, want) {
				t.Fatalf("%d %s windows: not sorted", n, shape)
			}
		}
	}
	for _, c := range []struct {
		a, b string
		want int
	}{{"", "", 0}, {"a", "", 0}, {"abc", "abd", 2}, {"key0000000123", "key0000000124", 12},
		{"key00000", "key00000", 8}, {"key000001", "key00000", 8}, {"key00000xyz", "key00001xyz", 7}} {
		if got := commonPrefix([]byte(c.a), []byte(c.b)); got != c.want {
			t.Errorf("commonPrefix(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}

// TestMultiGetTableErrors: a table of the last level that cannot be opened
// fails the batch's keys that fall in it, each with the error its Get gives,
// and no other key; once the table opens, every key is answered.
func TestMultiGetTableErrors(t *testing.T) {
	const n = 5000
	efs := vfs.NewErrorFS(vfs.NewMem())
	o := memOpts(efs)
	// Moved whole or rewritten, the tables reach the last level as 4 or more.
	o.L0CompactionThreshold, o.L0StopWritesThreshold, o.TargetFileSize = 100, 200, 8<<10
	d := mustOpen(t, "/db", o)
	const chunks = 4 // a flush each
	for c := range chunks {
		b := d.NewBatch()
		for i := c * n / chunks; i < (c+1)*n/chunks; i++ {
			b.Set(diffKey(i), fmt.Appendf(nil, "base-%d", i))
		}
		if err := d.Apply(b, NoSync); err != nil {
			t.Fatal(err)
		}
		if err := d.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Compact(nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d = mustOpen(t, "/db", o) // no table open yet
	closeAtCleanup(t, d)
	s := d.acquire()
	var tables []*manifest.FileMetadata
	for f := range s.version.Level(manifest.NumLevels - 1) {
		tables = append(tables, f)
	}
	d.release(s)
	if len(tables) < 3 {
		t.Fatalf("%d tables in the last level, want 3 or more", len(tables))
	}
	bad := tables[len(tables)/2]
	badName := tableName(bad.FileNum)
	efs.SetInjector(func(op vfs.Op, name string) error {
		if op == vfs.OpOpen && filepath.Base(name) == badName {
			return fmt.Errorf("open %s: %w", name, vfs.ErrInjected)
		}
		return nil
	})
	keys := make([][]byte, 0, 2*n)
	for i := range n {
		keys = append(keys, diffKey(i), append(diffKey(i), 'x')) // present, absent
	}
	checkMultiGet(t, "one table failing to open", d, keys)
	_, errs := d.MultiGet(keys)
	failed := 0
	for i, k := range keys {
		inside := bytes.Compare(bad.Smallest.UserKey, k) <= 0 && bytes.Compare(k, bad.Largest.UserKey) <= 0
		if inside != (errs[i] != nil && !errors.Is(errs[i], ErrNotFound)) {
			t.Fatalf("key %q (in %s: %v): error %v", k, badName, inside, errs[i])
		}
		if inside {
			if !errors.Is(errs[i], vfs.ErrInjected) {
				t.Fatalf("key %q: error %v does not wrap the injected one", k, errs[i])
			}
			failed++
		}
	}
	if failed == 0 || failed == len(keys) {
		t.Fatalf("%d of %d keys failed", failed, len(keys))
	}
	efs.SetInjector(nil)
	checkMultiGet(t, "the table opening again", d, keys)
	vals, errs := d.MultiGet(keys)
	for i := 0; i < len(keys); i += 2 {
		if errs[i] != nil || errs[i+1] != ErrNotFound || vals[i] == nil {
			t.Fatalf("key %q: %q, %v; absent key after it: %v", keys[i], vals[i], errs[i], errs[i+1])
		}
	}
}
