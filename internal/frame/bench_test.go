package frame

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"
)

const benchLen = 4 << 20

func benchPayloads() map[string][]byte {
	rng := rand.New(rand.NewPCG(15, 16))
	return map[string][]byte{
		"compressible":   payload(rng, benchLen, true),
		"incompressible": payload(rng, benchLen, false),
	}
}

// BenchmarkWriter writes 4 MiB in 16 KiB pieces to io.Discard.
func BenchmarkWriter(b *testing.B) {
	for name, p := range benchPayloads() {
		b.Run(name, func(b *testing.B) {
			w := NewWriter(io.Discard)
			b.SetBytes(int64(len(p)))
			b.ReportAllocs()
			for b.Loop() {
				for i := 0; i < len(p); i += 16 << 10 {
					w.Write(p[i : i+16<<10])
				}
				w.Flush()
			}
		})
	}
}

// BenchmarkReader reads a 4 MiB stream.
func BenchmarkReader(b *testing.B) {
	for name, p := range benchPayloads() {
		b.Run(name, func(b *testing.B) {
			stream := AppendMessage(nil, p)
			buf := make([]byte, 32<<10)
			var r Reader
			br := bytes.NewReader(nil)
			b.SetBytes(int64(len(p)))
			b.ReportAllocs()
			for b.Loop() {
				br.Reset(stream)
				r = Reader{r: br, max: DefaultSize, stored: r.stored, dec: r.dec}
				for {
					if _, err := r.Read(buf); err != nil {
						if err != io.EOF {
							b.Fatal(err)
						}
						break
					}
				}
			}
		})
	}
}

// BenchmarkRoundTrip writes a 4 MiB stream through a Writer and reads it
// back through a Reader.
func BenchmarkRoundTrip(b *testing.B) {
	for name, p := range benchPayloads() {
		b.Run(name, func(b *testing.B) {
			var stream bytes.Buffer
			buf := make([]byte, 32<<10)
			b.SetBytes(int64(len(p)))
			b.ReportAllocs()
			for b.Loop() {
				stream.Reset()
				w := NewWriter(&stream)
				w.Write(p)
				w.Close()
				r := NewReader(&stream, 0)
				for {
					if _, err := r.Read(buf); err != nil {
						if err != io.EOF {
							b.Fatal(err)
						}
						break
					}
				}
			}
		})
	}
}

// BenchmarkRecords writes and reads 16-byte keys with 100-byte values.
func BenchmarkRecords(b *testing.B) {
	const n = 10000
	keys := make([][]byte, n)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "key-%012d", i)
	}
	val := bytes.Repeat([]byte("v"), 100)
	var stream bytes.Buffer
	b.SetBytes(int64(n * (len(keys[0]) + len(val))))
	b.ReportAllocs()
	for b.Loop() {
		stream.Reset()
		w := NewWriter(&stream)
		rw := NewRecordWriter(w)
		for _, k := range keys {
			rw.Append(k, val)
		}
		w.Close()
		rr := NewRecordReader(NewReader(&stream, 0), 0)
		for {
			if _, err := rr.Next(); err != nil {
				if err != io.EOF {
					b.Fatal(err)
				}
				break
			}
		}
	}
}
