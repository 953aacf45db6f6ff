package riblt

import (
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func randomSymbols(r *rand.Rand, n int) []CodedSymbol {
	syms := make([]CodedSymbol, n)
	for i := range syms {
		syms[i] = CodedSymbol{Sum: Item{r.Uint64(), r.Uint64()}, Check: r.Uint64()}
		switch r.IntN(4) {
		case 0:
			syms[i].Count = int64(r.Uint64())
		case 1:
			syms[i].Count = []int64{math.MinInt64, math.MaxInt64, -1, 0, 1}[r.IntN(5)]
		default:
			syms[i].Count = int64(r.IntN(2001) - 1000)
		}
	}
	return syms
}

func TestSymbolsRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(20, 20))
	for trial := range 200 {
		syms := randomSymbols(r, r.IntN(50))
		start := r.IntN(1 << 20)
		if trial%10 == 0 {
			start = MaxSymbols - len(syms)
		}
		prefix := []byte("prefix")
		data := AppendSymbols(slices.Clone(prefix), start, syms)
		if !slices.Equal(data[:len(prefix)], prefix) {
			t.Fatal("AppendSymbols changed dst")
		}
		gotStart, got, err := DecodeSymbols(data[len(prefix):])
		if err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		if gotStart != start || !slices.Equal(got, syms) {
			t.Fatalf("trial %d: decoded start %d and %d symbols, want %d and %v", trial, gotStart, len(got), start, syms)
		}
	}
}

// TestSymbolsWireSize checks the size of an encoder's real symbols, whose
// counts the prediction should make cheap.
func TestSymbolsWireSize(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 21))
	enc := NewEncoder()
	for range 200_000 {
		enc.Add(Item{r.Uint64(), r.Uint64()})
	}
	syms := make([]CodedSymbol, 2000)
	for i := range syms {
		syms[i] = enc.ProduceNext()
	}
	data := AppendSymbols(nil, 0, syms)
	per := float64(len(data)) / float64(len(syms))
	t.Logf("2000 symbols over 200,000 items: %d bytes, %.2f bytes a symbol", len(data), per)
	if per > 26 {
		t.Errorf("%.2f bytes a symbol, want at most 26", per)
	}
	// In batches of 100, each batch's first count is sent whole.
	total := 0
	for i := 0; i < len(syms); i += 100 {
		total += len(AppendSymbols(nil, i, syms[i:i+100]))
	}
	t.Logf("in batches of 100: %.2f bytes a symbol", float64(total)/float64(len(syms)))
}

func TestDecodeSymbolsCorrupt(t *testing.T) {
	r := rand.New(rand.NewPCG(22, 22))
	syms := randomSymbols(r, 5)
	good := AppendSymbols(nil, 300, syms)

	check := func(name string, data []byte) {
		t.Helper()
		_, got, err := DecodeSymbols(data)
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: got %d symbols and error %v, want ErrCorrupt", name, len(got), err)
			return
		}
		if !strings.Contains(err.Error(), "offset") {
			t.Errorf("%s: error %q does not name the offset", name, err)
		}
	}
	for n := range len(good) {
		check("truncated", good[:n])
	}
	check("trailing byte", append(slices.Clone(good), 0))

	header := func(start, n uint64) []byte {
		return binary.AppendUvarint(binary.AppendUvarint(nil, start), n)
	}
	check("count too large for the bytes", append(header(0, 6), good[3:]...))
	check("absurd count", header(0, math.MaxUint64))
	check("start past MaxSymbols", header(MaxSymbols+1, 0))
	check("run past MaxSymbols", append(header(MaxSymbols-1, 2), make([]byte, 50)...))
	check("overlong start", append([]byte{0x80, 0x00}, good[2:]...))
	check("overflowing start", []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0})
	overlong := append(header(0, 1), make([]byte, 24)...)
	check("overlong count", append(overlong, 0x81, 0x00))
	check("overflowing count", append(overlong, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02))

	// The boundaries themselves are fine.
	if _, _, err := DecodeSymbols(header(MaxSymbols, 0)); err != nil {
		t.Errorf("empty batch at MaxSymbols: %v", err)
	}
	if _, got, err := DecodeSymbols(header(0, 0)); err != nil || len(got) != 0 {
		t.Errorf("empty batch: %d symbols, %v", len(got), err)
	}
}

func FuzzDecodeSymbols(f *testing.F) {
	r := rand.New(rand.NewPCG(23, 23))
	for _, n := range []int{0, 1, 2, 7} {
		f.Add(AppendSymbols(nil, r.IntN(1000), randomSymbols(r, n)))
	}
	enc := NewEncoder()
	for range 1000 {
		enc.Add(Item{r.Uint64(), r.Uint64()})
	}
	var syms []CodedSymbol
	for range 20 {
		syms = append(syms, enc.ProduceNext())
	}
	f.Add(AppendSymbols(nil, 0, syms))
	f.Add([]byte{})
	f.Add([]byte{0x80, 0x00, 0x00})
	f.Fuzz(func(t *testing.T, data []byte) {
		start, syms, err := DecodeSymbols(data)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		// Only canonical encodings decode, so re-encoding gives the input
		// back byte for byte.
		again := AppendSymbols(nil, start, syms)
		if !slices.Equal(again, data) {
			t.Fatalf("re-encoding %x gives %x", data, again)
		}
		start2, syms2, err := DecodeSymbols(again)
		if err != nil || start2 != start || !slices.Equal(syms2, syms) {
			t.Fatalf("re-encoded batch decodes to %d, %d symbols, %v", start2, len(syms2), err)
		}
	})
}
