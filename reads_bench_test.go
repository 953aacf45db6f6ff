package bloomkv

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	pebblebloom "github.com/cockroachdb/pebble/v2/bloom"
	pebblesst "github.com/cockroachdb/pebble/v2/sstable"
	bolt "go.etcd.io/bbolt"

	"github.com/bloomkv/bloomkv/internal/benchutil"
)

// BenchmarkReads runs the read workloads of ./bench on a store of 500k keys
// (16-byte keys, 100-byte values compressible to about half, loaded in random
// order) with ./bench's settings: an 8 MiB cache, a 4 MiB memtable, 4 KiB
// blocks, Snappy, 10 bits/key filters. The tables (about 40 MB) exceed the
// cache, so many reads fetch a block from the OS page cache. Each workload
// runs on bloomkv and on Pebble:
//
//	go test -run '^$' -bench 'Reads$' -benchmem .
//
// Besides wall time per op, each reports the process's CPU time per op (GC
// included), which other processes on the machine disturb less.
//
// Loading takes a while; set BLOOMKV_READS_DIR to a directory to keep the
// stores there between runs (they are reopened read-only). The last 20,000
// keys loaded are in the memtable (replayed from the WAL at open); the others
// are in tables, flushed and compacted as far as the load called for.
func BenchmarkReads(b *testing.B) {
	for _, w := range readsWorkloads {
		for _, eng := range readsEngines {
			b.Run(w.name+"/"+eng.name, func(b *testing.B) {
				e := eng.open(b, filepath.Join(readsDir(b), eng.name))
				defer e.close(b)
				run, done := w.start(b, e, rand.New(rand.NewPCG(1, 2)))
				b.ReportAllocs()
				b.ResetTimer()
				cpu := benchutil.CPUTime()
				run(b.N)
				b.StopTimer()
				done()
				if cpu != 0 {
					b.ReportMetric(float64(benchutil.CPUTime()-cpu)/float64(b.N), "cpu-ns/op")
				}
			})
		}
	}
}

// BenchmarkReadsVsPebble runs each workload of BenchmarkReads on bloomkv and
// Pebble in alternating chunks of ops (tens of milliseconds each), so that
// both see the same load from the rest of the machine, and reports each
// engine's time per op and their ratio, pebble-ns/op over bloomkv-ns/op
// (above 1: bloomkv is faster):
//
//	go test -run '^$' -bench ReadsVsPebble -benchtime 5s -count 6 .
func BenchmarkReadsVsPebble(b *testing.B) {
	readsVersus(b, readsEngines[1], readsWorkloads)
}

// BenchmarkReadsVsBbolt is BenchmarkReadsVsPebble against bbolt (one bucket,
// read in a read-only transaction per get, as ./bench reads it), for the
// point reads: bbolt-ns/op over bloomkv-ns/op. BLOOMKV_READS_CACHE sets
// bloomkv's and Pebble's cache size in MiB (8 unless set), as ./bench's
// -cache does; bbolt reads through the OS page cache.
func BenchmarkReadsVsBbolt(b *testing.B) {
	readsVersus(b, readsBboltEngine, readsWorkloads[:2])
}

// readsVersus runs the workloads on bloomkv and other in alternating chunks,
// reporting each one's time per op and other's over bloomkv's.
func readsVersus(b *testing.B, other readsEngineSpec, workloads []readsWorkload) {
	for _, w := range workloads {
		b.Run(w.name, func(b *testing.B) {
			var runs [2]func(int)
			for i, eng := range []readsEngineSpec{readsEngines[0], other} {
				e := eng.open(b, filepath.Join(readsDir(b), eng.name))
				defer e.close(b)
				run, done := w.start(b, e, rand.New(rand.NewPCG(1, 2)))
				defer done()
				runs[i] = run
			}
			var took [2]time.Duration
			b.ResetTimer()
			for range b.N {
				for i, run := range runs {
					t := time.Now()
					run(w.chunk)
					took[i] += time.Since(t)
				}
			}
			b.StopTimer()
			ops := float64(b.N * w.chunk)
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(float64(took[0])/ops, "bloomkv-ns/op")
			b.ReportMetric(float64(took[1])/ops, other.name+"-ns/op")
			b.ReportMetric(float64(took[1])/float64(took[0]), "speedup")
		})
	}
}

