package vfs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
)

// MemFS is an in-memory file system that models what survives a crash: a
// file's contents as of its last Sync, and the directory entries (creations,
// removals, renames) as of the last SyncDir of their directory. CrashClone
// returns that durable state as a new MemFS, as a machine would find its disk
// after losing power. Directories themselves are durable once created; a
// renamed directory keeps its old name across a crash until the directory
// holding its new name is synced (mem_dirs.go). It is safe for concurrent
// use.
type MemFS struct {
	mu      sync.Mutex
	dirs    map[string]bool
	ddirs   map[string]bool     // the directories a crash would leave
	names   map[string]*memNode // the namespace now
	durable map[string]*memNode // the namespace a crash would leave
	moves   []dirMove           // directory renames not yet durable, oldest first
	// removedDirs maps each durable directory removed while it still held
	// durable entries to its path in the current namespace: the removal
	// becomes durable at the SyncDir of its parent there.
	removedDirs map[string]string
	locks       map[string]bool
}

type memNode struct {
	mu     sync.Mutex
	data   []byte
	synced []byte
}

// NewMem returns an empty in-memory file system with a root directory "/"
// and the current directory ".".
func NewMem() *MemFS {
	return &MemFS{
		dirs:        map[string]bool{"/": true, ".": true},
		ddirs:       map[string]bool{"/": true, ".": true},
		names:       map[string]*memNode{},
		durable:     map[string]*memNode{},
		removedDirs: map[string]string{},
		locks:       map[string]bool{},
	}
}

func clean(name string) string { return filepath.Clean(name) }

func notExist(op, name string) error {
	return &os.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
}

func (m *MemFS) parentExists(name string) bool {
	return m.dirs[filepath.Dir(name)]
}

// Create implements FS.
func (m *MemFS) Create(name string) (File, error) {
	name = clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.parentExists(name) {
		return nil, notExist("create", name)
	}
	if m.dirs[name] {
		return nil, &os.PathError{Op: "create", Path: name, Err: errors.New("is a directory")}
	}
	n := m.names[name]
	if n != nil {
		// Truncated in place, as an operating system does: the name, its
		// other links and open handles keep the file, and a Sync alone
		// makes the new contents durable.
		n.mu.Lock()
		n.data = n.data[:0]
		n.mu.Unlock()
	} else {
		n = &memNode{}
		m.names[name] = n
	}
	return &memFile{node: n, name: name, writable: true}, nil
}

// Open implements FS.
func (m *MemFS) Open(name string) (File, error) {
	name = clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	n, ok := m.names[name]
	if !ok {
		return nil, notExist("open", name)
	}
	return &memFile{node: n, name: name}, nil
}

// Remove implements FS.
func (m *MemFS) Remove(name string) error {
	name = clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.names[name]; ok {
		delete(m.names, name)
		return nil
	}
	if m.dirs[name] {
		prefix := name + string(filepath.Separator)
		for n := range m.names {
			if strings.HasPrefix(n, prefix) {
				return &os.PathError{Op: "remove", Path: name, Err: errors.New("directory not empty")}
			}
		}
		delete(m.dirs, name)
		// The removal is durable at once, as a creation is, unless the
		// directory still holds durable entries (files removed since its
		// last SyncDir): a crash then leaves it with them, until a SyncDir
		// of its parent makes the removal durable.
		dd := m.durablePath(name)
		if m.hasDurableUnder(dd) {
			m.removedDirs[dd] = name
		} else {
			delete(m.ddirs, dd)
		}
		return nil
	}
	return notExist("remove", name)
}

// hasDurableUnder reports whether a durable entry lies under the durable
// directory dd.
func (m *MemFS) hasDurableUnder(dd string) bool {
	prefix := dd + string(filepath.Separator)
	for n := range m.durable {
		if strings.HasPrefix(n, prefix) {
			return true
		}
	}
	return false
}

