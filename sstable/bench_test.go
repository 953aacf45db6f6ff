package sstable

// Side-by-side benchmarks against Pebble's sstable package, same keys, same
// run: go test -run '^$' -bench Compare -benchmem ./sstable/
//
// 100k random 16-byte keys with 100-byte values, Snappy, 4 KiB blocks,
// 10 bits/key filters, tables in memory. Lookups run without a block cache
// (each reads, verifies and decompresses its block; Pebble also rereads its
// filter block) and with a warm 64 MiB cache on both sides.

import (
	"bytes"
	"context"
	"encoding/binary"
	"math/rand/v2"
	"reflect"
	"slices"
	"sync"
	"testing"

	pebbledb "github.com/cockroachdb/pebble/v2"
	pebblebloom "github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/objstorage/objstorageprovider"
	pebble "github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/cache"
)

const benchKeys = 100_000

type benchData struct {
	keys, absent [][]byte
	value        []byte
	ours         []byte
	theirs       []byte
}

var benchSet = sync.OnceValue(func() *benchData {
	r := rand.New(rand.NewPCG(1, 2))
	d := &benchData{value: make([]byte, 100)}
	for i := range d.value {
		d.value[i] = byte('a' + r.IntN(8))
	}
	mk := func(tag byte) []byte {
		k := make([]byte, 16)
		binary.BigEndian.PutUint64(k, r.Uint64())
		binary.BigEndian.PutUint64(k[8:], r.Uint64())
		k[15] = tag
		return k
	}
	for range benchKeys {
		d.keys = append(d.keys, mk(0))
		d.absent = append(d.absent, mk(1))
	}
	slices.SortFunc(d.keys, bytes.Compare)
	d.keys = slices.CompactFunc(d.keys, bytes.Equal)
	d.ours = writeOurs(d)
	d.theirs = writeTheirs(d)
	return d
})

func writeOurs(d *benchData) []byte {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, WriterOptions{})
	if err != nil {
		panic(err)
	}
	for _, k := range d.keys {
		if err := w.Add(base.MakeInternalKey(k, 1, base.KindSet), d.value); err != nil {
			panic(err)
		}
	}
	if err := w.Close(); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

func writeTheirs(d *benchData) []byte {
	fs := vfs.NewMem()
	f, err := fs.Create("p.sst", vfs.WriteCategoryUnspecified)
	if err != nil {
		panic(err)
	}
	w := pebble.NewWriter(objstorageprovider.NewFileWritable(f), pebble.WriterOptions{
		TableFormat:  pebble.TableFormatRocksDBv2,
		FilterPolicy: pebblebloom.FilterPolicy(10),
	})
	for _, k := range d.keys {
		if err := w.Set(k, d.value); err != nil {
			panic(err)
		}
	}
	if err := w.Close(); err != nil {
		panic(err)
	}
	f, _ = fs.Open("p.sst")
	st, _ := f.Stat()
	out := make([]byte, st.Size())
	f.ReadAt(out, 0)
	return out
}

func openTheirs(b *testing.B, data []byte, withCache bool) *pebble.Reader {
	fs := vfs.NewMem()
	f, _ := fs.Create("p.sst", vfs.WriteCategoryUnspecified)
	f.Write(append([]byte(nil), data...)) // Pebble may mangle buffers it is given
	f.Close()
	f, _ = fs.Open("p.sst")
	readable, err := pebble.NewSimpleReadable(f)
	if err != nil {
		b.Fatal(err)
	}
	ro := pebble.ReaderOptions{
		Filters: map[string]pebble.FilterPolicy{pebblebloom.FilterPolicy(10).Name(): pebblebloom.FilterPolicy(10)},
	}
	if withCache {
		// Pebble's cache options are of types internal to Pebble; their
		// fields are exported, so reflection can set them.
		c := pebbledb.NewCache(64 << 20)
		opts := reflect.ValueOf(&ro).Elem().FieldByName("ReaderOptions").FieldByName("CacheOpts")
		opts.FieldByName("CacheHandle").Set(reflect.ValueOf(c.NewHandle()))
		opts.FieldByName("FileNum").SetUint(1)
	}
	r, err := pebble.NewReader(context.Background(), readable, ro)
	if err != nil {
		b.Fatal(err)
	}
	return r
}

