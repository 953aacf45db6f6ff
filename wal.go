package bloomkv

import (
	"fmt"
	"io"
	"sync"

	"github.com/bloomkv/bloomkv/internal/vfs"
)

// maxLogPending bounds the log bytes handed to a logFile and not yet
// written: past it, a commit waits for the writer instead of queueing more.
const maxLogPending = 4 << 20

// logFile is a write-ahead log file with a writer goroutine of its own. A
// commit hands its records to Write, which queues them and returns; the
// goroutine writes the queue to the file in the order it came. Sync returns
// once everything queued before it is written and synced. After a failed
// write or sync the log takes nothing more: every later call returns the
// error, and onFail is called once, from the writer goroutine when the
// write was its own.
//
// So a NoSync commit costs a copy, not a system call; what a failure would
// lose is still in the memtable, which the DB then flushes to a table
// (DB.walFailed).
type logFile struct {
	f      vfs.File
	name   string
	onFail func(error)

	mu      sync.Mutex
	work    sync.Cond // the writer waits here for bytes, or for Close
	idle    sync.Cond // Flush and full queues wait here for the writer
	pending []byte    // queued, not yet taken by the writer
	spare   []byte    // the writer's previous buffer, for reuse
	writing bool      // the writer holds bytes it has not finished writing
	written int64     // bytes written to the file
	err     error
	closing bool
	done    chan struct{}
}

// newLogFile starts a writer for f, which holds size bytes already.
func newLogFile(f vfs.File, name string, size int64, onFail func(error)) *logFile {
	l := &logFile{f: f, name: name, onFail: onFail, written: size, done: make(chan struct{})}
	l.work.L = &l.mu
	l.idle.L = &l.mu
	go l.writeLoop()
	return l
}

// Write queues p. It waits only while the queue is over maxLogPending.
func (l *logFile) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.err == nil && len(l.pending) >= maxLogPending {
		l.idle.Wait()
	}
	if l.err != nil {
		return 0, l.err
	}
	if l.closing {
		return 0, fmt.Errorf("bloomkv: write to %s after close: %w", l.name, ErrClosed)
	}
	l.pending = append(l.pending, p...)
	if !l.writing {
		l.work.Signal()
	}
	return len(p), nil
}

// Flush waits until every byte queued so far is written.
func (l *logFile) Flush() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.err == nil && (len(l.pending) > 0 || l.writing) {
		l.idle.Wait()
	}
	return l.err
}

// Sync writes and syncs every byte queued so far. The caller serializes
// Sync with Write (the commit leader calls both), so nothing is queued while
// the file syncs.
func (l *logFile) Sync() error {
	if err := l.Flush(); err != nil {
		return err
	}
	if err := l.f.Sync(); err != nil {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.err == nil {
			l.err = fmt.Errorf("bloomkv: syncing %s: %w", l.name, err)
		}
		return l.err
	}
	return nil
}

// Close writes what is queued (unless a write failed), stops the writer
// and closes the file.
func (l *logFile) Close() error {
	l.mu.Lock()
	l.closing = true
	l.work.Signal()
	l.mu.Unlock()
	<-l.done
	return l.f.Close()
}

func (l *logFile) writeLoop() {
	defer close(l.done)
	l.mu.Lock()
	defer l.mu.Unlock()
	for {
		for len(l.pending) == 0 && !l.closing {
			l.work.Wait()
		}
		if len(l.pending) == 0 {
			return // closing, and all is written
		}
		if l.err != nil {
			// Nothing may follow a record that did not reach the file.
			l.pending = l.pending[:0]
			l.idle.Broadcast()
			continue
		}
		buf := l.pending
		l.pending, l.spare = l.spare[:0], nil
		l.writing = true
		l.mu.Unlock()
		n, err := l.f.Write(buf)
		if err == nil && n < len(buf) {
			err = io.ErrShortWrite
		}
		l.mu.Lock()
		l.writing = false
		l.spare = buf[:0]
		at := l.written
		l.written += int64(n)
		failed := err != nil && l.err == nil
		if failed {
			l.err = fmt.Errorf("bloomkv: writing %s at offset %d: %w", l.name, at+int64(n), err)
			l.pending = l.pending[:0]
		}
		l.idle.Broadcast()
		if failed && l.onFail != nil {
			// Waiters have seen the error; onFail takes DB.mu, which a
			// waiter (rotateLocked) may hold, so call it unlocked.
			ferr := l.err
			l.mu.Unlock()
			l.onFail(ferr)
			l.mu.Lock()
		}
	}
}
