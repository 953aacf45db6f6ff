package sstable

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/cache"
	"github.com/bloomkv/bloomkv/internal/rangedel"
)

// Regression tests for findings of the sstable review.

func TestTablesWithoutPointKeys(t *testing.T) {
	for _, withDels := range []bool{false, true} {
		for _, bpk := range []int{-1, 10} {
			var spec tableSpec
			if withDels {
				spec.dels = []rangedel.Tombstone{tomb([]byte("b"), []byte("m"), 5)}
			}
			rd := openTable(t, writeSpec(t, spec, WriterOptions{BloomBitsPerKey: bpk}))
			if _, _, found, err := lookup(rd, []byte("c"), base.SeqNumMax); err != nil || found {
				t.Fatalf("dels=%v bpk=%d: lookup = %v, %v", withDels, bpk, found, err)
			}
			it := rd.NewIter()
			for name, ok := range map[string]bool{"First": it.First(), "Last": it.Last(), "SeekGE": it.SeekGE([]byte("c")), "SeekLT": it.SeekLT([]byte("c"))} {
				if ok || it.Error() != nil {
					t.Fatalf("dels=%v bpk=%d: %s = %v, %v", withDels, bpk, name, ok, it.Error())
				}
			}
			if got := len(rd.RangeDeletions()); got != map[bool]int{false: 0, true: 1}[withDels] {
				t.Fatalf("%d range deletions", got)
			}
		}
	}
}

func TestPooledIteratorForgetsErrors(t *testing.T) {
	rd := openTable(t, tableOfKeys(t, 100))
	var it Iter
	it.reset(rd, false)
	boom := corruptionf("earlier failure")
	it.err, it.data.err, it.index.part.err, it.index.err = boom, boom, boom, boom
	it.reset(rd, false)
	if it.err != nil || it.data.err != nil || it.index.error() != nil {
		t.Fatalf("reset kept an error: %v %v %v", it.err, it.data.err, it.index.error())
	}
	if !it.SeekGE([]byte("key000050")) || string(it.Key().UserKey) != "key000050" {
		t.Fatal("iterator unusable after reset")
	}
}

// withFooterVersion rewrites a RocksDB footer's format version.
func withFooterVersion(data []byte, v uint32) []byte {
	out := append([]byte(nil), data...)
	binary.LittleEndian.PutUint32(out[len(out)-12:], v)
	return out
}

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

func TestLegacyRangeDeletionsAreFragmented(t *testing.T) {
	dels := []rangedel.Tombstone{tomb([]byte("a"), []byte("m"), 3), tomb([]byte("f"), []byte("z"), 7), tomb([]byte("c"), []byte("h"), 5)}
	var buf bytes.Buffer
	w, _ := NewWriter(&buf, WriterOptions{})
	w.legacyRangeDels = true
	for _, d := range dels {
		w.DeleteRange(d.Start, d.End, d.SeqNum)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	rd := openTable(t, buf.Bytes())
	var want []RangeDeletion
	want = append(want, rangedel.Fragment(dels)...)
	sameRangeDels(t, rd.RangeDeletions(), want, "legacy range deletions")
	if len(want) < 5 {
		t.Fatalf("only %d fragments: the test overlaps too little", len(want))
	}
}

func TestGetWithHugeSequenceNumber(t *testing.T) {
	rd := openTable(t, tableOfKeys(t, 10))
	for _, seq := range []base.SeqNum{base.SeqNumMax, base.SeqNumMax + 1, base.SeqNumMax + 2, 1<<64 - 1} {
		if _, _, found, err := lookup(rd, []byte("key000003"), seq); err != nil || !found {
			t.Fatalf("lookup at %d: %v, %v", seq, found, err)
		}
	}
}

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

func TestSharedCacheNeedsFileNum(t *testing.T) {
	data := tableOfKeys(t, 10)
	_, err := NewReader(bytes.NewReader(data), int64(len(data)), ReaderOptions{Cache: cache.New(1<<20, cache.Options{})})
	if err == nil || !strings.Contains(err.Error(), "FileNum") {
		t.Fatalf("cache without FileNum: %v", err)
	}
}

func TestShortReadNamesTheBlock(t *testing.T) {
	data := tableOfKeys(t, 2000)
	rd := openTable(t, data)
	// Serve the footer and metadata, then let data-block reads come up short.
	sr := &shortReader{data: data, limit: int64(len(data))}
	rd2, err := NewReader(sr, int64(len(data)), ReaderOptions{FileName: "short.sst"})
	if err != nil {
		t.Fatal(err)
	}
	sr.limit = 100
	_, _, _, err = lookup(rd2, []byte("key001000"), base.SeqNumMax)
	if !errors.Is(err, ErrCorruption) || !strings.Contains(err.Error(), "data block (") {
		t.Fatalf("short read: %v, want corruption naming the data block", err)
	}
	_ = rd
}

type shortReader struct {
	data  []byte
	limit int64
}

func (s *shortReader) ReadAt(p []byte, off int64) (int, error) {
	end := min(int64(len(s.data)), s.limit)
	if off >= end {
		return 0, nil
	}
	n := copy(p, s.data[off:end])
	return n, nil
}
