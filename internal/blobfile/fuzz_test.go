package blobfile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/sstable/blob"
	"github.com/cockroachdb/pebble/v2/sstable/block"

	"github.com/bloomkv/bloomkv/internal/base"
)

// checkErr fails the fuzz run on an error that is neither damage nor an
// unsupported format.
func checkErr(t *testing.T, err error) {
	t.Helper()
	if err != nil && !errors.Is(err, base.ErrCorruption) && !errors.Is(err, base.ErrUnsupportedFormat) {
		t.Fatalf("error %v wraps neither ErrCorruption nor ErrUnsupportedFormat", err)
	}
}

// maxFuzzBlob bounds FuzzBlobFile's inputs. The fuzzer minimizes each
// input that finds new coverage by trying to drop every run of its bytes, a
// count of runs quadratic in its length, and fuzzes nothing meanwhile: with
// files of kilobytes as seeds, a short run spends its time minimizing. Every
// path of the reader is within reach of a file of a few small blocks.
const maxFuzzBlob = 256

// FuzzBlobFile opens any bytes as a blob file and reads all it can, and
// decodes the same bytes as an index block and as a value block (which a
// whole file's checksums keep the fuzzer from reaching). It is seeded with
// small blob files Pebble wrote in each compression (and one it rewrote),
// and their blocks.
func FuzzBlobFile(f *testing.F) {
	add := func(data []byte) {
		if len(data) > maxFuzzBlob {
			f.Fatalf("a seed of %d bytes, over the %d the target reads", len(data), maxFuzzBlob)
		}
		f.Add(data)
	}
	// Values that compress and values that do not, and an empty one, in
	// blocks of two: each compression stores some blocks compressed.
	values := [][]byte{
		[]byte("value 0"),
		bytes.Repeat([]byte("value 1; "), 4),
		{},
		{0x8f, 0x3a, 0x11, 0xd2, 0x64, 0x09, 0xe7, 0x5b, 0xc0, 0x2e, 0x93, 0x71},
		bytes.Repeat([]byte("value 4; "), 4),
	}
	for _, pr := range profiles {
		data, _ := pebbleBlob(f, values, blobOptions(pr.p, block.ChecksumTypeCRC32c, 256), 2)
		add(data)
		r, err := Open(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			f.Fatal(err)
		}
		ix := r.Footer().Index
		add(data[ix.Offset : ix.Offset+ix.Length])
		if pr.want == NoCompression {
			h := r.BlockHandle(0)
			add(data[h.Offset : h.Offset+h.Length])
		}
	}
	// A rewritten file: three blocks of values mostly empty (which the
	// rewrite neither keeps nor drops) become one, holding a few values of
	// the first block and of the last, so that the virtual blocks map two
	// blocks into it, one at an offset, and the middle one, dropped, to
	// none.
	var sparse [][]byte
	for i := range 80 {
		v := []byte{}
		if i%6 == 0 {
			v = fmt.Appendf(nil, "v%d", i)
		}
		sparse = append(sparse, v)
	}
	data, _, _, _ := rewritten(f, sparse, block.NoCompression)
	r, err := Open(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		f.Fatal(err)
	}
	if v := r.Virtual(); len(v) != 3 || v[0].Physical != 0 || v[1].Physical != NoBlock || v[2].Physical != 0 || v[2].ValueIDOffset == 0 {
		f.Fatalf("the rewritten file's virtual blocks: %v", v)
	}
	r.Close()
	add(data)
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > maxFuzzBlob {
			return
		}
		if ix, err := decodeIndexBlock(data); err == nil {
			if ix.check(1<<40) == nil {
				for i := range int(ix.blocks) {
					ix.handle(i)
				}
			}
		} else {
			checkErr(t, err)
		}
		if col, err := decodeValueBlock(data); err == nil {
			total := 0
			for i := range col.Len() {
				total += len(col.At(i))
			}
			if total > len(data) {
				t.Fatalf("%d values of %d bytes in a block of %d", col.Len(), total, len(data))
			}
		} else {
			checkErr(t, err)
		}
		fuzzRead(t, data)
		fuzzRead(t, resealed(data))
	})
}

