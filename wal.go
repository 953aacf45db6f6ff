package bloomkv

// The write-ahead log's writer (logFile): its queue, its writer goroutine,
// syncs and recycling.

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/bloomkv/bloomkv/vfs"
)

// maxLogPending bounds the log bytes handed to a logFile and not yet
// written: past it, a commit waits for the writer instead of queueing more.
const maxLogPending = 4 << 20

// logHelpBytes is the queue length at which Write writes the queue itself
// when the writer goroutine has not taken it. The goroutine shares the CPU
// with the committer and with compactions, and on a busy machine it can
// wait to run while megabytes queue up; the committer writing the queue
// itself keeps it short.
const logHelpBytes = 64 << 10

// logKickBytes is the queue length at which Write wakes the writer
// goroutine; logWriteDelay, how long the goroutine lets a shorter queue
// gather before it writes it. Waking a goroutine costs the waker a system
// call when the goroutine's thread sleeps, which would put that call in the
// tail latency of commits; so a commit wakes the goroutine only for a full
// block's worth, or when the goroutine has gone to sleep for want of
// records.
const (
	logKickBytes  = 32 << 10
	logWriteDelay = time.Millisecond
)

// A log that is synced writes zeros ahead of its records, logPrepareBytes
// at a time, once the records come within logPrepareSlack of the zeros'
// end. A sync then commits records written over zeros the file already
// holds, without a change to the file's size or blocks; on ext4 that makes
// a small synced write about a third cheaper. Logs that are never synced
// prepare nothing: their writes reach the disk in bulk, with their growth.
const (
	logPrepareBytes = 1 << 20
	logPrepareSlack = logPrepareBytes / 2
	logZeroBuf      = 64 << 10
)

// logFile is a write-ahead log file with a writer goroutine of its own. A
// commit hands its records to Write, which queues them and returns; the
// goroutine writes the queue to the file in the order it came, about
// logWriteDelay after it is queued (sooner once logKickBytes are queued,
// later when the goroutine waits for a core).
// Sync returns once everything queued before it is written and synced.
// A log that follows another (newLogFile's pred) writes nothing to its file
// until the other is synced and closed and the directory naming it synced,
// so that only the newest log can end torn; meanwhile it queues.
// After a failed write or sync the log takes nothing more: every later call
// returns the error, and onFail is called once, from the writer goroutine
// when the write was its own.
//
// So a NoSync commit costs a copy, not a system call; what a failure would
// lose is still in the memtable, which the DB then flushes to a table
// (DB.walFailed).
//
// A log given a prep (newLogFile) writes zeros ahead of its records once it
// has been synced (logPrepareBytes). Its records must then be WAL-sync
// chunks (record.WriterOptions.SyncOffsets): in space written ahead, a
// crash may keep a later unsynced write and lose an earlier one, and only
// the chunks' synced offsets let the reader tell that from corruption.
type logFile struct {
	f      vfs.File
	name   string
	onFail func(error)
	// prep writes zeros ahead of the records (nil: it does not, or it
	// failed once); zeros is its buffer, filled the prepared end (set
	// under mu after the writer prepares), synced whether a Sync has
	// succeeded.
	prep   io.WriterAt
	zeros  []byte
	filled int64
	synced bool
	// sealed (under mu) says a later log replaced this one: it takes its
	// end mark only, without waiting for room and with no zeros ahead.
	sealed bool
	// delay is how long the writer lets a short queue gather.
	delay time.Duration

	// ready, when not nil, is closed once the log may write to its file
	// (newLogFile's pred is done); readyErr is then why it may not, and
	// predFailed (under mu) says the failure was pred's or the directory's,
	// which follow has reported. followed is closed once follow has
	// returned, onFail included, so that Close leaves nothing running.
	ready      chan struct{}
	followed   chan struct{}
	readyErr   error
	predFailed bool

	// bufs, when not nil, is where the queue buffers come from and go
	// back to once the log is closed.
	bufs *logBuffers

	mu      sync.Mutex
	idle    sync.Cond // Flush and full queues wait here for the writer
	pending []byte    // queued, not yet taken by the writer
	spare   []byte    // the writer's previous buffer, for reuse
	writing bool      // the writer holds bytes it has not finished writing
	written int64     // bytes written to the file
	err     error
	closing bool
	done    chan struct{}
	// kick wakes the writer goroutine while it waits (waiting, cleared by
	// the wake that ends the wait); parked says it waits for a record, with
	// no delay running, and awaitWrite that it waits for someone else's
	// write to end; wakes counts the wakes sent.
	kick       chan struct{}
	waiting    bool
	parked     bool
	awaitWrite bool
	wakes      int64
}

