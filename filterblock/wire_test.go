package filterblock

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"strings"
	"testing"
)

// bloomWithFill returns a filter of m bits with about fill·m random bits set.
func bloomWithFill(t testing.TB, m uint64, fill float64, seed uint64) *Bloom {
	t.Helper()
	b, err := NewBloom(m, 3)
	if err != nil {
		t.Fatal(err)
	}
	r := seed
	for i := uint64(0); i < m; i++ {
		r = splitmix(r)
		if float64(r>>11)/(1<<53) < fill {
			b.words[i/64] |= 1 << (i % 64)
		}
	}
	return b
}

func TestWireRoundTrip(t *testing.T) {
	for _, m := range []uint64{1, 7, 8, 63, 64, 65, 1000, 4099, 1 << 16} {
		for _, fill := range []float64{0, 0.001, 0.05, 0.3, 0.5, 0.7, 0.97, 1} {
			b := bloomWithFill(t, m, fill, m*1000+uint64(fill*1000))
			enc := b.AppendWire(nil)
			got, err := DecodeWire(enc, m)
			if err != nil {
				t.Fatalf("m=%d fill=%v: %v", m, fill, err)
			}
			if !got.Equal(b) {
				t.Fatalf("m=%d fill=%v: round trip changed the filter", m, fill)
			}
			if again := got.AppendWire(nil); string(again) != string(enc) {
				t.Fatalf("m=%d fill=%v: re-encoding differs", m, fill)
			}
		}
	}
	// A real filter of keys, appended after other bytes.
	keys := randomKeys(100, 10_000, 0)
	b := bloomOf(t, 500_000, 4, keys)
	enc := b.AppendWire([]byte("prefix"))
	got, err := DecodeWire(enc[len("prefix"):], 1<<20)
	if err != nil || !got.Equal(b) {
		t.Fatalf("keyed filter: %v", err)
	}
	for _, k := range keys {
		if !got.MayContain(k) {
			t.Fatal("decoded filter lost a key")
		}
	}
}

// TestWireSizeNearEntropy checks the encoded size against the entropy bound
// m·H(fill) for sparse and dense filters of 2^20 bits: within 10%.
func TestWireSizeNearEntropy(t *testing.T) {
	const m = 1 << 20
	for _, fill := range []float64{0.005, 0.02, 0.05, 0.1, 0.2, 0.3, 0.4, 0.6, 0.9} {
		b := bloomWithFill(t, m, fill, uint64(fill*1e6))
		bound := EntropyBits(m, b.FillRatio()) / 8
		size := float64(len(b.AppendWire(nil)))
		t.Logf("fill %.3f: %8.0f bytes, entropy bound %8.0f (%.2f%% over)", fill, size, bound, 100*(size/bound-1))
		if size > 1.10*bound {
			t.Errorf("fill %.3f: %0.f bytes exceeds the entropy bound %.0f by more than 10%%", fill, size, bound)
		}
	}
	// Empty and full filters cost only their header.
	for _, fill := range []float64{0, 1} {
		if n := len(bloomWithFill(t, m, fill, 1).AppendWire(nil)); n > 20 {
			t.Errorf("fill %v: %d bytes", fill, n)
		}
	}
}

// TestPickWireParams reproduces the survey's Table 1: with 16 bits per key on
// the wire, a larger, sparser filter beats the uncompressed optimum (k=11,
// 0.0459%). The encoded size stays within the budget.
func TestPickWireParams(t *testing.T) {
	const n = 100_000
	budget := 16 * n / 8
	p, err := PickWireParams(n, budget, 48*n)
	if err != nil {
		t.Fatal(err)
	}
	uncompressed := FPRate(16*n, 11, n)
	t.Logf("picked m=%d (%.1f bits/key) k=%d: expected FP %.4f%%, %d bytes; uncompressed 16 bits/key: %.4f%%",
		p.M, float64(p.M)/n, p.K, 100*p.ExpectedFPRate, p.ExpectedBytes, 100*uncompressed)
	if p.ExpectedFPRate >= uncompressed/1.8 {
		t.Errorf("expected FP %.4f%% is not well below the uncompressed %.4f%%", 100*p.ExpectedFPRate, 100*uncompressed)
	}
	keys := randomKeys(101, n, 0)
	b := bloomOf(t, p.M, p.K, keys)
	size := len(b.AppendWire(nil))
	if size > budget+budget/200 {
		t.Errorf("encoded %d bytes, budget %d", size, budget)
	}
	if math.Abs(float64(size-p.ExpectedBytes)) > 0.01*float64(p.ExpectedBytes) {
		t.Errorf("encoded %d bytes, expected %d", size, p.ExpectedBytes)
	}
	fp := 0
	absent := randomKeys(102, 1_000_000, 1)
	for _, k := range absent {
		if b.MayContain(k) {
			fp++
		}
	}
	got := float64(fp) / float64(len(absent))
	if sigma := math.Sqrt(p.ExpectedFPRate / float64(len(absent))); math.Abs(got-p.ExpectedFPRate) > 4.5*sigma+0.05*p.ExpectedFPRate {
		t.Errorf("measured FP %.4f%%, expected %.4f%%", 100*got, 100*p.ExpectedFPRate)
	}

	// A tight memory cap leaves the uncompressed shape.
	q, err := PickWireParams(n, budget, 16*n)
	if err != nil || q.M > 16*n {
		t.Fatalf("capped pick: %+v, %v", q, err)
	}
	for _, bad := range [][3]int{{0, 100, 100}, {10, 0, 100}, {10, 100, 0}, {1000, 1, 1 << 20}} {
		if _, err := PickWireParams(bad[0], bad[1], uint64(bad[2])); err == nil {
			t.Errorf("PickWireParams%v: no error", bad)
		}
	}
}

