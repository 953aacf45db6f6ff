package filterblock

import (
	"errors"
	"testing"
)

// FuzzDecode feeds arbitrary bytes to Decode: it must return a Filter or an
// error wrapping ErrCorruption, never panic, and a Filter it returns must
// answer probes without panicking.
func FuzzDecode(f *testing.F) {
	for _, n := range []int{0, 1, 3, 200} {
		enc := encodeKeys(10, randomKeys(uint64(n), n, 0))
		f.Add(enc)
		if len(enc) > trailerLen {
			flipped := append([]byte(nil), enc...)
			flipped[len(flipped)-trailerLen] ^= 0x40
			f.Add(flipped)
		}
	}
	probes := randomKeys(999, 32, 1)
	f.Fuzz(func(t *testing.T, data []byte) {
		filter, err := Decode(data)
		if err != nil {
			if !errors.Is(err, ErrCorruption) {
				t.Fatalf("error %v does not wrap ErrCorruption", err)
			}
			return
		}
		for _, k := range probes {
			filter.MayContain(k)
		}
		if info := filter.Stats(); info.EncodedLength != len(data) {
			t.Fatalf("info %+v for %d bytes", info, len(data))
		}
	})
}

// FuzzDecodeWire feeds arbitrary bytes to DecodeWire, as they are and with
// their checksum fixed up (so that the fuzzer explores the body parser rather
// than the checksum): it must return a filter or an error, never panic; a
// filter it returns must re-encode to bytes that decode to the same filter.
func FuzzDecodeWire(f *testing.F) {
	for _, fill := range []float64{0, 0.01, 0.2, 0.5, 0.9, 1} {
		enc := bloomWithFill(f, 777, fill, 3).AppendWire(nil)
		f.Add(enc[:len(enc)-wireCRCLen]) // a body: the target adds the checksum
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, in := range [][]byte{data, withWireCRC(data)} {
			b, err := DecodeWire(in, 1<<16)
			if err != nil {
				if !errors.Is(err, ErrCorruption) && !errors.Is(err, ErrTooLarge) {
					t.Fatalf("error %v wraps neither ErrCorruption nor ErrTooLarge", err)
				}
				continue
			}
			again, err := DecodeWire(b.AppendWire(nil), 1<<16)
			if err != nil {
				t.Fatalf("re-encoded filter does not decode: %v", err)
			}
			if !again.Equal(b) {
				t.Fatal("re-encoded filter differs")
			}
		}
	})
}