// newLogFile starts a writer for f, which holds size bytes already, that
// lets a short queue gather for delay (logWriteDelay); with prep, which
// writes at an offset of f, it writes zeros ahead of the records once
// synced (logFile). pred, when not nil,
// is the log f follows: f takes records at once but writes them only once
// pred is synced and closed and then syncDir (which syncs the directory
// that names f) has returned; a failure there fails f as a failed write
// would, onFail included.
// With bufs, not nil, it takes its queue buffers from bufs and gives them
// back when closed.
func newLogFile(f vfs.File, name string, size int64, delay time.Duration, prep io.WriterAt, onFail func(error), pred *logFile, syncDir func() error, bufs *logBuffers) *logFile {
	l := &logFile{f: f, name: name, onFail: onFail, written: size, done: make(chan struct{}),
		delay: delay, kick: make(chan struct{}, 1), prep: prep, filled: size, bufs: bufs}
	if bufs != nil {
		l.pending, l.spare = bufs.get(), bufs.get()
	}
	l.idle.L = &l.mu
	if pred != nil {
		l.ready, l.followed = make(chan struct{}), make(chan struct{})
		go l.follow(pred, syncDir)
	}
	go l.writeLoop()
	return l
}

// follow syncs and closes pred, then runs syncDir, and lets l write to its
// file, or fails l with the first error. It closes l.followed last.
func (l *logFile) follow(pred *logFile, syncDir func() error) {
	defer close(l.followed)
	err := pred.Sync()
	pred.Close() // synced: a failed close loses nothing
	if err == nil {
		err = syncDir()
	}
	failed := false
	l.mu.Lock()
	if err != nil && l.err == nil {
		// Nothing may be written after what pred may lack.
		l.err, failed, l.predFailed = err, true, true
		l.pending = l.pending[:0]
	}
	l.readyErr = l.err
	close(l.ready)
	l.idle.Broadcast()
	l.mu.Unlock()
	if failed && l.onFail != nil {
		l.onFail(err)
	}
}

// awaitReady waits until l may write to its file, and returns why it may
// not, if so.
func (l *logFile) awaitReady() error {
	if l.ready == nil {
		return nil
	}
	<-l.ready
	return l.readyErr
}

// readyNow reports whether l may write to its file without waiting.
func (l *logFile) readyNow() bool {
	if l.ready == nil {
		return true
	}
	select {
	case <-l.ready:
		return true
	default:
		return false
	}
}

// wake wakes the writer goroutine if it waits. l.mu is held.
func (l *logFile) wake() {
	if l.waiting {
		l.kick <- struct{}{} // (never blocks: one wake per wait)
		l.waiting = false
		l.wakes++
	}
}

// Write queues p. Once the queue holds logHelpBytes and the writer
// goroutine is not writing, it writes the queue itself, unless the log
// waits for the one it follows; it waits only while the queue is over
// maxLogPending. An error it returns from its own write
// is not passed to onFail: the caller reports it.
func (l *logFile) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.err == nil && len(l.pending) >= maxLogPending && !l.sealed {
		l.idle.Wait()
	}
	if l.err != nil {
		return 0, l.err
	}
	if l.closing {
		return 0, fmt.Errorf("bloomkv: write to %s after close: %w", l.name, ErrClosed)
	}
	l.queue(p)
	switch {
	case l.writing:
	case len(l.pending) >= logHelpBytes && l.readyNow():
		if err := l.writeQueued(); err != nil {
			return 0, err
		}
	case l.parked || len(l.pending) >= logKickBytes:
		l.wake()
	}
	return len(p), nil
}

