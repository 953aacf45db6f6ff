package difffile

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash/crc32"
	"strings"
	"testing"
)

// sampleFilter returns a filter of n keys, one of them added 20 times so that
// some counters are saturated.
func sampleFilter(t testing.TB, capacity, n int) *Filter {
	t.Helper()
	f := mustNew(t, capacity, 0)
	keys := testKeys(9, n)
	for _, k := range keys {
		f.Add(k)
	}
	if n > 0 {
		for range 20 {
			f.Add(keys[0])
		}
	}
	return f
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	for _, c := range [][2]int{{0, 0}, {100, 0}, {100, 100}, {10_000, 12_000}} {
		f := sampleFilter(t, c[0], c[1])
		enc := f.Encode()
		if len(enc) != f.EncodedLen() {
			t.Fatalf("encoding of %d bytes, EncodedLen %d", len(enc), f.EncodedLen())
		}
		g, err := Decode(enc)
		if err != nil {
			t.Fatal(err)
		}
		if g.Count() != f.Count() || g.Saturated() != f.Saturated() || g.K() != f.K() ||
			g.Lines() != f.Lines() || g.Capacity() != f.Capacity() || g.CountersPerKey() != f.CountersPerKey() ||
			g.DesignFPRate() != f.DesignFPRate() || g.growthLoad != f.growthLoad {
			t.Fatalf("decoded filter differs: count %d/%d, saturated %d/%d, k %d/%d, lines %d/%d, capacity %d/%d",
				g.Count(), f.Count(), g.Saturated(), f.Saturated(), g.K(), f.K(), g.Lines(), f.Lines(), g.Capacity(), f.Capacity())
		}
		if c[1] > 0 && g.Saturated() == 0 {
			t.Fatal("no saturated counter in the sample")
		}
		for _, k := range append(testKeys(9, c[1]), testKeys(10, 20_000)...) {
			if f.MayContain(k) != g.MayContain(k) {
				t.Fatalf("decoded filter answers differently for %x", k)
			}
		}
		if !bytes.Equal(g.Encode(), enc) {
			t.Fatal("re-encoding differs")
		}
		prefix := []byte("prefix")
		if got := f.AppendEncoded(prefix); !bytes.Equal(got[:len(prefix)], prefix) || !bytes.Equal(got[len(prefix):], enc) {
			t.Fatal("AppendEncoded does not append the encoding")
		}
	}
}

func TestEncodingIsStable(t *testing.T) {
	f := mustNew(t, 16, 0)
	f.Add([]byte("a"))
	f.Add([]byte("b"))
	f.Add([]byte("b"))
	enc := f.Encode()
	const header = "626b6466" + "01" + "05" + "08" + "00" + "1000000000000000" + "0100000000000000" + "0300000000000000"
	if got := hex.EncodeToString(enc[:headerLen]); got != header {
		t.Fatalf("header %s, want %s", got, header)
	}
	if f.EstimateCount() != 3 {
		t.Fatalf("EstimateCount %v", f.EstimateCount())
	}
}

func wantCorruption(t *testing.T, data []byte, what string) error {
	t.Helper()
	f, err := Decode(data)
	if err == nil {
		t.Fatalf("%s: Decode accepted it (%d lines)", what, f.Lines())
	}
	if !errors.Is(err, ErrCorruption) {
		t.Fatalf("%s: error %v does not wrap ErrCorruption", what, err)
	}
	return err
}

func TestDecodeRejectsEveryBitFlipAndTruncation(t *testing.T) {
	enc := sampleFilter(t, 100, 80).Encode()
	for i := range len(enc) * 8 {
		bad := bytes.Clone(enc)
		bad[i/8] ^= 1 << (i % 8)
		wantCorruption(t, bad, "bit flip")
	}
	for n := range len(enc) {
		wantCorruption(t, enc[:n], "truncation")
	}
	wantCorruption(t, append(bytes.Clone(enc), 0), "a trailing byte")
	wantCorruption(t, append(bytes.Clone(enc), make([]byte, LineBytes)...), "a trailing line")
}

// resum recomputes the checksum of an edited encoding, so that Decode's
// parameter checks rather than its checksum see the edit.
func resum(b []byte) []byte {
	n := len(b) - checksumLen
	binary.LittleEndian.PutUint32(b[n:], crc32.Checksum(b[:n], castagnoli))
	return b
}

func TestDecodeRejectsImpossibleParameters(t *testing.T) {
	enc := sampleFilter(t, 100, 50).Encode()
	for _, c := range []struct {
		name, want string
		edit       func(b []byte) []byte
	}{
		{"magic", "offset 0", func(b []byte) []byte { b[0] = 'x'; return b }},
		{"version", "offset 4", func(b []byte) []byte { b[4] = 2; return b }},
		{"reserved", "offset 7", func(b []byte) []byte { b[7] = 1; return b }},
		{"k zero", "offset 5", func(b []byte) []byte { b[5] = 0; return b }},
		{"k too large", "offset 5", func(b []byte) []byte { b[5] = maxProbes + 1; return b }},
		{"counters per key zero", "offset 6", func(b []byte) []byte { b[6] = 0; return b }},
		{"counters per key too large", "offset 6", func(b []byte) []byte { b[6] = MaxCountersPerKey + 1; return b }},
		{"capacity too small", "offset 8", func(b []byte) []byte { binary.LittleEndian.PutUint64(b[8:], 10); return b }},
		{"capacity too large", "offset 8", func(b []byte) []byte { binary.LittleEndian.PutUint64(b[8:], 1<<62); return b }},
		{"negative count", "offset 24", func(b []byte) []byte { binary.LittleEndian.PutUint64(b[24:], 1<<63); return b }},
		{"zero lines", "offset 16", func(b []byte) []byte {
			binary.LittleEndian.PutUint64(b[16:], 0)
			return append(b[:headerLen], 0, 0, 0, 0)
		}},
		{"lines beyond the data", "offset 16", func(b []byte) []byte { binary.LittleEndian.PutUint64(b[16:], 1<<40); return b }},
		{"line count overflowing", "offset 16", func(b []byte) []byte { binary.LittleEndian.PutUint64(b[16:], 1<<58+7); return b }},
		{"checksum", "offset", func(b []byte) []byte { b[len(b)-1] ^= 1; return b }},
	} {
		edited := c.edit(bytes.Clone(enc))
		if c.name != "checksum" {
			edited = resum(edited)
		}
		err := wantCorruption(t, edited, c.name)
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %q does not name %s", c.name, err, c.want)
		}
	}
}
