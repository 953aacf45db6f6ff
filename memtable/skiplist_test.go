package memtable

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/bloomkv/bloomkv/internal/base"
)

// check compares every way of reading m with model (any order).
func check(t *testing.T, m *MemTable, model []kv) {
	t.Helper()
	model = slices.Clone(model)
	slices.SortFunc(model, func(a, b kv) int { return base.CompareInternal(a.key, b.key) })
	if m.Len() != len(model) {
		t.Fatalf("Len %d, want %d", m.Len(), len(model))
	}
	it := m.NewIter()
	defer it.Close()
	i := 0
	for ok := it.First(); ok; ok = it.Next() {
		if i >= len(model) || base.CompareInternal(it.Key(), model[i].key) != 0 || !bytes.Equal(it.Value(), model[i].value) {
			t.Fatalf("forward %d: %s", i, it.Key())
		}
		i++
	}
	if i != len(model) {
		t.Fatalf("forward saw %d of %d", i, len(model))
	}
	i = len(model) - 1
	for ok := it.Last(); ok; ok = it.Prev() {
		if i < 0 || base.CompareInternal(it.Key(), model[i].key) != 0 || !bytes.Equal(it.Value(), model[i].value) {
			t.Fatalf("backward %d: %s", i, it.Key())
		}
		i--
	}
	if i != -1 {
		t.Fatalf("backward stopped at %d", i)
	}
	for _, e := range model {
		v, k, ok := m.Get(e.key.UserKey, e.key.SeqNum()+1)
		if !ok || k.Trailer != e.key.Trailer || !bytes.Equal(k.UserKey, e.key.UserKey) || !bytes.Equal(v, e.value) {
			t.Fatalf("Get(%q, %d) = %v %s", e.key.UserKey, e.key.SeqNum()+1, ok, k)
		}
	}
}

// TestEqualUserKeys writes many versions of few user keys in random order:
// versions of a key must come newest first, and Get must pick the newest
// below its sequence number.
func TestEqualUserKeys(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	m := New()
	var model []kv
	seqs := r.Perm(3000)
	for _, s := range seqs {
		uk := []byte{'k', byte(s % 3)}
		if s%7 == 0 {
			uk = uk[:1] // a key that is a prefix of the others
		}
		kind := base.KindSet
		if s%5 == 0 {
			kind = base.KindDelete
		}
		e := kv{base.MakeInternalKey(uk, base.SeqNum(s+1), kind), []byte(fmt.Sprint(s))}
		m.Add(e.key, e.value)
		model = append(model, e)
	}
	check(t, m, model)
	slices.SortFunc(model, func(a, b kv) int { return base.CompareInternal(a.key, b.key) })
	for range 2000 {
		uk := []byte{'k', byte(r.IntN(4))}[:1+r.IntN(2)]
		seq := base.SeqNum(r.IntN(3100))
		want := newestBelow(model, uk, seq)
		v, k, ok := m.Get(uk, seq)
		if ok != (want != nil) || ok && (k.Trailer != want.key.Trailer || !bytes.Equal(v, want.value)) {
			t.Fatalf("Get(%q, %d) = %v %s", uk, seq, ok, k)
		}
	}
}

// TestRandomWalk moves an iterator at random (seeks, Next, Prev, First,
// Last) and compares each position with a sorted slice.
func TestRandomWalk(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	m := New()
	var model []kv
	for i := range 2000 {
		e := kv{base.MakeInternalKey([]byte(fmt.Sprintf("%05d", r.IntN(1000)*2)), base.SeqNum(i+1), base.KindSet), []byte(fmt.Sprint(i))}
		m.Add(e.key, e.value)
		model = append(model, e)
	}
	slices.SortFunc(model, func(a, b kv) int { return base.CompareInternal(a.key, b.key) })
	it := m.NewIter()
	pos := -1 // model index, or -1 when not valid
	for range 20000 {
		switch r.IntN(6) {
		case 0:
			k := base.MakeInternalKey([]byte(fmt.Sprintf("%05d", r.IntN(2001))), base.SeqNum(r.IntN(2100)), base.KindSet)
			pos, _ = slices.BinarySearchFunc(model, k, func(e kv, k base.InternalKey) int { return base.CompareInternal(e.key, k) })
			if pos == len(model) {
				pos = -1
			}
			it.SeekGE(k)
		case 1:
			k := base.MakeInternalKey([]byte(fmt.Sprintf("%05d", r.IntN(2001))), base.SeqNum(r.IntN(2100)), base.KindSet)
			pos, _ = slices.BinarySearchFunc(model, k, func(e kv, k base.InternalKey) int { return base.CompareInternal(e.key, k) })
			pos--
			it.SeekLT(k)
		case 2:
			if pos >= 0 {
				if pos++; pos == len(model) {
					pos = -1
				}
			}
			it.Next()
		case 3:
			if pos >= 0 {
				pos--
			}
			it.Prev()
		case 4:
			pos = 0
			it.First()
		case 5:
			pos = len(model) - 1
			it.Last()
		}
		if it.Valid() != (pos >= 0) {
			t.Fatalf("valid %v, want %v", it.Valid(), pos >= 0)
		}
		if pos >= 0 && (base.CompareInternal(it.Key(), model[pos].key) != 0 || !bytes.Equal(it.Value(), model[pos].value)) {
			t.Fatalf("at %s, want %s", it.Key(), model[pos].key)
		}
	}
}

