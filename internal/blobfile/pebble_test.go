package blobfile

// Blob files written by Pebble's own writer (the oracle), in every
// compression and checksum Pebble uses for them, read back value by value.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strconv"
	"testing"

	"github.com/cockroachdb/pebble/v2/objstorage"
	"github.com/cockroachdb/pebble/v2/sstable/blob"
	"github.com/cockroachdb/pebble/v2/sstable/block"

	"github.com/bloomkv/bloomkv/internal/base"
)

// testValues returns n values: compressible text, random bytes, one empty
// value and one large one, in a fixed order.
func testValues(seed uint64, n int) [][]byte {
	r := rand.New(rand.NewPCG(seed, 1))
	var out [][]byte
	for i := range n {
		var v []byte
		switch {
		case i == 3:
			v = []byte{}
		case i == n/2:
			v = bytes.Repeat([]byte("large value "), 2000)
		case i%3 == 0:
			v = make([]byte, 50+r.IntN(400))
			for j := range v {
				v[j] = byte(r.Uint32())
			}
		default:
			v = bytes.Repeat(fmt.Appendf(nil, "value %d of the blob file; ", i), 1+r.IntN(20))
		}
		out = append(out, v)
	}
	return out
}

// pebbleBlob writes values with Pebble's blob writer and returns the file
// and each value's handle. Every flushEvery values (0: never) the block is
// ended by hand, besides the writer's own block-size flushes.
func pebbleBlob(t testing.TB, values [][]byte, opts blob.FileWriterOptions, flushEvery int) ([]byte, []Handle) {
	t.Helper()
	obj := &objstorage.MemObj{}
	w := blob.NewFileWriter(7, obj, opts)
	var hs []Handle
	for i, v := range values {
		h := w.AddValue(v)
		hs = append(hs, Handle{BlockID: uint32(h.BlockID), ValueID: uint32(h.ValueID), ValueLen: h.ValueLen})
		if flushEvery > 0 && i%flushEvery == flushEvery-1 {
			w.FlushForTesting()
		}
	}
	if _, err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return bytes.Clone(obj.Data()), hs
}

// blobOptions are the writer options of one test file.
func blobOptions(c *block.CompressionProfile, ck block.ChecksumType, blockSize int) blob.FileWriterOptions {
	return blob.FileWriterOptions{Compression: c, ChecksumType: ck, FlushGovernor: block.MakeFlushGovernor(blockSize, 90, 0, nil)}
}

// profiles are Pebble's compressions of blob value blocks, with the
// compression each should leave on a compressible block.
var profiles = []struct {
	p    *block.CompressionProfile
	want Compression
}{
	{block.NoCompression, NoCompression},
	{block.SnappyCompression, SnappyCompression},
	{block.ZstdCompression, ZstdCompression},
	{block.MinLZCompression, MinLZCompression},
}

