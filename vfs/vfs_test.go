package vfs

import (
	"errors"
	"io"
	"io/fs"
	"slices"
	"testing"
)

// conformance runs the same checks on any FS rooted at dir.
func conformance(t *testing.T, fsys FS, dir string) {
	t.Helper()
	p := func(n string) string { return Join(dir, n) }
	if err := fsys.MkdirAll(p("sub/deeper")); err != nil {
		t.Fatal(err)
	}
	f, err := fsys.Create(p("a"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("hello ")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("world")); err != nil {
		t.Fatal(err)
	}
	if n, err := f.Size(); err != nil || n != 11 {
		t.Fatalf("Size = %d, %v", n, err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := fsys.Open(p("a"))
	if err != nil {
		t.Fatal(err)
	}
	all, err := io.ReadAll(r)
	if err != nil || string(all) != "hello world" {
		t.Fatalf("read %q, %v", all, err)
	}
	buf := make([]byte, 5)
	if n, err := r.ReadAt(buf, 6); n != 5 || string(buf) != "world" || (err != nil && err != io.EOF) {
		t.Fatalf("ReadAt = %d %q %v", n, buf, err)
	}
	if n, err := r.ReadAt(buf, 9); n != 2 || err != io.EOF {
		t.Fatalf("ReadAt past the end = %d, %v; want 2, EOF", n, err)
	}
	r.Close()
	if err := fsys.Rename(p("a"), p("b")); err != nil {
		t.Fatal(err)
	}
	if ok, _ := fsys.Exists(p("a")); ok {
		t.Fatal("a still exists after rename")
	}
	if ok, _ := fsys.Exists(p("b")); !ok {
		t.Fatal("b missing after rename")
	}
	names, err := fsys.List(dir)
	if err != nil || !slices.Equal(names, []string{"b", "sub"}) {
		t.Fatalf("List = %v, %v", names, err)
	}
	if err := fsys.SyncDir(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := fsys.Open(p("missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Open of a missing file: %v", err)
	}
	if err := fsys.Remove(p("b")); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Remove(p("b")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("second Remove: %v", err)
	}
	// Locks.
	l1, err := fsys.Lock(p("LOCK"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fsys.Lock(p("LOCK")); !errors.Is(err, ErrLocked) {
		t.Fatalf("second Lock: %v, want ErrLocked", err)
	}
	if err := l1.Close(); err != nil {
		t.Fatal(err)
	}
	l2, err := fsys.Lock(p("LOCK"))
	if err != nil {
		t.Fatalf("Lock after release: %v", err)
	}
	l2.Close()
}

func TestOSConformance(t *testing.T)  { conformance(t, Default, t.TempDir()) }
func TestMemConformance(t *testing.T) { conformance(t, NewMem(), "/db") }

func write(t *testing.T, fsys FS, name, data string, sync bool) File {
	t.Helper()
	f, err := fsys.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte(data)); err != nil {
		t.Fatal(err)
	}
	if sync {
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func contents(t *testing.T, fsys FS, name string) (string, bool) {
	t.Helper()
	f, err := fsys.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return "", false
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return string(b), true
}

func TestMemCrash(t *testing.T) {
	m := NewMem()
	m.MkdirAll("/db")
	f := write(t, m, "/db/synced", "durable", true)
	f.Write([]byte(" and lost"))                // written after the sync
	write(t, m, "/db/unsynced", "gone", false)  // never synced
	write(t, m, "/db/renamed", "renamed", true) // synced, renamed after the dir sync
	write(t, m, "/db/removed", "removed", true) // synced, removed after the dir sync
	if err := m.SyncDir("/db"); err != nil {
		t.Fatal(err)
	}
	write(t, m, "/db/new-unsynced-dir", "x", true) // file synced, directory not
	m.Rename("/db/renamed", "/db/renamed2")
	m.Remove("/db/removed")

	c := m.CrashClone()
	for name, want := range map[string]string{
		"/db/synced":   "durable",
		"/db/unsynced": "", // created before the dir sync: exists, empty
		"/db/renamed":  "renamed",
		"/db/removed":  "removed",
	} {
		got, ok := contents(t, c, name)
		if !ok || got != want {
			t.Errorf("%s after crash: %q (exists %v), want %q", name, got, ok, want)
		}
	}
	for _, name := range []string{"/db/new-unsynced-dir", "/db/renamed2"} {
		if _, ok := contents(t, c, name); ok {
			t.Errorf("%s survived a crash without a directory sync", name)
		}
	}
	// The original goes on, unaffected.
	if got, _ := contents(t, m, "/db/synced"); got != "durable and lost" {
		t.Fatalf("original changed: %q", got)
	}
	// Locks do not survive.
	if _, err := m.Lock("/db/LOCK"); err != nil {
		t.Fatal(err)
	}
	if l, err := m.CrashClone().Lock("/db/LOCK"); err != nil {
		t.Fatalf("lock after crash: %v", err)
	} else {
		l.Close()
	}
}

// TestMemCrashKeeping: a crash may also leave part of what was written but
// not synced, never more than was written, and never bytes out of order.
func TestMemCrashKeeping(t *testing.T) {
	m := NewMem()
	m.MkdirAll("/db")
	f := write(t, m, "/db/log", "synced", true)
	f.Write([]byte("+unsynced"))
	m.SyncDir("/db")
	for keep, want := range map[int]string{-1: "synced", 0: "synced", 3: "synced+un", 9: "synced+unsynced", 100: "synced+unsynced"} {
		var asked int
		c := m.CrashCloneKeeping(func(name string, unsynced int) int {
			if name != "/db/log" {
				t.Errorf("asked about %s", name)
			}
			asked = unsynced
			return keep
		})
		if asked != 9 {
			t.Errorf("keep was told of %d unsynced bytes, want 9", asked)
		}
		if got, _ := contents(t, c, "/db/log"); got != want {
			t.Errorf("keeping %d: %q, want %q", keep, got, want)
		}
	}
	if got, _ := contents(t, m.CrashCloneKeeping(nil), "/db/log"); got != "synced" {
		t.Errorf("keeping nothing: %q", got)
	}
}

func TestErrorFS(t *testing.T) {
	e := NewErrorFS(NewMem())
	e.MkdirAll("/d")
	sync := OpSync
	e.SetInjector(FailOnce(&sync, 1))
	f, err := e.Create("/d/f")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		err := f.Sync()
		if (err != nil) != (i == 1) || (err != nil && !errors.Is(err, ErrInjected)) {
			t.Fatalf("sync %d: %v", i, err)
		}
	}
	e.SetInjector(func(op Op, name string) error {
		if op == OpWrite {
			return errors.New("disk full")
		}
		return nil
	})
	if _, err := f.Write([]byte("x")); err == nil {
		t.Fatal("write succeeded")
	}
	e.SetInjector(nil)
	if _, err := f.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	for op := OpCreate; op <= OpLink; op++ {
		if op.String() == "op?" {
			t.Fatalf("op %d has no name", op)
		}
	}
}

// writeAtConformance: WriteAt past the end extends the file with zeros and
// leaves the offset Write writes at where it was.
func writeAtConformance(t *testing.T, fsys FS, dir string) {
	f, err := fsys.Create(Join(dir, "prepared"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	wa, ok := f.(io.WriterAt)
	if !ok {
		t.Fatalf("%T does not implement io.WriterAt", f)
	}
	if _, err := f.Write([]byte("head")); err != nil {
		t.Fatal(err)
	}
	if _, err := wa.WriteAt([]byte("zz"), 10); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("+tail")); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 12)
	if _, err := f.ReadAt(got, 0); err != nil {
		t.Fatal(err)
	}
	if want := "head+tail\x00zz"; string(got) != want {
		t.Fatalf("contents %q, want %q", got, want)
	}
	if n, err := f.Size(); err != nil || n != 12 {
		t.Fatalf("Size = %d, %v", n, err)
	}
}

func TestOSWriteAt(t *testing.T)  { writeAtConformance(t, Default, t.TempDir()) }
func TestMemWriteAt(t *testing.T) { writeAtConformance(t, NewMem(), "/") }

// TestMemCrashKeepingInPlace: writes into zeros written and synced ahead
// change bytes in place; a crash keeps a prefix of them.
func TestMemCrashKeepingInPlace(t *testing.T) {
	m := NewMem()
	m.MkdirAll("/db")
	f := write(t, m, "/db/log", "synced", true)
	f.(io.WriterAt).WriteAt(make([]byte, 8), 6)
	f.Sync()
	f.Write([]byte("+new"))
	m.SyncDir("/db")
	for keep, want := range map[int]string{0: "synced\x00\x00\x00\x00\x00\x00\x00\x00", 2: "synced+n\x00\x00\x00\x00\x00\x00", 4: "synced+new\x00\x00\x00\x00"} {
		c := m.CrashCloneKeeping(func(string, int) int { return keep })
		if got, _ := contents(t, c, "/db/log"); got != want {
			t.Errorf("keeping %d: %q, want %q", keep, got, want)
		}
	}
}

// TestErrorFSWriteAt: WriteAt passes through and fails as a write does.
func TestErrorFSWriteAt(t *testing.T) {
	e := NewErrorFS(NewMem())
	f, err := e.Create("/x")
	if err != nil {
		t.Fatal(err)
	}
	wa := f.(io.WriterAt)
	if _, err := wa.WriteAt([]byte("a"), 3); err != nil {
		t.Fatal(err)
	}
	op := OpWrite
	e.SetInjector(FailOnce(&op, 0))
	if _, err := wa.WriteAt([]byte("a"), 5); !errors.Is(err, ErrInjected) {
		t.Fatalf("injected write error: %v", err)
	}
}