// Rename implements FS.
func (m *MemFS) Rename(oldname, newname string) error {
	oldname, newname = clean(oldname), clean(newname)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.dirs[oldname] {
		return m.renameDirLocked(oldname, newname)
	}
	n, ok := m.names[oldname]
	if !ok {
		return notExist("rename", oldname)
	}
	if !m.parentExists(newname) {
		return notExist("rename", newname)
	}
	delete(m.names, oldname)
	m.names[newname] = n
	return nil
}

// MkdirAll implements FS.
func (m *MemFS) MkdirAll(dir string) error {
	dir = clean(dir)
	m.mu.Lock()
	defer m.mu.Unlock()
	for d := dir; !m.dirs[d]; d = filepath.Dir(d) {
		if _, ok := m.names[d]; ok {
			return &os.PathError{Op: "mkdir", Path: d, Err: errors.New("a file exists there")}
		}
		m.dirs[d] = true
		m.ddirs[m.durablePath(d)] = true
	}
	return nil
}

// List implements FS.
func (m *MemFS) List(dir string) ([]string, error) {
	dir = clean(dir)
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.dirs[dir] {
		return nil, notExist("list", dir)
	}
	var out []string
	for n := range m.names {
		if filepath.Dir(n) == dir {
			out = append(out, filepath.Base(n))
		}
	}
	for d := range m.dirs {
		if d != dir && filepath.Dir(d) == dir {
			out = append(out, filepath.Base(d))
		}
	}
	sort.Strings(out)
	return out, nil
}

// Exists implements FS.
func (m *MemFS) Exists(name string) (bool, error) {
	name = clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.names[name]
	return ok || m.dirs[name], nil
}

// SyncDir implements FS: the directory's current entries become durable,
// and so do the renames of directories into it.
func (m *MemFS) SyncDir(dir string) error {
	dir = clean(dir)
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.dirs[dir] {
		return notExist("syncdir", dir)
	}
	ddir := m.durablePath(dir)
	for n := range m.durable {
		if filepath.Dir(n) == ddir {
			delete(m.durable, n)
		}
	}
	for n, node := range m.names {
		if filepath.Dir(n) == dir {
			m.durable[filepath.Join(ddir, filepath.Base(n))] = node
		}
	}
	m.syncMovesLocked(dir)
	// Directories removed from dir are gone for good, with what they held,
	// directories removed from them included.
	for dd, name := range m.removedDirs {
		if filepath.Dir(name) != dir {
			continue
		}
		delete(m.removedDirs, dd)
		if m.dirs[name] {
			continue // made again since
		}
		for d := range m.ddirs {
			if under(d, dd) {
				delete(m.ddirs, d)
			}
		}
		for d := range m.removedDirs {
			if under(d, dd) {
				delete(m.removedDirs, d)
			}
		}
		for n := range m.durable {
			if under(n, dd) {
				delete(m.durable, n)
			}
		}
	}
	return nil
}

type memLock struct {
	m    *MemFS
	name string
	once sync.Once
}

func (l *memLock) Close() error {
	l.once.Do(func() {
		l.m.mu.Lock()
		delete(l.m.locks, l.name)
		l.m.mu.Unlock()
	})
	return nil
}

// Lock implements FS.
func (m *MemFS) Lock(name string) (io.Closer, error) {
	name = clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.locks[name] {
		return nil, &os.PathError{Op: "lock", Path: name, Err: ErrLocked}
	}
	if !m.parentExists(name) {
		return nil, notExist("lock", name)
	}
	if _, ok := m.names[name]; !ok {
		m.names[name] = &memNode{}
	}
	m.locks[name] = true
	return &memLock{m: m, name: name}, nil
}

// CrashClone returns a new MemFS holding what a crash at this moment would
// leave: the durable namespace, each file with its synced contents, and no
// locks. The receiver is unchanged and may go on being used.
func (m *MemFS) CrashClone() *MemFS { return m.CrashCloneKeeping(nil) }

