package vfs

import (
	"errors"
	"io/fs"
	"os"
	"slices"
	"strings"
	"testing"
)

// linkConformance checks Link, LinkOrCopy and the rename of a directory on
// any FS rooted at dir.
func linkConformance(t *testing.T, fsys FS, dir string) {
	p := func(n string) string { return Join(dir, n) }
	if err := fsys.MkdirAll(dir); err != nil {
		t.Fatal(err)
	}
	write(t, fsys, p("a"), "contents", true).Close()
	if err := fsys.(Linker).Link(p("a"), p("b")); err != nil {
		t.Fatal(err)
	}
	if err := fsys.(Linker).Link(p("a"), p("b")); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("Link over an existing name: %v, want ErrExist", err)
	}
	if err := fsys.(Linker).Link(p("missing"), p("c")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Link of a missing file: %v, want ErrNotExist", err)
	}
	if err := fsys.Remove(p("a")); err != nil {
		t.Fatal(err)
	}
	if got, ok := contents(t, fsys, p("b")); !ok || got != "contents" {
		t.Fatalf("the link after its original's removal: %q, %v", got, ok)
	}
	if err := LinkOrCopy(fsys, p("b"), p("c")); err != nil {
		t.Fatal(err)
	}
	if err := LinkOrCopy(fsys, p("b"), p("c")); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("LinkOrCopy over an existing name: %v, want ErrExist", err)
	}
	if got, _ := contents(t, fsys, p("c")); got != "contents" {
		t.Fatalf("LinkOrCopy: %q", got)
	}

	// A directory renamed with its contents.
	if err := fsys.MkdirAll(p("d1/sub")); err != nil {
		t.Fatal(err)
	}
	write(t, fsys, p("d1/f"), "f", true).Close()
	write(t, fsys, p("d1/sub/g"), "g", true).Close()
	if err := fsys.MkdirAll(p("taken")); err != nil {
		t.Fatal(err)
	}
	write(t, fsys, p("taken/x"), "x", true).Close()
	if err := fsys.Rename(p("d1"), p("taken")); err == nil {
		t.Fatal("a directory renamed over a directory that is not empty")
	}
	if err := fsys.Rename(p("d1"), p("d2")); err != nil {
		t.Fatal(err)
	}
	if ok, _ := fsys.Exists(p("d1")); ok {
		t.Fatal("d1 exists after its rename")
	}
	for name, want := range map[string]string{"d2/f": "f", "d2/sub/g": "g"} {
		if got, ok := contents(t, fsys, p(name)); !ok || got != want {
			t.Fatalf("%s after the rename: %q, %v", name, got, ok)
		}
	}
	if names, err := fsys.List(p("d2")); err != nil || !slices.Equal(names, []string{"f", "sub"}) {
		t.Fatalf("List of the renamed directory: %v, %v", names, err)
	}
}

func TestOSLink(t *testing.T)  { linkConformance(t, Default, t.TempDir()) }
func TestMemLink(t *testing.T) { linkConformance(t, NewMem(), "/db") }

// TestLinkOrCopyFallback: without a working link, LinkOrCopy copies.
func TestLinkOrCopyFallback(t *testing.T) {
	m := NewMem()
	m.MkdirAll("/d")
	write(t, m, "/d/a", "data", true).Close()

	e := NewErrorFS(m)
	link := OpLink
	e.SetInjector(FailOnce(&link, 0))
	if err := e.Link("/d/a", "/d/x"); !errors.Is(err, ErrInjected) {
		t.Fatalf("injected Link: %v", err)
	}
	e.SetInjector(FailOnce(&link, 0))
	if err := LinkOrCopy(e, "/d/a", "/d/b"); err != nil {
		t.Fatal(err)
	}
	notLinker := struct{ FS }{m}
	if err := LinkOrCopy(notLinker, "/d/a", "/d/c"); err != nil {
		t.Fatal(err)
	}
	if err := NewErrorFS(notLinker).Link("/d/a", "/d/x"); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("Link through an ErrorFS over an FS without links: %v", err)
	}
	// Copies are separate files, synced: a crash keeps them whole.
	m.SyncDir("/d")
	c := m.CrashClone()
	for _, n := range []string{"/d/b", "/d/c"} {
		if got, _ := contents(t, c, n); got != "data" {
			t.Fatalf("%s after a crash: %q", n, got)
		}
	}
	m.mu.Lock()
	shared := m.names["/d/a"] == m.names["/d/b"] || m.names["/d/a"] == m.names["/d/c"]
	m.mu.Unlock()
	if shared {
		t.Fatal("a copy shares its original's node")
	}

	// A failed copy leaves no file behind.
	e.SetInjector(func(op Op, name string) error {
		if op == OpLink || (op == OpWrite && strings.HasSuffix(name, "/d/e")) {
			return &os.PathError{Op: op.String(), Path: name, Err: ErrInjected}
		}
		return nil
	})
	if err := LinkOrCopy(e, "/d/a", "/d/e"); !errors.Is(err, ErrInjected) {
		t.Fatalf("a copy whose write fails: %v", err)
	}
	if ok, _ := m.Exists("/d/e"); ok {
		t.Fatal("a failed copy left its file")
	}
}

// TestMemDirRenameCrash: a directory's rename survives a crash once the
// directory holding its new name is synced, not before; its contents go with
// it either way.
func TestMemDirRenameCrash(t *testing.T) {
	m := NewMem()
	m.MkdirAll("/p/tmp")
	write(t, m, "/p/tmp/f", "f", true).Close()
	m.SyncDir("/p/tmp")
	if err := m.Rename("/p/tmp", "/p/final"); err != nil {
		t.Fatal(err)
	}
	// Synced after the rename, under its new name: durable under the old
	// one until the rename is.
	write(t, m, "/p/final/g", "g", true).Close()
	m.SyncDir("/p/final")

	c := m.CrashClone()
	if ok, _ := c.Exists("/p/final"); ok {
		t.Fatal("the rename survived a crash before its directory was synced")
	}
	for _, n := range []string{"/p/tmp/f", "/p/tmp/g"} {
		if _, ok := contents(t, c, n); !ok {
			t.Fatalf("%s lost in a crash before the rename was durable", n)
		}
	}

	m.SyncDir("/p")
	c = m.CrashClone()
	if ok, _ := c.Exists("/p/tmp"); ok {
		t.Fatal("the old name survived a crash after the rename was durable")
	}
	for name, want := range map[string]string{"/p/final/f": "f", "/p/final/g": "g"} {
		if got, ok := contents(t, c, name); !ok || got != want {
			t.Fatalf("%s after a durable rename and a crash: %q, %v", name, got, ok)
		}
	}
	if names, _ := c.List("/p"); !slices.Equal(names, []string{"final"}) {
		t.Fatalf("/p after the crash: %v", names)
	}
	// Renamed twice, then synced: the last name wins.
	if err := m.Rename("/p/final", "/p/again"); err != nil {
		t.Fatal(err)
	}
	if err := m.Rename("/p/again", "/p/third"); err != nil {
		t.Fatal(err)
	}
	if got, _ := contents(t, m.CrashClone(), "/p/final/f"); got != "f" {
		t.Fatalf("before the sync: %q", got)
	}
	m.SyncDir("/p")
	if got, _ := contents(t, m.CrashClone(), "/p/third/g"); got != "g" {
		t.Fatalf("after two renames and a sync: %q", got)
	}
}
