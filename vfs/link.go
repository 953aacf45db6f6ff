package vfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// Linker is a file system that can give a file a second name (a hard
// link): both names then refer to the same contents, and removing one
// leaves the other. The operating system's FS, MemFS and an ErrorFS over
// either implement it.
type Linker interface {
	// Link creates newname as a link to oldname; newname must not exist.
	// The new name is durable once its directory is synced.
	Link(oldname, newname string) error
}

// Link implements Linker.
func (osFS) Link(oldname, newname string) error { return os.Link(oldname, newname) }

// Link implements Linker: newname shares oldname's contents.
func (m *MemFS) Link(oldname, newname string) error {
	oldname, newname = clean(oldname), clean(newname)
	m.mu.Lock()
	defer m.mu.Unlock()
	n, ok := m.names[oldname]
	if !ok {
		return &os.LinkError{Op: "link", Old: oldname, New: newname, Err: fs.ErrNotExist}
	}
	if !m.parentExists(newname) {
		return &os.LinkError{Op: "link", Old: oldname, New: newname, Err: fs.ErrNotExist}
	}
	if _, ok := m.names[newname]; ok || m.dirs[newname] {
		return &os.LinkError{Op: "link", Old: oldname, New: newname, Err: fs.ErrExist}
	}
	m.names[newname] = n
	return nil
}

// Link implements Linker, failing as the injector says (OpLink, named by
// oldname), and with errors.ErrUnsupported when the wrapped FS cannot link.
func (e *ErrorFS) Link(oldname, newname string) error {
	if err := e.maybe(OpLink, oldname); err != nil {
		return err
	}
	l, ok := e.fs.(Linker)
	if !ok {
		return &os.LinkError{Op: "link", Old: oldname, New: newname, Err: errors.ErrUnsupported}
	}
	return l.Link(oldname, newname)
}

// LinkOrCopy gives the contents of oldname the name newname: a hard link
// where fs can make one, a synced copy otherwise (fs is no Linker, or the
// link failed, as it does across devices or on file systems without hard
// links). newname must not exist. Either way the caller syncs newname's
// directory to make the name durable.
func LinkOrCopy(fsys FS, oldname, newname string) error {
	if l, ok := fsys.(Linker); ok {
		err := l.Link(oldname, newname)
		if err == nil || errors.Is(err, os.ErrExist) || errors.Is(err, os.ErrNotExist) {
			return err // copying would fail the same way
		}
	}
	src, err := fsys.Open(oldname)
	if err != nil {
		return err
	}
	defer src.Close()
	_, err = CopyFrom(fsys, newname, src)
	return err
}

// CopyFrom creates name and writes into it everything r holds, then syncs
// and closes it. It returns the bytes written; on an error it removes name.
func CopyFrom(fsys FS, name string, r io.Reader) (int64, error) {
	f, err := fsys.Create(name)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(f, r)
	if err != nil {
		err = fmt.Errorf("vfs: copying into %s: %w", name, err)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		fsys.Remove(name)
		return n, err
	}
	return n, nil
}