// CrashCloneKeeping is CrashClone on a machine whose disk had also written
// part of what was not yet synced, as a real one may: of each durable file's
// unsynced appended bytes, the first keep(name, unsynced) survive (clamped to
// [0, unsynced]). A nil keep keeps none.
func (m *MemFS) CrashCloneKeeping(keep func(name string, unsynced int) int) *MemFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := NewMem()
	for d := range m.ddirs {
		c.dirs[d] = true
		c.ddirs[d] = true
	}
	for name, n := range m.durable {
		n.mu.Lock()
		data := append([]byte(nil), n.synced...)
		// What was not synced is what follows the first byte that differs
		// from the synced contents (a write into zeros written ahead
		// changes bytes in place; an append adds them): of it, a prefix
		// reaches the disk.
		from, same := 0, min(len(n.synced), len(n.data))
		for from+4096 <= same && bytes.Equal(n.synced[from:from+4096], n.data[from:from+4096]) {
			from += 4096
		}
		for from < same && n.synced[from] == n.data[from] {
			from++
		}
		if extra := len(n.data) - from; keep != nil && extra > 0 {
			k := min(max(keep(name, extra), 0), extra)
			if from+k > len(data) {
				data = append(data, make([]byte, from+k-len(data))...)
			}
			copy(data[from:], n.data[from:from+k])
		}
		n.mu.Unlock()
		node := &memNode{data: data, synced: append([]byte(nil), data...)}
		c.names[name] = node
		c.durable[name] = node
	}
	return c
}

// memFile is an open MemFS file: written sequentially from the start, read
// at an offset or sequentially.
type memFile struct {
	node     *memNode
	name     string
	writable bool
	pos      int64 // where Read reads
	wpos     int64 // where Write writes
	closed   bool
}

var errClosed = errors.New("vfs: file already closed")

func (f *memFile) check(op string, write bool) error {
	if f.closed {
		return &os.PathError{Op: op, Path: f.name, Err: errClosed}
	}
	if write && !f.writable {
		return &os.PathError{Op: op, Path: f.name, Err: errors.New("file opened read-only")}
	}
	return nil
}

func (f *memFile) Read(p []byte) (int, error) {
	if err := f.check("read", false); err != nil {
		return 0, err
	}
	n, err := f.ReadAt(p, f.pos)
	f.pos += int64(n)
	if err == io.EOF && n > 0 {
		err = nil
	}
	return n, err
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.check("read", false); err != nil {
		return 0, err
	}
	f.node.mu.Lock()
	defer f.node.mu.Unlock()
	if off < 0 {
		return 0, &os.PathError{Op: "read", Path: f.name, Err: fmt.Errorf("negative offset %d", off)}
	}
	if off >= int64(len(f.node.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.node.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) Write(p []byte) (int, error) {
	n, err := f.WriteAt(p, f.wpos)
	f.wpos += int64(n)
	return n, err
}

// WriteAt implements io.WriterAt: it writes p at off, extending the file
// with zeros up to off if it ends before.
func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.check("write", true); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, &os.PathError{Op: "writeat", Path: f.name, Err: errors.New("negative offset")}
	}
	f.node.mu.Lock()
	defer f.node.mu.Unlock()
	d := f.node.data
	if end := int(off) + len(p); end > len(d) {
		d = slices.Grow(d, end-len(d))[:end]
		if gap := len(f.node.data); int(off) > gap {
			clear(d[gap:off]) // the gap between the old end and off
		}
	}
	copy(d[off:], p)
	f.node.data = d
	return len(p), nil
}

func (f *memFile) Sync() error {
	if err := f.check("sync", false); err != nil {
		return err
	}
	f.node.mu.Lock()
	defer f.node.mu.Unlock()
	f.node.synced = append(f.node.synced[:0], f.node.data...)
	return nil
}

func (f *memFile) Size() (int64, error) {
	if err := f.check("stat", false); err != nil {
		return 0, err
	}
	f.node.mu.Lock()
	defer f.node.mu.Unlock()
	return int64(len(f.node.data)), nil
}

func (f *memFile) Close() error {
	if err := f.check("close", false); err != nil {
		return err
	}
	f.closed = true
	return nil
}
