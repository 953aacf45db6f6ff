package manifest

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/benchutil"
)

// benchShape is the number of tables in each level of benchVersion; L6
// table j covers keys 10j to 10j+8 of benchKey's space.
var benchShape = benchutil.TablesPerLevel(benchutil.ManyTables)

func benchKey(i int) []byte { return fmt.Appendf(nil, "k%010d", i) }

func benchMeta(num uint64, lo, hi int, seq base.SeqNum) *FileMetadata {
	return &FileMetadata{FileNum: num, Size: 64 << 20,
		Smallest: base.MakeInternalKey(benchKey(lo), seq, base.KindSet), Largest: base.MakeInternalKey(benchKey(hi), seq, base.KindSet),
		SmallestSeq: seq, LargestSeq: seq}
}

// benchVersion builds a version of benchShape's tables with one edit; L6
// table j is file number j+1.
func benchVersion(tb testing.TB) *Version {
	e := &VersionEdit{}
	num := uint64(0)
	add := func(l, count, width, off int, seq base.SeqNum) {
		for j := range count {
			num++
			e.NewFiles = append(e.NewFiles, NewFile{l, benchMeta(num, width*j+off, width*j+off+width-2, seq)})
		}
	}
	add(6, benchShape[6], 10, 0, 1)
	add(5, benchShape[5], 100, 1, 2)
	add(4, benchShape[4], 1000, 2, 3)
	for j := range benchShape[0] {
		num++
		e.NewFiles = append(e.NewFiles, NewFile{0, benchMeta(num, 1000*j, 1000*j+5*benchShape[6], base.SeqNum(10+j))})
	}
	v, err := (&Version{}).Apply(e)
	if err != nil {
		tb.Fatal(err)
	}
	if n := v.NumFiles(6) + v.NumFiles(5) + v.NumFiles(4) + v.NumFiles(0); n != benchutil.ManyTables {
		tb.Fatalf("built %d tables", n)
	}
	return v
}

// BenchmarkApply installs a typical compaction's edit on a version of 100k
// tables: one L6 table replaced by two covering its keys.
func BenchmarkApply(b *testing.B) {
	v := benchVersion(b)
	r := rand.New(rand.NewPCG(1, 2))
	edits := make([]*VersionEdit, 1024)
	for i := range edits {
		j := r.IntN(benchShape[6])
		edits[i] = &VersionEdit{
			DeletedFiles: []DeletedFile{{6, uint64(j + 1)}},
			NewFiles: []NewFile{
				{6, benchMeta(uint64(benchutil.ManyTables+2*i+1), 10*j, 10*j+3, 50)},
				{6, benchMeta(uint64(benchutil.ManyTables+2*i+2), 10*j+5, 10*j+8, 50)},
			},
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu := benchutil.CPUTime()
	for i := range b.N {
		nv, err := v.Apply(edits[i%len(edits)])
		if err != nil || nv.NumFiles(6) != benchShape[6]+1 {
			b.Fatal(err)
		}
	}
	benchutil.ReportCPU(b, b.N, cpu)
}

// BenchmarkFind looks up the L6 table holding a random key (as Get does on
// each level), among 90k.
func BenchmarkFind(b *testing.B) {
	v := benchVersion(b)
	r := rand.New(rand.NewPCG(1, 2))
	keys := make([][]byte, 4096)
	for i := range keys {
		keys[i] = benchKey(10*r.IntN(benchShape[6]) + r.IntN(9))
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu := benchutil.CPUTime()
	for i := range b.N {
		if v.Find(6, keys[i%len(keys)]) == nil {
			b.Fatal("no table")
		}
	}
	benchutil.ReportCPU(b, b.N, cpu)
}

// BenchmarkOverlapping lists the three L6 tables meeting a random range of
// 21 keys (as picking a compaction's inputs and NewIter do).
func BenchmarkOverlapping(b *testing.B) {
	v := benchVersion(b)
	r := rand.New(rand.NewPCG(1, 2))
	bounds := make([][2][]byte, 4096)
	for i := range bounds {
		k := 10*r.IntN(benchShape[6]-3) + 5
		bounds[i] = [2][]byte{benchKey(k), benchKey(k + 20)}
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu := benchutil.CPUTime()
	for i := range b.N {
		lohi := &bounds[i%len(bounds)]
		if got := v.Overlapping(6, lohi[0], lohi[1]); len(got) != 3 {
			b.Fatalf("%d tables", len(got))
		}
	}
	benchutil.ReportCPU(b, b.N, cpu)
}

// BenchmarkFindSmall looks up the L6 table holding a random key in levels of
// the sizes a store of a few GiB has, by the sorted slice Find searches and
// by the tree alone (the search larger levels use).
func BenchmarkFindSmall(b *testing.B) {
	for _, n := range []int{20, 300, flatMax} {
		e := &VersionEdit{}
		for j := range n {
			e.NewFiles = append(e.NewFiles, NewFile{6, benchMeta(uint64(j+1), 10*j, 10*j+8, 1)})
		}
		v, err := (&Version{}).Apply(e)
		if err != nil {
			b.Fatal(err)
		}
		tree := *v
		tree.flat = [NumLevels]*flatLevel{}
		r := rand.New(rand.NewPCG(1, 2))
		keys := make([][]byte, 4096)
		for i := range keys {
			keys[i] = benchKey(10*r.IntN(n) + r.IntN(9))
		}
		for _, s := range []struct {
			name string
			v    *Version
		}{{"flat", v}, {"tree", &tree}} {
			b.Run(fmt.Sprintf("tables=%d/%s", n, s.name), func(b *testing.B) {
				b.ReportAllocs()
				for i := range b.N {
					if s.v.Find(6, keys[i%len(keys)]) == nil {
						b.Fatal("no table")
					}
				}
			})
		}
	}
}
