package bloomkv

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

// BenchmarkApplyBatch measures a NoSync Apply of a batch of size random
// 16-byte keys with 100-byte values, the batch built anew each time as an
// application that does not keep its batches would: ns/op is per batch, and
// MB/s counts keys and values.
func BenchmarkApplyBatch(b *testing.B) {
	for _, size := range []int{100, 1000} {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			d := benchDB(b)
			keys := make([]byte, 16*size)
			rng := rand.New(rand.NewPCG(1, 2))
			b.ReportAllocs()
			b.SetBytes(int64(size * (16 + len(benchValue))))
			for range b.N {
				for i := range size {
					binary.BigEndian.PutUint64(keys[16*i:], rng.Uint64())
					binary.BigEndian.PutUint64(keys[16*i+8:], rng.Uint64())
				}
				bt := d.NewBatch()
				for i := range size {
					if err := bt.Set(keys[16*i:16*i+16], benchValue); err != nil {
						b.Fatal(err)
					}
				}
				if err := d.Apply(bt, NoSync); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkApplyBatchPebble is BenchmarkApplyBatch on Pebble, for
// comparison.
func BenchmarkApplyBatchPebble(b *testing.B) {
	for _, size := range []int{100, 1000} {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			o, c := readsPebbleOptions(false)
			d, err := pebble.Open(b.TempDir(), o)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { d.Close(); c.Unref() })
			keys := make([]byte, 16*size)
			rng := rand.New(rand.NewPCG(1, 2))
			b.ReportAllocs()
			b.SetBytes(int64(size * (16 + len(benchValue))))
			for range b.N {
				for i := range size {
					binary.BigEndian.PutUint64(keys[16*i:], rng.Uint64())
					binary.BigEndian.PutUint64(keys[16*i+8:], rng.Uint64())
				}
				bt := d.NewBatch()
				for i := range size {
					if err := bt.Set(keys[16*i:16*i+16], benchValue, nil); err != nil {
						b.Fatal(err)
					}
				}
				if err := bt.Commit(pebble.NoSync); err != nil {
					b.Fatal(err)
				}
				bt.Close()
			}
		})
	}
}

// BenchmarkBatchBuild measures building a batch of size writes (16-byte
// keys, 100-byte values) in a new Batch, without applying it: the encoding's
// appends and growth.
func BenchmarkBatchBuild(b *testing.B) {
	for _, size := range []int{100, 1000} {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			d := benchDB(b)
			key := make([]byte, 16)
			b.ReportAllocs()
			b.SetBytes(int64(size * (16 + len(benchValue))))
			for range b.N {
				bt := d.NewBatch()
				for i := range size {
					binary.BigEndian.PutUint64(key[8:], uint64(i))
					if err := bt.Set(key, benchValue); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
