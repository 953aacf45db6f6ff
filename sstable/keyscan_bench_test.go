package sstable

import (
	"bytes"
	"fmt"
	"testing"
)

// keyScanTable is a table of 100k keys at sequence number 0, as a table
// for ingestion holds them.
func keyScanTable(b *testing.B) []byte {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, WriterOptions{})
	if err != nil {
		b.Fatal(err)
	}
	v := make([]byte, 100)
	for i := range 100_000 {
		if err := w.Set(fmt.Appendf(nil, "key%013d", i), v); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	return buf.Bytes()
}

// benchmarkScanKeys scans the table reading every entry's key, the path the
// store's iterators and compactions take, with the reader's options; every
// key must read at wantSeq.
func benchmarkScanKeys(b *testing.B, ro ReaderOptions, wantSeq uint64) {
	data := keyScanTable(b)
	r, err := NewReader(bytes.NewReader(data), int64(len(data)), ro)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	n := 0
	var seqs uint64
	for range b.N {
		it := r.NewIter()
		for ok := it.First(); ok; ok = it.Next() {
			seqs += uint64(it.Key().SeqNum())
			n++
		}
		if err := it.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/key")
	if seqs != uint64(n)*wantSeq {
		b.Fatalf("sequence numbers sum to %d", seqs)
	}
}

func BenchmarkScanKeys(b *testing.B) { benchmarkScanKeys(b, ReaderOptions{}, 0) }
