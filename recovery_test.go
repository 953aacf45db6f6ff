package bloomkv

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/bloomkv/bloomkv/vfs"
)

func TestTornWALTailIsDroppedWithALogLine(t *testing.T) {
	fs := storeWithWAL(t, 20)
	name := walFile(t, fs)
	data := walRecords(t, fs, name)
	rewrite(t, fs, name, data[:len(data)-50]) // the last record is cut short
	var logs bytes.Buffer
	o := memOpts(fs)
	o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	d := mustOpen(t, "/db", o)
	defer d.Close()
	for i := range 19 {
		expect(t, d, fmt.Sprintf("k%03d", i), strings.Repeat("v", 200))
	}
	expect(t, d, "k019", "")
	if !strings.Contains(logs.String(), "torn") || !strings.Contains(logs.String(), name) {
		t.Fatalf("no log line names the torn WAL: %q", logs.String())
	}
}

func TestWALCorruptionInTheMiddle(t *testing.T) {
	fs := storeWithWAL(t, 20)
	name := walFile(t, fs)
	data := readFile(t, fs, name)
	data[30] ^= 0x55 // inside the first record; valid records follow
	rewrite(t, fs, name, data)
	_, err := Open("/db", memOpts(fs))
	if !errors.Is(err, ErrCorruption) || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "offset") {
		t.Fatalf("corrupt WAL: %v, want ErrCorruption naming %s and an offset", err, name)
	}
}

// TestManifestThatLostEditsIsRefused: a manifest cut back to an earlier
// state (here: before a flush, whose log was then deleted) or naming a table
// that is gone must fail Open with ErrCorruption, not open a store that
// silently lacks writes or answers with old values.
func TestManifestThatLostEditsIsRefused(t *testing.T) {
	fs := vfs.NewMem()
	d := mustOpen(t, "/db", memOpts(fs))
	d.Set([]byte("a"), []byte("1"), Sync)
	name := manifestFile(t, fs)
	before := readFile(t, fs, name)
	if err := d.Flush(); err != nil {
		t.Fatal(err)
	}
	d.Set([]byte("b"), []byte("2"), Sync)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	fs.SyncDir("/db") // the flushed log's removal reaches the disk

	t.Run("manifest cut back before a flush", func(t *testing.T) {
		lost := fs.CrashClone()
		rewrite(t, lost, name, before)
		_, err := Open("/db", memOpts(lost))
		if !errors.Is(err, ErrCorruption) || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "lost edits") {
			t.Fatalf("manifest cut back before a flush: %v, want ErrCorruption naming %s", err, name)
		}
	})
	t.Run("a table deleted", func(t *testing.T) {
		gone := fs.CrashClone()
		tables, _ := gone.List("/db")
		removed := ""
		for _, n := range tables {
			if k, _ := parseName(n); k == kindTable {
				removed = "/db/" + n
				gone.Remove(removed)
			}
		}
		_, err := Open("/db", memOpts(gone))
		if !errors.Is(err, ErrCorruption) || !strings.Contains(err.Error(), removed) || !strings.Contains(err.Error(), "missing") {
			t.Fatalf("a table deleted: %v, want ErrCorruption naming %s", err, removed)
		}
	})
	t.Run("the store itself is sound", func(t *testing.T) {
		d := mustOpen(t, "/db", memOpts(fs))
		expect(t, d, "a", "1")
		expect(t, d, "b", "2")
		d.Close()
	})
}

// TestCleanlyClosedWALCutShortIsRefused: a store closed cleanly records its
// WAL's size in the manifest, so that a WAL later cut short, even at a record
// boundary, or with its last record damaged, fails Open with ErrCorruption
// instead of passing for a crash's torn tail and losing synced writes.
func TestCleanlyClosedWALCutShortIsRefused(t *testing.T) {
	fs := vfs.NewMem()
	d := mustOpen(t, "/db", memOpts(fs))
	for i := range 10 {
		d.Set([]byte(fmt.Sprintf("k%d", i)), []byte("v"), Sync)
	}
	boundary := d.walW.Size() // the WAL's size before the last write
	d.Set([]byte("last"), []byte("v"), Sync)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	name := walFile(t, fs)
	data := walRecords(t, fs, name)

	t.Run("cut at a record boundary", func(t *testing.T) {
		cut := fs.CrashClone()
		rewrite(t, cut, name, data[:boundary])
		_, err := Open("/db", memOpts(cut))
		if !errors.Is(err, ErrCorruption) || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "last closed") {
			t.Fatalf("WAL cut at a record boundary: %v, want ErrCorruption naming %s", err, name)
		}
	})
	t.Run("last record damaged", func(t *testing.T) {
		flipped := fs.CrashClone()
		bad := bytes.Clone(data)
		bad[len(bad)-2] ^= 1 // inside the last record
		rewrite(t, flipped, name, bad)
		_, err := Open("/db", memOpts(flipped))
		if !errors.Is(err, ErrCorruption) || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "closed cleanly") {
			t.Fatalf("last WAL record damaged: %v, want ErrCorruption naming %s", err, name)
		}
	})
	// (Without a clean close, a cut WAL reads as a crash's torn tail:
	// TestTornWALTailIsDroppedWithALogLine.)
	t.Run("the store itself is sound", func(t *testing.T) {
		d := mustOpen(t, "/db", memOpts(fs))
		expect(t, d, "last", "v")
		d.Close()
	})
}

// TestCorruptOrMissingManifest: Open refuses, with ErrCorruption, a store
// whose manifest or CURRENT is damaged or gone.
func TestCorruptOrMissingManifest(t *testing.T) {
	t.Run("flipped byte with a valid record after it", func(t *testing.T) {
		fs := closedStoreWithK(t)
		name := manifestFile(t, fs)
		f, _ := fs.Open(name)
		data, _ := io.ReadAll(f)
		f.Close()
		// A flipped byte in the manifest's only record, with a valid
		// chunk after it, is corruption; as the last record it is a torn
		// tail.
		bad := append([]byte(nil), data...)
		bad[len(bad)/2] ^= 0xff
		bad = append(bad, data...) // a valid copy follows
		w, _ := fs.Create(name)
		w.Write(bad)
		w.Sync()
		w.Close()
		if _, err := Open("/db", memOpts(fs)); !errors.Is(err, ErrCorruption) {
			t.Fatalf("corrupt manifest: %v, want ErrCorruption", err)
		}
	})
	t.Run("missing manifest", func(t *testing.T) {
		fs := closedStoreWithK(t)
		fs.Remove(manifestFile(t, fs))
		if _, err := Open("/db", memOpts(fs)); !errors.Is(err, ErrCorruption) {
			t.Fatalf("missing manifest: %v, want ErrCorruption", err)
		}
	})
	t.Run("CURRENT naming nothing", func(t *testing.T) {
		fs := closedStoreWithK(t)
		c, _ := fs.Create("/db/CURRENT")
		c.Write([]byte("garbage\n"))
		c.Close()
		if _, err := Open("/db", memOpts(fs)); !errors.Is(err, ErrCorruption) {
			t.Fatalf("bad CURRENT: %v, want ErrCorruption", err)
		}
	})
}