// readsEngineSpec names an engine of the read benchmarks and opens its store
// in a directory, loading it first if need be.
type readsEngineSpec struct {
	name string
	open func(b *testing.B, dir string) readsEngine
}

var readsEngines = []readsEngineSpec{
	{"bloomkv", openReadsBloomkv},
	{"pebble", openReadsPebble},
}

func readsDir(b *testing.B) string {
	if dir := os.Getenv("BLOOMKV_READS_DIR"); dir != "" {
		return dir
	}
	return b.TempDir()
}

// readsWorkload is a workload of the read benchmarks: start returns a
// function running ops operations, and one to call when done; chunk is the
// ops readsVersus runs at a time.
type readsWorkload struct {
	name  string
	chunk int
	start func(b *testing.B, e readsEngine, r *rand.Rand) (run func(ops int), done func())
}

// readsWorkloads are the workloads of the read benchmarks.
var readsWorkloads = []readsWorkload{
	// Gets of uniformly random loaded keys (./bench readrandom).
	{"get", 2000, func(b *testing.B, e readsEngine, r *rand.Rand) (func(int), func()) {
		key := make([]byte, benchutil.KeyLen)
		return func(ops int) {
			for range ops {
				readsGet(b, e, benchutil.MakeKey(key, 2*r.Uint64N(readsKeys)))
			}
		}, func() {}
	}},
	// Gets of zipfian loaded keys (YCSB C).
	{"get-zipf", 2000, func(b *testing.B, e readsEngine, r *rand.Rand) (func(int), func()) {
		key := make([]byte, benchutil.KeyLen)
		z := readsZipfKeys()
		return func(ops int) {
			for range ops {
				readsGet(b, e, benchutil.MakeKey(key, 2*benchutil.Scatter(z.Next(r), readsKeys)))
			}
		}, func() {}
	}},
	// A seek to a random loaded key, then 10 nexts (./bench seekrandom).
	{"seek10", 1000, func(b *testing.B, e readsEngine, r *rand.Rand) (func(int), func()) {
		key := make([]byte, benchutil.KeyLen)
		it := e.newIter(b)
		return func(ops int) {
			for range ops {
				ok := it.seekGE(benchutil.MakeKey(key, 2*r.Uint64N(readsKeys)))
				for j := 0; ok && j < 10; j++ {
					_ = it.value()
					ok = it.next()
				}
			}
		}, func() { it.close(b) }
	}},
	// A new iterator per op, a seek to a zipfian key, then a zipfian number
	// of nexts in [1, 1000] (YCSB E's scans).
	{"scan-zipf", 200, func(b *testing.B, e readsEngine, r *rand.Rand) (func(int), func()) {
		key := make([]byte, benchutil.KeyLen)
		z, lengths := readsZipfKeys(), readsZipfLengths()
		return func(ops int) {
			for range ops {
				it := e.newIter(b)
				m := 1 + lengths.Next(r)
				ok := it.seekGE(benchutil.MakeKey(key, 2*benchutil.Scatter(z.Next(r), readsKeys)))
				for j := uint64(0); ok && j < m; j++ {
					_ = it.value()
					ok = it.next()
				}
				it.close(b)
			}
		}, func() {}
	}},
	// Full forward scans; an op is a key (./bench scan).
	{"scan", 50000, func(b *testing.B, e readsEngine, r *rand.Rand) (func(int), func()) {
		var it readsIter
		ok := false
		return func(ops int) {
				for range ops {
					if !ok {
						if it != nil {
							it.close(b)
						}
						it = e.newIter(b)
						ok = it.first()
					}
					_ = it.value()
					ok = it.next()
				}
			}, func() {
				if it != nil {
					it.close(b)
				}
			}
	}},
}

const readsKeys = 500_000

func readsGet(b *testing.B, e readsEngine, key []byte) {
	if ok, err := e.get(key); err != nil || !ok {
		b.Fatalf("get %s: %v %v", key, ok, err)
	}
}

var (
	readsZipfKeys    = sync.OnceValue(func() *benchutil.Zipf { return benchutil.NewZipf(readsKeys, 0.99) })
	readsZipfLengths = sync.OnceValue(func() *benchutil.Zipf { return benchutil.NewZipf(1000, 0.99) })
)

type readsEngine interface {
	get(key []byte) (bool, error)
	newIter(b *testing.B) readsIter
	close(b *testing.B)
}

