package manifest

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/bloomkv/bloomkv/internal/base"
)

func meta(num uint64, a, b string, seq base.SeqNum) *FileMetadata {
	return &FileMetadata{FileNum: num, Size: 1000 + num,
		Smallest: base.MakeInternalKey([]byte(a), seq, base.KindSet), Largest: base.MakeInternalKey([]byte(b), seq, base.KindSet),
		SmallestSeq: seq, LargestSeq: seq + 5}
}

// ingested returns the metadata of a table ingested at seq.
func ingested(num uint64, a, b string, seq base.SeqNum) *FileMetadata {
	m := meta(num, a, b, seq)
	m.LargestSeq, m.SeqNumOverride = seq, seq
	return m
}

func sampleEdit() *VersionEdit {
	return &VersionEdit{FormatVersion: NewestFormat, ComparerName: base.ComparerName, LogNumber: 7, NextFileNum: 12, LastSeq: 999,
		NewFiles:     []NewFile{{0, meta(8, "a", "m", 10)}, {1, meta(9, "n", "z", 3)}, {2, ingested(10, "c", "d", 77)}},
		DeletedFiles: []DeletedFile{{0, 4}, {2, 5}}, ClosedLog: ClosedLog{Num: 6, Size: 4096}}
}

func TestEncodeDecode(t *testing.T) {
	e := sampleEdit()
	got, err := Decode(e.Encode())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, e) {
		t.Fatalf("round trip:\n%+v\nwant\n%+v", got, e)
	}
	empty, err := Decode(nil)
	if err != nil || !reflect.DeepEqual(empty, &VersionEdit{}) {
		t.Fatalf("empty edit: %+v, %v", empty, err)
	}
}