// TestLargeEntries mixes small entries with keys and values too big for a
// regular chunk, and an entry of an empty key and value.
func TestLargeEntries(t *testing.T) {
	r := rand.New(rand.NewPCG(6, 6))
	m := New()
	var model []kv
	sizes := []int{0, 1, 100, bigRecord - 200, bigRecord, bigRecord + 1, chunkSize, chunkSize + 1, 3 << 20}
	for i := range 300 {
		ks, vs := 16, 100
		if i%10 == 0 {
			vs = sizes[r.IntN(len(sizes))]
		}
		if i%23 == 0 {
			ks = sizes[r.IntN(len(sizes))]
		}
		k := make([]byte, ks)
		for j := range k {
			k[j] = byte(r.IntN(4))
		}
		v := make([]byte, vs)
		for j := range v {
			v[j] = byte(r.Uint32())
		}
		e := kv{base.MakeInternalKey(k, base.SeqNum(i+1), base.KindSet), v}
		m.Add(e.key, e.value)
		model = append(model, e)
	}
	check(t, m, model)
}

// TestGrowth fills many chunks and checks the table whole, and that Size
// follows the arena's use.
func TestGrowth(t *testing.T) {
	m := New()
	var model []kv
	r := rand.New(rand.NewPCG(8, 8))
	value := bytes.Repeat([]byte("v"), 300)
	for i := range 20_000 {
		k := binary.BigEndian.AppendUint64(nil, r.Uint64())
		e := kv{base.MakeInternalKey(k, base.SeqNum(i+1), base.KindSet), value[:r.IntN(len(value))]}
		m.Add(e.key, e.value)
		model = append(model, e)
	}
	if n := len(*m.dir.Load()); n < 10 {
		t.Fatalf("%d chunks: the test does not reach past the first few", n)
	}
	check(t, m, model)
}

// TestSizeMatchesArena checks entryOverhead against the arena bytes that
// entries of the benchmark's shape take.
func TestSizeMatchesArena(t *testing.T) {
	m := New()
	start := m.used
	r := rand.New(rand.NewPCG(9, 9))
	for i := range 20_000 {
		k := binary.BigEndian.AppendUint64(nil, r.Uint64())
		k = binary.BigEndian.AppendUint64(k, uint64(i))
		m.Add(base.MakeInternalKey(k, base.SeqNum(i+1), base.KindSet), benchValue)
	}
	used := m.used - start
	if d := float64(m.Size()-used) / float64(used); d < -0.02 || d > 0.02 {
		t.Fatalf("Size %d, arena holds %d bytes of entries (%+.1f%%)", m.Size(), used, 100*d)
	}
}

// TestReplace adds an internal key twice: the second value replaces the
// first for new readers; an older iterator keeps the first.
func TestReplace(t *testing.T) {
	m := New()
	k := base.MakeInternalKey([]byte("key"), 5, base.KindSet)
	m.Add(k, []byte("one"))
	m.Add(base.MakeInternalKey([]byte("other"), 6, base.KindSet), nil)
	old := m.NewIter()
	m.Add(k, []byte("two!"))
	if m.Len() != 2 || m.Size() != int64(len("key")+len("two!")+len("other")+2*entryOverhead) {
		t.Fatalf("Len %d Size %d", m.Len(), m.Size())
	}
	if v, _, _ := m.Get([]byte("key"), 6); string(v) != "two!" {
		t.Fatalf("Get: %q", v)
	}
	if !old.First() || string(old.Value()) != "one" {
		t.Fatalf("old iterator: %q", old.Value())
	}
	it := m.NewIter()
	if !it.First() || string(it.Value()) != "two!" {
		t.Fatalf("new iterator: %q", it.Value())
	}
	// The replaced entry is not listed twice: "other" follows, then nothing.
	if !it.Next() {
		t.Fatal("new iterator: no second entry")
	}
	if string(it.Key().UserKey) != "other" {
		t.Fatalf("new iterator, second entry: %q", it.Key().UserKey)
	}
	if it.Next() {
		t.Fatalf("new iterator, third entry: %q", it.Key().UserKey)
	}
	m.Add(k, nil)
	if v, _, ok := m.Get([]byte("key"), 6); !ok || v != nil {
		t.Fatalf("Get after replacing with nothing: %q", v)
	}
}

