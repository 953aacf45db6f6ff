package vfs

import (
	"io"
	"slices"
	"testing"
)

func readAllOf(t *testing.T, fsys FS, name string) (string, bool) {
	t.Helper()
	f, err := fsys.Open(name)
	if err != nil {
		return "", false
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return string(b), true
}

// Create of an existing name truncates its file in place, as the operating
// system's does: a Sync alone makes the new contents durable (the entry did
// not change), open handles see the truncation, and so does a hard link.
func TestMemCreateTruncatesInPlace(t *testing.T) {
	m := NewMem()
	m.MkdirAll("/db")
	f, _ := m.Create("/db/x")
	f.Write([]byte("old contents"))
	f.Sync()
	f.Close()
	m.SyncDir("/db")
	r, _ := m.Open("/db/x")
	defer r.Close()

	f, _ = m.Create("/db/x")
	f.Write([]byte("new"))
	if n, _ := r.Size(); n != 3 {
		t.Errorf("a handle opened before Create sees %d bytes, want 3", n)
	}
	if got, _ := readAllOf(t, m.CrashClone(), "/db/x"); got != "old contents" {
		t.Errorf("after a crash before the Sync: %q, want the old contents", got)
	}
	f.Sync()
	f.Close()
	if got, ok := readAllOf(t, m.CrashClone(), "/db/x"); !ok || got != "new" {
		t.Errorf("after a crash once synced: %q (exists %v), want %q", got, ok, "new")
	}

	for name, fsys := range map[string]FS{"os": Default, "mem": NewMem()} {
		d := "/d"
		if name == "os" {
			d = t.TempDir()
		} else {
			fsys.MkdirAll(d)
		}
		f, _ := fsys.Create(Join(d, "a"))
		f.Write([]byte("table bytes"))
		f.Close()
		if err := fsys.(Linker).Link(Join(d, "a"), Join(d, "b")); err != nil {
			t.Fatal(err)
		}
		f, _ = fsys.Create(Join(d, "a"))
		f.Write([]byte("x"))
		f.Close()
		if got, _ := readAllOf(t, fsys, Join(d, "b")); got != "x" {
			t.Errorf("%s: after Create of a, its link b reads %q, want %q", name, got, "x")
		}
	}
}

// A directory removed after files in it were removed without a SyncDir
// comes back with them after a crash, never leaving a file without its
// directory; once its parent is synced, the removal is durable.
func TestMemRemoveDirDurability(t *testing.T) {
	m := NewMem()
	m.MkdirAll("/db/tmp")
	f, _ := m.Create("/db/tmp/f")
	f.Write([]byte("x"))
	f.Sync()
	f.Close()
	m.SyncDir("/db/tmp")
	if err := m.Remove("/db/tmp/f"); err != nil {
		t.Fatal(err)
	}
	if err := m.Remove("/db/tmp"); err != nil {
		t.Fatal(err)
	}
	c := m.CrashClone()
	_, fileOK := readAllOf(t, c, "/db/tmp/f")
	dirOK, _ := c.Exists("/db/tmp")
	names, _ := c.List("/db")
	if !fileOK || !dirOK || !slices.Contains(names, "tmp") {
		t.Errorf("a crash before the parent's SyncDir: file %v, directory %v, List(/db) %v; want the directory back with its file", fileOK, dirOK, names)
	}
	m.SyncDir("/db")
	c = m.CrashClone()
	_, fileOK = readAllOf(t, c, "/db/tmp/f")
	dirOK, _ = c.Exists("/db/tmp")
	if fileOK || dirOK {
		t.Errorf("a crash after the parent's SyncDir: file %v, directory %v; want both gone", fileOK, dirOK)
	}
	// An empty directory's removal is durable at once, as its creation is.
	m.MkdirAll("/db/empty")
	m.Remove("/db/empty")
	if ok, _ := m.CrashClone().Exists("/db/empty"); ok {
		t.Error("an empty directory removed came back after a crash")
	}
}

// A directory removal pending durability follows a rename of the
// directory made before it, and a nested removal goes with its parent's:
// after the SyncDirs that make them durable, a crash brings back neither
// the directories nor their files.
func TestMemRemoveDirAfterRenameAndNested(t *testing.T) {
	write := func(m *MemFS, name string) {
		f, _ := m.Create(name)
		f.Write([]byte("x"))
		f.Sync()
		f.Close()
	}
	m := NewMem()
	m.MkdirAll("/d/x")
	write(m, "/d/x/f")
	m.SyncDir("/d/x")
	m.SyncDir("/d")
	if err := m.Rename("/d/x", "/d/y"); err != nil {
		t.Fatal(err)
	}
	m.Remove("/d/y/f")
	if err := m.Remove("/d/y"); err != nil {
		t.Fatal(err)
	}
	m.SyncDir("/d")
	c := m.CrashClone()
	for _, p := range []string{"/d/x/f", "/d/y/f", "/d/x", "/d/y"} {
		if ok, _ := c.Exists(p); ok {
			t.Errorf("renamed then removed, the parent synced: %s exists after a crash", p)
		}
	}

	m = NewMem()
	m.MkdirAll("/a/x/y")
	write(m, "/a/x/y/f")
	m.SyncDir("/a/x/y")
	m.Remove("/a/x/y/f")
	m.Remove("/a/x/y")
	m.Remove("/a/x")
	m.SyncDir("/a")
	c = m.CrashClone()
	for _, p := range []string{"/a/x", "/a/x/y", "/a/x/y/f"} {
		if ok, _ := c.Exists(p); ok {
			t.Errorf("nested removals, the top one's parent synced: %s exists after a crash", p)
		}
	}
}