func TestDecodeWireRejectsMalformed(t *testing.T) {
	for _, fill := range []float64{0.01, 0.5, 0.95} {
		enc := bloomWithFill(t, 5000, fill, 7).AppendWire(nil)
		for i := 0; i < len(enc); i++ {
			if _, err := DecodeWire(enc[:i], 1<<20); !errors.Is(err, ErrCorruption) {
				t.Fatalf("fill %v: prefix of %d of %d bytes: %v, want ErrCorruption", fill, i, len(enc), err)
			}
		}
		if _, err := DecodeWire(append(enc[:len(enc):len(enc)], 0), 1<<20); !errors.Is(err, ErrCorruption) {
			t.Fatalf("fill %v: trailing byte accepted: %v", fill, err)
		}
		// Every single flipped bit is reported as corruption (the checksum
		// sees it), never decoded to a different filter, never a panic.
		rejected := 0
		for i := 0; i < len(enc)*8; i++ {
			bad := append([]byte(nil), enc...)
			bad[i/8] ^= 1 << (i % 8)
			b, err := DecodeWire(bad, 1<<20)
			if err != nil {
				if !errors.Is(err, ErrCorruption) && !errors.Is(err, ErrTooLarge) {
					t.Fatalf("bit %d: error %v wraps neither ErrCorruption nor ErrTooLarge", i, err)
				}
				rejected++
				continue
			}
			if again, err := DecodeWire(b.AppendWire(nil), 1<<20); err != nil || !again.Equal(b) {
				t.Fatalf("bit %d: accepted filter does not round-trip: %v", i, err)
			}
		}
		if rejected != len(enc)*8 {
			t.Fatalf("fill %v: only %d of %d bit flips detected", fill, rejected, len(enc)*8)
		}
	}
	if _, err := DecodeWire(bloomWithFill(t, 5000, 0.1, 7).AppendWire(nil), 4999); !errors.Is(err, ErrTooLarge) || errors.Is(err, ErrCorruption) {
		t.Fatalf("over-limit filter: %v, want ErrTooLarge", err)
	}
	cases := map[string][]byte{
		"magic":         []byte("xkw\x01\x01\x03\x08\x00\x00"),
		"wire version":  []byte("bkw\x02\x01\x03\x08\x00\x00"),
		"hash version":  []byte("bkw\x01\x02\x03\x08\x00\x00"),
		"k zero":        []byte("bkw\x01\x01\x00\x08\x00\x00\x00"),
		"m zero":        []byte("bkw\x01\x01\x03\x00\x00\x00"),
		"set above m":   []byte("bkw\x01\x01\x03\x08\x09\x00\x00"),
		"coding":        []byte("bkw\x01\x01\x03\x08\x00\x07"),
		"raw high bits": []byte("bkw\x01\x01\x03\x04\x01\x00\x10"),
		"raw count":     []byte("bkw\x01\x01\x03\x08\x02\x00\x01"),
		"golomb M zero": []byte("bkw\x01\x01\x03\x08\x00\x01\x00"),
		"golomb M huge": []byte("bkw\x01\x01\x03\x08\x01\x01\x09\x00"),
		"gap past m":    []byte("bkw\x01\x01\x03\x08\x01\x01\x01\xff\x00"),
		"bad varint":    []byte("bkw\x01\x01\x03\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff"),
	}
	for name, data := range cases {
		// With a valid checksum, so that the field checks are what reject it.
		if _, err := DecodeWire(withWireCRC(data), 1<<20); !errors.Is(err, ErrCorruption) || strings.Contains(err.Error(), "checksum") {
			t.Errorf("%s: %v, want ErrCorruption from a field check", name, err)
		}
	}
}

// withWireCRC returns body followed by its wire checksum.
func withWireCRC(body []byte) []byte {
	return binary.LittleEndian.AppendUint32(append([]byte(nil), body...), crc32.Checksum(body, castagnoli))
}

func ExamplePickWireParams() {
	// Ship a filter of 100,000 join keys in at most 200,000 bytes, keeping
	// the filter in memory under 600,000 bytes.
	p, _ := PickWireParams(100_000, 200_000, 8*600_000)
	fmt.Printf("m=%d bits, k=%d, expected false positives %.3f%%\n", p.M, p.K, 100*p.ExpectedFPRate)
	// Output: m=4800000 bits, k=3, expected false positives 0.022%
}