type readsIter interface {
	seekGE(key []byte) bool
	first() bool
	next() bool
	value() []byte
	close(b *testing.B)
}

// readsMemKeys is how many keys the load writes last, after settling the
// rest into tables: they stay in the memtable (the WAL, replayed at open), as
// ./bench's last writes do.
const readsMemKeys = 20_000

// readsLoad loads the keys into a store through set, in random order, unless
// dir holds a finished load: all but the last readsMemKeys, then settle
// (flush and let compactions finish), then the rest, then done (close).
func readsLoad(b *testing.B, dir string, open func() (set func(k, v []byte) error, settle, done func() error)) {
	marker := filepath.Join(dir, "LOADED")
	if _, err := os.Stat(marker); err == nil {
		return
	}
	if err := os.RemoveAll(dir); err != nil {
		b.Fatal(err)
	}
	set, settle, done := open()
	r := rand.New(rand.NewPCG(1, 1))
	values := benchutil.NewValueSource(100, r)
	order := r.Perm(readsKeys)
	key := make([]byte, benchutil.KeyLen)
	for j, i := range order {
		if j == len(order)-readsMemKeys {
			if err := settle(); err != nil {
				b.Fatal(err)
			}
		}
		if err := set(benchutil.MakeKey(key, 2*uint64(i)), values.Next(r)); err != nil {
			b.Fatal(err)
		}
	}
	if err := done(); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		b.Fatal(err)
	}
}

type readsBloomkv struct{ d *DB }

func openReadsBloomkv(b *testing.B, dir string) readsEngine {
	readsLoad(b, dir, func() (func(k, v []byte) error, func() error, func() error) {
		d, err := Open(dir, &Options{Logger: quietLogger()})
		if err != nil {
			b.Fatal(err)
		}
		set := func(k, v []byte) error { return d.Set(k, v, NoSync) }
		settle := func() error {
			if err := d.Flush(); err != nil {
				return err
			}
			waitForCompactions(b, d)
			return nil
		}
		return set, settle, d.Close
	})
	d, err := Open(dir, &Options{Logger: quietLogger(), ReadOnly: true, CacheSize: readsCache(b)})
	if err != nil {
		b.Fatal(err)
	}
	return readsBloomkv{d}
}

