package riblt

import (
	"math/rand/v2"
	"testing"
	"time"
)

// millionCase is two sets of a million items differing in 1,000: 500 only in
// each.
func millionCase() diffCase {
	const n, d = 1_000_000, 1000
	return makeCase(rand.New(rand.NewPCG(30, 30)), n-d/2, d/2, d/2, 0)
}

// TestReconcileMillion is the target workload: both sides' work for two
// million-item sets that differ in 1,000 items.
func TestReconcileMillion(t *testing.T) {
	if testing.Short() {
		t.Skip("a million items")
	}
	c := millionCase()
	start, startCPU := time.Now(), cpuTime()
	dec, syms, err := reconcile(c, 42, 0)
	elapsed, cpu := time.Since(start), cpuTime()-startCPU
	if err != nil {
		t.Fatal(err)
	}
	checkDecoded(t, "a million items", c, dec)
	d := c.d()
	wire := len(AppendSymbols(nil, 0, syms))
	t.Logf("1M vs 1M items, d=%d: %d symbols (%.3f per item), %d wire bytes (%.1f per item), %v for both sides (%v of CPU)",
		d, len(syms), float64(len(syms))/float64(d), wire, float64(wire)/float64(d), elapsed.Round(time.Millisecond), cpu.Round(time.Millisecond))
	if len(syms) > 17*d/10 {
		t.Errorf("%d symbols for d=%d, want at most 1.7·d", len(syms), d)
	}
}

// BenchmarkEncodeMillion adds a million items to an encoder and produces 1,700
// symbols, enough for a difference of 1,000 items.
func BenchmarkEncodeMillion(b *testing.B) {
	c := millionCase()
	b.ResetTimer()
	for b.Loop() {
		enc := NewEncoder()
		for _, x := range c.a {
			enc.Add(x)
		}
		for range 1700 {
			enc.ProduceNext()
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(c.a)), "ns/item")
}

// BenchmarkDecodeMillion adds a million local items to a decoder and feeds it
// symbols, produced beforehand, until it has decoded a difference of 1,000.
func BenchmarkDecodeMillion(b *testing.B) {
	c := millionCase()
	enc := NewEncoder()
	for _, x := range c.a {
		enc.Add(x)
	}
	syms := make([]CodedSymbol, 1700)
	for i := range syms {
		syms[i] = enc.ProduceNext()
	}
	used := 0
	b.ResetTimer()
	for b.Loop() {
		dec := NewDecoder()
		for _, x := range c.b {
			dec.AddLocal(x)
		}
		for used = 0; !dec.Decoded(); used++ {
			if used == len(syms) {
				b.Fatal("not decoded after 1,700 symbols")
			}
			if err := dec.AddCodedSymbol(syms[used]); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(c.b)), "ns/item")
	b.ReportMetric(float64(used)/float64(c.d()), "symbols/d")
}

// BenchmarkReconcileMillion is the whole reconciliation of two million-item
// sets that differ in 1,000 items: the sender's encoding, the receiver's
// encoding of its own items and the decoding.
func BenchmarkReconcileMillion(b *testing.B) {
	c := millionCase()
	b.ResetTimer()
	for b.Loop() {
		if _, _, err := reconcile(c, 0, 0); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*(len(c.a)+len(c.b))), "ns/item")
}
