package blobfile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/sstable/blob"
	"github.com/cockroachdb/pebble/v2/sstable/block"

	"github.com/bloomkv/bloomkv/internal/base"
)

// readAll opens data and reads every value, returning the first error.
func readAll(data []byte) error {
	r, err := Open(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return err
	}
	defer r.Close()
	for _, b := range r.Layout().Blocks {
		if b.Err != nil {
			return b.Err
		}
	}
	return r.Each(func(int, int, []byte) bool { return true })
}

// expectDamage asserts that err reports damage (or an unsupported format)
// and names an offset.
func expectDamage(t *testing.T, what string, err error) {
	t.Helper()
	switch {
	case err == nil:
		t.Fatalf("%s: no error", what)
	case !errors.Is(err, base.ErrCorruption) && !errors.Is(err, base.ErrUnsupportedFormat):
		t.Fatalf("%s: %v does not wrap ErrCorruption", what, err)
	case !strings.Contains(err.Error(), "offset"):
		t.Fatalf("%s: %v names no offset", what, err)
	}
}

// TestDamagedBlobFiles truncates a Pebble blob file at every class of
// length (empty, shorter than a footer, within a value block, at block and
// trailer boundaries, within the index block and the footer) and flips
// random bits in it: each must fail to open or to read, with an error that
// wraps ErrCorruption and names an offset, and never panic.
func TestDamagedBlobFiles(t *testing.T) {
	for _, pr := range profiles {
		t.Run(pr.p.Name, func(t *testing.T) {
			data, _ := pebbleBlob(t, testValues(3, 120), blobOptions(pr.p, block.ChecksumTypeCRC32c, 1024), 0)
			r := openBytes(t, data)
			first, idx := r.BlockHandle(0), r.Footer().Index
			n := len(data)
			cuts := []struct {
				name string
				at   int
			}{
				{"empty", 0},
				{"one byte", 1},
				{"shorter than a footer", FooterLen - 1},
				{"a footer's length", FooterLen},
				{"within the first value block", int(first.Offset + first.Length/2)},
				{"at the first block's trailer", int(first.Offset + first.Length)},
				{"within the first block's trailer", int(first.Offset + first.Length + 2)},
				{"after the first block", int(first.Offset + first.Length + TrailerLen)},
				{"at the index block", int(idx.Offset)},
				{"within the index block", int(idx.Offset + idx.Length/2)},
				{"at the index block's trailer", int(idx.Offset + idx.Length)},
				{"without the footer", n - FooterLen},
				{"within the footer's checksum", n - FooterLen + 2},
				{"within the footer's handle", n - FooterLen + 10},
				{"before the format byte", n - 17},
				{"within the magic", n - 4},
				{"without the last byte", n - 1},
			}
			for _, c := range cuts {
				expectDamage(t, c.name, readAll(data[:c.at]))
			}
			rng := rand.New(rand.NewPCG(4, uint64(pr.want)))
			for i := range 300 {
				d := bytes.Clone(data)
				at := rng.IntN(n)
				if i%4 == 0 { // every fourth flip in the index block or footer
					at = int(idx.Offset) + rng.IntN(n-int(idx.Offset))
				}
				d[at] ^= 1 << rng.IntN(8)
				expectDamage(t, "bit flipped at offset "+strconv.Itoa(at), readAll(d))
			}
		})
	}
}

// reseal rewrites a blob file's footer with format version f and checksum
// type c, and a valid footer checksum.
func reseal(data []byte, f uint8, c ChecksumType) []byte {
	d := bytes.Clone(data)
	ft := d[len(d)-FooterLen:]
	ft[20], ft[21] = byte(c), f
	binary.LittleEndian.PutUint32(ft, maskedCRC(ft[4:]))
	return d
}

