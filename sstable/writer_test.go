package sstable

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/bloomkv/bloomkv/internal/base"
)

// TestWriterBlockLimit: an entry that would take a data block past the
// largest a reader takes starts a new block, and one that cannot fit in a
// block alone is refused without harming the table, which reads back whole.
func TestWriterBlockLimit(t *testing.T) {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, WriterOptions{BlockSize: 1 << 20, Compression: NoCompression})
	if err != nil {
		t.Fatal(err)
	}
	w.blockLimit = 100 << 10
	big := bytes.Repeat([]byte{'v'}, 30<<10)
	var keys []string
	for i := range 10 {
		k := fmt.Sprintf("k%02d", i)
		if err := w.Set([]byte(k), big); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	if err := w.Set([]byte("k10"), bytes.Repeat([]byte{'v'}, 100<<10)); err == nil || !strings.Contains(err.Error(), "does not fit in a block") {
		t.Fatalf("an entry larger than a block: %v", err)
	}
	if err := w.Set([]byte("k11"), big); err != nil {
		t.Fatalf("after a refused entry: %v", err)
	}
	keys = append(keys, "k11")
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r := openTable(t, buf.Bytes())
	blocks := 0
	for _, b := range r.Blocks().Blocks {
		if b.Kind != BlockData {
			continue
		}
		blocks++
		if b.Handle.Length > uint64(w.blockLimit) {
			t.Fatalf("data block %v longer than the limit %d", b.Handle, w.blockLimit)
		}
	}
	if blocks < 4 {
		t.Fatalf("%d data blocks for 11 entries of 30 KiB under a 100 KiB limit", blocks)
	}
	it := r.NewIter()
	defer it.Close()
	i := 0
	for ok := it.First(); ok; ok = it.Next() {
		if i >= len(keys) || string(it.Key().UserKey) != keys[i] || len(it.Value()) != len(big) {
			t.Fatalf("entry %d: %s, %d bytes", i, it.Key(), len(it.Value()))
		}
		i++
	}
	if i != len(keys) {
		t.Fatalf("%d entries read back, want %d", i, len(keys))
	}
}

// TestIndexPartitionThreshold checks that the Writer writes an index larger
// than IndexPartitionThreshold in two levels, of partitions of about
// BlockSize bytes, and smaller ones, LevelDB's and any with a negative
// threshold in one; every such table reads back whole.
func TestIndexPartitionThreshold(t *testing.T) {
	var spec tableSpec
	for i := range 20_000 {
		spec.entries = append(spec.entries, entry{base.MakeInternalKey(fmt.Appendf(nil, "key%06d", i), 0, base.KindSet), []byte("value")})
	}
	for _, c := range []struct {
		name     string
		opts     WriterOptions
		twoLevel bool
	}{
		{"default threshold, small index", WriterOptions{BlockSize: 4096}, false},
		{"default threshold, large index", WriterOptions{BlockSize: 64}, true},
		{"small threshold", WriterOptions{BlockSize: 512, IndexPartitionThreshold: 1024}, true},
		{"negative threshold", WriterOptions{BlockSize: 64, IndexPartitionThreshold: -1}, false},
		{"LevelDB format", WriterOptions{BlockSize: 64, TableFormat: TableFormatLevelDB}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			data := writeSpec(t, spec, c.opts)
			r := openTable(t, data)
			if got := r.props.IndexType == indexTypeTwoLevel; got != c.twoLevel {
				t.Fatalf("two-level %v, want %v (index block %d bytes)", got, c.twoLevel, r.footer.index.Length)
			}
			// The properties' index size counts every index block
			// (uncompressed, with its trailer), as Pebble's does.
			indexSize, partsSize := uint64(len(r.index))+blockTrailerLen, uint64(0)
			pinnedAtOpen := r.PinnedBytes()
			if c.twoLevel {
				parts := 0
				for _, b := range r.Layout().Blocks {
					if b.Kind != BlockIndexPartition {
						continue
					}
					parts++
					// A partition closes at the entry that takes it to
					// BlockSize: one entry (under 64 bytes here) past it
					// at most.
					raw, err := r.readBlock(b.Handle, "index partition")
					if err != nil || len(raw) > c.opts.BlockSize+64 {
						t.Fatalf("partition %s: %d bytes, %v", b.Handle, len(raw), err)
					}
					indexSize += uint64(len(raw)) + blockTrailerLen
					partsSize += uint64(len(raw))
				}
				if parts < 2 || r.parts == nil || len(r.parts.slots) != parts {
					t.Fatalf("%d partitions", parts)
				}
			}
			if r.props.IndexSize != indexSize {
				t.Fatalf("properties say an index of %d bytes, the blocks hold %d", r.props.IndexSize, indexSize)
			}
			checkTable(t, r, spec, rand.New(rand.NewPCG(1, 2)))
			// Reading every key loaded every partition, which the
			// reader keeps.
			if got := r.PinnedBytes(); got != pinnedAtOpen+partsSize {
				t.Fatalf("%d bytes pinned after reading the table, want %d at open and %d of partitions", got, pinnedAtOpen, partsSize)
			}
		})
	}
}

// Set and Delete write a key once: Set then Delete of a key (two entries at
// 0, in kind order, which Ingest refuses) is refused, the table keeping the
// first, while Add takes versions of a key at different sequence numbers.
func TestWriterSetDeleteOncePerKey(t *testing.T) {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Set([]byte("a"), []byte("1")); err != nil {
		t.Fatal(err)
	}
	if err := w.Delete([]byte("a")); err == nil || !strings.Contains(err.Error(), "written twice") {
		t.Fatalf("Delete of a key just Set: %v", err)
	}
	if err := w.Set([]byte("a"), []byte("2")); err == nil || !strings.Contains(err.Error(), "written twice") {
		t.Fatalf("Set of a key just Set: %v", err)
	}
	if err := w.Add(base.MakeInternalKey([]byte("b"), 7, base.KindSet), []byte("new")); err != nil {
		t.Fatal(err)
	}
	if err := w.Add(base.MakeInternalKey([]byte("b"), 5, base.KindDelete), nil); err != nil {
		t.Fatalf("an older version of a key: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()), ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v, tr, found, err := r.LookupCopy([]byte("a"), base.SeqNumMax); err != nil || !found || tr.Kind() != base.KindSet || string(v) != "1" {
		t.Fatalf("a: %q %v %v %v", v, tr, found, err)
	}
	if n := r.Properties().NumEntries; n != 3 {
		t.Fatalf("%d entries, want 3", n)
	}
}