// Flush waits until every byte queued so far is written, writing the queue
// itself when the writer goroutine is not.
func (l *logFile) Flush() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.err == nil && (len(l.pending) > 0 || l.writing) {
		if !l.writing {
			return l.writeQueued()
		}
		l.idle.Wait()
	}
	return l.err
}

// writeQueued writes the queue to the file. l.mu is held, unlocked during
// the write; nobody else is writing. On a failed write it sets l.err,
// empties the queue and returns the error; it returns nil when the queue
// is written, and l.err if an earlier write had failed.
func (l *logFile) writeQueued() error {
	if l.err != nil {
		// Nothing may follow a record that did not reach the file.
		l.pending = l.pending[:0]
		l.idle.Broadcast()
		return l.err
	}
	buf := l.pending
	l.pending, l.spare = l.spare[:0], nil
	l.writing = true
	// Prepare from the records' end or the zeros', whichever is later, so
	// that zeros never land on a record.
	prepareAt := int64(-1)
	if end := l.written + int64(len(buf)); l.prep != nil && l.synced && !l.sealed && end+logPrepareSlack > l.filled {
		prepareAt = max(end, l.filled)
	}
	l.mu.Unlock()
	n, err := 0, l.awaitReady()
	if err == nil {
		n, err = l.f.Write(buf)
		if err == nil && n < len(buf) {
			err = io.ErrShortWrite
		}
	}
	prepared := false
	if err == nil && prepareAt >= 0 {
		switch perr := l.prepare(prepareAt); {
		case perr == nil:
			prepared = true
		case errors.Is(perr, errors.ErrUnsupported):
			// The file cannot write at an offset after all: its
			// records are written as they would be without.
		default:
			// An I/O error is the log's failure, as a record's would be.
			err = fmt.Errorf("writing zeros ahead at offset %d: %w", prepareAt, perr)
		}
	}
	l.mu.Lock()
	if prepared {
		l.filled = prepareAt + logPrepareBytes
	} else if prepareAt >= 0 && err == nil {
		l.prep = nil
	}
	l.writing = false
	l.spare = buf[:0]
	at := l.written
	l.written += int64(n)
	if err != nil && l.err == nil {
		l.err = fmt.Errorf("bloomkv: writing %s at offset %d: %w", l.name, at+int64(n), err)
		l.pending = l.pending[:0]
	}
	l.idle.Broadcast()
	if l.awaitWrite || len(l.pending) > 0 && (l.parked || len(l.pending) >= logKickBytes) {
		// The writer goroutine waits for this write to end, or would have
		// been woken by a Write it made wait.
		l.wake()
	}
	if err != nil {
		return l.err
	}
	return nil
}

// Sync writes and syncs every byte queued so far. The caller serializes
// Sync with Write (the commit leader calls both), so nothing is queued while
// the file syncs.
func (l *logFile) Sync() error {
	if err := l.awaitReady(); err != nil {
		return err
	}
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
	l.mu.Lock()
	l.synced = true
	l.mu.Unlock()
	return nil
}

// prepare writes logPrepareBytes of zeros at offset at. It runs as the
// writer, with l.mu not held.
func (l *logFile) prepare(at int64) error {
	if l.zeros == nil {
		l.zeros = make([]byte, logZeroBuf)
	}
	for off := at; off < at+logPrepareBytes; off += logZeroBuf {
		if _, err := l.prep.WriteAt(l.zeros, off); err != nil {
			return err
		}
	}
	return nil
}

// Close writes what is queued (unless a write failed), stops the writer
// and closes the file. It returns once no goroutine of l runs: the writer
// and, for a log that follows another, follow, whose onFail (DB.walFailed
// and the BackgroundError listener) must not run after DB.Close has
// returned, and which has closed the log followed. The caller must not
// hold what onFail takes (DB.mu).
func (l *logFile) Close() error {
	l.mu.Lock()
	l.closing = true
	l.wake()
	l.mu.Unlock()
	<-l.done
	if l.followed != nil {
		<-l.followed
	}
	if l.bufs != nil {
		// The writer and follow are done: nothing is writing the buffers.
		l.mu.Lock()
		pending, spare := l.pending, l.spare
		l.pending, l.spare = nil, nil
		l.mu.Unlock()
		l.bufs.put(pending)
		l.bufs.put(spare)
	}
	return l.f.Close()
}