func TestDecodeRejectsMalformed(t *testing.T) {
	enc := sampleEdit().Encode()
	for i := 1; i < len(enc); i++ {
		if _, err := Decode(enc[:i]); err == nil {
			// A prefix that ends exactly between fields is a valid shorter
			// edit; anything else must fail.
			continue
		} else if !errors.Is(err, base.ErrCorruption) {
			t.Fatalf("prefix %d: %v does not wrap ErrCorruption", i, err)
		}
	}
	for name, data := range map[string][]byte{
		"unknown tag":    {99, 1},
		"level too high": {tagDeletedFile, 7, 1},
		"bad varint":     {tagLogNumber, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
		"short key":      {tagNewFile, 0, 1, 1, 3, 'a', 'b', 'c', 0, 0, 0},
		"long bytes":     {tagComparer, 50, 'x'},
		"zero override": func() []byte {
			enc := (&VersionEdit{NewFiles: []NewFile{{1, ingested(3, "a", "b", 5)}}}).Encode()
			enc[len(enc)-1] = 0 // the override, last
			return enc
		}(),
	} {
		if _, err := Decode(data); !errors.Is(err, base.ErrCorruption) {
			t.Errorf("%s: %v, want ErrCorruption", name, err)
		}
	}
	for name, m := range map[string]*FileMetadata{
		"override off the sequence numbers": func() *FileMetadata { m := ingested(3, "a", "b", 9); m.LargestSeq = 10; return m }(),
		"override beyond 2^56-1":            ingested(3, "a", "b", base.SeqNumMax+1),
	} {
		if _, err := Decode((&VersionEdit{NewFiles: []NewFile{{1, m}}}).Encode()); !errors.Is(err, base.ErrCorruption) {
			t.Errorf("%s: %v, want ErrCorruption", name, err)
		}
	}
	inverted := &VersionEdit{NewFiles: []NewFile{{1, meta(3, "z", "a", 1)}}}
	if _, err := Decode(inverted.Encode()); !errors.Is(err, base.ErrCorruption) {
		t.Errorf("inverted key range: %v", err)
	}
}

// TestFormatVersionDecoding: the version is the edit's first field; a
// newer one than this package knows is refused as unsupported, not as
// corruption, before any later field (which may use a tag unknown here) is
// read.
func TestFormatVersionDecoding(t *testing.T) {
	enc := sampleEdit().Encode()
	if enc[0] != tagFormatVersion {
		t.Fatalf("the edit starts with tag %d, not the format version's", enc[0])
	}
	newer := binary.AppendUvarint([]byte{tagFormatVersion}, NewestFormat+1)
	for name, data := range map[string][]byte{
		"newer version":                  newer,
		"newer version, then a new tag":  binary.AppendUvarint(binary.AppendUvarint(slices.Clone(newer), 99), 1),
		"newer version, then known tags": append(slices.Clone(newer), (&VersionEdit{LogNumber: 3, NextFileNum: 9}).Encode()...),
		"far newer version":              binary.AppendUvarint([]byte{tagFormatVersion}, 1<<40),
	} {
		_, err := Decode(data)
		var ue *UnsupportedFormatError
		if !errors.Is(err, base.ErrUnsupportedFormat) || errors.Is(err, base.ErrCorruption) || !errors.As(err, &ue) || ue.Version <= NewestFormat {
			t.Errorf("%s: %v, want ErrUnsupportedFormat and not ErrCorruption", name, err)
		}
	}
	for name, data := range map[string][]byte{
		"version not first":          append((&VersionEdit{LogNumber: 3}).Encode(), tagFormatVersion, FormatVersioned),
		"version 0":                  {tagFormatVersion, 0},
		"known version, unknown tag": {tagFormatVersion, NewestFormat, 99, 1},
		"no version, unknown tag":    {99, 1},
	} {
		if _, err := Decode(data); !errors.Is(err, base.ErrCorruption) || errors.Is(err, base.ErrUnsupportedFormat) {
			t.Errorf("%s: %v, want ErrCorruption only", name, err)
		}
	}
	e, err := Decode([]byte{tagFormatVersion, FormatVersioned, tagLogNumber, 4})
	if err != nil || e.FormatVersion != FormatVersioned || e.LogNumber != 4 {
		t.Fatalf("%+v, %v", e, err)
	}
}

func TestApply(t *testing.T) {
	v := &Version{}
	v, err := v.Apply(&VersionEdit{NewFiles: []NewFile{{0, meta(1, "a", "c", 5)}, {0, meta(2, "b", "d", 9)}, {1, meta(3, "a", "f", 1)}, {1, meta(4, "g", "k", 1)}}})
	if err != nil {
		t.Fatal(err)
	}
	if l0 := v.Files(0); len(l0) != 2 || l0[0].FileNum != 2 || l0[1].FileNum != 1 {
		t.Fatalf("L0 not newest first: %v", l0)
	}
	all := 0
	for range v.All() {
		all++
	}
	if v.NumFiles(1) != 2 || v.LevelSize(1) != 1003+1004 || all != 4 {
		t.Fatalf("%d tables, L1: %v", all, v.Files(1))
	}
	if _, err := v.Apply(&VersionEdit{DeletedFiles: []DeletedFile{{1, 99}}}); !errors.Is(err, base.ErrCorruption) {
		t.Fatalf("deleting a missing table: %v", err)
	}
	if _, err := v.Apply(&VersionEdit{NewFiles: []NewFile{{1, meta(5, "e", "h", 1)}}}); !errors.Is(err, base.ErrCorruption) {
		t.Fatalf("overlapping L1 tables: %v", err)
	}
	v2, err := v.Apply(&VersionEdit{DeletedFiles: []DeletedFile{{0, 1}}})
	if err != nil || v2.NumFiles(0) != 1 || v.NumFiles(0) != 2 {
		t.Fatalf("delete: %v; the old version must not change", err)
	}
	for name, e := range map[string]*VersionEdit{
		"delete from the wrong level":   {DeletedFiles: []DeletedFile{{2, 3}}},
		"add a table held":              {NewFiles: []NewFile{{2, meta(3, "x", "y", 1)}}},
		"overlap the next table":        {NewFiles: []NewFile{{1, meta(5, "0", "a", 1)}}},
		"overlap the previous table":    {NewFiles: []NewFile{{1, meta(5, "k", "l", 1)}}},
		"new tables overlapping":        {NewFiles: []NewFile{{2, meta(5, "a", "c", 1)}, {2, meta(6, "c", "d", 1)}}},
		"the same smallest key":         {NewFiles: []NewFile{{2, meta(5, "a", "c", 1)}, {2, meta(6, "a", "b", 1)}}},
		"overlap a table moved into L1": {DeletedFiles: []DeletedFile{{1, 3}}, NewFiles: []NewFile{{1, meta(5, "a", "b", 1)}, {1, meta(3, "b", "f", 1)}}},
	} {
		if _, err := v.Apply(e); !errors.Is(err, base.ErrCorruption) {
			t.Errorf("%s: %v, want ErrCorruption", name, err)
		}
	}
	// A table deleted twice by one edit is deleted; one moved down is
	// deleted from its level before it is added to the next.
	v3, err := v.Apply(&VersionEdit{DeletedFiles: []DeletedFile{{1, 4}, {1, 4}, {1, 3}}, NewFiles: []NewFile{{2, v.Find(1, []byte("a"))}}})
	if err != nil || v3.NumFiles(1) != 0 || v3.Find(2, []byte("b")).FileNum != 3 || v3.LevelSize(2) != 1003 {
		t.Fatalf("delete twice, move: %v, %v", err, v3)
	}
}

// TestVersionModel applies random edits to versions and to a model (sorted
// slices), comparing every query, and checks that applying an edit leaves
// the older versions as they were.
func TestVersionModel(t *testing.T) {
	type model [NumLevels][]*FileMetadata
	r := rand.New(rand.NewPCG(1, 2))
	key := func(i int) string { return fmt.Sprintf("%04d", i) }
	var versions []*Version
	var models []model
	v, m := &Version{}, model{}
	num := uint64(0)
	for step := range 300 {
		e := &VersionEdit{}
		next := m
		for range r.IntN(4) { // delete some tables
			l := r.IntN(NumLevels)
			if len(next[l]) == 0 {
				continue
			}
			i := r.IntN(len(next[l]))
			e.DeletedFiles = append(e.DeletedFiles, DeletedFile{l, next[l][i].FileNum})
			next[l] = slices.Delete(slices.Clone(next[l]), i, i+1)
		}
		for range r.IntN(4) { // add tables where they fit
			l := r.IntN(NumLevels)
			lo := r.IntN(1000)
			f := meta(num+1, key(lo), key(lo+r.IntN(20)), base.SeqNum(step))
			if r.IntN(3) > 0 { // entries counted (a table written since Open)
				f.Entries = 1 + uint64(r.IntN(100))
				f.Deletions = uint64(r.IntN(int(f.Entries) + 1))
			}
			if l > 0 && slices.ContainsFunc(next[l], func(g *FileMetadata) bool { return g.Overlaps(f.Smallest.UserKey, f.Largest.UserKey) }) {
				continue
			}
			num++
			e.NewFiles = append(e.NewFiles, NewFile{l, f})
			next[l] = append(slices.Clone(next[l]), f)
		}
		slices.SortFunc(next[0], func(a, b *FileMetadata) int {
			return cmp.Or(cmp.Compare(b.LargestSeq, a.LargestSeq), cmp.Compare(b.FileNum, a.FileNum))
		})
		for l := 1; l < NumLevels; l++ {
			slices.SortFunc(next[l], func(a, b *FileMetadata) int { return base.CompareInternal(a.Smallest, b.Smallest) })
		}
		nv, err := v.Apply(e)
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		versions, models = append(versions, nv), append(models, next)
		v, m = nv, next
	}
	for i, v := range versions {
		m := models[i]
		for l := range NumLevels {
			var size uint64
			var st LevelStats
			for _, f := range m[l] {
				size += f.Size
				st.Size += f.Size
				if f.Entries > 0 {
					st.CountedSize += f.Size
					st.Entries += f.Entries
					st.Deletions += f.Deletions
				}
			}
			if got := v.Files(l); !slices.Equal(got, m[l]) || v.NumFiles(l) != len(m[l]) || v.LevelSize(l) != size {
				t.Fatalf("version %d L%d: %v (%d bytes), want %v (%d)", i, l, got, v.LevelSize(l), m[l], size)
			}
			if got := v.LevelStats(l); got != st {
				t.Fatalf("version %d L%d: stats %+v, want %+v", i, l, got, st)
			}
			for range 20 {
				lo := r.IntN(1020)
				k := []byte(key(lo))
				var want []*FileMetadata
				for _, f := range m[l] {
					if f.Overlaps(k, k) {
						want = append(want, f)
					}
				}
				if got := slices.Collect(v.Containing(l, k)); !slices.Equal(got, want) {
					t.Fatalf("version %d L%d: %s in %v, want %v", i, l, k, got, want)
				}
				if l > 0 {
					if got := v.Find(l, k); (got == nil) != (len(want) == 0) || got != nil && got != want[0] {
						t.Fatalf("version %d L%d: Find(%s) = %v, want %v", i, l, k, got, want)
					}
				}
				var lb, hb []byte
				if r.IntN(5) > 0 {
					lb = k
				}
				if r.IntN(5) > 0 {
					hb = []byte(key(lo + r.IntN(50)))
				}
				want = want[:0]
				for _, f := range m[l] {
					if f.Overlaps(lb, hb) {
						want = append(want, f)
					}
				}
				if got := v.Overlapping(l, lb, hb); !slices.Equal(got, want) {
					t.Fatalf("version %d L%d: Overlapping(%s, %s) = %v, want %v", i, l, lb, hb, got, want)
				}
			}
		}
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(sampleEdit().Encode())
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := Decode(data)
		if err != nil {
			// Damage, or an edit of a format version newer than this
			// build's (which the fuzzer finds by changing tag 8's value).
			if !errors.Is(err, base.ErrCorruption) && !errors.Is(err, base.ErrUnsupportedFormat) {
				t.Fatalf("%v wraps neither ErrCorruption nor ErrUnsupportedFormat", err)
			}
			return
		}
		again, err := Decode(e.Encode())
		if err != nil || !reflect.DeepEqual(again, e) {
			t.Fatalf("re-encoded edit differs: %v", err)
		}
	})
}

