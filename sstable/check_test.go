package sstable

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/bloomkv/bloomkv/internal/base"
)

// reseal recomputes the checksum of the block at bh after a test changed it.
func reseal(data []byte, bh BlockHandle) {
	typ := data[bh.Offset+bh.Length]
	binary.LittleEndian.PutUint32(data[bh.Offset+bh.Length+1:], maskedCRC(data[bh.Offset:bh.Offset+bh.Length], typ))
}

// TestCheckFindsProblems damages tables in the ways Check looks for: each
// damage is reported.
func TestCheckFindsProblems(t *testing.T) {
	var spec tableSpec
	for i := range 400 {
		spec.entries = append(spec.entries, entry{base.MakeInternalKey(fmt.Appendf(nil, "k%04d", i), 5, base.KindSet), []byte("v")})
	}
	opts := WriterOptions{BlockSize: 256, BlockRestartInterval: 1, Compression: NoCompression}
	clean := writeSpec(t, spec, opts)
	l := openTable(t, clean).Layout()

	t.Run("checksum", func(t *testing.T) {
		data := bytes.Clone(clean)
		b := l.Blocks[indexOfKind(l, BlockData)+1]
		data[b.Handle.Offset+3] ^= 0x10
		rd := openTable(t, data)
		lay := rd.Layout()
		if got := lay.Blocks[indexOfKind(l, BlockData)+1]; !errors.Is(got.Err, ErrCorruption) {
			t.Fatalf("layout: damaged block has error %v", got.Err)
		}
		rep := rd.Check()
		err := rep.Err()
		if !errors.Is(err, ErrCorruption) || !strings.Contains(err.Error(), "checksum mismatch") || !strings.Contains(err.Error(), b.Handle.String()) {
			t.Fatalf("check: %v", err)
		}
		if rep.Entries == 0 || rep.Complete {
			t.Fatalf("check stopped at the damaged block, or called the report complete: %+v", rep)
		}
		if rep.Largest == nil || !bytes.Equal(rep.Largest.UserKey, []byte("k0399")) {
			t.Fatalf("largest key read %v, want k0399", rep.Largest)
		}
	})
	t.Run("order", func(t *testing.T) {
		data := bytes.Clone(clean)
		// With no prefix compression the key is in the block as written;
		// ':' sorts after '9', so k0100 becomes k010: after k0101..k0109.
		i := bytes.Index(data, []byte("k0100"))
		data[i+4] = ':'
		for _, b := range l.Blocks {
			if b.Kind == BlockData && uint64(i) >= b.Handle.Offset && uint64(i) < b.Handle.Offset+b.Handle.Length {
				reseal(data, b.Handle)
			}
		}
		rep := openTable(t, data).Check()
		var all []string
		for _, p := range rep.Problems {
			all = append(all, p.Error())
		}
		joined := strings.Join(all, "\n")
		for _, want := range []string{"out of order", "index separator", "false negative"} {
			if !strings.Contains(joined, want) {
				t.Fatalf("no problem mentions %q:\n%s", want, joined)
			}
		}
	})
	t.Run("false negative", func(t *testing.T) {
		data := bytes.Clone(clean)
		fb := l.Blocks[indexOfKind(l, BlockFilter)].Handle
		clear(data[fb.Offset : fb.Offset+64]) // the first line's bits
		reseal(data, fb)
		rep := openTable(t, data).Check()
		if err := rep.Err(); err == nil || !strings.Contains(err.Error(), "false negative") {
			t.Fatalf("check: %v", err)
		}
	})
	t.Run("footer padding", func(t *testing.T) {
		for _, format := range []TableFormat{TableFormatLevelDB, TableFormatRocksDBv2} {
			o := opts
			o.TableFormat = format
			data := writeSpec(t, spec, o)
			data[len(data)-9] = 0x5a // the last padding byte, just before the version or magic
			if format == TableFormatRocksDBv2 {
				data[len(data)-13] = 0x5a
				data[len(data)-9] = 0
			}
			err := openTable(t, data).Check().Err()
			if err == nil || !strings.Contains(err.Error(), "padding byte") {
				t.Fatalf("%v: check: %v", format, err)
			}
		}
	})
	t.Run("properties", func(t *testing.T) {
		var b bytes.Buffer
		w, _ := NewWriter(&b, opts)
		for _, e := range spec.entries {
			w.Add(e.key, e.value)
		}
		w.props.NumEntries = 7 // a writer that miscounts
		w.Close()
		err := openTable(t, b.Bytes()).Check().Err()
		if err == nil || !strings.Contains(err.Error(), "properties state 7 entries") {
			t.Fatalf("check: %v", err)
		}
	})
}
