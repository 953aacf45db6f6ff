package sstable

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/bloomkv/bloomkv/internal/base"
)

func set(k string, seq base.SeqNum) base.InternalKey {
	return base.MakeInternalKey([]byte(k), seq, base.KindSet)
}

func TestWriterRejectsBadInput(t *testing.T) {
	w, err := NewWriter(io.Discard, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Add(set("b", 5), []byte("v")); err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{
		"same key":          w.Add(set("b", 5), nil),
		"older key first":   w.Add(set("a", 9), nil),
		"newer version":     w.Add(set("b", 6), nil),
		"range delete kind": w.Add(base.MakeInternalKey([]byte("c"), 1, base.KindRangeDelete), nil),
		"separator kind":    w.Add(base.MakeInternalKey([]byte("c"), 1, base.KindSeparator), nil),
		"delete with value": w.Add(base.MakeInternalKey([]byte("c"), 1, base.KindDelete), []byte("x")),
		"empty range":       w.DeleteRange([]byte("k"), []byte("k"), 1),
		"inverted range":    w.DeleteRange([]byte("z"), []byte("k"), 1),
	} {
		if err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// The bad calls changed nothing: the table holds its one key.
	if err := w.Add(set("c", 1), []byte("w")); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Add(set("d", 1), nil); !errors.Is(err, ErrWriterClosed) {
		t.Fatalf("Add after Close: %v", err)
	}
	if err := w.Close(); !errors.Is(err, ErrWriterClosed) {
		t.Fatalf("second Close: %v", err)
	}

	lw, _ := NewWriter(io.Discard, WriterOptions{TableFormat: TableFormatLevelDB})
	if err := lw.DeleteRange([]byte("a"), []byte("b"), 1); err == nil {
		t.Fatal("the LevelDB format accepted a range deletion")
	}
	for _, o := range []WriterOptions{
		{BlockSize: -1}, {BlockRestartInterval: -2}, {BloomBitsPerKey: 33}, {Compression: 7}, {TableFormat: 9},
	} {
		if _, err := NewWriter(io.Discard, o); err == nil {
			t.Errorf("options %+v accepted", o)
		}
	}
}

// failingWriter fails after n bytes.
type failingWriter struct{ n int }

func (f *failingWriter) Write(p []byte) (int, error) {
	if len(p) > f.n {
		k := f.n
		f.n = 0
		return k, errors.New("device full")
	}
	f.n -= len(p)
	return len(p), nil
}

func TestWriterReportsWriteErrors(t *testing.T) {
	for _, limit := range []int{0, 100, 5000} {
		w, err := NewWriter(&failingWriter{n: limit}, WriterOptions{BlockSize: 512})
		if err != nil {
			t.Fatal(err)
		}
		var werr error
		for i := 0; i < 2000 && werr == nil; i++ {
			werr = w.Add(set(fmt.Sprintf("key%06d", i), 1), []byte("0123456789"))
		}
		if werr == nil {
			werr = w.Close()
		}
		if werr == nil || !strings.Contains(werr.Error(), "device full") || !strings.Contains(werr.Error(), "offset") {
			t.Fatalf("limit %d: error %v, want the device error with an offset", limit, werr)
		}
		// The writer stays failed.
		if err := w.Add(set("zzz", 1), nil); err == nil {
			t.Fatalf("limit %d: Add after a write error succeeded", limit)
		}
	}
}

// errReader fails every read.
type errReader struct{ err error }

func (e errReader) ReadAt([]byte, int64) (int, error) { return 0, e.err }

func TestReaderErrors(t *testing.T) {
	data := tableOfKeys(t, 100)
	eio := errors.New("input/output error")
	_, err := NewReader(errReader{eio}, int64(len(data)), ReaderOptions{FileName: "x.sst"})
	if !errors.Is(err, eio) || errors.Is(err, ErrCorruption) || !strings.Contains(err.Error(), "x.sst") {
		t.Fatalf("I/O error: %v, want it wrapped, naming the file, not corruption", err)
	}
	if _, err := NewReader(bytes.NewReader(data), -1, ReaderOptions{}); err == nil {
		t.Fatal("negative size accepted")
	}
	// A table ordered by another comparer is refused, naming it.
	var buf bytes.Buffer
	w, _ := NewWriter(&buf, WriterOptions{})
	w.comparerName = "my.reverse.comparer"
	if err := w.Add(set("a", 1), nil); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()), ReaderOptions{}); err == nil || !strings.Contains(err.Error(), "my.reverse.comparer") {
		t.Fatalf("foreign comparer: %v", err)
	}
}
