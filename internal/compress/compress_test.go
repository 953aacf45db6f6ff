package compress

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/golang/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/minio/minlz"

	"github.com/bloomkv/bloomkv/internal/base"
)

// block is a compressible block of n bytes.
func block(n int) []byte {
	var b []byte
	for i := 0; len(b) < n; i++ {
		b = binary.AppendUvarint(b, uint64(i%97))
		b = append(b, "value"...)
	}
	return b[:n]
}

// stored returns raw as a block stored with compression t.
func stored(t testing.TB, c Type, raw []byte) []byte {
	switch c {
	case None:
		return raw
	case Snappy:
		return snappy.Encode(nil, raw)
	case Zstd:
		e, err := zstd.NewWriter(nil)
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		return e.EncodeAll(raw, binary.AppendUvarint(nil, uint64(len(raw))))
	case MinLZ:
		b, err := minlz.Encode(nil, raw, minlz.LevelBalanced)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	t.Fatalf("no encoder for %s", c)
	return nil
}

// decompress decompresses src in both steps.
func decompress(c Type, src []byte, limit int, z *ZstdDecoder) ([]byte, error) {
	n, err := DecodedLen(c, src, limit)
	if err != nil {
		return nil, err
	}
	return Decode(c, make([]byte, n), src, z)
}

func TestRoundTrip(t *testing.T) {
	var z ZstdDecoder
	defer z.Close()
	for _, c := range []Type{None, Snappy, Zstd, MinLZ} {
		for _, n := range []int{0, 1, 100, 4096, 300 << 10} {
			raw := block(n)
			got, err := decompress(c, stored(t, c, raw), n, &z)
			if err != nil || !bytes.Equal(got, raw) {
				t.Fatalf("%s, %d bytes: %d bytes back, %v", c, n, len(got), err)
			}
		}
	}
}

// TestNoneIsSrc checks that a block stored uncompressed is returned as it is,
// not copied.
func TestNoneIsSrc(t *testing.T) {
	src := block(10)
	got, err := Decode(None, nil, src, nil)
	if err != nil || &got[0] != &src[0] || len(got) != len(src) {
		t.Fatalf("%x, %v", got, err)
	}
}

func TestErrors(t *testing.T) {
	var z ZstdDecoder
	defer z.Close()
	raw := block(5000)
	cases := []struct {
		name        string
		c           Type
		src         []byte
		limit       int
		unsupported bool
		contains    string
	}{
		{"lz4", LZ4, raw, 1 << 20, true, "lz4"},
		{"zlib", Zlib, raw, 1 << 20, true, "zlib"},
		{"unknown", 9, raw, 1 << 20, false, "unknown compression 9"},
		{"snappy over the limit", Snappy, stored(t, Snappy, raw), 4999, true, "limit of 4999"},
		{"zstd over the limit", Zstd, stored(t, Zstd, raw), 4999, true, "limit of 4999"},
		{"minlz over the limit", MinLZ, stored(t, MinLZ, raw), 4999, true, "limit of 4999"},
		{"snappy header", Snappy, []byte{0xff}, 1 << 20, false, "bad Snappy header"},
		{"zstd prefix", Zstd, []byte{0xff}, 1 << 20, false, "bad zstd length prefix"},
		{"zstd empty", Zstd, nil, 1 << 20, false, "bad zstd length prefix"},
		{"minlz header", MinLZ, nil, 1 << 20, false, "bad MinLZ header"},
		{"snappy data", Snappy, stored(t, Snappy, raw)[:100], 1 << 20, false, "bad snappy data"},
		{"zstd data", Zstd, stored(t, Zstd, raw)[:50], 1 << 20, false, "bad zstd data"},
		{"minlz data", MinLZ, stored(t, MinLZ, raw)[:100], 1 << 20, false, "bad minlz data"},
		// A zstd prefix that disagrees with the frame, either way.
		{"zstd longer than its prefix", Zstd, append(binary.AppendUvarint(nil, 4000), stored(t, Zstd, raw)[2:]...), 1 << 20, false, "zstd data"},
		{"zstd shorter than its prefix", Zstd, append(binary.AppendUvarint(nil, 6000), stored(t, Zstd, raw)[2:]...), 1 << 20, false, "decompressed to 5000 bytes, its header says 6000"},
	}
	for _, tc := range cases {
		_, err := decompress(tc.c, tc.src, tc.limit, &z)
		switch {
		case err == nil:
			t.Errorf("%s: no error", tc.name)
		case tc.unsupported != errors.Is(err, base.ErrUnsupportedFormat) || tc.unsupported == errors.Is(err, base.ErrCorruption):
			t.Errorf("%s: %v: unsupported %v, corruption %v", tc.name, err, errors.Is(err, base.ErrUnsupportedFormat), errors.Is(err, base.ErrCorruption))
		case !strings.Contains(err.Error(), tc.contains):
			t.Errorf("%s: %v does not say %q", tc.name, err, tc.contains)
		}
	}
	// Decode refuses what DecodedLen does.
	if _, err := Decode(LZ4, nil, raw, nil); !errors.Is(err, base.ErrUnsupportedFormat) {
		t.Errorf("Decode LZ4: %v", err)
	}
	if _, err := Decode(Zstd, nil, nil, &z); !errors.Is(err, base.ErrCorruption) {
		t.Errorf("Decode of an empty zstd block: %v", err)
	}
}

func TestNames(t *testing.T) {
	if None != 0 || Snappy != 1 || LZ4 != 4 || Zstd != 7 || MinLZ != 8 {
		t.Fatalf("indicators %d %d %d %d %d, want RocksDB's 0 1 4 7 8", None, Snappy, LZ4, Zstd, MinLZ)
	}
	var got []string
	for c := range Type(10) {
		got = append(got, c.String())
	}
	if s, want := strings.Join(got, " "), "none snappy zlib bzip2 lz4 lz4hc xpress zstd minlz compression(9)"; s != want {
		t.Fatalf("%s, want %s", s, want)
	}
}

// TestZstdDecoder checks that the zero decoder works, concurrently, and
// again after Close.
func TestZstdDecoder(t *testing.T) {
	var z ZstdDecoder
	raw := block(70000)
	src := stored(t, Zstd, raw)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				if got, err := decompress(Zstd, src, len(raw), &z); err != nil || !bytes.Equal(got, raw) {
					t.Errorf("%d bytes, %v", len(got), err)
					return
				}
			}
		}()
	}
	wg.Wait()
	z.Close()
	z.Close()
	if got, err := decompress(Zstd, src, len(raw), &z); err != nil || !bytes.Equal(got, raw) {
		t.Fatalf("after Close: %d bytes, %v", len(got), err)
	}
	z.Close()
}

// TestNoAllocs checks that Snappy and MinLZ blocks decompress into the
// caller's memory without allocating.
func TestNoAllocs(t *testing.T) {
	raw := block(4096)
	dst := make([]byte, len(raw))
	for _, c := range []Type{None, Snappy, MinLZ} {
		src := stored(t, c, raw)
		if n := testing.AllocsPerRun(100, func() {
			n, err := DecodedLen(c, src, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Decode(c, dst[:n], src, nil); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Errorf("%s: %v allocations", c, n)
		}
	}
}
