package vfs

import (
	"errors"
	"os"
	"sync/atomic"
)

// MappedFile is a file opened for reading whose bytes are also mapped into
// memory, so that a reader can verify and decode them where they lie instead
// of copying them out with a read system call. Tables, which never change
// once written, are opened this way.
//
// Readers bracket each use of the bytes with MappedBytes and ReleaseMapped.
// Close stops new uses at once, and the bytes are unmapped when the last use
// under way ends, so no reader ever touches memory that was unmapped.
type MappedFile struct {
	File
	data []byte
	// state counts the uses under way, plus mapClosed once Close ran.
	state atomic.Int64
	// unmapped is set by whoever unmaps the bytes (exactly once).
	unmapped atomic.Bool
}

// mapClosed marks a MappedFile's state once Close has run.
const mapClosed = 1 << 62

// MapForReading returns f with its first size bytes mapped into memory when
// f is a file of the operating system's file system, the platform can map
// files and size is not zero; otherwise it returns f itself. Closing the
// returned file closes f.
func MapForReading(f File, size int64) File {
	of, ok := f.(osFile)
	if !ok || size <= 0 || int64(int(size)) != size {
		return f
	}
	data, err := mapFile(of.File, int(size))
	if err != nil {
		return f // reads go through ReadAt, as for any other file
	}
	return &MappedFile{File: f, data: data}
}

// MappedBytes returns the file's mapped bytes, to read until the matching
// ReleaseMapped; ok is false, and nothing need be released, once the file is
// closed.
func (m *MappedFile) MappedBytes() (data []byte, ok bool) {
	if m.state.Add(1)&mapClosed != 0 {
		m.ReleaseMapped()
		return nil, false
	}
	return m.data, true
}

// ReleaseMapped ends a use of the bytes MappedBytes returned.
func (m *MappedFile) ReleaseMapped() {
	if m.state.Add(-1) == mapClosed {
		_ = m.unmap()
	}
}

// Close closes the file; its bytes are unmapped once no use of them is under
// way. A second Close returns an error wrapping os.ErrClosed.
func (m *MappedFile) Close() error {
	for {
		s := m.state.Load()
		if s&mapClosed != 0 {
			return &os.PathError{Op: "close", Path: m.name(), Err: os.ErrClosed}
		}
		if m.state.CompareAndSwap(s, s|mapClosed) {
			var err error
			if s == 0 {
				err = m.unmap()
			}
			return errors.Join(err, m.File.Close())
		}
	}
}

// unmap unmaps the bytes, once whoever calls it first. Its error (munmap
// fails only for a range that is not mapped, which unmapped rules out) is
// Close's to report when Close unmaps; a use ending after Close has no one
// to report it to.
func (m *MappedFile) unmap() error {
	if !m.unmapped.CompareAndSwap(false, true) {
		return nil
	}
	if err := unmapFile(m.data); err != nil {
		return &os.PathError{Op: "munmap", Path: m.name(), Err: err}
	}
	return nil
}

func (m *MappedFile) name() string {
	if of, ok := m.File.(osFile); ok {
		return of.Name()
	}
	return "file"
}
