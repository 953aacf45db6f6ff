package sstable

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/bloomkv/bloomkv/internal/cache"
)

// TestParallelWriterSameBytes writes random tables with and without
// WriterOptions.Parallel: the files must be byte for byte the same, so the
// pipeline changes when blocks are compressed and written, never what.
func TestParallelWriterSameBytes(t *testing.T) {
	for seed := range 20 {
		r := rand.New(rand.NewPCG(uint64(seed), 11))
		spec := randomSpec(r, 1+r.IntN(5000))
		opts := WriterOptions{
			BlockSize:       []int{64, 512, 4096}[r.IntN(3)],
			Compression:     compressionIf(r.IntN(3) == 0),
			BloomBitsPerKey: []int{-1, 10}[r.IntN(2)],
		}
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			serial := writeSpec(t, spec, opts)
			opts.Parallel = true
			parallel := writeSpec(t, spec, opts)
			if !bytes.Equal(serial, parallel) {
				t.Fatalf("Parallel wrote a different table: %d bytes against %d", len(parallel), len(serial))
			}
			checkTable(t, openTable(t, parallel), spec, r)
		})
	}
}

// TestParallelWriterWriteError fails the output at every point of a
// parallel table: the error comes back from Add or Close, wrapped, and the
// worker has stopped when Close (or Abort) returns.
func TestParallelWriterWriteError(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	spec := randomSpec(r, 3000)
	opts := WriterOptions{BlockSize: 256, Parallel: true}
	full := len(writeSpec(t, spec, opts))
	for n := 0; n < full; n += 1 + n/8 {
		for _, abort := range []bool{false, true} {
			w, err := NewWriter(&failingWriter{n: n}, opts)
			if err != nil {
				t.Fatal(err)
			}
			var addErr error
			for _, e := range spec.entries {
				if addErr = w.Add(e.key, e.value); addErr != nil {
					break
				}
			}
			var closeErr error
			if abort {
				w.Abort()
				if err := w.Add(spec.entries[0].key, nil); !errors.Is(err, ErrWriterClosed) {
					t.Fatalf("Add after Abort: %v", err)
				}
			} else {
				closeErr = w.Close()
				if addErr == nil && !errors.Is(closeErr, errDeviceFull) {
					t.Fatalf("write failing at byte %d: Close returned %v", n, closeErr)
				}
			}
			if addErr != nil && !errors.Is(addErr, errDeviceFull) {
				t.Fatalf("write failing at byte %d: Add returned %v", n, addErr)
			}
			if w.pipe != nil {
				t.Fatalf("write failing at byte %d (abort %v): the worker was not stopped", n, abort)
			}
		}
	}
}

// TestParallelWriterSizeEstimate checks that Size, while blocks are in
// flight, grows with the keys added, and is exact after Close.
func TestParallelWriterSizeEstimate(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	spec := randomSpec(r, 5000)
	var buf bytes.Buffer
	w, err := NewWriter(&buf, WriterOptions{BlockSize: 1024, Parallel: true})
	if err != nil {
		t.Fatal(err)
	}
	prev := uint64(0)
	for _, e := range spec.entries {
		if err := w.Add(e.key, e.value); err != nil {
			t.Fatal(err)
		}
		size := w.Size()
		if size < prev {
			t.Fatalf("Size went from %d back to %d", prev, size)
		}
		prev = size
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if prev < uint64(buf.Len())/2 {
		t.Fatalf("Size before Close %d, far below the table's %d bytes", prev, buf.Len())
	}
	if w.Size() != uint64(buf.Len()) {
		t.Fatalf("Size after Close %d, table %d bytes", w.Size(), buf.Len())
	}
}

// TestDataBlockWritten checks that WriterOptions.DataBlockWritten sees every
// data block, and only those, at its offset and as a Reader decodes it,
// serial and parallel, over block sizes, restart intervals, compression and
// two-level indexes: a cache given those blocks serves every read of the
// table without a miss.
func TestDataBlockWritten(t *testing.T) {
	for seed := range 12 {
		r := rand.New(rand.NewPCG(uint64(seed), 6))
		opts := WriterOptions{
			BlockSize:            []int{128, 512, 4096}[r.IntN(3)],
			BlockRestartInterval: []int{1, 16, 32}[r.IntN(3)],
			Compression:          compressionIf(r.IntN(2) == 0),
			Parallel:             seed%2 == 1,
		}
		if r.IntN(2) == 0 {
			opts.IndexPartitionThreshold = 512
		}
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			spec := randomSpec(r, 4000)
			written := map[uint64][]byte{}
			opts.DataBlockWritten = func(off uint64, b []byte) {
				if _, ok := written[off]; ok {
					t.Errorf("block at %d written twice", off)
				}
				written[off] = bytes.Clone(b)
			}
			data := writeSpec(t, spec, opts)
			rd := openTable(t, data)
			blocks := 0
			for _, b := range rd.Layout().Blocks {
				if b.Kind != BlockData {
					continue
				}
				blocks++
				want, err := rd.readBlock(b.Handle, "data")
				if err != nil {
					t.Fatal(err)
				}
				if got, ok := written[b.Handle.Offset]; !ok || !bytes.Equal(got, want) {
					t.Fatalf("data block %s: hook saw %v, %d bytes; the reader decodes %d", b.Handle, ok, len(got), len(want))
				}
			}
			if blocks < 5 || blocks != len(written) {
				t.Fatalf("the hook saw %d blocks, the table has %d data blocks", len(written), blocks)
			}
			c := cache.New(64<<20, cache.Options{})
			for off, b := range written {
				if !c.Offer(1, off, b) {
					t.Fatalf("Offer refused block %d", off)
				}
			}
			cached, err := NewReader(bytes.NewReader(data), int64(len(data)), ReaderOptions{FileName: "test.sst", Cache: c, FileNum: 1})
			if err != nil {
				t.Fatal(err)
			}
			checkTable(t, cached, spec, r)
			if m := c.Metrics(); m.Misses != 0 || m.Hits == 0 {
				t.Fatalf("reading the table through the offered blocks: %+v", m)
			}
		})
	}
}