// TestFindFlat checks Find's search of a level's sorted slice against its
// tree's and against every table's range, on levels that grow past flatMax
// (where Find searches the tree alone) and shrink back, with tables that end
// at a range deletion's exclusive end where the next one begins.
func TestFindFlat(t *testing.T) {
	// Keys of one run share a prefix and differ in the eight bytes after
	// it; those of the other share nothing and, within each half, the eight
	// bytes that follow (Find must compare the rest).
	t.Run("prefix", func(t *testing.T) { testFindFlat(t, func(i int) string { return fmt.Sprintf("%06d", i) }) })
	t.Run("ties", func(t *testing.T) {
		testFindFlat(t, func(i int) string { return fmt.Sprintf("%c-middle-%06d", 'a'+i/2500, i) })
	})
}

func testFindFlat(t *testing.T, key func(int) string) {
	r := rand.New(rand.NewPCG(7, 8))
	// Keys outside every level's range, and outside any common prefix.
	outside := [][]byte{{}, []byte("/"), []byte("0"), []byte("1"), []byte("c"), []byte("zz")}
	v := &Version{}
	var files []*FileMetadata // L3's tables, in key order
	num := uint64(0)
	check := func(step int) {
		t.Helper()
		if n := v.NumFiles(3); (v.flat[3] != nil) != (n <= flatMax) || v.flat[3] != nil && len(v.flat[3].entries) != n {
			t.Fatalf("step %d: %d tables, flat level %v", step, n, v.flat[3])
		}
		tree := *v
		tree.flat = [NumLevels]*flatLevel{}
		for range 300 {
			k := []byte(key(r.IntN(4*(flatMax+100) + 8)))
			switch {
			case r.IntN(4) == 0 && len(files) > 0: // a table's own bounds
				f := files[r.IntN(len(files))]
				k = slices.Clone([]byte([][]byte{f.Smallest.UserKey, f.Largest.UserKey}[r.IntN(2)]))
			case r.IntN(10) == 0:
				k = outside[r.IntN(len(outside))]
			}
			var want *FileMetadata
			for _, f := range files {
				if f.Overlaps(k, k) {
					if want != nil {
						t.Fatalf("step %d: %s in %s and %s", step, k, want, f)
					}
					want = f
				}
			}
			if got := v.Find(3, k); got != want {
				t.Fatalf("step %d: Find(%s) = %v, want %v", step, k, got, want)
			}
			if got := tree.Find(3, k); got != want {
				t.Fatalf("step %d: the tree's Find(%s) = %v, want %v", step, k, got, want)
			}
		}
	}
	// Slot i of L3's key space is keys 4i to 4i+3: a table in slot i spans
	// 4i to 4i+2, or, one time in three, 4i to 4i+4 with 4i+4 a range
	// deletion's exclusive end, which the table in slot i+1 begins at.
	slots := map[int]*FileMetadata{}
	peak := 0
	for step := range 40 {
		e := &VersionEdit{}
		grow := step < 20
		for range 200 {
			i := r.IntN(flatMax + 100)
			if f, ok := slots[i]; ok {
				if !grow {
					e.DeletedFiles = append(e.DeletedFiles, DeletedFile{3, f.FileNum})
					delete(slots, i)
				}
				continue
			}
			if !grow {
				continue
			}
			num++
			f := meta(num, key(4*i), key(4*i+2), 1)
			if r.IntN(3) == 0 {
				f.Largest = base.MakeRangeDeleteSentinel([]byte(key(4*i + 4)))
			}
			e.NewFiles = append(e.NewFiles, NewFile{3, f})
			slots[i] = f
		}
		nv, err := v.Apply(e)
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		v = nv
		files = v.Files(3)
		peak = max(peak, len(files))
		check(step)
	}
	if peak <= flatMax {
		t.Fatalf("L3 held at most %d tables: the test did not grow it past flatMax", peak)
	}
	if v.NumFiles(3) > flatMax/2 {
		t.Fatalf("L3 holds %d tables at the end: the test did not shrink it", v.NumFiles(3))
	}
}