func BenchmarkCompareWrite(b *testing.B) {
	d := benchSet()
	raw := int64(len(d.keys) * (16 + len(d.value)))
	b.Run("bloomkv", func(b *testing.B) {
		b.SetBytes(raw)
		for range b.N {
			writeOurs(d)
		}
	})
	b.Run("pebble", func(b *testing.B) {
		b.SetBytes(raw)
		for range b.N {
			writeTheirs(d)
		}
	})
	b.Logf("table sizes: bloomkv %d bytes, pebble %d bytes", len(d.ours), len(d.theirs))
}

func BenchmarkCompareGet(b *testing.B) {
	d := benchSet()
	for _, withCache := range []bool{false, true} {
		ro := ReaderOptions{}
		if withCache {
			ro = ReaderOptions{Cache: cache.New(64<<20, cache.Options{}), FileNum: 1}
		}
		ours, err := NewReader(bytes.NewReader(d.ours), int64(len(d.ours)), ro)
		if err != nil {
			b.Fatal(err)
		}
		theirs := openTheirs(b, d.theirs, withCache)
		it, err := theirs.NewIter(pebble.NoTransforms, nil, nil, pebble.AssertNoBlobHandles)
		if err != nil {
			b.Fatal(err)
		}
		if withCache { // warm both caches with every block
			for _, k := range d.keys {
				lookup(ours, k, base.SeqNumMax)
				it.SeekPrefixGE(k, k, 0)
			}
		}
		name := "nocache"
		if withCache {
			name = "cache"
		}
		for _, which := range []string{"present", "absent"} {
			keys := d.keys
			if which == "absent" {
				keys = d.absent
			}
			b.Run(name+"/"+which+"/bloomkv", func(b *testing.B) {
				found := 0
				for i := range b.N {
					_, _, ok, err := lookup(ours, keys[(i*7919)%len(keys)], base.SeqNumMax)
					if err != nil {
						b.Fatal(err)
					}
					if ok {
						found++
					}
				}
				b.ReportMetric(float64(found)/float64(b.N), "found/op")
			})
			b.Run(name+"/"+which+"/pebble", func(b *testing.B) {
				found := 0
				for i := range b.N {
					k := keys[(i*7919)%len(keys)]
					if kv := it.SeekPrefixGE(k, k, 0); kv != nil && bytes.Equal(kv.K.UserKey, k) {
						found++
					}
				}
				b.ReportMetric(float64(found)/float64(b.N), "found/op")
			})
		}
		it.Close()
		theirs.Close()
	}
}

func BenchmarkCompareScan(b *testing.B) {
	d := benchSet()
	ours, err := NewReader(bytes.NewReader(d.ours), int64(len(d.ours)), ReaderOptions{})
	if err != nil {
		b.Fatal(err)
	}
	theirs := openTheirs(b, d.theirs, false)
	defer theirs.Close()
	b.Run("bloomkv", func(b *testing.B) {
		n := 0
		for range b.N {
			it := ours.NewIter()
			for ok := it.First(); ok; ok = it.Next() {
				n++
			}
			if err := it.Close(); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "keys/s")
	})
	b.Run("pebble", func(b *testing.B) {
		n := 0
		for range b.N {
			it, err := theirs.NewIter(pebble.NoTransforms, nil, nil, pebble.AssertNoBlobHandles)
			if err != nil {
				b.Fatal(err)
			}
			for kv := it.First(); kv != nil; kv = it.Next() {
				n++
			}
			if err := it.Close(); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "keys/s")
	})
}