// fuzzRead opens data as a blob file and reads every block and value, and
// a value of every virtual block.
func fuzzRead(t *testing.T, data []byte) {
	r, err := Open(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		checkErr(t, err)
		return
	}
	defer r.Close()
	for _, b := range r.Layout().Blocks {
		checkErr(t, b.Err)
	}
	checkErr(t, r.Each(func(block, row int, v []byte) bool {
		_, err := r.Value(Handle{BlockID: uint32(block), ValueID: uint32(row), ValueLen: uint32(len(v))})
		checkErr(t, err)
		return true
	}))
	for i := range len(r.Virtual()) {
		_, err := r.Value(Handle{BlockID: uint32(i)})
		checkErr(t, err)
	}
}

// resealed returns a copy of data with good checksums in the footer, the
// index block and each value block the index lists (when stored
// uncompressed), so that the fuzzer's changes reach the decoders behind
// them.
func resealed(data []byte) []byte {
	if len(data) < FooterLen {
		return data
	}
	d := bytes.Clone(data)
	foot := uint64(len(d) - FooterLen)
	ft := d[foot:]
	binary.LittleEndian.PutUint32(ft, maskedCRC(ft[4:]))
	seal := func(h BlockHandle, limit uint64) bool {
		if !fits(h, limit) {
			return false
		}
		end := h.Offset + h.Length
		binary.LittleEndian.PutUint32(d[end+1:], checksum(ChecksumType(ft[20]), d[h.Offset:end+1]))
		return true
	}
	ih := BlockHandle{binary.LittleEndian.Uint64(ft[4:]), binary.LittleEndian.Uint64(ft[12:])}
	if !seal(ih, foot) || d[ih.Offset+ih.Length] != byte(NoCompression) {
		return d
	}
	ix, err := decodeIndexBlock(bytes.Clone(d[ih.Offset : ih.Offset+ih.Length]))
	if err != nil {
		return d
	}
	for i := range min(int(ix.blocks), 1000) {
		if o, e := ix.offsets.At(i), ix.offsets.At(i+1); e >= o+TrailerLen {
			seal(BlockHandle{o, e - o - TrailerLen}, ih.Offset)
		}
	}
	return d
}

// FuzzInlineHandle decodes any bytes as an inline handle; what decodes must
// decode the same with Pebble's decoder, and re-encode to bytes that
// decode the same. It is seeded with handles Pebble encoded.
func FuzzInlineHandle(f *testing.F) {
	for _, h := range []blob.InlineHandle{
		{InlineHandlePreface: blob.InlineHandlePreface{ReferenceID: 0, ValueLen: 300}, HandleSuffix: blob.HandleSuffix{BlockID: 2, ValueID: 17}},
		{InlineHandlePreface: blob.InlineHandlePreface{ReferenceID: 5, ValueLen: 1 << 20}, HandleSuffix: blob.HandleSuffix{BlockID: 70000, ValueID: 1<<32 - 1}},
	} {
		enc := make([]byte, 1+blob.MaxInlineHandleLength)
		enc[0] = 0x43
		f.Add(enc[:1+h.Encode(enc[1:])])
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := DecodeInlineHandle(data)
		if err != nil {
			checkErr(t, err)
			return
		}
		pre, rest := blob.DecodeInlineHandlePreface(data[1:])
		suf := blob.DecodeHandleSuffix(rest)
		if uint32(pre.ReferenceID) != h.ReferenceIndex || pre.ValueLen != h.ValueLen || uint32(suf.BlockID) != h.BlockID || uint32(suf.ValueID) != h.ValueID {
			t.Fatalf("%x: %+v; Pebble decodes %+v %+v", data, h, pre, suf)
		}
		enc := AppendInlineHandle(nil, h)
		if len(enc) > MaxInlineHandleLen {
			t.Fatalf("%+v encodes in %d bytes", h, len(enc))
		}
		if h2, err := DecodeInlineHandle(enc); err != nil || h2 != h {
			t.Fatalf("%+v re-encodes as %x, which decodes as %+v, %v", h, enc, h2, err)
		}
	})
}
