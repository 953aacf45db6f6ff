// Package vfs is the file-system seam every bloomkv file operation goes
// through (bloomkv.Options.FS): the operating system's file system
// (Default), an in-memory one that can simulate a crash by dropping whatever
// was not synced (NewMem, MemFS.CrashClone), and a wrapper that injects
// errors (NewErrorFS), for tests of how a program copes with power loss and
// I/O errors. Implement FS to put a store on storage of one's own.
package vfs

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"syscall"
)

// File is an open file. A file open for writing may also implement
// io.WriterAt, writing at an offset without moving the offset Write writes
// at, and extending the file with zeros when the offset is past its end: a
// write-ahead log then writes zeros ahead of its records, so that a sync
// after a record commits data without the file's growth.
type File interface {
	io.Reader
	io.ReaderAt
	io.Writer
	io.Closer
	// Sync makes the file's contents durable.
	Sync() error
	// Size returns the file's current size.
	Size() (int64, error)
}

// FS is a file system.
type FS interface {
	// Create creates name, or truncates it, for writing.
	Create(name string) (File, error)
	// Open opens name for reading.
	Open(name string) (File, error)
	// Remove removes a file or an empty directory.
	Remove(name string) error
	// Rename renames oldname to newname, replacing newname; it is atomic,
	// and durable once the directory is synced.
	Rename(oldname, newname string) error
	// MkdirAll creates dir and any missing parents.
	MkdirAll(dir string) error
	// List returns the names in dir, sorted.
	List(dir string) ([]string, error)
	// Exists reports whether name exists.
	Exists(name string) (bool, error)
	// SyncDir makes the creations, removals and renames in dir durable.
	SyncDir(dir string) error
	// Lock takes an exclusive lock on name, creating it if needed; the lock
	// holds until the returned Closer is closed. A second Lock of a held
	// name fails with an error wrapping ErrLocked.
	Lock(name string) (io.Closer, error)
}

// ErrLocked is wrapped by the error Lock returns for a lock already held.
var ErrLocked = errors.New("vfs: lock held by another user")

// Default is the operating system's file system.
var Default FS = osFS{}

type osFS struct{}

type osFile struct{ *os.File }

func (f osFile) Size() (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

func (osFS) Create(name string) (File, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) Open(name string) (File, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) Remove(name string) error             { return os.Remove(name) }
func (osFS) Rename(oldname, newname string) error { return os.Rename(oldname, newname) }
func (osFS) MkdirAll(dir string) error            { return os.MkdirAll(dir, 0o755) }

func (osFS) List(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	sort.Strings(names)
	return names, nil
}

func (osFS) Exists(name string) (bool, error) {
	_, err := os.Stat(name)
	if err == nil {
		return true, nil
	}
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return false, err
}

func (osFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

func (osFS) Lock(name string) (io.Closer, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS) {
		// A store on a read-only mount or owned by another user can still
		// be locked (flock needs no write access) for reading.
		f, err = os.Open(name)
	}
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, &os.PathError{Op: "lock", Path: name, Err: ErrLocked}
		}
		return nil, &os.PathError{Op: "lock", Path: name, Err: err}
	}
	return f, nil // closing the file releases the lock
}

// Join joins path elements; it is filepath.Join, named here so callers need
// one import.
func Join(elem ...string) string { return filepath.Join(elem...) }
