package sstable

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/cache"
)

// ingestTable writes a table as one for DB.Ingest: keys k000..k(n-1) at
// sequence number 0, every third a deletion, and two range deletions.
func ingestTable(t testing.TB, n int) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, WriterOptions{BlockSize: 256})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		k := fmt.Appendf(nil, "k%03d", i)
		if i%3 == 2 {
			err = w.Delete(k)
		} else {
			err = w.Set(k, fmt.Appendf(nil, "v%d", i))
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := w.DeleteRange([]byte("k010"), []byte("k020"), 0); err != nil {
		t.Fatal(err)
	}
	if err := w.DeleteRange([]byte("k015"), []byte("k030"), 0); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestSeqNumOverride(t *testing.T) {
	const n, seq = 200, 1000
	data := ingestTable(t, n)
	for _, withCache := range []bool{false, true} {
		t.Run(fmt.Sprintf("cache=%v", withCache), func(t *testing.T) {
			ro := ReaderOptions{FileName: "ingested.sst", SeqNumOverride: seq}
			if withCache {
				ro.Cache, ro.FileNum = cache.New(1<<20, cache.Options{}), 9
			}
			r, err := NewReader(bytes.NewReader(data), int64(len(data)), ro)
			if err != nil {
				t.Fatal(err)
			}
			raw := openTable(t, data)
			it, rawIt := r.NewIter(), raw.NewIter()
			i := 0
			for ok := it.First(); ok; ok = it.Next() {
				rawOK := false
				if i == 0 {
					rawOK = rawIt.First()
				} else {
					rawOK = rawIt.Next()
				}
				if !rawOK {
					t.Fatal("the raw table ends first")
				}
				k, rk := it.Key(), rawIt.Key()
				if k.SeqNum() != seq || rk.SeqNum() != 0 || k.Kind() != rk.Kind() || !bytes.Equal(k.UserKey, rk.UserKey) || !bytes.Equal(it.Value(), rawIt.Value()) {
					t.Fatalf("entry %d: %s (raw %s)", i, k, rk)
				}
				i++
			}
			if err := it.Close(); err != nil || i != n {
				t.Fatalf("%d entries, %v", i, err)
			}
			rawIt.Close()

			// Reverse and seeks see the same numbers.
			it = r.NewIter()
			if !it.Last() || it.Key().SeqNum() != seq || string(it.Key().UserKey) != fmt.Sprintf("k%03d", n-1) {
				t.Fatalf("Last: %s", it.Key())
			}
			if !it.Prev() || it.Key().SeqNum() != seq {
				t.Fatalf("Prev: %s", it.Key())
			}
			if !it.SeekGE([]byte("k050")) || it.Key().SeqNum() != seq || string(it.Key().UserKey) != "k050" {
				t.Fatalf("SeekGE: %s", it.Key())
			}
			if !it.SeekLT([]byte("k050")) || it.Key().SeqNum() != seq || string(it.Key().UserKey) != "k049" {
				t.Fatalf("SeekLT: %s", it.Key())
			}
			// An internal seek orders by the returned numbers: k050#1000
			// sorts after k050#1001 and before k050#999.
			if !it.SeekGEInternal(base.MakeInternalKey([]byte("k050"), seq+1, base.KindMax)) || string(it.Key().UserKey) != "k050" {
				t.Fatalf("SeekGEInternal above: %s", it.Key())
			}
			if !it.SeekGEInternal(base.MakeInternalKey([]byte("k050"), seq, base.KindSet)) || string(it.Key().UserKey) != "k050" {
				t.Fatalf("SeekGEInternal at: %s", it.Key())
			}
			if !it.SeekGEInternal(base.MakeInternalKey([]byte("k050"), seq-1, base.KindMax)) || string(it.Key().UserKey) != "k051" {
				t.Fatalf("SeekGEInternal below: %s", it.Key())
			}
			if it.SeekGEInternal(base.MakeInternalKey([]byte(fmt.Sprintf("k%03d", n-1)), 5, base.KindMax)) {
				t.Fatalf("SeekGEInternal below the last key: %s", it.Key())
			}
			it.Close()

			// A read at seq sees nothing; at seq+1 everything, at seq.
			for _, k := range []string{"k000", "k001", "k002", "k199"} {
				if _, _, found, err := r.LookupCopy([]byte(k), seq); found || err != nil {
					t.Fatalf("%s visible to a read at %d: %v", k, seq, err)
				}
				v, tr, found, err := r.LookupCopy([]byte(k), seq+1)
				if !found || err != nil || tr.SeqNum() != seq {
					t.Fatalf("%s at %d: found %v, seq %d, %v", k, seq+1, found, tr.SeqNum(), err)
				}
				if tr.Kind() == base.KindSet && string(v) != fmt.Sprintf("v%d", atoi(k[1:])) {
					t.Fatalf("%s: value %q", k, v)
				}
				if _, _, found, _ := r.LookupCopy([]byte(k), base.SeqNumMax); !found {
					t.Fatalf("%s not found at SeqNumMax", k)
				}
			}
			dels := r.RangeDeletions()
			if len(dels) != len(raw.RangeDeletions()) || len(dels) < 2 {
				t.Fatalf("%d fragments, raw %d", len(dels), len(raw.RangeDeletions()))
			}
			for _, d := range dels {
				if d.SeqNum != seq {
					t.Fatalf("fragment %q-%q at %d", d.Start, d.End, d.SeqNum)
				}
			}
			lo, hi, err := r.KeyRange()
			if err != nil || lo.SeqNum() != seq || string(lo.UserKey) != "k000" || string(hi.UserKey) != fmt.Sprintf("k%03d", n-1) {
				t.Fatalf("KeyRange %v %v %v", lo, hi, err)
			}
			// Check reports what is stored.
			rep := r.Check()
			if rep.Err() != nil || rep.LargestSeq != 0 || rep.Entries != n {
				t.Fatalf("Check: %v, seqs %d-%d, %d entries", rep.Err(), rep.SmallestSeq, rep.LargestSeq, rep.Entries)
			}
		})
	}
	if _, err := NewReader(bytes.NewReader(data), int64(len(data)), ReaderOptions{SeqNumOverride: base.SeqNumMax + 1}); err == nil {
		t.Fatal("an override beyond 2^56-1 was accepted")
	}
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}

func TestCheckEntries(t *testing.T) {
	data := ingestTable(t, 100)
	r := openTable(t, data)
	var seen int
	var blocks []BlockHandle
	rep := r.CheckEntries(func(k base.InternalKey, v []byte, bh BlockHandle, off int) error {
		if want := fmt.Sprintf("k%03d", seen); string(k.UserKey) != want || off < 0 || bh.Length == 0 {
			t.Fatalf("entry %d: %s in %s at %d", seen, k, bh, off)
		}
		if len(blocks) == 0 || blocks[len(blocks)-1] != bh {
			blocks = append(blocks, bh)
		}
		seen++
		if string(k.UserKey) == "k042" {
			return fmt.Errorf("refused %s at offset %d in block %s", k.UserKey, off, bh)
		}
		return nil
	})
	if seen != 100 || len(blocks) < 3 {
		t.Fatalf("visited %d entries in %d blocks", seen, len(blocks))
	}
	if len(rep.Problems) != 1 || rep.Err() == nil || !bytes.Contains([]byte(rep.Err().Error()), []byte("refused k042")) {
		t.Fatalf("problems: %v", rep.Problems)
	}
	if rep := r.Check(); rep.Err() != nil {
		t.Fatal(rep.Err())
	}
}

func BenchmarkScanKeysOverride(b *testing.B) {
	benchmarkScanKeys(b, ReaderOptions{SeqNumOverride: 77}, 77)
}

// TestReassign: a reader opened without an override, then reassigned,
// reads as one opened with the new name and override; reassigned back to
// 0, as one opened with none. An override beyond 2^56-1 is refused.
func TestReassign(t *testing.T) {
	const n, seq = 200, 1000
	data := ingestTable(t, n)
	r, err := NewReader(bytes.NewReader(data), int64(len(data)), ReaderOptions{FileName: "in.sst"})
	if err != nil {
		t.Fatal(err)
	}
	want, err := NewReader(bytes.NewReader(data), int64(len(data)), ReaderOptions{FileName: "store.sst", SeqNumOverride: seq})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Reassign("store.sst", seq); err != nil {
		t.Fatal(err)
	}
	same := func(what string, a, b *Reader) {
		t.Helper()
		if fmt.Sprint(a.RangeDeletions()) != fmt.Sprint(b.RangeDeletions()) {
			t.Fatalf("%s: range deletions %v, want %v", what, a.RangeDeletions(), b.RangeDeletions())
		}
		ia, ib := a.NewIter(), b.NewIter()
		defer ia.Close()
		defer ib.Close()
		for oa, ob := ia.First(), ib.First(); oa || ob; oa, ob = ia.Next(), ib.Next() {
			if oa != ob || ia.Key().String() != ib.Key().String() {
				t.Fatalf("%s: key %v, want %v", what, ia.Key(), ib.Key())
			}
		}
		for _, k := range []string{"k005", "k100", "k199", "k999"} {
			va, ta, fa, ea := a.LookupCopy([]byte(k), base.SeqNumMax)
			vb, tb, fb, eb := b.LookupCopy([]byte(k), base.SeqNumMax)
			if string(va) != string(vb) || ta != tb || fa != fb || (ea == nil) != (eb == nil) {
				t.Fatalf("%s: LookupCopy(%s) = %q %v %v %v, want %q %v %v %v", what, k, va, ta, fa, ea, vb, tb, fb, eb)
			}
		}
	}
	same("reassigned", r, want)
	if r.opts.FileName != "store.sst" {
		t.Fatalf("errors name %q", r.opts.FileName)
	}
	raw, err := NewReader(bytes.NewReader(data), int64(len(data)), ReaderOptions{FileName: "raw.sst"})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Reassign("raw.sst", 0); err != nil {
		t.Fatal(err)
	}
	same("reassigned to 0", r, raw)
	if err := r.Reassign("x.sst", base.SeqNumMax+1); err == nil {
		t.Fatal("an override beyond 2^56-1 accepted")
	}
}
