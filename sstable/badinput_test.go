package sstable

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/cache"
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

// failingWriter fails after n bytes, with errDeviceFull.
type failingWriter struct{ n int }

var errDeviceFull = errors.New("device full")

func (f *failingWriter) Write(p []byte) (int, error) {
	if len(p) > f.n {
		k := f.n
		f.n = 0
		return k, errDeviceFull
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

// withFooterVersion rewrites a RocksDB footer's format version.
func withFooterVersion(data []byte, v uint32) []byte {
	out := append([]byte(nil), data...)
	binary.LittleEndian.PutUint32(out[len(out)-12:], v)
	return out
}

// TestRocksDBIndexEncodingsRefused checks that the reader refuses the index
// encodings of RocksDB format versions 3 and up, and a version 3 footer
// without the property it calls for.
func TestRocksDBIndexEncodingsRefused(t *testing.T) {
	for _, c := range []struct {
		version uint32
		prop    string
		value   uint64
		ok      bool
	}{
		{2, "rocksdb.index.key.is.user.key", 1, true}, // ignored before v3
		{3, "rocksdb.index.key.is.user.key", 0, true},
		{3, "rocksdb.index.key.is.user.key", 1, false},
		{4, "rocksdb.index.value.is.delta.encoded", 1, false},
		{3, "rocksdb.other", 0, false}, // version 3 without its property: a damaged footer
	} {
		var buf bytes.Buffer
		w, _ := NewWriter(&buf, WriterOptions{})
		w.props.User = map[string][]byte{c.prop: binary.AppendUvarint(nil, c.value)}
		w.Add(set("a", 1), []byte("v"))
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		data := withFooterVersion(buf.Bytes(), c.version)
		_, err := NewReader(bytes.NewReader(data), int64(len(data)), ReaderOptions{FileName: "v.sst"})
		if (err == nil) != c.ok {
			t.Errorf("version %d %s=%d: %v", c.version, c.prop, c.value, err)
		}
	}
}

// TestSharedCacheNeedsFileNum checks that a reader sharing a cache without a
// file number is refused.
func TestSharedCacheNeedsFileNum(t *testing.T) {
	data := tableOfKeys(t, 10)
	_, err := NewReader(bytes.NewReader(data), int64(len(data)), ReaderOptions{Cache: cache.New(1<<20, cache.Options{})})
	if err == nil || !strings.Contains(err.Error(), "FileNum") {
		t.Fatalf("cache without FileNum: %v", err)
	}
}

// TestRejectedDeleteIsNotCounted checks that a deletion the writer refuses is
// not counted in the properties.
func TestRejectedDeleteIsNotCounted(t *testing.T) {
	var buf bytes.Buffer
	w, _ := NewWriter(&buf, WriterOptions{})
	w.Add(base.MakeInternalKey([]byte("b"), 1, base.KindDelete), nil)
	if err := w.Add(base.MakeInternalKey([]byte("a"), 1, base.KindDelete), nil); err == nil {
		t.Fatal("out-of-order delete accepted")
	}
	w.Close()
	if n := openTable(t, buf.Bytes()).Properties().NumDeletions; n != 1 {
		t.Fatalf("%d deletions recorded, want 1", n)
	}
}
