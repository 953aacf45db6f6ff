package sstable

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/cache"
)

// TestLookupCopyAllMatchesLookupCopy compares batched lookups with single
// ones on random tables, with and without a cache: sorted batches of present
// and absent user keys, with duplicates, at several sequence numbers.
func TestLookupCopyAllMatchesLookupCopy(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 11))
	for round := range 4 {
		spec := randomSpec(r, 2000)
		data := writeSpec(t, spec, WriterOptions{BlockSize: 256 << (round % 3)})
		readers := []*Reader{openTable(t, data)}
		for _, capacity := range []int64{8 << 10, 64 << 20} {
			c := cache.New(capacity, cache.Options{Shards: 1})
			rd, err := NewReader(bytes.NewReader(data), int64(len(data)), ReaderOptions{Cache: c, FileNum: 1, FileName: "1.sst"})
			if err != nil {
				t.Fatal(err)
			}
			readers = append(readers, rd)
		}
		for _, rd := range readers {
			for _, n := range []int{1, 7, 100, 3000} {
				var keys [][]byte
				for range n {
					e := spec.entries[r.IntN(len(spec.entries))]
					switch r.IntN(3) {
					case 0:
						keys = append(keys, e.key.UserKey)
					case 1:
						keys = append(keys, append(slices.Clip(e.key.UserKey), 0)) // absent
					default:
						keys = append(keys, keys[max(len(keys)-1, 0):]...) // a duplicate
						if len(keys) == 0 {
							keys = append(keys, e.key.UserKey)
						}
					}
				}
				slices.SortFunc(keys, bytes.Compare)
				for _, seq := range []base.SeqNum{1, 3, base.SeqNumMax} {
					out := make([]LookupResult, len(keys))
					got, err := rd.LookupCopyAll(keys, seq, out)
					if err != nil || got != len(keys) {
						t.Fatalf("round %d: %d of %d keys answered: %v", round, got, len(keys), err)
					}
					for i, k := range keys {
						v, tr, found, err := rd.LookupCopy(k, seq)
						if err != nil || found != out[i].Found || tr != out[i].Trailer || !bytes.Equal(v, out[i].Value) {
							t.Fatalf("round %d, lookup(%q, %d): batched %v %v %q; single %v %v %q %v",
								round, k, seq, out[i].Found, out[i].Trailer, out[i].Value, found, tr, v, err)
						}
					}
				}
			}
		}
	}
}

// TestLookupCopyAllReadsEachBlockOnce checks that a batch of every key of a
// table asks the cache for each data block once.
func TestLookupCopyAllReadsEachBlockOnce(t *testing.T) {
	var spec tableSpec
	var keys [][]byte
	for i := range 2000 {
		k := []byte(fmt.Sprintf("key%06d", i))
		keys = append(keys, k)
		spec.entries = append(spec.entries, entry{base.MakeInternalKey(k, 1, base.KindSet), []byte(fmt.Sprintf("value%d", i))})
	}
	data := writeSpec(t, spec, WriterOptions{BlockSize: 512})
	c := cache.New(64<<20, cache.Options{Shards: 1})
	rd, err := NewReader(bytes.NewReader(data), int64(len(data)), ReaderOptions{Cache: c, FileNum: 1})
	if err != nil {
		t.Fatal(err)
	}
	if rd.windows == nil || len(rd.windows.handles) < 20 {
		t.Fatalf("want windows over many blocks: %+v", rd.windows)
	}
	before := c.Metrics()
	out := make([]LookupResult, len(keys))
	if n, err := rd.LookupCopyAll(keys, base.SeqNumMax, out); err != nil || n != len(keys) {
		t.Fatalf("%d answered: %v", n, err)
	}
	for i, o := range out {
		if !o.Found || string(o.Value) != fmt.Sprintf("value%d", i) {
			t.Fatalf("key %d: %v %q", i, o.Found, o.Value)
		}
	}
	after := c.Metrics()
	if reads, blocks := after.Hits+after.Misses-before.Hits-before.Misses, uint64(len(rd.windows.handles)); reads != blocks {
		t.Fatalf("%d cache lookups for %d keys in %d blocks, want one per block", reads, len(keys), blocks)
	}
}