// pebbleReader opens a blob file with Pebble's reader, on a copy of data:
// built with invariants (as under -race), Pebble poisons buffers it is done
// with, which may be the very bytes it was handed.
func pebbleReader(t testing.TB, data []byte) *blob.FileReader {
	t.Helper()
	obj := &objstorage.MemObj{}
	if err := obj.Write(bytes.Clone(data)); err != nil {
		t.Fatal(err)
	}
	r, err := blob.NewFileReader(context.Background(), obj, blob.FileReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// pebbleLayout returns the block handles Pebble's own reader lists for a
// blob file.
func pebbleLayout(t testing.TB, data []byte) []BlockHandle {
	t.Helper()
	r := pebbleReader(t, data)
	defer r.Close()
	l, err := r.Layout()
	if err != nil {
		t.Fatal(err)
	}
	var out []BlockHandle
	for _, m := range regexp.MustCompile(`block \d+: offset=(\d+) length=(\d+)`).FindAllStringSubmatch(l, -1) {
		o, _ := strconv.ParseUint(m[1], 10, 64)
		n, _ := strconv.ParseUint(m[2], 10, 64)
		out = append(out, BlockHandle{o, n})
	}
	return out
}

func openBytes(t testing.TB, data []byte) *Reader {
	t.Helper()
	r, err := Open(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// TestPebbleBlobFiles reads blob files Pebble wrote in every compression and
// both checksums: every value by its handle and in a walk, the blocks
// where Pebble's reader lists them, in the compression asked for.
func TestPebbleBlobFiles(t *testing.T) {
	values := testValues(1, 300)
	for _, pr := range profiles {
		for _, ck := range []block.ChecksumType{block.ChecksumTypeCRC32c, block.ChecksumTypeXXHash64} {
			t.Run(fmt.Sprintf("%s/%s", pr.p.Name, ck), func(t *testing.T) {
				data, hs := pebbleBlob(t, values, blobOptions(pr.p, ck, 2048), 37)
				r := openBytes(t, data)
				f := r.Footer()
				if f.Format != FormatV1 || uint8(f.ChecksumType) != uint8(ck) || f.OriginalFileNum != 7 || f.Offset != uint64(len(data)-FooterLen) {
					t.Fatalf("footer %+v", f)
				}
				want := pebbleLayout(t, data)
				if r.NumBlocks() != len(want) || r.NumBlocks() < 10 {
					t.Fatalf("%d blocks, Pebble lists %d", r.NumBlocks(), len(want))
				}
				l := r.Layout()
				compressed := 0
				for i, b := range l.Blocks {
					if b.Handle != want[i] || b.Err != nil {
						t.Fatalf("block %d: %s %v, Pebble lists %s", i, b.Handle, b.Err, want[i])
					}
					if b.Compression == pr.want {
						compressed++
					} else if b.Compression != NoCompression {
						t.Fatalf("block %d stored with %s", i, b.Compression)
					}
				}
				if compressed == 0 {
					t.Fatalf("no block stored with %s", pr.want)
				}
				for i, h := range hs {
					v, err := r.Value(h)
					if err != nil || !bytes.Equal(v, values[i]) {
						t.Fatalf("value %d at %s: %d bytes, %v; want %d bytes", i, h, len(v), err, len(values[i]))
					}
				}
				n := 0
				err := r.Each(func(block, row int, v []byte) bool {
					if h := hs[n]; int(h.BlockID) != block || int(h.ValueID) != row || !bytes.Equal(v, values[n]) {
						t.Fatalf("walk: value %d at block %d row %d, want %s", n, block, row, h)
					}
					n++
					return true
				})
				if err != nil || n != len(values) {
					t.Fatalf("walk: %d values, %v", n, err)
				}
				// Handles the file does not hold.
				last := hs[len(hs)-1]
				for _, h := range []Handle{{BlockID: last.BlockID + 1}, {BlockID: last.BlockID, ValueID: last.ValueID + 1, ValueLen: 1},
					{BlockID: 0, ValueID: 0, ValueLen: hs[0].ValueLen + 1}} {
					if _, err := r.Value(h); !errors.Is(err, base.ErrCorruption) {
						t.Fatalf("handle %s: %v", h, err)
					}
				}
			})
		}
	}
}

// readerProvider serves Pebble's rewriter the original blob file. F is
// Pebble's file-number type, which is internal to Pebble: provide infers
// it.
type readerProvider[F any] struct{ r *blob.FileReader }

func (p readerProvider[F]) GetValueReader(context.Context, F) (blob.ValueReader, func(), error) {
	return p.r, func() {}, nil
}

// provide returns a blob.ReaderProvider of r; newWriter is
// blob.NewFileWriter, whose first parameter names the file-number type.
func provide[F any](_ func(F, objstorage.Writable, blob.FileWriterOptions) *blob.FileWriter, r *blob.FileReader) blob.ReaderProvider {
	var p any = readerProvider[F]{r} // F is only known when instantiated
	return p.(blob.ReaderProvider)
}

// rewritten has Pebble write values to a blob file and rewrite it keeping
// some values of some blocks, and returns the new file, the kept values' handles (of the
// original file) and values, and handles of dropped values.
func rewritten(t testing.TB, values [][]byte, c *block.CompressionProfile) (data []byte, kept []Handle, keptValues [][]byte, dropped []Handle) {
	t.Helper()
	orig, hs := pebbleBlob(t, values, blobOptions(c, block.ChecksumTypeCRC32c, 2048), 37)
	fr := pebbleReader(t, orig)
	defer fr.Close()
	out := &objstorage.MemObj{}
	rw := blob.NewFileRewriter(7, 7, provide(blob.NewFileWriter, fr), block.ReadEnv{}, 9, out,
		blobOptions(c, block.ChecksumTypeCRC32c, 2048))
	byBlock := map[uint32][]int{}
	var order []uint32
	for i, h := range hs {
		if _, ok := byBlock[h.BlockID]; !ok {
			order = append(order, h.BlockID)
		}
		byBlock[h.BlockID] = append(byBlock[h.BlockID], i)
	}
	for _, b := range order {
		idx := byBlock[b]
		if b%3 == 1 { // drop the whole block
			for _, i := range idx {
				dropped = append(dropped, hs[i])
			}
			continue
		}
		var ids []int
		size := 0
		for k, i := range idx {
			if k%2 == 0 && len(values[i]) > 0 {
				ids = append(ids, int(hs[i].ValueID))
				size += len(values[i])
				kept, keptValues = append(kept, hs[i]), append(keptValues, values[i])
			} else if len(values[i]) > 0 {
				dropped = append(dropped, hs[i])
			}
		}
		if len(ids) == 0 {
			continue
		}
		if err := rw.CopyBlock(context.Background(), blob.BlockID(b), size, ids); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := rw.Close(); err != nil {
		t.Fatal(err)
	}
	return bytes.Clone(out.Data()), kept, keptValues, dropped
}

// TestPebbleRewrittenBlobFile reads a blob file Pebble rewrote, dropping
// some blocks and some values: the kept values by their original handles,
// and errors for the dropped ones.
func TestPebbleRewrittenBlobFile(t *testing.T) {
	values := testValues(2, 200)
	data, kept, keptValues, dropped := rewritten(t, values, block.SnappyCompression)
	r := openBytes(t, data)
	if len(r.Virtual()) == 0 || r.Footer().OriginalFileNum != 9 {
		t.Fatalf("virtual blocks %v, footer %+v", r.Virtual(), r.Footer())
	}
	if len(pebbleLayout(t, data)) != r.NumBlocks() {
		t.Fatalf("%d blocks, Pebble lists %d", r.NumBlocks(), len(pebbleLayout(t, data)))
	}
	for i, h := range kept {
		v, err := r.Value(h)
		if err != nil || !bytes.Equal(v, keptValues[i]) {
			t.Fatalf("kept value %s: %q, %v", h, v, err)
		}
	}
	gone := 0
	for _, h := range dropped {
		if _, err := r.Value(h); err != nil {
			if !errors.Is(err, base.ErrCorruption) {
				t.Fatalf("dropped value %s: %v", h, err)
			}
			gone++
		}
	}
	if len(dropped) == 0 || gone != len(dropped) {
		t.Fatalf("%d of %d dropped values are errors", gone, len(dropped))
	}
}
