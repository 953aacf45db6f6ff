package vfs

import (
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Renaming MemFS directories. The rename takes effect at once; a crash
// undoes it until the directory holding the new name is synced, as for a
// file's rename. Until then the directory's entries, and what syncs of it
// make durable, lie under its old name in the namespace a crash would
// leave (durablePath). Locks held on files inside it stay on their old
// names.

// dirMove is a directory rename not yet durable.
type dirMove struct{ old, new string }

// under reports whether p is dir or lies inside it.
func under(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, dir+string(filepath.Separator))
}

// reroot moves p, which lies under from, to the same place under to.
func reroot(p, from, to string) string { return to + p[len(from):] }

// undoMoves maps p back through m.moves[from:to], newest first: where p lay
// before those renames.
func (m *MemFS) undoMoves(p string, from, to int) string {
	for i := to - 1; i >= from; i-- {
		if mv := m.moves[i]; under(p, mv.new) {
			p = reroot(p, mv.new, mv.old)
		}
	}
	return p
}

// durablePath returns where p, a path of the current namespace, lies in the
// namespace a crash would leave.
func (m *MemFS) durablePath(p string) string { return m.undoMoves(p, 0, len(m.moves)) }

// renameDirLocked renames the directory oldname, and everything in it, to
// newname, which must not exist. m.mu is held.
func (m *MemFS) renameDirLocked(oldname, newname string) error {
	if oldname == newname {
		return nil
	}
	if under(newname, oldname) || oldname == "/" || oldname == "." {
		return &os.PathError{Op: "rename", Path: oldname, Err: errors.New("cannot move a directory inside itself")}
	}
	if !m.parentExists(newname) {
		return notExist("rename", newname)
	}
	if _, ok := m.names[newname]; ok || m.dirs[newname] {
		return &os.PathError{Op: "rename", Path: newname, Err: fs.ErrExist}
	}
	moveUnder(m.dirs, oldname, newname)
	moveUnder(m.names, oldname, newname)
	for dd, name := range m.removedDirs {
		if under(name, oldname) {
			m.removedDirs[dd] = reroot(name, oldname, newname)
		}
	}
	m.moves = append(m.moves, dirMove{old: oldname, new: newname})
	return nil
}

// syncMovesLocked makes durable the renames of directories into dir, which
// is being synced. m.mu is held.
func (m *MemFS) syncMovesLocked(dir string) {
	for i := 0; i < len(m.moves); {
		mv := m.moves[i]
		// Where dir was when this rename was made.
		if filepath.Dir(mv.new) != m.undoMoves(dir, i+1, len(m.moves)) {
			i++
			continue
		}
		from, to := m.undoMoves(mv.old, 0, i), m.undoMoves(mv.new, 0, i)
		moveUnder(m.ddirs, from, to)
		moveUnder(m.durable, from, to)
		moveUnder(m.removedDirs, from, to)
		m.moves = slices.Delete(m.moves, i, i+1)
	}
}

// moveUnder moves the entries of set that lie under from to the same places
// under to.
func moveUnder[V any](set map[string]V, from, to string) {
	var keys []string
	for k := range set {
		if under(k, from) {
			keys = append(keys, k)
		}
	}
	moved := make(map[string]V, len(keys))
	for _, k := range keys {
		moved[reroot(k, from, to)] = set[k]
		delete(set, k)
	}
	maps.Copy(set, moved)
}