// TestContainingL0Flat checks Containing's listing of L0 from its slice
// against the tree's and against every table's range, as L0 grows past
// flatMax (where Containing walks the tree alone).
func TestContainingL0Flat(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	key := func(i int) string { return fmt.Sprintf("%05d", i) }
	v := &Version{}
	num := uint64(0)
	for step := range 12 {
		e := &VersionEdit{}
		for range 100 {
			num++
			lo := r.IntN(10_000)
			e.NewFiles = append(e.NewFiles, NewFile{0, meta(num, key(lo), key(lo+r.IntN(200)), base.SeqNum(num))})
		}
		nv, err := v.Apply(e)
		if err != nil {
			t.Fatal(err)
		}
		v = nv
		n := v.NumFiles(0)
		if (v.flat[0] != nil) != (n <= flatMax) || v.flat[0] != nil && len(v.flat[0].entries) != n {
			t.Fatalf("step %d: %d tables, flat level %v", step, n, v.flat[0])
		}
		tree := *v
		tree.flat = [NumLevels]*flatLevel{}
		files := v.Files(0)
		for range 200 {
			k := []byte(key(r.IntN(10_300)))
			var want []*FileMetadata
			for _, f := range files {
				if f.Overlaps(k, k) {
					want = append(want, f)
				}
			}
			if got := slices.Collect(v.Containing(0, k)); !slices.Equal(got, want) {
				t.Fatalf("step %d: %s in %v, want %v", step, k, got, want)
			}
			if got := slices.Collect(tree.Containing(0, k)); !slices.Equal(got, want) {
				t.Fatalf("step %d: the tree's %s in %v, want %v", step, k, got, want)
			}
		}
	}
	if v.NumFiles(0) <= flatMax {
		t.Fatalf("L0 holds %d tables: the test did not grow it past flatMax", v.NumFiles(0))
	}
}

