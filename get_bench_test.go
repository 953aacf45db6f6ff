package bloomkv

import (
	"math/rand/v2"
	"testing"

	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/benchutil"
	"github.com/bloomkv/bloomkv/internal/manifest"
)

func BenchmarkGetMemtable(b *testing.B) {
	d := benchDB(b)
	const n = 20_000 // 2.3 MB: stays in the 4 MiB memtable
	for i := range n {
		d.Set(benchKey(i), benchValue, NoSync)
	}
	if m := d.Metrics(); m.Levels[0].Files != 0 {
		b.Fatalf("memtable flushed: %+v", m.Levels[0])
	}
	present, absent := make([][]byte, n), make([][]byte, n)
	for i := range n {
		present[i], absent[i] = benchKey((i*7919)%n), benchKey(n+i)
	}
	// One allocation per present key: the value Get returns is the
	// caller's copy.
	b.Run("present", func(b *testing.B) {
		b.ReportAllocs()
		for i := range b.N {
			if _, err := d.Get(present[i%n]); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("absent", func(b *testing.B) {
		b.ReportAllocs()
		for i := range b.N {
			if _, err := d.Get(absent[i%n]); err == nil {
				b.Fatal("found an absent key")
			}
		}
	})
}

// BenchmarkGetLevels reads present and absent keys of a 200k-key store whose
// tables lie on several levels (L1 and L2, overlapping, with these targets).
func BenchmarkGetLevels(b *testing.B) {
	const n = 200_000
	d := levelsDB(b, n)
	eachPresence(b, func(r *rand.Rand) int { return 2 * r.IntN(n) }, func(b *testing.B, present bool, keys [][]byte) {
		before := d.Metrics()
		b.ReportAllocs()
		b.ResetTimer()
		cpu := benchutil.CPUTime()
		for i := range b.N {
			_, err := d.Get(keys[i%len(keys)])
			if present != (err == nil) {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		benchutil.ReportCPU(b, b.N, cpu)
		after := d.Metrics()
		b.ReportMetric(float64(after.FilterProbes-before.FilterProbes)/float64(b.N), "probes/op")
		b.ReportMetric(float64(after.BlockCache.Hits+after.BlockCache.Misses-before.BlockCache.Hits-before.BlockCache.Misses)/float64(b.N), "blocks/op")
	})
	b.Logf("\n%s", d.Metrics())
}

// eachPresence runs f as the sub-benchmarks "present" and "absent", with
// 4096 random keys: levelKey(k) for k from pick (keys the store holds), or
// levelKey(k+1) (keys it does not).
func eachPresence(b *testing.B, pick func(r *rand.Rand) int, f func(b *testing.B, present bool, keys [][]byte)) {
	for _, present := range []bool{true, false} {
		name := "absent"
		if present {
			name = "present"
		}
		b.Run(name, func(b *testing.B) {
			r := rand.New(rand.NewPCG(1, 2))
			keys := make([][]byte, 4096)
			for i := range keys {
				k := pick(r)
				if !present {
					k++
				}
				keys[i] = levelKey(k)
			}
			f(b, present, keys)
		})
	}
}

// manyShape is the number of tables in each level of manyTablesState's
// version. L6 table j covers levelKey(10j) to levelKey(10j+8); the others
// each cover a gap between two adjacent keys of levelKey's space, so that a
// Get searches every level.
var manyShape = benchutil.TablesPerLevel(benchutil.ManyTables)

// The keys of the one real table: levelKey(manyKeysStep*i) for i below
// manyKeys, spread over the L6 tables' keys.
var (
	manyKeys     = 18_000
	manyKeysStep = 10 * manyShape[6] / manyKeys
)

// manyTablesState returns a read state of d, which it fills, over a
// hand-built version of benchutil.ManyTables tables: one real table holding
// levelKey(manyKeysStep*i) for i below manyKeys stands for all of them (the
// table cache opens it under each of their numbers). The state is never
// published, and holds references enough never to be released.
func manyTablesState(b *testing.B) (*DB, *readState) {
	d := benchDB(b)
	for i := range manyKeys {
		if err := d.Set(levelKey(manyKeysStep*i), benchValue, NoSync); err != nil {
			b.Fatal(err)
		}
	}
	if err := d.Flush(); err != nil {
		b.Fatal(err)
	}
	tables, err := d.SSTables()
	if err != nil || len(tables[0]) != 1 {
		b.Fatalf("tables after the flush: %v, %v", tables, err)
	}
	r, err := d.tables.get(&manifest.FileMetadata{FileNum: tables[0][0].FileNum})
	if err != nil {
		b.Fatal(err)
	}
	gap := func(k int) []byte { return append(levelKey(k), 'a') } // between levelKey(k) and levelKey(k+1)
	e := &manifest.VersionEdit{}
	num := uint64(1 << 40)
	add := func(l int, lo, hi []byte, seq base.SeqNum) {
		num++
		e.NewFiles = append(e.NewFiles, manifest.NewFile{Level: l, Meta: &manifest.FileMetadata{FileNum: num, Size: 64 << 20,
			Smallest: base.MakeInternalKey(lo, seq, base.KindSet), Largest: base.MakeInternalKey(hi, seq, base.KindSet), SmallestSeq: seq, LargestSeq: seq}})
		ot := &openTable{r: r}
		ot.once.Do(func() {})
		d.tables.mu.Lock()
		d.tables.tables[num] = ot // no file: the cache's close leaves r to its owner
		d.tables.mu.Unlock()
	}
	for j := range manyShape[6] {
		add(6, levelKey(10*j), levelKey(10*j+8), 1)
	}
	for j := range manyShape[5] {
		add(5, gap(100*j+1), append(gap(100*j+1), 'z'), 2)
	}
	for j := range manyShape[4] {
		add(4, gap(1000*j+2), append(gap(1000*j+2), 'z'), 3)
	}
	for j := range manyShape[0] {
		add(0, gap(3*j+3), append(gap(3*j+3), 'z'), base.SeqNum(10+j))
	}
	v, err := (&manifest.Version{}).Apply(e)
	if err != nil {
		b.Fatal(err)
	}
	cur := d.acquire()
	s := &readState{mem: cur.mem, version: v}
	d.release(cur)
	s.refs.Store(1 << 30)
	return d, s
}

// BenchmarkGetManyTables reads present and absent keys through a version of
// 100k tables (manyTablesState): every level searched, then one table read
// from the block cache (present) or its filter (absent).
func BenchmarkGetManyTables(b *testing.B) {
	d, s := manyTablesState(b)
	seq := base.SeqNum(d.visibleSeq.Load()) + 1
	eachPresence(b, func(r *rand.Rand) int { return manyKeysStep * r.IntN(manyKeys) }, func(b *testing.B, present bool, keys [][]byte) {
		b.ReportAllocs()
		b.ResetTimer()
		cpu := benchutil.CPUTime()
		for i := range b.N {
			_, err := d.get(s, keys[i%len(keys)], seq)
			if present != (err == nil) {
				b.Fatal(err)
			}
		}
		benchutil.ReportCPU(b, b.N, cpu)
	})
}
