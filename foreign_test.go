package bloomkv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/syndtr/goleveldb/leveldb"
	"github.com/syndtr/goleveldb/leveldb/util"

	"github.com/bloomkv/bloomkv/vfs"
)

// dirNames lists dir's files, sorted.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	slices.Sort(names)
	return names
}

// Open refuses another engine's store, writable or read-only, with
// ErrUnsupportedFormat and without touching it: its manifest and logs
// could read as bloomkv's, which a writable Open would replace and delete.
func TestOpenRefusesAnotherEnginesStore(t *testing.T) {
	const keys = 1000
	key := func(i int) []byte { return fmt.Appendf(nil, "k%04d", i) }
	stores := []struct {
		name  string
		write func(dir string, flush bool) error
		read  func(dir string) error // reads every key back
	}{
		{"pebble", func(dir string, flush bool) error {
			p, err := pebble.Open(dir, &pebble.Options{Logger: quietPebbleLogger{}})
			if err != nil {
				return err
			}
			for i := range keys {
				p.Set(key(i), []byte("v"), pebble.NoSync)
			}
			if flush {
				p.Flush()
			}
			return p.Close()
		}, func(dir string) error {
			p, err := pebble.Open(dir, &pebble.Options{Logger: quietPebbleLogger{}})
			if err != nil {
				return err
			}
			defer p.Close()
			for i := range keys {
				_, c, err := p.Get(key(i))
				if err != nil {
					return fmt.Errorf("key %s: %w", key(i), err)
				}
				c.Close()
			}
			return nil
		}},
		{"goleveldb", func(dir string, flush bool) error {
			l, err := leveldb.OpenFile(dir, nil)
			if err != nil {
				return err
			}
			for i := range keys {
				l.Put(key(i), []byte("v"), nil)
			}
			if flush {
				l.CompactRange(util.Range{})
			}
			return l.Close()
		}, func(dir string) error {
			l, err := leveldb.OpenFile(dir, nil)
			if err != nil {
				return err
			}
			defer l.Close()
			for i := range keys {
				if _, err := l.Get(key(i), nil); err != nil {
					return fmt.Errorf("key %s: %w", key(i), err)
				}
			}
			return nil
		}},
	}
	for _, s := range stores {
		for _, flush := range []bool{false, true} {
			for _, readOnly := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/tables=%v/readonly=%v", s.name, flush, readOnly), func(t *testing.T) {
					dir := t.TempDir()
					if err := s.write(dir, flush); err != nil {
						t.Fatal(err)
					}
					before := dirNames(t, dir)
					d, err := Open(dir, &Options{Logger: quietLogger(), ReadOnly: readOnly})
					if err == nil {
						d.Close()
						t.Fatal("Open succeeded")
					}
					if !errors.Is(err, ErrUnsupportedFormat) || !strings.Contains(err.Error(), dir) {
						t.Errorf("Open: %v, want ErrUnsupportedFormat naming the directory", err)
					}
					if after := dirNames(t, dir); !slices.Equal(before, after) {
						t.Errorf("Open changed the directory: %v -> %v", before, after)
					}
					if err := s.read(dir); err != nil {
						t.Fatalf("%s after bloomkv's Open: %v", s.name, err)
					}
				})
			}
		}
	}
}

// A directory without CURRENT that holds a log is not a new store: the
// log is another store's writes, which a new store would delete.
func TestOpenRefusesALogWithoutCurrent(t *testing.T) {
	mem := vfs.NewMem()
	if err := mem.MkdirAll("/db"); err != nil {
		t.Fatal(err)
	}
	f, err := mem.Create("/db/000002.log")
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("someone's writes"))
	f.Close()
	if d, err := Open("/db", memOpts(mem)); err == nil {
		d.Close()
		t.Fatal("Open started a store over a log")
	} else if !strings.Contains(err.Error(), "000002.log") {
		t.Fatalf("Open: %v, want an error naming the log", err)
	}
	if ok, err := mem.Exists("/db/000002.log"); !ok || err != nil {
		t.Fatalf("the log is gone: %v", err)
	}
}

// Ingest refuses the store's own files: it would link a live table under a
// new number and then remove the original, which the manifest still names.
func TestIngestRefusesTheStoresOwnFiles(t *testing.T) {
	mem := vfs.NewMem()
	o := memOpts(mem)
	d := mustOpen(t, "/db", o)
	want := map[string]string{}
	setsTable(t, mem, "/in/a.sst", 0, 100, "ing", want)
	if err := d.Ingest([]string{"/in/a.sst"}); err != nil {
		t.Fatal(err)
	}
	levels, err := d.SSTables()
	if err != nil {
		t.Fatal(err)
	}
	var own []string
	for _, tables := range levels {
		for _, ti := range tables {
			own = append(own, "/db/"+ti.Name, "/db/../db/"+ti.Name)
		}
	}
	if len(own) == 0 {
		t.Fatal("no table")
	}
	for _, p := range own {
		if err := d.Ingest([]string{p}); err == nil || !strings.Contains(err.Error(), "file of the store itself") {
			t.Errorf("Ingest(%s): %v, want a refusal", p, err)
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d = mustOpen(t, "/db", o)
	defer d.Close()
	for k, v := range want {
		expect(t, d, k, v)
	}
	// A table that only shares a store file's name elsewhere is ingested.
	setsTable(t, mem, filepath.Join("/in", filepath.Base(own[0])), 100, 200, "ing", want)
	if err := d.Ingest([]string{filepath.Join("/in", filepath.Base(own[0]))}); err != nil {
		t.Fatalf("a table named like the store's, elsewhere: %v", err)
	}
}

// On the operating system's file system, a path through a symbolic link to
// the store's directory names the store's file all the same.
func TestIngestRefusesTheStoresOwnFileThroughALink(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "db")
	d, err := Open(db, &Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for i := range 10 {
		if err := d.Set(fmt.Appendf(nil, "k%d", i), []byte("v"), NoSync); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Flush(); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(db, link); err != nil {
		t.Skip("no symbolic links here:", err)
	}
	levels, err := d.SSTables()
	if err != nil {
		t.Fatal(err)
	}
	for _, tables := range levels {
		for _, ti := range tables {
			p := filepath.Join(link, ti.Name)
			if err := d.Ingest([]string{p}); err == nil || !strings.Contains(err.Error(), "file of the store itself") {
				t.Errorf("Ingest(%s): %v, want a refusal", p, err)
			}
			if _, err := os.Stat(filepath.Join(db, ti.Name)); err != nil {
				t.Errorf("the table: %v", err)
			}
		}
	}
	if _, err := d.Check(); err != nil {
		t.Fatal(err)
	}
}