// TestFindBinaryKeys checks Find on levels whose keys are short binary
// strings over a few bytes (zeros, 0xff, a shared prefix or none), where
// the eight-byte windows a flat level compares tie, run past a key's end or
// sit beside keys shorter than the level's prefix: against every table's
// range, for keys at and between the tables' bounds.
func TestFindBinaryKeys(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 8))
	alphabet := []byte{0x00, 0x01, 'a', 0xfe, 0xff}
	randKey := func(prefix []byte) []byte {
		k := append([]byte{}, prefix...)
		for range r.IntN(12) {
			k = append(k, alphabet[r.IntN(len(alphabet))])
		}
		return k
	}
	for round := range 300 {
		var prefix []byte
		if round%3 != 0 {
			prefix = randKey(nil)
		}
		// Distinct sorted keys, paired into tables that do not overlap.
		set := map[string]bool{}
		for range 2 + r.IntN(60) {
			set[string(randKey(prefix))] = true
		}
		keys := make([][]byte, 0, len(set))
		for k := range set {
			keys = append(keys, []byte(k))
		}
		slices.SortFunc(keys, func(a, b []byte) int { return cmp.Compare(string(a), string(b)) })
		e := &VersionEdit{}
		var files []*FileMetadata
		for i := 0; i+1 < len(keys); i += 2 {
			f := meta(uint64(i+1), string(keys[i]), string(keys[i+1]), 1)
			if r.IntN(3) == 0 {
				// A range deletion ending where the next table may
				// begin.
				end := keys[i+1]
				if i+2 < len(keys) && r.IntN(2) == 0 {
					end = keys[i+2]
				}
				f.Largest = base.MakeRangeDeleteSentinel(end)
			}
			files = append(files, f)
			e.NewFiles = append(e.NewFiles, NewFile{4, f})
		}
		v, err := (&Version{}).Apply(e)
		if err != nil {
			t.Fatal(err)
		}
		if v.flat[4] == nil {
			t.Fatal("the level is not flat")
		}
		probes := append([][]byte{{}, append([]byte{}, prefix...), randKey(nil)}, keys...)
		for _, k := range keys {
			probes = append(probes, append(append([]byte{}, k...), 0x00), append([]byte{}, k[:len(k)/2]...))
		}
		for range 40 {
			probes = append(probes, randKey(prefix), randKey(nil))
		}
		for _, k := range probes {
			var want *FileMetadata
			for _, f := range files {
				if f.Overlaps(k, k) {
					want = f
					break
				}
			}
			if got := v.Find(4, k); got != want {
				t.Fatalf("round %d: Find(%x) = %v, want %v (prefix %x)", round, k, got, want, prefix)
			}
		}
	}
}

