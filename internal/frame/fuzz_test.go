package frame

import (
	"bytes"
	"encoding/binary"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/golang/snappy"
)

func FuzzReader(f *testing.F) {
	stream, _ := smallStream()
	f.Add(stream, uint16(64), false)
	f.Add(AppendMessage(nil, nil), uint16(0), true)
	f.Add(AppendMessage(nil, []byte("hello, hello, hello")), uint16(100), true)
	rng := rand.New(rand.NewPCG(13, 14))
	f.Add(encode(f, rng, payload(rng, 3000, true), WithSize(1000)), uint16(1000), true)
	f.Fuzz(func(t *testing.T, data []byte, maxFrame uint16, fix bool) {
		if fix {
			// Repair the checksums, so that the fuzzer gets past them to
			// the lengths, Snappy data and end frame checks.
			data = fixChecksums(bytes.Clone(data))
		}
		got, err := io.ReadAll(NewReader(bytes.NewReader(data), int(maxFrame)))
		msg, merr := ReadMessage(bytes.NewReader(data), 1<<20)
		if err != nil {
			return
		}
		// A stream read to a valid end re-encodes to a stream with the
		// same payload, and ReadMessage agrees.
		again, err := io.ReadAll(NewReader(bytes.NewReader(AppendMessage(nil, got)), 0))
		if err != nil || !bytes.Equal(again, got) {
			t.Fatalf("re-encoded stream reads back %d bytes, %v; want %d", len(again), err, len(got))
		}
		if merr != nil || !bytes.Equal(msg, got) {
			t.Fatalf("ReadMessage: %d bytes, %v; Reader: %d bytes", len(msg), merr, len(got))
		}
	})
}

// fixChecksums sets the checksum of every frame in stream whose payload can
// be decoded to the payload's.
func fixChecksums(stream []byte) []byte {
	for off := 0; off+headerLen <= len(stream); {
		h := stream[off:]
		end := off + headerLen + int(binary.LittleEndian.Uint32(h[1:5]))
		if end > len(stream) || end < off {
			break
		}
		p := stream[off+headerLen : end]
		if h[0]&flagSnappy != 0 {
			if n, err := snappy.DecodedLen(p); err != nil || n > 1<<20 {
				break
			}
			var err error
			if p, err = snappy.Decode(nil, p); err != nil {
				break
			}
		}
		binary.LittleEndian.PutUint32(h[5:9], checksum(p))
		off = end
	}
	return stream
}

func FuzzRecordReader(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{2, 2, 'k', '1', 2, 'v', '1', 0, 1, 0})
	f.Add([]byte{1, 0x81, 0x00})
	f.Add([]byte{3, 1, 'a'})
	f.Fuzz(func(t *testing.T, p []byte) {
		// p is the payload of an intact stream, so the records are what is
		// under test; cut it into frames of a size p chooses.
		size := 1
		if len(p) > 0 {
			size = 1 + int(p[0]%32)
		}
		var buf bytes.Buffer
		w := NewWriter(&buf, WithSize(size))
		w.Write(p)
		w.Close()
		recs, err := readRecords(bytes.NewReader(buf.Bytes()), size, 64)
		if err != nil {
			return
		}
		// Lengths are canonical, so records that read back re-encode to p.
		var out bytes.Buffer
		w = NewWriter(&out)
		rw := NewRecordWriter(w)
		for _, rec := range recs {
			if err := rw.Append(rec...); err != nil {
				t.Fatal(err)
			}
		}
		w.Close()
		again, err := ReadMessage(&out, 1<<20)
		if err != nil || !bytes.Equal(again, p) {
			t.Fatalf("records re-encode to %x, %v; want %x", again, err, p)
		}
	})
}