// TestReadersDuringInserts runs readers against a writer under -race: every
// reader checks order, that Get finds every entry published before it
// started, and that an iterator sees exactly the batches published before
// it was made.
func TestReadersDuringInserts(t *testing.T) {
	const batches, perBatch = 3000, 5
	m := New()
	var published atomic.Int64 // batches applied
	keyOf := func(b, i int) []byte {
		return binary.BigEndian.AppendUint32([]byte{byte(i * 37)}, uint32(b*2654435761))
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 9))
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				done := int(published.Load())
				if done > 0 {
					b := r.IntN(done)
					i := r.IntN(perBatch)
					v, _, ok := m.Get(keyOf(b, i), base.SeqNumMax)
					if !ok || string(v) != fmt.Sprint(b) {
						t.Errorf("Get of batch %d entry %d: %v %q", b, i, ok, v)
						return
					}
				}
				it := m.NewIter()
				after := int(published.Load())
				var prev base.InternalKey
				seen := 0
				walk := it.First
				step := it.Next
				if n%2 == 1 {
					walk, step = it.Last, it.Prev
				}
				for ok := walk(); ok; ok = step() {
					k := it.Key()
					if seen > 0 {
						c := base.CompareInternal(prev, k)
						if n%2 == 1 {
							c = -c
						}
						if c >= 0 {
							t.Errorf("order: %s then %s", prev, k)
							return
						}
					}
					prev = base.InternalKey{UserKey: slices.Clone(k.UserKey), Trailer: k.Trailer}
					seen++
				}
				// The batch being applied may be visible before published counts it.
				if seen%perBatch != 0 || seen < done*perBatch || seen > (after+1)*perBatch {
					t.Errorf("iterator saw %d entries; %d to %d batches were published", seen, done, after+1)
					return
				}
				it.Close()
			}
		}()
	}
	for b := range batches {
		var batch testBatch
		for i := range perBatch {
			batch = append(batch, kv{base.MakeInternalKey(keyOf(b, i), base.SeqNum(b+1), base.KindSet), []byte(fmt.Sprint(b))})
		}
		m.Apply(batch)
		published.Add(1)
	}
	close(stop)
	wg.Wait()
}

// TestNoAllocs checks the hot paths do not allocate (Add apart from the
// arena's chunks, which it takes seldom).
func TestNoAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	m := New()
	keys := benchKeys()
	i := 0
	if n := testing.AllocsPerRun(10000, func() {
		m.Add(base.MakeInternalKey(keys[i], base.SeqNum(i+1), base.KindSet), benchValue)
		i++
	}); n != 0 {
		t.Errorf("Add: %v allocations", n)
	}
	if n := testing.AllocsPerRun(1000, func() {
		m.Get(keys[i%10000], base.SeqNumMax)
		i++
	}); n != 0 {
		t.Errorf("Get: %v allocations", n)
	}
	it := m.NewIter()
	if n := testing.AllocsPerRun(1000, func() {
		it.SeekGE(base.MakeInternalKey(keys[i%10000], base.SeqNumMax, base.KindMax))
		it.Next()
		it.Prev()
		it.SeekLT(base.MakeInternalKey(keys[i%10000], base.SeqNumMax, base.KindMax))
		_, _ = it.Key(), it.Value()
		i++
	}); n != 0 {
		t.Errorf("iterator: %v allocations", n)
	}
}

// TestGetDuringFirstInserts: a Get of a key already in the table must find
// it while the writer inserts new keys around it. A seek that re-read its
// predecessor's link after comparing could start from a node inserted in
// the meantime before the key, and so miss it (found by the DB's
// TestStress: stale reads after each memtable rotation).
func TestGetDuringFirstInserts(t *testing.T) {
	const n = 2000
	rounds := 30
	if testing.Short() {
		rounds = 5
	}
	var misses atomic.Int64
	for round := range rounds {
		m := New()
		r := rand.New(rand.NewPCG(uint64(round), 1))
		order := r.Perm(n)
		var acked atomic.Int64 // entries of order inserted and visible
		var stop atomic.Bool
		var wg sync.WaitGroup
		for g := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rr := rand.New(rand.NewPCG(uint64(round), uint64(g)+2))
				for !stop.Load() {
					a := acked.Load()
					if a == 0 {
						continue
					}
					i := order[rr.Int64N(a)]
					if _, _, ok := m.Get(fmt.Appendf(nil, "key%06d", i), base.SeqNumMax); !ok {
						misses.Add(1)
					}
				}
			}()
		}
		for j, i := range order {
			m.Add(base.MakeInternalKey(fmt.Appendf(nil, "key%06d", i), base.SeqNum(j+1), base.KindSet), []byte("v"))
			acked.Store(int64(j + 1))
		}
		stop.Store(true)
		wg.Wait()
	}
	if n := misses.Load(); n > 0 {
		t.Fatalf("%d Gets missed a key inserted before them", n)
	}
}
