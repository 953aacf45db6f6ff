package memtable

import (
	"encoding/binary"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/bloomkv/bloomkv/internal/base"
)

// benchKeys returns n distinct random 16-byte keys (the shape the end-to-end
// benchmark writes), made once per size and shared by the benchmarks.
var benchKeys = sync.OnceValue(func() [][]byte {
	r := rand.New(rand.NewPCG(7, 7))
	keys := make([][]byte, 1<<20)
	buf := make([]byte, 16*len(keys))
	for i := range keys {
		k := buf[16*i : 16*i+16 : 16*i+16]
		binary.BigEndian.PutUint64(k, r.Uint64())
		binary.BigEndian.PutUint64(k[8:], uint64(i))
		keys[i] = k
	}
	return keys
})

var benchValue = make([]byte, 100)

// benchInsert inserts keys in random order, starting a new table whenever
// full reports true, and reports the time per insert.
func benchInsert(b *testing.B, full func(m *MemTable, n int) bool) {
	keys := benchKeys()
	b.ReportAllocs()
	m := New()
	n := 0
	b.ResetTimer()
	for i := range b.N {
		if full(m, n) {
			b.StopTimer()
			m, n = New(), 0
			b.StartTimer()
		}
		m.Add(base.MakeInternalKey(keys[i%len(keys)], base.SeqNum(i+1), base.KindSet), benchValue)
		n++
	}
}

// BenchmarkInsert1M fills tables of a million entries, random key order.
func BenchmarkInsert1M(b *testing.B) {
	benchInsert(b, func(m *MemTable, n int) bool { return n == 1<<20 })
}

// BenchmarkInsert4MiB fills tables up to the DB's default MemTableSize, as
// the end-to-end benchmark does.
func BenchmarkInsert4MiB(b *testing.B) {
	benchInsert(b, func(m *MemTable, n int) bool { return m.Size() >= 4<<20 })
}

// BenchmarkApply applies batches of one entry each, as a DB of single Sets
// does.
func BenchmarkApply(b *testing.B) {
	keys := benchKeys()
	b.ReportAllocs()
	m := New()
	batch := make(testBatch, 1)
	b.ResetTimer()
	for i := range b.N {
		if m.Size() >= 4<<20 {
			b.StopTimer()
			m = New()
			b.StartTimer()
		}
		batch[0] = kv{base.MakeInternalKey(keys[i%len(keys)], base.SeqNum(i+1), base.KindSet), benchValue}
		m.Apply(batch)
	}
}

// filled returns a table of n entries from benchKeys.
func filled(n int) *MemTable {
	keys := benchKeys()
	m := New()
	for i := range n {
		m.Add(base.MakeInternalKey(keys[i], base.SeqNum(i+1), base.KindSet), benchValue)
	}
	return m
}

var (
	table1M  = sync.OnceValue(func() *MemTable { return filled(1 << 20) })
	table25K = sync.OnceValue(func() *MemTable { return filled(25_000) }) // ~4 MiB
)

func benchGet(b *testing.B, m *MemTable, n int) {
	keys := benchKeys()[:n]
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if _, _, ok := m.Get(keys[(i*7919)%n], base.SeqNumMax); !ok {
			b.Fatal("missing key")
		}
	}
}

func BenchmarkGet1M(b *testing.B)  { benchGet(b, table1M(), 1<<20) }
func BenchmarkGet25K(b *testing.B) { benchGet(b, table25K(), 25_000) }

// BenchmarkScan reports the time per entry of forward and backward scans
// over a million entries.
func BenchmarkScan(b *testing.B) {
	m := table1M()
	b.Run("forward", func(b *testing.B) {
		b.ReportAllocs()
		it := m.NewIter()
		ok := it.First()
		for range b.N {
			if !ok {
				ok = it.First()
			}
			_ = it.Value()
			ok = it.Next()
		}
		it.Close()
	})
	b.Run("backward", func(b *testing.B) {
		b.ReportAllocs()
		it := m.NewIter()
		ok := it.Last()
		for range b.N {
			if !ok {
				ok = it.Last()
			}
			_ = it.Value()
			ok = it.Prev()
		}
		it.Close()
	})
}

// BenchmarkSeekGE seeks to random keys of a million-entry table and reads
// ten entries from each, in a new iterator each time as the DB does.
func BenchmarkSeekGE(b *testing.B) {
	m := table1M()
	keys := benchKeys()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		it := m.NewIter()
		ok := it.SeekGE(base.MakeInternalKey(keys[(i*7919)%len(keys)], base.SeqNumMax, base.KindMax))
		for j := 0; ok && j < 10; j++ {
			ok = it.Next()
		}
		it.Close()
	}
}
