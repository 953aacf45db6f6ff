package bloomkv

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/bloomkv/bloomkv/internal/manifest"
	"github.com/bloomkv/bloomkv/vfs"
)

// checkedStore writes a store with tables on L0 and lower levels, deletions
// and range deletions, and returns it open, with a snapshot older than the
// deletions that keeps them, and its live key count.
func checkedStore(t *testing.T, fs vfs.FS) (*DB, uint64) {
	o := &Options{FS: fs, Logger: quietLogger(), MemTableSize: 128 << 10, LBaseMaxBytes: 256 << 10, TargetFileSize: 64 << 10}
	d := mustOpen(t, "/db", o)
	const n = 20_000
	fillKeys(t, d, n, 50) // even keys 0..2n-2
	// A snapshot older than the deletions keeps them (and the keys they
	// delete) from being compacted away, so that the store holds some.
	if _, err := d.NewSnapshot(); err != nil {
		t.Fatal(err)
	}
	if err := d.DeleteRange(levelKey(1000), levelKey(2000), NoSync); err != nil {
		t.Fatal(err)
	}
	for i := 4000; i < 4100; i += 2 {
		if err := d.Delete(levelKey(i), NoSync); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Flush(); err != nil {
		t.Fatal(err)
	}
	waitForCompactions(t, d)
	if err := d.Set(levelKey(1), []byte("odd"), NoSync); err != nil {
		t.Fatal(err)
	}
	if err := d.Flush(); err != nil {
		t.Fatal(err)
	}
	waitForCompactions(t, d)
	return d, n - 500 - 50 + 1
}

// TestSSTablesAndCheck: SSTables lists a store's tables level by level,
// Check counts what a sound store holds and names each damaged table's
// problem, and both refuse a closed store.
func TestSSTablesAndCheck(t *testing.T) {
	fs := vfs.NewMem()
	d, live := checkedStore(t, fs)
	levels, err := d.SSTables()
	if err != nil {
		t.Fatal(err)
	}
	used, most := 0, 0
	for l, tables := range levels {
		if len(tables) > 0 {
			used++
		}
		if len(tables) > len(levels[most]) {
			most = l
		}
	}

	t.Run("sound store", func(t *testing.T) {
		m := d.Metrics()
		files := 0
		for _, lm := range m.Levels {
			files += lm.Files
		}
		for l, tables := range levels {
			if len(tables) != m.Levels[l].Files {
				t.Fatalf("L%d: %d tables listed, metrics count %d", l, len(tables), m.Levels[l].Files)
			}
			for i, ti := range tables {
				if ti.Level != l || ti.Size == 0 || bytes.Compare(ti.Smallest, ti.Largest) > 0 || ti.SmallestSeq > ti.LargestSeq {
					t.Fatalf("L%d table %d: %+v", l, i, ti)
				}
				if l > 0 && i > 0 && bytes.Compare(tables[i-1].Largest, ti.Smallest) > 0 {
					t.Fatalf("L%d: tables %d and %d overlap", l, i-1, i)
				}
			}
		}
		if used < 2 {
			t.Fatalf("want tables on several levels:\n%s", m)
		}
		st, err := d.Check()
		if err != nil {
			t.Fatalf("check of a sound store: %v", err)
		}
		if st.Tables != files || st.LiveKeys != live || st.Entries == 0 || st.RangeDeletions == 0 || st.Blocks <= st.Tables {
			t.Fatalf("check stats %+v; want %d tables, %d live keys", st, files, live)
		}
	})

	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	t.Run("closed handle", func(t *testing.T) {
		if _, err := d.Check(); !errors.Is(err, ErrClosed) {
			t.Fatalf("Check after Close: %v", err)
		}
		if _, err := d.SSTables(); !errors.Is(err, ErrClosed) {
			t.Fatalf("SSTables after Close: %v", err)
		}
	})

	// Damage: a byte of one table's first data block, and another table
	// replaced by a copy of a third (sound blocks, wrong contents for the
	// manifest).
	t.Run("damaged tables", func(t *testing.T) {
		tables := levels[most]
		if len(tables) < 3 {
			t.Fatalf("want 3 tables on a level, have %d", len(tables))
		}
		flip := "/db/" + tables[0].Name
		data := readFile(t, fs, flip)
		data[10] ^= 0x40
		rewrite(t, fs, flip, data)
		rewrite(t, fs, "/db/"+tables[1].Name, readFile(t, fs, "/db/"+tables[2].Name))

		ro := mustOpen(t, "/db", &Options{FS: fs, Logger: quietLogger(), ReadOnly: true})
		defer ro.Close()
		_, err := ro.Check()
		var ce *CheckError
		if !errors.As(err, &ce) || !errors.Is(err, ErrCorruption) {
			t.Fatalf("check of a damaged store: %v", err)
		}
		all := []string{}
		for _, p := range ce.Problems {
			all = append(all, p.Error())
		}
		joined := strings.Join(all, "\n")
		// The copy differs from the manifest's record in its size (refused
		// at open) or, when the sizes match, in its keys.
		copied := tables[1].Name + ": holds keys"
		if tables[1].Size != tables[2].Size {
			copied = tables[1].Name + " is "
		}
		for _, want := range []string{flip + ": data block (0, ", "checksum mismatch", copied, "the manifest records"} {
			if !strings.Contains(joined, want) {
				t.Errorf("no problem mentions %q:\n%s", want, joined)
			}
		}
		// The damaged table's partial contents are not compared with the
		// manifest (that would add false problems), and its block is
		// reported once.
		if strings.Contains(joined, tables[0].Name+": holds") || strings.Count(joined, flip+": data block (0, ") != 1 {
			t.Errorf("problems repeat or follow from the damaged block:\n%s", joined)
		}
	})
}

// TestCheckLevelInvariants: Check's level checks find overlapping tables in
// a level and, across levels, an older version of a key above a newer one
// (which would make Get return the old value). L0's order is its tree's own.
func TestCheckLevelInvariants(t *testing.T) {
	d := mustOpen(t, "/db", memOpts(vfs.NewMem()))
	closeAtCleanup(t, d)
	// Two level-0 tables of one key make level 0 due: a compaction would
	// merge them and delete the tables the cases below read.
	holdCompactions(t, d)
	var tables []*manifest.FileMetadata // k=old, then k=new
	for _, v := range []string{"old", "new"} {
		if err := d.Set([]byte("k"), []byte(v), NoSync); err != nil {
			t.Fatal(err)
		}
		if err := d.Flush(); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, newestTable(d))
	}
	old, newer := tables[0], tables[1]
	for _, c := range []struct {
		name, want string
		v          *manifest.Version
	}{
		{"sound", "", manifest.NewVersionForTesting([manifest.NumLevels][]*manifest.FileMetadata{0: {newer, old}})},
		{"sound across levels", "", manifest.NewVersionForTesting([manifest.NumLevels][]*manifest.FileMetadata{1: {newer}, 2: {old}})},
		{"overlap", "overlap", manifest.NewVersionForTesting([manifest.NumLevels][]*manifest.FileMetadata{3: {newer, old}})},
		{"older above newer", "which lies deeper", manifest.NewVersionForTesting([manifest.NumLevels][]*manifest.FileMetadata{1: {old}, 2: {newer}})},
	} {
		t.Run(c.name, func(t *testing.T) {
			errs := d.checkLevels(c.v)
			switch {
			case c.want == "" && len(errs) > 0:
				t.Errorf("%s: %v", c.name, errs)
			case c.want != "" && (len(errs) == 0 || !errors.Is(errs[0], ErrCorruption) || !strings.Contains(errs[0].Error(), c.want)):
				t.Errorf("%s: %v, want a corruption error saying %q", c.name, errs, c.want)
			}
		})
	}
}