// TestUnsupportedBlobFiles checks that a format version, checksum type or
// compression Pebble does not write is reported as unsupported, not as
// damage.
func TestUnsupportedBlobFiles(t *testing.T) {
	data, _ := pebbleBlob(t, testValues(5, 20), blobOptions(block.NoCompression, block.ChecksumTypeCRC32c, 1024), 0)
	if err := readAll(reseal(data, FormatV1, ChecksumCRC32C)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		f uint8
		c ChecksumType
	}{{2, ChecksumCRC32C}, {0, ChecksumCRC32C}, {FormatV1, ChecksumXXHash}, {FormatV1, ChecksumNone}} {
		err := readAll(reseal(data, c.f, c.c))
		if !errors.Is(err, base.ErrUnsupportedFormat) || errors.Is(err, base.ErrCorruption) {
			t.Errorf("format %d, checksum %s: %v", c.f, c.c, err)
		}
	}
	if err := readAll(reseal(data, FormatV1, 9)); !errors.Is(err, base.ErrCorruption) {
		t.Errorf("checksum type 9: %v", err)
	}
	// A value block stored with LZ4, its checksum made good.
	r := openBytes(t, data)
	h := r.BlockHandle(0)
	d := bytes.Clone(data)
	d[h.Offset+h.Length] = 4
	binary.LittleEndian.PutUint32(d[h.Offset+h.Length+1:], maskedCRC(d[h.Offset:h.Offset+h.Length+1]))
	if err := readAll(d); !errors.Is(err, base.ErrUnsupportedFormat) || !strings.Contains(err.Error(), "lz4") {
		t.Errorf("LZ4 block: %v", err)
	}
}

// TestInlineHandles decodes the handles Pebble encodes, with every kind of
// prefix byte, and refuses damaged ones.
func TestInlineHandles(t *testing.T) {
	for _, h := range []blob.InlineHandle{
		{},
		{InlineHandlePreface: blob.InlineHandlePreface{ReferenceID: 3, ValueLen: 29357353}, HandleSuffix: blob.HandleSuffix{BlockID: 194, ValueID: 2952}},
		{InlineHandlePreface: blob.InlineHandlePreface{ReferenceID: 1<<32 - 1, ValueLen: 1<<32 - 1}, HandleSuffix: blob.HandleSuffix{BlockID: 1<<32 - 1, ValueID: 1<<32 - 1}},
	} {
		for _, prefix := range []byte{0x40, 0x47, 0x60, 0x65} {
			enc := make([]byte, 1+blob.MaxInlineHandleLength)
			enc[0] = prefix
			enc = enc[:1+h.Encode(enc[1:])]
			got, err := DecodeInlineHandle(enc)
			want := InlineHandle{Prefix: prefix, ReferenceIndex: uint32(h.ReferenceID),
				Handle: Handle{BlockID: uint32(h.BlockID), ValueID: uint32(h.ValueID), ValueLen: h.ValueLen}}
			if err != nil || got != want || got.ShortAttribute() != prefix&7 || got.SetHasSamePrefix() != (prefix&0x20 != 0) {
				t.Fatalf("%x: %+v, %v; want %+v", enc, got, err, want)
			}
			if !bytes.Equal(AppendInlineHandle(nil, got), enc) {
				t.Fatalf("%x re-encodes as %x", enc, AppendInlineHandle(nil, got))
			}
			for i := range len(enc) {
				expectDamage(t, "handle cut to "+strconv.Itoa(i)+" bytes", errOf(DecodeInlineHandle(enc[:i])))
			}
			expectDamage(t, "handle with a byte after it", errOf(DecodeInlineHandle(append(enc, 0))))
		}
	}
	for _, bad := range [][]byte{{0x00, 1, 2, 3, 4}, {0x80, 1, 2, 3, 4}, {0x40, 0x80, 0x80, 0x80, 0x80, 0x80, 0, 1, 1, 1}, {0x40, 0xff, 0xff, 0xff, 0xff, 0x1f, 1, 1, 1}} {
		expectDamage(t, fmt.Sprintf("handle %x", bad), errOf(DecodeInlineHandle(bad)))
	}
}

func errOf[T any](_ T, err error) error { return err }
