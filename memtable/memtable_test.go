package memtable

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"
	"unsafe"

	"github.com/bloomkv/bloomkv/filterblock"
	"github.com/bloomkv/bloomkv/internal/base"
)

type kv struct {
	key   base.InternalKey
	value []byte
}

// newestBelow returns the first entry of model (sorted in internal-key
// order: a user key's newest version first) with user key uk and a
// sequence number below seq, or nil: what Get should find.
func newestBelow(model []kv, uk []byte, seq base.SeqNum) *kv {
	for i := range model {
		if bytes.Equal(model[i].key.UserKey, uk) && model[i].key.SeqNum() < seq {
			return &model[i]
		}
	}
	return nil
}

// TestAgainstModel adds random entries and compares Get, iteration both ways
// and seeks with a sorted slice, on a table without a key filter and on one
// whose filter is small for its keys (so that it answers "maybe" often).
func TestAgainstModel(t *testing.T) {
	for _, sized := range []bool{false, true} {
		t.Run(fmt.Sprintf("sized=%v", sized), func(t *testing.T) {
			m := New()
			if sized {
				m = NewSized(16 << 10)
			}
			testAgainstModel(t, m)
		})
	}
}

func testAgainstModel(t *testing.T, m *MemTable) {
	r := rand.New(rand.NewPCG(1, 1))
	var model []kv
	seen := map[string]bool{}
	for range 5000 {
		uk := []byte(fmt.Sprintf("k%04d", r.IntN(800)))
		seq := base.SeqNum(r.IntN(100000) + 1)
		if seen[fmt.Sprint(string(uk), seq)] {
			continue
		}
		seen[fmt.Sprint(string(uk), seq)] = true
		kind := base.KindSet
		if r.IntN(4) == 0 {
			kind = base.KindDelete
		}
		v := []byte(fmt.Sprintf("v%d", r.IntN(1e9)))
		if r.IntN(50) == 0 {
			v = bytes.Repeat([]byte("x"), chunkSize) // beyond the arena's limit
		}
		m.Add(base.MakeInternalKey(uk, seq, kind), v)
		model = append(model, kv{base.MakeInternalKey(uk, seq, kind), v})
	}
	slices.SortFunc(model, func(a, b kv) int { return base.CompareInternal(a.key, b.key) })
	if m.Len() != len(model) {
		t.Fatalf("Len %d, want %d", m.Len(), len(model))
	}
	var wantSize int64
	for _, e := range model {
		wantSize += int64(len(e.key.UserKey) + len(e.value) + entryOverhead)
	}
	if m.Size() != wantSize {
		t.Fatalf("Size %d, want %d", m.Size(), wantSize)
	}
	for range 3000 {
		uk := []byte(fmt.Sprintf("k%04d", r.IntN(820)))
		seq := base.SeqNum(r.IntN(110000))
		want := newestBelow(model, uk, seq)
		v, ik, found := m.Get(uk, seq)
		kind := ik.Kind()
		if found != (want != nil) || (found && (kind != want.key.Kind() || !bytes.Equal(v, want.value))) {
			t.Fatalf("Get(%s, %d) = %v %v", uk, seq, found, kind)
		}
	}
	it := m.NewIter()
	i := 0
	for ok := it.First(); ok; ok = it.Next() {
		if base.CompareInternal(it.Key(), model[i].key) != 0 || !bytes.Equal(it.Value(), model[i].value) {
			t.Fatalf("forward %d: %s, want %s", i, it.Key(), model[i].key)
		}
		i++
	}
	if i != len(model) {
		t.Fatalf("forward saw %d of %d", i, len(model))
	}
	i = len(model) - 1
	for ok := it.Last(); ok; ok = it.Prev() {
		if base.CompareInternal(it.Key(), model[i].key) != 0 {
			t.Fatalf("backward %d: %s, want %s", i, it.Key(), model[i].key)
		}
		i--
	}
	if i != -1 {
		t.Fatalf("backward stopped at %d", i)
	}
	for range 2000 {
		k := base.MakeInternalKey([]byte(fmt.Sprintf("k%04d", r.IntN(820))), base.SeqNum(r.IntN(110000)), base.KindSet)
		ge, _ := slices.BinarySearchFunc(model, k, func(e kv, k base.InternalKey) int { return base.CompareInternal(e.key, k) })
		if ok := it.SeekGE(k); ok != (ge < len(model)) || (ok && base.CompareInternal(it.Key(), model[ge].key) != 0) {
			t.Fatalf("SeekGE(%s)", k)
		}
		// Direction changes after a seek.
		if ge < len(model) && ge > 0 {
			if !it.Prev() || base.CompareInternal(it.Key(), model[ge-1].key) != 0 {
				t.Fatalf("Prev after SeekGE(%s)", k)
			}
			if !it.Next() || base.CompareInternal(it.Key(), model[ge].key) != 0 {
				t.Fatalf("Next after Prev after SeekGE(%s)", k)
			}
		}
		if ok := it.SeekLT(k); ok != (ge > 0) || (ok && base.CompareInternal(it.Key(), model[ge-1].key) != 0) {
			t.Fatalf("SeekLT(%s)", k)
		}
	}
}

