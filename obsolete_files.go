package bloomkv

import "strings"

// releaseFilesLocked drops a released state's references to its tables and
// deletes those no state references and no version holds.
func (d *DB) releaseFilesLocked(s *readState) {
	defer d.diffReleasedLocked(s)
	live := map[uint64]bool{}
	for _, f := range d.version.All() {
		live[f.FileNum] = true
	}
	for _, f := range s.version.All() {
		if d.fileRefs[f.FileNum]--; d.fileRefs[f.FileNum] > 0 || live[f.FileNum] {
			continue
		}
		delete(d.fileRefs, f.FileNum)
		delete(d.diff.tableDels, f.FileNum)
		d.tables.evict(f.FileNum)
		d.cache.EvictFile(f.FileNum)
		if err := d.fs.Remove(d.path(tableName(f.FileNum))); err != nil {
			d.opts.Logger.Warn("bloomkv: removing an obsolete table", "file", d.path(tableName(f.FileNum)), "err", err)
		}
	}
}

// deleteObsolete removes, at open, WALs below the log number, manifests
// other than the live one, and tables no version holds (a flush cut short by
// a crash). Failures are logged, not fatal.
func (d *DB) deleteObsolete() {
	names, err := d.fs.List(d.dir)
	if err != nil {
		return
	}
	live := map[uint64]bool{}
	for _, f := range d.version.All() {
		live[f.FileNum] = true
	}
	for _, n := range names {
		kind, num := parseName(n)
		if strings.HasPrefix(n, currentName+".") && strings.HasSuffix(n, ".dbtmp") {
			d.fs.Remove(d.path(n)) // a CURRENT update cut short
			continue
		}
		obsolete := (kind == kindLog && num < d.logNumber) ||
			(kind == kindManifest && num != d.manifestNum) ||
			(kind == kindTable && !live[num])
		if obsolete {
			if err := d.fs.Remove(d.path(n)); err != nil {
				d.opts.Logger.Warn("bloomkv: removing an obsolete file", "file", d.path(n), "err", err)
			}
		}
	}
}
