package bloomkv

// The DB's write-ahead log: creating one, and the failure of a log and the
// store's rescue from it.

import (
	"errors"
	"fmt"
	"io"

	"github.com/bloomkv/bloomkv/internal/record"
)

// createWAL creates the log num and makes it the one commits write to.
// pred, when not nil, is the log it follows, which the new log's writer
// syncs and closes (newLogFile); seal, when not nil, runs once the new file
// exists and before that writer starts, so that what it writes to pred is
// in pred's queue before pred's last sync. Without pred, the directory
// naming the new log is synced before it returns.
//
// At FormatWALSyncOffsets the log is written in WAL-sync chunks and writes
// zeros ahead of its records once synced, if its file can (io.WriterAt).
// d.mu is held.
func (d *DB) createWAL(num uint64, pred *logFile, seal func()) error {
	f, err := d.fs.Create(d.path(logName(num)))
	if err != nil {
		return fmt.Errorf("bloomkv: creating %s: %w", d.path(logName(num)), err)
	}
	syncDir := func() error {
		if err := d.fs.SyncDir(d.dir); err != nil {
			return fmt.Errorf("bloomkv: syncing %s: %w", d.dir, err)
		}
		return nil
	}
	if pred == nil {
		if err := syncDir(); err != nil {
			f.Close()
			return err
		}
	}
	syncOffsets := d.mu.formatVersion >= FormatWALSyncOffsets
	var prep io.WriterAt
	if wa, ok := f.(io.WriterAt); ok && syncOffsets {
		prep = wa
	}
	if seal != nil {
		seal()
	}
	d.wal = newLogFile(f, d.path(logName(num)), 0, logWriteDelay, prep, func(err error) { d.walFailed(err) }, pred, syncDir, &d.logBufs)
	d.walW = record.NewWriterOptions(d.wal, 0, record.WriterOptions{SyncOffsets: syncOffsets, LogNum: num})
	return nil
}

// walFailed records a failed WAL write or sync. The store then refuses
// writes until reopened: a failed fsync is never retried as if it had
// succeeded, and nothing after an unwritten record may be acknowledged.
//
// NoSync writes acknowledged before the failure may be missing from the
// log, since its writer goroutine writes them after the commit returns; they
// are all in the memtables. So the memtable of the failed log is frozen
// (rescueLocked) and, with every frozen memtable, flushed to level 0 even
// though the store has failed; Close waits for that.
//
// d.mu must not be held: walFailed takes it, and calls the BackgroundError
// listener after letting it go. A caller holding d.mu records the failure
// with walFailedLocked and reports it once it has let go of its locks; one
// that holds d.mu and leads the commit queue returns a logFailure, which the
// leader passes here (reportLogFailure).
func (d *DB) walFailed(err error) error {
	d.mu.Lock()
	bgErr, first := d.walFailedLocked(err)
	d.mu.Unlock()
	if first {
		d.opts.EventListener.BackgroundError(bgErr)
	}
	return bgErr
}

// walFailedLocked is walFailed without the listener: it records the
// failure and returns the store's error, and whether this call set it (then
// the caller tells the BackgroundError listener, once it holds no lock of
// the DB). d.mu is held.
func (d *DB) walFailedLocked(err error) (bgErr error, first bool) {
	first = d.mu.bgErr == nil
	if first {
		d.mu.bgErr = fmt.Errorf("bloomkv: write-ahead log failed (current log %s); the store takes no more writes until reopened: %w",
			d.path(logName(d.mu.mem.logNum)), err)
	}
	if !d.mu.walBroken {
		d.mu.walBroken = true
		d.mu.rescuing = true
		d.mu.cond.Broadcast() // wake stalled writers, and the flusher to rescue
	}
	return d.mu.bgErr, first
}

// logFailure is a failed write, sync or creation of a WAL met with d.mu
// held (rotateLocked). The commit leader reports it through walFailed once
// it has let go of d.mu (reportLogFailure).
type logFailure struct{ err error }

func (e *logFailure) Error() string { return e.err.Error() }
func (e *logFailure) Unwrap() error { return e.err }

// reportLogFailure passes a logFailure among err's chain to walFailed and
// returns the store's error; any other error it returns as it is. d.mu is
// not held.
func (d *DB) reportLogFailure(err error) error {
	var lf *logFailure
	if errors.As(err, &lf) {
		return d.walFailed(lf.err)
	}
	return err
}

// rescueLocked freezes the memtable after a WAL failure, so that the
// flusher writes it to a table. The new memtable has no WAL: the store takes
// no more writes. d.mu is held and no commit is under way (the caller leads
// the commit queue, or Close has emptied it).
func (d *DB) rescueLocked() {
	if !d.mu.rescuing || d.mu.mem.mt.Empty() {
		return
	}
	d.mu.imm = append(d.mu.imm, d.mu.mem)
	d.mu.mem = &memEntry{mt: d.newMemTable(), logNum: d.allocFileNumLocked()}
	d.publishLocked()
	d.mu.cond.Broadcast()
}
