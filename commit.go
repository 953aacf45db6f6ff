package bloomkv

import (
	"fmt"
	"time"

	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/memtable"
)

// maxGroupBytes bounds the batches one leader commits together.
const maxGroupBytes = 4 << 20

// commitWaiter is a writer in the commit queue: a batch, or a request to
// freeze the memtable for a flush.
type commitWaiter struct {
	batch   *Batch
	sync    bool
	flush   bool
	flushed *memEntry // the memtable a flush request froze, if any
	rescue  bool      // with flush: freeze the memtable of a failed WAL (DB.rescueLocked)
	err     error
	done    bool
}

// commit runs w through the group-commit pipeline (LevelDB's writer queue):
// writers queue up; the one at the front leads, writing every batch waiting
// behind it to the WAL in one write and, if any of them asked for Sync, one
// fsync; then it applies them to the memtable, makes them visible, and wakes
// them.
func (d *DB) commit(w *commitWaiter) error {
	d.commitMu.Lock()
	d.queue = append(d.queue, w)
	for !w.done && d.queue[0] != w {
		d.commitCond.Wait()
	}
	if w.done {
		d.commitMu.Unlock()
		return w.err
	}
	n := 1
	if !w.flush {
		size := w.batch.Len()
		for n < len(d.queue) && !d.queue[n].flush && size+d.queue[n].batch.Len() <= maxGroupBytes {
			size += d.queue[n].batch.Len()
			n++
		}
	}
	// The leader alone uses d.group until it hands the lead on below.
	d.group = append(d.group[:0], d.queue[:n]...)
	group := d.group
	d.commitMu.Unlock()

	err := d.commitGroup(group)

	d.commitMu.Lock()
	for _, g := range group {
		g.err, g.done = err, true
	}
	// Move the waiters behind the group to the front, so that appends reuse
	// the queue's memory instead of growing it from its end.
	rest := copy(d.queue, d.queue[n:])
	clear(d.queue[rest:])
	d.queue = d.queue[:rest]
	clear(group)
	d.commitCond.Broadcast()
	d.commitMu.Unlock()
	return w.err
}

// commitGroup writes a group; the caller leads the queue, so it alone uses
// the WAL.
func (d *DB) commitGroup(group []*commitWaiter) error {
	d.mu.Lock()
	if group[0].rescue {
		d.rescueLocked()
		d.mu.Unlock()
		return nil
	}
	if d.closed {
		d.mu.Unlock()
		return ErrClosed
	}
	if d.bgErr != nil {
		d.mu.Unlock()
		return d.bgErr
	}
	if group[0].flush {
		var err error
		if !d.mem.mt.Empty() {
			group[0].flushed = d.mem
			err = d.rotateLocked()
		} else if len(d.imm) > 0 {
			group[0].flushed = d.imm[len(d.imm)-1] // wait for earlier freezes too
		}
		d.mu.Unlock()
		return err
	}
	if d.mem.mt.Size() >= d.opts.MemTableSize {
		if err := d.makeRoomLocked(); err != nil {
			d.mu.Unlock()
			return err
		}
	}
	mem := d.mem
	seq := d.lastSeq + 1
	for _, g := range group {
		g.batch.setSeq(seq)
		seq += base.SeqNum(g.batch.Count())
	}
	last := seq - 1
	d.lastSeq = last
	d.mu.Unlock()

	sync := false
	var bytes uint64
	for _, g := range group {
		if _, err := d.walW.Write(g.batch.data); err != nil {
			return d.walFailed(err)
		}
		sync = sync || g.sync
		bytes += uint64(len(g.batch.data))
	}
	// NoSync: the records are queued for the log's writer goroutine.
	if err := d.walW.Flush(); err != nil {
		return d.walFailed(err)
	}
	if sync {
		if err := d.wal.Sync(); err != nil {
			return d.walFailed(err)
		}
	}
	d.metrics.walBytes.Add(bytes)
	for _, g := range group {
		mem.mt.Apply((*batchEntries)(g.batch))
	}
	d.visibleSeq.Store(uint64(last))
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
func (d *DB) walFailed(err error) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.bgErr == nil {
		d.bgErr = fmt.Errorf("bloomkv: write-ahead log failed (current log %s); the store takes no more writes until reopened: %w",
			d.path(logName(d.mem.logNum)), err)
		if f := d.opts.EventListener.BackgroundError; f != nil {
			f(d.bgErr)
		}
	}
	if !d.walBroken {
		d.walBroken = true
		d.rescuing = true
		d.cond.Broadcast() // wake stalled writers, and the flusher to rescue
	}
	return d.bgErr
}

// rescueLocked freezes the memtable after a WAL failure, so that the
// flusher writes it to a table. The new memtable has no WAL: the store takes
// no more writes. d.mu is held and no commit is under way (the caller leads
// the commit queue, or Close has emptied it).
func (d *DB) rescueLocked() {
	if !d.rescuing || d.mem.mt.Empty() {
		return
	}
	d.imm = append(d.imm, d.mem)
	d.mem = &memEntry{mt: memtable.NewSized(d.opts.MemTableSize), logNum: d.allocFileNum()}
	d.publish()
	d.cond.Broadcast()
}

// makeRoomLocked freezes the full memtable, first waiting while too many
// frozen ones await a flush or too many level-0 tables await compaction. d.mu is held; the caller leads the commit queue.
func (d *DB) makeRoomLocked() error {
	stalled := func() string {
		switch {
		case len(d.imm) >= d.opts.MaxImmutableMemTables:
			return "too many memtables waiting for a flush"
		case len(d.version.Levels[0]) >= d.opts.L0StopWritesThreshold:
			return "too many level-0 tables waiting for compaction"
		}
		return ""
	}
	if reason := stalled(); reason != "" {
		start := time.Now()
		d.metrics.stalls.Add(1)
		if f := d.opts.EventListener.WriteStallBegin; f != nil {
			f(reason)
		}
		for stalled() != "" && d.bgErr == nil && !d.closed {
			d.cond.Wait()
		}
		d.metrics.stallNanos.Add(int64(time.Since(start)))
		if f := d.opts.EventListener.WriteStallEnd; f != nil {
			f()
		}
		if d.bgErr != nil {
			return d.bgErr
		}
		if d.closed {
			return ErrClosed
		}
	}
	return d.rotateLocked()
}

// rotateLocked freezes the memtable and starts a new WAL and memtable. The
// old WAL is synced first, so that only the newest WAL can end torn. d.mu is
// held; the caller leads the commit queue (or no one else runs).
func (d *DB) rotateLocked() error {
	if err := d.walW.Flush(); err != nil {
		return d.walFailedLocked(err)
	}
	if err := d.wal.Sync(); err != nil {
		return d.walFailedLocked(err)
	}
	old, oldW := d.wal, d.walW
	num := d.allocFileNum()
	if err := d.createWAL(num); err != nil {
		d.wal, d.walW = old, oldW
		return d.walFailedLocked(fmt.Errorf("starting %s: %w", d.path(logName(num)), err))
	}
	old.Close()
	d.wal.recycle(old)
	d.imm = append(d.imm, d.mem)
	d.mem = &memEntry{mt: memtable.NewSized(d.opts.MemTableSize), logNum: num}
	d.publish()
	d.cond.Broadcast() // wake the flusher
	return nil
}

func (d *DB) walFailedLocked(err error) error {
	d.mu.Unlock()
	err = d.walFailed(err)
	d.mu.Lock()
	return err
}