// seal marks l as replaced by a later log: what it is written from now on
// (its end mark) is queued at once, whatever the queue holds, since the
// caller holds what the writer may need to drain it (DB.mu, while the log
// before l is synced), and no zeros are written ahead of it.
func (l *logFile) seal() {
	l.mu.Lock()
	l.sealed = true
	l.mu.Unlock()
}

// logBuffers holds the queue buffers of closed logs for the logs that
// follow them. A log's queue grows to what its commits hand it while it
// waits for the log before it, about a memtable's worth; a new log that
// grew its own from nothing would copy that many bytes over and over, and
// take fresh memory each time.
type logBuffers struct {
	mu   sync.Mutex
	free [][]byte
	// reused counts the buffers get handed out.
	reused int
}

// maxLogBuffers is the most buffers logBuffers keeps: two per log, for the
// two or three logs alive at once; maxLogBuffer is the largest it keeps.
const (
	maxLogBuffers = 4
	maxLogBuffer  = maxLogPending + maxLogPending/4
)

// get returns a kept buffer, empty, or nil if none is kept.
func (p *logBuffers) get() []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.free)
	if n == 0 {
		return nil
	}
	b := p.free[n-1]
	p.free[n-1] = nil
	p.free = p.free[:n-1]
	p.reused++
	return b[:0]
}

// put keeps b, unless it is nil, larger than a queue grows (queue: a
// batch over maxLogPending makes one larger), or maxLogBuffers are kept:
// at most maxLogBuffers times maxLogBuffer bytes, which the store keeps.
func (p *logBuffers) put(b []byte) {
	if b == nil || cap(b) > maxLogBuffer {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.free) < maxLogBuffers {
		p.free = append(p.free, b[:0])
	}
}

// queue appends p to the queue, growing it when full to twice its size
// up to maxLogPending (past which Write waits), or to what p needs: append
// grows a large slice by a quarter at a time. l.mu is held.
func (l *logFile) queue(p []byte) {
	if need := len(l.pending) + len(p); need > cap(l.pending) {
		q := make([]byte, len(l.pending), max(need, min(2*cap(l.pending), maxLogPending), logKickBytes))
		copy(q, l.pending)
		l.pending = q
	}
	l.pending = append(l.pending, p...)
}

// writeLoop is the writer goroutine. It writes the queue once it holds
// logKickBytes, or once it has gathered for l.delay; after a delay that
// gathered nothing it parks until a Write wakes it. While records keep
// coming, the commits that queue them wake it only for full queues.
func (l *logFile) writeLoop() {
	defer close(l.done)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	// wait waits for a wake, or for the delay when timed; l.mu is held.
	wait := func(timed bool) (elapsed bool) {
		if timed {
			timer.Reset(l.delay)
		}
		l.waiting = true
		l.mu.Unlock()
		select {
		case <-l.kick:
		case <-timer.C: // never, untimed
			elapsed = true
		}
		l.mu.Lock()
		if l.waiting { // no wake came
			l.waiting = false
		} else if elapsed {
			<-l.kick // a wake sent as the delay ended
		}
		if timed && !elapsed {
			timer.Stop()
		}
		return elapsed
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	due := false // a delay has elapsed since the last write
	for {
		switch {
		case l.writing: // a Write, Flush or Sync writes; it wakes us after
			l.awaitWrite = true
			wait(false)
			l.awaitWrite = false
			continue
		case len(l.pending) == 0 && l.closing:
			return // all is written
		case len(l.pending) == 0 && due:
			l.parked = true
			wait(false)
			l.parked, due = false, false
			continue
		case len(l.pending) < logKickBytes && !due && !l.closing:
			due = wait(true)
			continue
		}
		due = false
		hadErr := l.err != nil
		failed := l.writeQueued() != nil && !hadErr && !l.predFailed
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