// TestCheckCountsMemtableRangeDeletions: Check counts the range deletions
// the memtables hold, those replayed from the WAL among them, once each:
// before a flush, after a reopen, and after the flush that moves them into
// a table.
func TestCheckCountsMemtableRangeDeletions(t *testing.T) {
	fs := vfs.NewMem()
	o := &Options{FS: fs, Logger: quietLogger()}
	d := mustOpen(t, "/db", o)
	if err := d.Set([]byte("a"), []byte("1"), Sync); err != nil {
		t.Fatal(err)
	}
	if err := d.DeleteRange([]byte("b"), []byte("c"), Sync); err != nil {
		t.Fatal(err)
	}
	count := func(when string, want uint64) {
		t.Helper()
		st, err := d.Check()
		if err != nil || st.RangeDeletions != want {
			t.Fatalf("%s: %+v, %v; want %d range deletions", when, st, err, want)
		}
	}
	count("in the memtable", 1)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d = mustOpen(t, "/db", &Options{FS: fs, Logger: quietLogger(), ReadOnly: true})
	count("replayed from the WAL", 1)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d = mustOpen(t, "/db", o)
	// No background compaction may start before Check counts (as while a
	// Compact runs): an elision-only compaction of the flushed table
	// would rightly drop a range deletion that hides nothing.
	d.mu.Lock()
	d.mu.manualCompacts++
	d.mu.Unlock()
	if err := d.Flush(); err != nil {
		t.Fatal(err)
	}
	count("flushed", 1)
	d.mu.Lock()
	d.mu.manualCompacts--
	d.mu.Unlock()
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
}