func (e readsBloomkv) get(k []byte) (bool, error) {
	_, err := e.d.Get(k)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

func (e readsBloomkv) newIter(b *testing.B) readsIter {
	it, err := e.d.NewIter(nil)
	if err != nil {
		b.Fatal(err)
	}
	return readsBloomkvIter{it}
}

func (e readsBloomkv) close(b *testing.B) {
	if err := e.d.Close(); err != nil {
		b.Fatal(err)
	}
}

type readsBloomkvIter struct{ it *Iterator }

func (i readsBloomkvIter) seekGE(k []byte) bool { return i.it.SeekGE(k) }
func (i readsBloomkvIter) first() bool          { return i.it.First() }
func (i readsBloomkvIter) next() bool           { return i.it.Next() }
func (i readsBloomkvIter) value() []byte        { return i.it.Value() }
func (i readsBloomkvIter) close(b *testing.B) {
	if err := i.it.Close(); err != nil {
		b.Fatal(err)
	}
}

type readsPebble struct {
	d *pebble.DB
	c *pebble.Cache
}

func readsPebbleOptions(readOnly bool) (*pebble.Options, *pebble.Cache) {
	// Pebble charges its memtables to the cache: two more than the
	// blocks get, as ./bench gives it.
	c := pebble.NewCache(readsCache(nil) + 2*4<<20)
	o := &pebble.Options{MemTableSize: 4 << 20, Cache: c, ReadOnly: readOnly, Logger: readsQuietPebble{}}
	for i := range o.Levels {
		o.Levels[i].BlockSize = 4096
		o.Levels[i].FilterPolicy = pebblebloom.FilterPolicy(10)
		o.Levels[i].Compression = func() *pebblesst.CompressionProfile { return pebblesst.SnappyCompression }
	}
	o.EnsureDefaults()
	return o, c
}

func openReadsPebble(b *testing.B, dir string) readsEngine {
	readsLoad(b, dir, func() (func(k, v []byte) error, func() error, func() error) {
		o, c := readsPebbleOptions(false)
		d, err := pebble.Open(dir, o)
		if err != nil {
			b.Fatal(err)
		}
		set := func(k, v []byte) error { return d.Set(k, v, pebble.NoSync) }
		settle := func() error {
			if err := d.Flush(); err != nil {
				return err
			}
			// Let the compactions the load called for finish.
			for quiet := 0; quiet < 10; {
				time.Sleep(100 * time.Millisecond)
				if m := d.Metrics(); m.Compact.NumInProgress > 0 || m.Compact.EstimatedDebt > 0 {
					quiet = 0
				} else {
					quiet++
				}
			}
			return nil
		}
		done := func() error {
			err := d.Close()
			c.Unref()
			return err
		}
		return set, settle, done
	})
	o, c := readsPebbleOptions(true)
	d, err := pebble.Open(dir, o)
	if err != nil {
		b.Fatal(err)
	}
	return readsPebble{d, c}
}

func (e readsPebble) get(k []byte) (bool, error) {
	_, closer, err := e.d.Get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, closer.Close()
}

func (e readsPebble) newIter(b *testing.B) readsIter {
	it, err := e.d.NewIter(nil)
	if err != nil {
		b.Fatal(err)
	}
	return readsPebbleIter{it}
}

func (e readsPebble) close(b *testing.B) {
	if err := e.d.Close(); err != nil {
		b.Fatal(err)
	}
	e.c.Unref()
}

type readsPebbleIter struct{ it *pebble.Iterator }

func (i readsPebbleIter) seekGE(k []byte) bool { return i.it.SeekGE(k) }
func (i readsPebbleIter) first() bool          { return i.it.First() }
func (i readsPebbleIter) next() bool           { return i.it.Next() }
func (i readsPebbleIter) value() []byte        { return i.it.Value() }
func (i readsPebbleIter) close(b *testing.B) {
	if err := i.it.Close(); err != nil {
		b.Fatal(err)
	}
}

// readsCache is the block cache size of bloomkv and Pebble in the read
// benchmarks: BLOOMKV_READS_CACHE MiB, 8 MiB unless set.
func readsCache(b *testing.B) int64 {
	v := os.Getenv("BLOOMKV_READS_CACHE")
	if v == "" {
		return 8 << 20
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		if b != nil {
			b.Fatalf("BLOOMKV_READS_CACHE=%q: want a number of MiB", v)
		}
		return 8 << 20
	}
	return int64(n) << 20
}

// readsBboltEngine is bbolt, one bucket, as ./bench runs it.
var readsBboltEngine = readsEngineSpec{"bbolt", openReadsBbolt}

var readsBboltBucket = []byte("bench")

type readsBbolt struct{ db *bolt.DB }

func openReadsBbolt(b *testing.B, dir string) readsEngine {
	path := filepath.Join(dir, "bolt.db")
	opts := &bolt.Options{NoSync: true, FreelistType: bolt.FreelistMapType}
	readsLoad(b, dir, func() (func(k, v []byte) error, func() error, func() error) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		db, err := bolt.Open(path, 0o644, opts)
		if err != nil {
			b.Fatal(err)
		}
		if err := db.Update(func(tx *bolt.Tx) error {
			_, err := tx.CreateBucketIfNotExists(readsBboltBucket)
			return err
		}); err != nil {
			b.Fatal(err)
		}
		set := func(k, v []byte) error {
			return db.Update(func(tx *bolt.Tx) error { return tx.Bucket(readsBboltBucket).Put(k, v) })
		}
		return set, func() error { return nil }, db.Close
	})
	ro := *opts
	ro.ReadOnly = true
	db, err := bolt.Open(path, 0o444, &ro)
	if err != nil {
		b.Fatal(err)
	}
	return readsBbolt{db}
}

func (e readsBbolt) get(k []byte) (found bool, err error) {
	err = e.db.View(func(tx *bolt.Tx) error {
		found = tx.Bucket(readsBboltBucket).Get(k) != nil
		return nil
	})
	return found, err
}

func (e readsBbolt) newIter(b *testing.B) readsIter {
	b.Fatal("the bbolt engine of the read benchmarks runs point reads only")
	return nil
}

func (e readsBbolt) close(b *testing.B) {
	if err := e.db.Close(); err != nil {
		b.Fatal(err)
	}
}

type readsQuietPebble struct{}

func (readsQuietPebble) Infof(string, ...any)  {}
func (readsQuietPebble) Errorf(string, ...any) {}
func (readsQuietPebble) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf("pebble: "+format, args...))
}
