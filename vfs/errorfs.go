package vfs

import (
	"errors"
	"fmt"
	"io"
	"sync/atomic"
)

// Op names a file-system operation for error injection.
type Op uint8

// The operations an ErrorFS can fail.
const (
	OpCreate Op = iota
	OpOpen
	OpRead
	OpWrite
	OpSync
	OpClose
	OpRemove
	OpRename
	OpMkdir
	OpList
	OpExists
	OpSyncDir
	OpLock
	OpLink
)

var opNames = [...]string{"create", "open", "read", "write", "sync", "close", "remove", "rename", "mkdir", "list", "exists", "syncdir", "lock", "link"}

func (o Op) String() string {
	if int(o) < len(opNames) {
		return opNames[o]
	}
	return "op?"
}

// ErrInjected is wrapped by the errors an ErrorFS injects.
var ErrInjected = errors.New("vfs: injected error")

// Injector decides whether an operation on name fails: it returns the error
// to fail with, or nil. It must be safe for concurrent use.
type Injector func(op Op, name string) error

// ErrorFS wraps an FS and fails the operations its Injector picks; files it
// opens fail the same way for reads, writes, syncs and closes.
type ErrorFS struct {
	fs     FS
	inject atomic.Pointer[Injector]
}

// NewErrorFS returns an ErrorFS over fs with no errors injected.
func NewErrorFS(fs FS) *ErrorFS { return &ErrorFS{fs: fs} }

// SetInjector sets the injector; nil stops injecting.
func (e *ErrorFS) SetInjector(inj Injector) {
	if inj == nil {
		e.inject.Store(nil)
		return
	}
	e.inject.Store(&inj)
}

func (e *ErrorFS) maybe(op Op, name string) error {
	if p := e.inject.Load(); p != nil {
		return (*p)(op, name)
	}
	return nil
}

// FailOnce returns an injector that fails the n-th (0-based) operation
// matching op (any op when op is nil), once, with ErrInjected.
func FailOnce(op *Op, n int64) Injector {
	var count atomic.Int64
	return func(o Op, name string) error {
		if op != nil && o != *op {
			return nil
		}
		if count.Add(1)-1 == n {
			return &opError{op: o, name: name}
		}
		return nil
	}
}

type opError struct {
	op   Op
	name string
}

func (e *opError) Error() string { return "vfs: injected " + e.op.String() + " error on " + e.name }
func (e *opError) Unwrap() error { return ErrInjected }

// Create implements FS.
func (e *ErrorFS) Create(name string) (File, error) {
	if err := e.maybe(OpCreate, name); err != nil {
		return nil, err
	}
	f, err := e.fs.Create(name)
	if err != nil {
		return nil, err
	}
	return &errorFile{File: f, e: e, name: name}, nil
}

// Open implements FS.
func (e *ErrorFS) Open(name string) (File, error) {
	if err := e.maybe(OpOpen, name); err != nil {
		return nil, err
	}
	f, err := e.fs.Open(name)
	if err != nil {
		return nil, err
	}
	return &errorFile{File: f, e: e, name: name}, nil
}

// Remove implements FS.
func (e *ErrorFS) Remove(name string) error {
	if err := e.maybe(OpRemove, name); err != nil {
		return err
	}
	return e.fs.Remove(name)
}

// Rename implements FS.
func (e *ErrorFS) Rename(oldname, newname string) error {
	if err := e.maybe(OpRename, oldname); err != nil {
		return err
	}
	return e.fs.Rename(oldname, newname)
}

// MkdirAll implements FS.
func (e *ErrorFS) MkdirAll(dir string) error {
	if err := e.maybe(OpMkdir, dir); err != nil {
		return err
	}
	return e.fs.MkdirAll(dir)
}

// List implements FS.
func (e *ErrorFS) List(dir string) ([]string, error) {
	if err := e.maybe(OpList, dir); err != nil {
		return nil, err
	}
	return e.fs.List(dir)
}

// Exists implements FS.
func (e *ErrorFS) Exists(name string) (bool, error) {
	if err := e.maybe(OpExists, name); err != nil {
		return false, err
	}
	return e.fs.Exists(name)
}

// SyncDir implements FS.
func (e *ErrorFS) SyncDir(dir string) error {
	if err := e.maybe(OpSyncDir, dir); err != nil {
		return err
	}
	return e.fs.SyncDir(dir)
}

// Lock implements FS.
func (e *ErrorFS) Lock(name string) (io.Closer, error) {
	if err := e.maybe(OpLock, name); err != nil {
		return nil, err
	}
	return e.fs.Lock(name)
}

type errorFile struct {
	File
	e    *ErrorFS
	name string
}

func (f *errorFile) Read(p []byte) (int, error) {
	if err := f.e.maybe(OpRead, f.name); err != nil {
		return 0, err
	}
	return f.File.Read(p)
}

func (f *errorFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.e.maybe(OpRead, f.name); err != nil {
		return 0, err
	}
	return f.File.ReadAt(p, off)
}

func (f *errorFile) Write(p []byte) (int, error) {
	if err := f.e.maybe(OpWrite, f.name); err != nil {
		return 0, err
	}
	return f.File.Write(p)
}

// WriteAt writes at an offset when the wrapped file can (io.WriterAt),
// counted as an OpWrite, and fails with errors.ErrUnsupported otherwise.
func (f *errorFile) WriteAt(p []byte, off int64) (int, error) {
	wa, ok := f.File.(io.WriterAt)
	if !ok {
		return 0, fmt.Errorf("vfs: %s: WriteAt: %w", f.name, errors.ErrUnsupported)
	}
	if err := f.e.maybe(OpWrite, f.name); err != nil {
		return 0, err
	}
	return wa.WriteAt(p, off)
}

func (f *errorFile) Sync() error {
	if err := f.e.maybe(OpSync, f.name); err != nil {
		return err
	}
	return f.File.Sync()
}

func (f *errorFile) Close() error {
	if err := f.e.maybe(OpClose, f.name); err != nil {
		f.File.Close()
		return err
	}
	return f.File.Close()
}