func TestIteratorIsASnapshot(t *testing.T) {
	m := New()
	for i := range 100 {
		m.Add(base.MakeInternalKey([]byte(fmt.Sprintf("a%03d", i)), 1, base.KindSet), nil)
	}
	it := m.NewIter()
	for i := range 100 {
		m.Add(base.MakeInternalKey([]byte(fmt.Sprintf("a%03d", i)), 2, base.KindSet), []byte("new"))
		m.Add(base.MakeInternalKey([]byte(fmt.Sprintf("b%03d", i)), 2, base.KindSet), nil)
	}
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		if it.Key().SeqNum() != 1 {
			t.Fatalf("snapshot sees %s, added after it", it.Key())
		}
		n++
	}
	if n != 100 || m.Len() != 300 {
		t.Fatalf("snapshot %d entries, table %d", n, m.Len())
	}
}

type testBatch []kv

func (b testBatch) Each(fn func(base.InternalKey, []byte)) {
	for _, e := range b {
		fn(e.key, e.value)
	}
}

// TestConcurrentUse runs writers applying batches, readers and iterators
// together (under -race in CI). Readers check batches are all-or-nothing: a
// batch writes keys 0-9 at one sequence number.
func TestConcurrentUse(t *testing.T) {
	m := NewSized(1 << 20)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range 300 {
				seq := base.SeqNum(1 + b*2 + w)
				var batch testBatch
				for k := range 10 {
					batch = append(batch, kv{base.MakeInternalKey([]byte(fmt.Sprintf("key%d", k)), seq, base.KindSet), []byte(fmt.Sprint(seq))})
				}
				m.Apply(batch)
			}
		}()
	}
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				it := m.NewIter()
				perSeq := map[base.SeqNum]int{}
				for ok := it.First(); ok; ok = it.Next() {
					perSeq[it.Key().SeqNum()]++
				}
				for seq, n := range perSeq {
					if n != 10 {
						t.Errorf("snapshot holds %d of batch %d's 10 keys", n, seq)
						return
					}
				}
				if _, _, found := m.Get([]byte("key3"), base.SeqNumMax); !found && len(perSeq) > 0 {
					t.Error("key3 not found after an iterator saw a batch")
					return
				}
			}
		}()
	}
	for m.Len() < 6000 {
		runtime.Gosched()
	}
	close(stop)
	wg.Wait()
}

// TestPrefixOrder checks that comparing the inline prefixes orders keys as
// bytes.Compare does wherever the prefixes differ, including short keys and
// zero bytes.
func TestPrefixOrder(t *testing.T) {
	alphabet := []byte{0, 1, 'a', 0xff}
	var keys [][]byte
	var gen func(prefix []byte, depth int)
	gen = func(prefix []byte, depth int) {
		keys = append(keys, append([]byte(nil), prefix...))
		if depth == 0 {
			return
		}
		for _, c := range alphabet {
			gen(append(prefix, c), depth-1)
		}
	}
	gen(nil, 4)
	keys = append(keys, []byte("abcdefgh"), []byte("abcdefgh\x00"), []byte("abcdefg"), []byte("abcdefgi"))
	for _, a := range keys {
		for _, b := range keys {
			pa, pb := keyPrefix(a), keyPrefix(b)
			if pa != pb && (pa < pb) != (bytes.Compare(a, b) < 0) {
				t.Fatalf("prefixes of %x and %x order them wrongly", a, b)
			}
		}
	}
}

