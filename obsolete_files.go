package bloomkv

// Deleting the files that no version and no read state needs any more.

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
)

// liveTables returns the file numbers of the tables d.mu.version holds. d.mu
// is held (or the DB is not yet shared).
func (d *DB) liveTables() map[uint64]bool {
	live := map[uint64]bool{}
	for _, f := range d.mu.version.All() {
		live[f.FileNum] = true
	}
	return live
}

// releaseFilesLocked drops a released state's references to its tables and
// deletes those no state references and no version holds. Once Close has
// let go of the directory (releaseDirLocked), a state released later (an
// iterator closed after Close) only drops its references: Close has deleted
// its obsolete tables already.
func (d *DB) releaseFilesLocked(s *readState) {
	defer d.diffReleasedLocked(s)
	live := d.liveTables()
	for _, f := range s.version.All() {
		if d.mu.fileRefs[f.FileNum]--; d.mu.fileRefs[f.FileNum] > 0 || live[f.FileNum] {
			continue
		}
		delete(d.mu.fileRefs, f.FileNum)
		if !d.mu.dirReleased {
			d.retireTableLocked(f.FileNum)
		}
		f.ClearOpened() // the reader is closed: let it go with the table
	}
}

// removeTableLocked deletes the file of table num, which no version names,
// and what the store holds of it: its reader in the table cache, its
// blocks in the block cache, the range deletions kept of it for the
// differential-file filter. what names the table in the warning a failed
// removal logs; a file already gone is no failure (a compaction's output
// whose sync failed was removed by its builder). d.mu is held. The
// failure paths use it: the file is gone when it returns.
func (d *DB) removeTableLocked(num uint64, what string) {
	delete(d.mu.diff.tableDels, num)
	d.removeTable(num, what)
}

// retireTableLocked is removeTableLocked for an obsolete table, whose file
// the file deleter removes when it runs, so that commits and reads waiting
// for d.mu do not wait for the file system too; without a deleter, at
// once. d.mu is held.
func (d *DB) retireTableLocked(num uint64) {
	delete(d.mu.diff.tableDels, num)
	if !d.mu.deleter {
		d.removeTable(num, obsoleteTable)
		return
	}
	d.mu.obsolete = append(d.mu.obsolete, num)
	d.mu.queued++
	if len(d.mu.obsolete) == 1 {
		d.mu.cond.Broadcast()
	}
}

// obsoleteTable names a table the file deleter removes in the warning a
// failed removal logs.
const obsoleteTable = "an obsolete table"

// removeTable removes table num's reader, cached blocks and file. A
// failure is logged.
func (d *DB) removeTable(num uint64, what string) {
	d.tables.evict(num)
	d.cache.EvictFile(num)
	if err := d.fs.Remove(d.path(tableName(num))); err != nil && !errors.Is(err, fs.ErrNotExist) {
		d.opts.Logger.Warn("bloomkv: removing "+what, "file", d.path(tableName(num)), "err", err)
	}
}

// removeLog removes WAL num, whose records are all in tables the manifest
// names. A failure is logged.
func (d *DB) removeLog(num uint64) {
	if err := d.fs.Remove(d.path(logName(num))); err != nil {
		d.opts.Logger.Warn("bloomkv: removing a flushed write-ahead log", "file", d.path(logName(num)), "err", err)
	}
}

// removeQueuedLocked removes the tables queued for the deleter, with d.mu
// held: Close's way, once the deleter has stopped.
func (d *DB) removeQueuedLocked() {
	for _, num := range d.mu.obsolete {
		d.removeTable(num, obsoleteTable)
	}
	d.mu.removed += uint64(len(d.mu.obsolete))
	d.mu.obsolete = nil
}

// fileDeleter is the goroutine that removes the tables queued by
// retireTableLocked, without d.mu. It stops once the store is closed and
// the queue is empty.
func (d *DB) fileDeleter() {
	defer d.bgWG.Done()
	d.mu.Lock()
	defer d.mu.Unlock()
	for {
		for len(d.mu.obsolete) == 0 && !d.mu.closed {
			d.mu.cond.Wait()
		}
		if len(d.mu.obsolete) == 0 {
			return
		}
		todo := d.mu.obsolete
		d.mu.obsolete = nil
		d.mu.Unlock()
		for _, num := range todo {
			d.removeTable(num, obsoleteTable)
		}
		d.mu.Lock()
		d.mu.removed += uint64(len(todo))
		d.mu.cond.Broadcast() // for waitRemovedLocked
	}
}

// waitRemovedLocked waits until the tables queued for removal so far are
// removed. d.mu is held, and released while it waits.
func (d *DB) waitRemovedLocked() {
	for queued := d.mu.queued; d.mu.deleter && !d.mu.closed && d.mu.removed < queued; {
		d.mu.cond.Wait()
	}
}

// releaseDirLocked is Close's last word on the directory, once background
// work has stopped: it deletes the obsolete tables that read states still
// in use hold (iterators left open, reads under way), which their release
// would otherwise delete after Close returned or, never released, leave
// behind; it syncs the directory, so that not even a crash finds an
// obsolete file after Close; and it marks the directory let go of, so that
// no later release touches it. It returns the sync's error. d.mu is held.
func (d *DB) releaseDirLocked() error {
	live := d.liveTables()
	for num, refs := range d.mu.fileRefs {
		if refs > 0 && !live[num] {
			d.removeTableLocked(num, obsoleteTable)
		}
	}
	d.mu.dirReleased = true
	if d.opts.ReadOnly {
		return nil
	}
	if err := d.fs.SyncDir(d.dir); err != nil {
		return fmt.Errorf("bloomkv: syncing %s at Close: %w", d.dir, err)
	}
	return nil
}

// deleteObsolete removes, at open, WALs below the log number, manifests
// other than the live one, and tables no version holds (a flush cut short by
// a crash). Failures are logged, not fatal.
func (d *DB) deleteObsolete() {
	names, err := d.fs.List(d.dir)
	if err != nil {
		return
	}
	live := d.liveTables()
	for _, n := range names {
		kind, num := parseName(n)
		if strings.HasPrefix(n, currentName+".") && strings.HasSuffix(n, ".dbtmp") {
			d.fs.Remove(d.path(n)) // a CURRENT update cut short
			continue
		}
		obsolete := (kind == kindLog && num < d.mu.logNumber) ||
			(kind == kindManifest && num != d.mu.manifestNum) ||
			(kind == kindTable && !live[num])
		if obsolete {
			if err := d.fs.Remove(d.path(n)); err != nil {
				d.opts.Logger.Warn("bloomkv: removing an obsolete file", "file", d.path(n), "err", err)
			}
		}
	}
}
