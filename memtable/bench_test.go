package memtable

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/benchutil"
)

// benchKeys returns 1M distinct 16-byte keys in random order, written as the
// end-to-end benchmark (./bench) writes them, by benchutil.MakeKey: a
// zero-padded decimal id, so that every key shares its first 8 bytes. They slice one buffer, so the collector has
// little to scan.
var benchKeys = sync.OnceValue(func() [][]byte {
	return makeKeys(func(dst []byte, id uint64) { benchutil.MakeKey(dst, id) })
})

// binaryKeys are like benchKeys but random bytes, which their first 8 bytes
// order.
var binaryKeys = sync.OnceValue(func() [][]byte {
	r := rand.New(rand.NewPCG(8, 8))
	return makeKeys(func(dst []byte, id uint64) {
		binary.BigEndian.PutUint64(dst, r.Uint64())
		binary.BigEndian.PutUint64(dst[8:], id)
	})
})

func makeKeys(put func(dst []byte, id uint64)) [][]byte {
	const n = 1 << 20
	buf := make([]byte, 16*n)
	keys := make([][]byte, n)
	for i, id := range rand.New(rand.NewPCG(7, 7)).Perm(n) {
		k := buf[16*i : 16*i+16 : 16*i+16]
		put(k, 2*uint64(id))
		keys[i] = k
	}
	return keys
}

var benchValue = make([]byte, 100)

// cpuMeter reports the process's CPU time per op as cpu-ns/op when stopped,
// where it is measured: where other processes share the machine, wall time
// swings far more than CPU time does. Collector work on other threads counts.
func cpuMeter(b *testing.B) (stop func()) {
	start := benchutil.CPUTime()
	return func() {
		if start != 0 {
			b.ReportMetric(float64(benchutil.CPUTime()-start)/float64(b.N), "cpu-ns/op")
		}
	}
}

// benchInsert inserts keys in random order, starting a new table whenever
// full reports true, and reports the time per insert.
func benchInsert(b *testing.B, keys [][]byte, full func(m *MemTable, n int) bool) {
	b.ReportAllocs()
	m := New()
	n := 0
	b.ResetTimer()
	defer cpuMeter(b)()
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
	benchInsert(b, benchKeys(), func(m *MemTable, n int) bool { return n == 1<<20 })
}

// BenchmarkInsert4MiB fills tables up to the DB's default MemTableSize, as
// the end-to-end benchmark does.
func BenchmarkInsert4MiB(b *testing.B) {
	benchInsert(b, benchKeys(), func(m *MemTable, n int) bool { return m.Size() >= 4<<20 })
}

// BenchmarkInsert4MiBBinaryKeys is BenchmarkInsert4MiB with random binary
// keys, which the first 8 bytes order.
func BenchmarkInsert4MiBBinaryKeys(b *testing.B) {
	benchInsert(b, binaryKeys(), func(m *MemTable, n int) bool { return m.Size() >= 4<<20 })
}

// BenchmarkApply applies batches of one entry each, as a DB of single Sets
// does.
func BenchmarkApply(b *testing.B) {
	keys := benchKeys()
	b.ReportAllocs()
	m := New()
	batch := make(testBatch, 1)
	b.ResetTimer()
	defer cpuMeter(b)()
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
	defer cpuMeter(b)()
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
		defer cpuMeter(b)()
		it := m.NewIter()
		ok := it.First()
		for range b.N {
			if !ok && !it.First() {
				b.Fatal("empty table")
			}
			_ = it.Value()
			ok = it.Next()
		}
		it.Close()
	})
	b.Run("backward", func(b *testing.B) {
		b.ReportAllocs()
		defer cpuMeter(b)()
		it := m.NewIter()
		ok := it.Last()
		for range b.N {
			if !ok && !it.Last() {
				b.Fatal("empty table")
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
	defer cpuMeter(b)()
	for i := range b.N {
		it := m.NewIter()
		ok := it.SeekGE(base.MakeInternalKey(keys[(i*7919)%len(keys)], base.SeqNumMax, base.KindMax))
		for j := 0; ok && j < 10; j++ {
			ok = it.Next()
		}
		it.Close()
	}
}

// BenchmarkAdd inserts random 16-byte hex keys, starting a new table every
// 65,536 entries.
func BenchmarkAdd(b *testing.B) {
	keys := make([][]byte, 1<<16)
	r := rand.New(rand.NewPCG(2, 2))
	for i := range keys {
		keys[i] = []byte(fmt.Sprintf("%016x", r.Uint64()))
	}
	value := make([]byte, 100)
	b.ReportAllocs()
	m := New()
	for i := range b.N {
		if i%len(keys) == 0 && i > 0 {
			m = New()
		}
		m.Add(base.MakeInternalKey(keys[i%len(keys)], base.SeqNum(i+1), base.KindSet), value)
	}
}

// BenchmarkGet looks up keys of a table of 100,000 random entries.
func BenchmarkGet(b *testing.B) {
	m := New()
	keys := make([][]byte, 100_000)
	r := rand.New(rand.NewPCG(3, 3))
	for i := range keys {
		keys[i] = []byte(fmt.Sprintf("%016x", r.Uint64()))
		m.Add(base.MakeInternalKey(keys[i], 1, base.KindSet), make([]byte, 100))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		m.Get(keys[(i*7919)%len(keys)], base.SeqNumMax)
	}
}