// TestKeyFilter: a table sized for its keys answers a Get of an absent key
// from its filter nearly always, and never misses a present one, deletions
// included; a range deletion is not a point entry and stays out.
func TestKeyFilter(t *testing.T) {
	m := NewSized(4 << 20)
	value := make([]byte, 100)
	key := func(i int) []byte { return []byte(fmt.Sprintf("%016d", i)) }
	n := 0
	for ; m.Size() < 4<<20; n++ {
		kind := base.KindSet
		if n%10 == 0 {
			kind = base.KindDelete
		}
		m.Add(base.MakeInternalKey(key(2*n), base.SeqNum(n+1), kind), value)
	}
	for i := range n {
		if !m.filter.mayContain(filterblock.Hash(key(2 * i))) {
			t.Fatalf("the filter lacks key %d", 2*i)
		}
		if _, ik, found := m.Get(key(2*i), base.SeqNumMax); !found || ik.SeqNum() != base.SeqNum(i+1) {
			t.Fatalf("Get(%d) = %v, %v", 2*i, ik, found)
		}
	}
	const probes = 100_000
	maybes := 0
	for i := range probes {
		if m.filter.mayContain(filterblock.Hash(key(2*i + 1))) {
			maybes++
		}
	}
	if rate := float64(maybes) / probes; rate > 0.01 {
		t.Fatalf("%d keys in %d bytes: false-positive rate %.4f", n, len(m.filter.words)*8, rate)
	}
	t.Logf("%d keys, %d filter bytes: false-positive rate %.4f", n, len(m.filter.words)*8, float64(maybes)/probes)
}

// TestChunkSource checks that a table made by NewSizedFrom takes its
// regular chunks from the source, and allocates its own when the source
// has none (or one of the wrong size), with every entry readable.
func TestChunkSource(t *testing.T) {
	for _, c := range []struct {
		name    string
		give    func(i int) []byte // the source's i-th answer
		wantOut int                // chunks the table must take from it, at least
	}{
		{"always", func(int) []byte { return make([]byte, ChunkSize) }, 12},
		{"every other", func(i int) []byte {
			if i%2 == 0 {
				return make([]byte, ChunkSize)
			}
			return nil
		}, 6},
		{"wrong size", func(int) []byte { return make([]byte, ChunkSize/2) }, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			given := map[*byte]bool{}
			calls := 0
			m := NewSizedFrom(4<<20, func() []byte {
				b := c.give(calls)
				calls++
				if len(b) == ChunkSize {
					given[unsafe.SliceData(b)] = true
				}
				return b
			})
			value := bytes.Repeat([]byte("v"), 200)
			n := 0
			for m.Size() < 3<<20 {
				m.Add(base.MakeInternalKey(fmt.Appendf(nil, "key%08d", n), base.SeqNum(n+1), base.KindSet), value)
				n++
			}
			used := 0
			for i, p := range m.chunks {
				if given[(*byte)(p)] {
					used++
				} else if c.name == "always" {
					t.Fatalf("chunk %d is not the source's", i)
				}
			}
			if used < c.wantOut || (c.wantOut == 0 && used > 0) {
				t.Fatalf("%d of %d chunks from the source, want at least %d", used, len(m.chunks), c.wantOut)
			}
			if c.name == "always" && calls != len(m.chunks) {
				t.Fatalf("the source was asked %d times for %d chunks: the first is not a regular one", calls, len(m.chunks))
			}
			for i := range n {
				v, _, ok := m.Get(fmt.Appendf(nil, "key%08d", i), base.SeqNumMax)
				if !ok || !bytes.Equal(v, value) {
					t.Fatalf("key %d: %q, %v", i, v, ok)
				}
			}
		})
	}
}

// An iterator used after Close reports no entry rather than panicking.
func TestIterAfterClose(t *testing.T) {
	m := New()
	m.Add(base.MakeInternalKey([]byte("a"), 1, base.KindSet), []byte("1"))
	it := m.NewIter()
	if !it.First() {
		t.Fatal("First on a table of one entry")
	}
	it.Close()
	k := base.MakeInternalKey([]byte("a"), base.SeqNumMax, base.KindMax)
	if it.First() || it.Last() || it.SeekGE(k) || it.SeekLT(k) || it.Next() || it.Prev() || it.Valid() {
		t.Fatal("a closed iterator reports an entry")
	}
}