// TestFindLongWindowRuns checks Find where many tables share a window (ids
// zero-padded past the eight bytes after a short common prefix), so that
// the search must tell them apart by whole keys beyond a run of eight.
func TestFindLongWindowRuns(t *testing.T) {
	e := &VersionEdit{}
	files := []*FileMetadata{meta(1, "accounts/1", "accounts/9", 1)}
	for i := range 1000 {
		f := meta(uint64(i+2), fmt.Sprintf("users/%012d", i*1000), fmt.Sprintf("users/%012d", i*1000+999), 1)
		if i%7 == 3 {
			f.Largest = base.MakeRangeDeleteSentinel([]byte(fmt.Sprintf("users/%012d", i*1000+1000)))
		}
		files = append(files, f)
		e.NewFiles = append(e.NewFiles, NewFile{5, f})
	}
	e.NewFiles = append(e.NewFiles, NewFile{5, files[0]})
	v, err := (&Version{}).Apply(e)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(9, 9))
	probes := []string{"users/", "users/0", "users/000000000000", "users/999999999999", "v", "accounts/5"}
	for range 3000 {
		probes = append(probes, fmt.Sprintf("users/%012d", r.IntN(1_001_000)))
	}
	for _, k := range probes {
		var want *FileMetadata
		for _, f := range files {
			if f.Overlaps([]byte(k), []byte(k)) {
				want = f
				break
			}
		}
		if got := v.Find(5, []byte(k)); got != want {
			t.Fatalf("Find(%s) = %v, want %v", k, got, want)
		}
	}
}
