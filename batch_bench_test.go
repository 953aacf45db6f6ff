package bloomkv

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

// batchSizes are the writes per batch the batch benchmarks measure.
var batchSizes = []int{100, 1000}

// benchBatches runs, for each of batchSizes, b.N batches of size random
// 16-byte keys with 100-byte values: apply writes one batch's keys, the
// keys drawn anew for each. ns/op is per batch, and MB/s counts keys and
// values.
func benchBatches(b *testing.B, open func(b *testing.B) (apply func(keys [][]byte) error)) {
	for _, size := range batchSizes {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			apply := open(b)
			buf := make([]byte, 16*size)
			keys := make([][]byte, size)
			for i := range keys {
				keys[i] = buf[16*i : 16*i+16]
			}
			rng := rand.New(rand.NewPCG(1, 2))
			b.ResetTimer() // the store's opening is not the work measured
			b.ReportAllocs()
			b.SetBytes(int64(size * (16 + len(benchValue))))
			for range b.N {
				for _, k := range keys {
					binary.BigEndian.PutUint64(k, rng.Uint64())
					binary.BigEndian.PutUint64(k[8:], rng.Uint64())
				}
				if err := apply(keys); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkApplyBatch measures a NoSync Apply of a batch built anew each
// time, as an application that does not keep its batches would.
func BenchmarkApplyBatch(b *testing.B) {
	benchBatches(b, func(b *testing.B) func([][]byte) error {
		d := benchDB(b)
		return func(keys [][]byte) error {
			bt := d.NewBatch()
			for _, k := range keys {
				if err := bt.Set(k, benchValue); err != nil {
					return err
				}
			}
			return d.Apply(bt, NoSync)
		}
	})
}

// BenchmarkApplyBatchPebble is BenchmarkApplyBatch on Pebble, for
// comparison.
func BenchmarkApplyBatchPebble(b *testing.B) {
	benchBatches(b, func(b *testing.B) func([][]byte) error {
		o, c := readsPebbleOptions(false)
		d, err := pebble.Open(b.TempDir(), o)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { d.Close(); c.Unref() })
		return func(keys [][]byte) error {
			bt := d.NewBatch()
			defer bt.Close()
			for _, k := range keys {
				if err := bt.Set(k, benchValue, nil); err != nil {
					return err
				}
			}
			return bt.Commit(pebble.NoSync)
		}
	})
}

// BenchmarkBatchBuild measures building a batch in a new Batch, without
// applying it: the encoding's appends and growth.
func BenchmarkBatchBuild(b *testing.B) {
	benchBatches(b, func(b *testing.B) func([][]byte) error {
		d := benchDB(b)
		return func(keys [][]byte) error {
			bt := d.NewBatch()
			for _, k := range keys {
				if err := bt.Set(k, benchValue); err != nil {
					return err
				}
			}
			return nil
		}
	})
}
