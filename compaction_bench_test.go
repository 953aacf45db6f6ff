package bloomkv

import (
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/bloomkv/bloomkv/internal/benchutil"
)

// BenchmarkCompaction times the merge of level 0 into a compacted store, as
// ./bench's writes make them: 400k keys (16-byte keys, 100-byte values
// compressible to about half) compacted to the last level, then 100k
// overwrites of random ones left in level 0, the benchmark's memtable,
// cache and block settings, one compaction at a time. Each op copies the
// store (untimed), opens it and times Compact of the whole key space; the
// bytes are the tables' before it. Besides wall time it reports the process's
// CPU time per op, which the rest of the machine disturbs less:
//
//	go test -run '^$' -bench Compaction -benchtime 10x .
func BenchmarkCompaction(b *testing.B) {
	opts := func() *Options {
		return &Options{Logger: quietLogger(), MemTableSize: 4 << 20, CacheSize: 8 << 20, MaxConcurrentCompactions: 1,
			L0CompactionThreshold: 1000, L0StopWritesThreshold: 2000}
	}
	src := filepath.Join(b.TempDir(), "src")
	d, err := Open(src, opts())
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	vals := benchutil.NewValueSource(100, rng)
	key := make([]byte, benchutil.KeyLen)
	const n = 400_000
	for _, i := range rng.Perm(n) {
		if err := d.Set(benchutil.MakeKey(key, uint64(i)), vals.Next(rng), NoSync); err != nil {
			b.Fatal(err)
		}
	}
	if err := d.Compact(nil, nil); err != nil {
		b.Fatal(err)
	}
	for range n / 4 {
		if err := d.Set(benchutil.MakeKey(key, rng.Uint64N(n)), vals.Next(rng), NoSync); err != nil {
			b.Fatal(err)
		}
	}
	if err := d.Flush(); err != nil {
		b.Fatal(err)
	}
	m := d.Metrics()
	if m.Levels[0].Files < 2 || m.Levels[6].Files == 0 {
		b.Fatalf("want tables in L0 and L6:\n%s", m)
	}
	b.SetBytes(int64(m.Levels[0].Bytes + m.Levels[6].Bytes))
	if err := d.Close(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	var cpu time.Duration
	for i := range b.N {
		b.StopTimer()
		dir := filepath.Join(b.TempDir(), "db")
		copyTree(b, src, dir)
		d, err := Open(dir, opts())
		if err != nil {
			b.Fatal(err)
		}
		start := benchutil.CPUTime()
		b.StartTimer()
		if err := d.Compact(nil, nil); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		cpu += benchutil.CPUTime() - start
		if i == 0 && d.Metrics().Levels[0].Files != 0 {
			b.Fatalf("level 0 left after Compact:\n%s", d.Metrics())
		}
		if err := d.Close(); err != nil {
			b.Fatal(err)
		}
		if err := os.RemoveAll(dir); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	if cpu != 0 {
		b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
	}
}

// copyTree copies the regular files of directory src into a new directory
// dst.
func copyTree(tb testing.TB, src, dst string) {
	tb.Helper()
	if err := os.MkdirAll(dst, 0o755); err != nil {
		tb.Fatal(err)
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		tb.Fatal(err)
	}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		in, err := os.Open(filepath.Join(src, e.Name()))
		if err != nil {
			tb.Fatal(err)
		}
		out, err := os.Create(filepath.Join(dst, e.Name()))
		if err == nil {
			_, err = io.Copy(out, in)
			if cerr := out.Close(); err == nil {
				err = cerr
			}
		}
		in.Close()
		if err != nil {
			tb.Fatal(err)
		}
	}
}
