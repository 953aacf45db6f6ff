package sstable

import (
	"bytes"
	"testing"
)

// compressionIf is NoCompression when off, else the default.
func compressionIf(off bool) Compression {
	if off {
		return NoCompression
	}
	return DefaultCompression
}

// TestCompressionDefault: the zero value writes Snappy blocks, as
// SnappyCompression does, and NoCompression writes none; a trailer's code
// that names no compression reads as unknown, with its code.
func TestCompressionDefault(t *testing.T) {
	write := func(c Compression) *Reader {
		var buf bytes.Buffer
		w, err := NewWriter(&buf, WriterOptions{Compression: c})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 1000 {
			if err := w.Set([]byte{byte(i >> 8), byte(i)}, bytes.Repeat([]byte("v"), 100)); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		r, err := NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()), ReaderOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	for c, want := range map[Compression]Compression{DefaultCompression: SnappyCompression, SnappyCompression: SnappyCompression, NoCompression: NoCompression} {
		r := write(c)
		if got := r.Properties().CompressionName; got != want.String() {
			t.Errorf("%v: properties name %q, want %q", c, got, want)
		}
		for _, b := range r.Layout().Blocks {
			if b.Kind == BlockData && b.Compression != want {
				t.Errorf("%v: data block %s is %v, want %v", c, b.Handle, b.Compression, want)
			}
		}
	}
	if _, err := NewWriter(&bytes.Buffer{}, WriterOptions{Compression: ZstdCompression}); err == nil {
		t.Error("a writer took zstd, which it cannot write")
	}
	if got := compressionOf(5).String(); got != "Compression(code 5)" {
		t.Errorf("code 5: %q", got)
	}
	for c := NoCompression; c <= MinLZCompression; c++ {
		if compressionOf(byte(c.code())) != c {
			t.Errorf("%v: code %d reads back as %v", c, c.code(), compressionOf(byte(c.code())))
		}
	}
}
