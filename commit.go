package bloomkv

// The commit pipeline: the queue of writers, and the leader that writes a
// group to the WAL and applies it to the memtable.

import (
	"github.com/bloomkv/bloomkv/internal/base"
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
	// diffBuild asks to begin a build of the differential-file filter
	// (beginDiffBuildLocked) with no commit under way; build is the build
	// begun, if any.
	diffBuild    bool
	buildEntries int
	build        *diffBuild
	// ingest asks to install the tables of an Ingest (applyIngestLocked).
	ingest *ingestOp
	err    error
	done   bool

	// checkpoint asks to pin what a checkpoint copies with no commit
	// under way (DB.Checkpoint).
	checkpoint *checkpointPin
}

// request reports whether w asks for something other than a batch's commit;
// such a waiter leads a group of its own.
func (w *commitWaiter) request() bool {
	return w.flush || w.diffBuild || w.checkpoint != nil || w.ingest != nil
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
	if !w.request() {
		size := w.batch.Len()
		for n < len(d.queue) && !d.queue[n].request() && size+d.queue[n].batch.Len() <= maxGroupBytes {
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
	if op := group[0].ingest; op != nil {
		err := d.ingestStepLocked(op)
		d.mu.Unlock()
		return d.reportLogFailure(err)
	}
	if d.mu.closed {
		d.mu.Unlock()
		return ErrClosed
	}
	if group[0].checkpoint != nil {
		// Before bgErr: a store that failed a flush or compaction may
		// still be copied.
		err := d.pinCheckpointLocked(group[0].checkpoint)
		d.mu.Unlock()
		return d.reportLogFailure(err)
	}
	if d.mu.bgErr != nil {
		d.mu.Unlock()
		return d.mu.bgErr
	}
	if group[0].diffBuild {
		group[0].build = d.beginDiffBuildLocked(group[0].buildEntries)
		d.mu.Unlock()
		return nil
	}
	if group[0].flush {
		var err error
		if !d.mu.mem.mt.Empty() {
			group[0].flushed = d.mu.mem
			err = d.rotateLocked()
		} else if len(d.mu.imm) > 0 {
			group[0].flushed = d.mu.imm[len(d.mu.imm)-1] // wait for earlier freezes too
		}
		d.mu.Unlock()
		return d.reportLogFailure(err)
	}
	if d.mu.mem.mt.Size() >= d.opts.MemTableSize {
		if err := d.makeRoomLocked(); err != nil {
			d.mu.Unlock()
			return d.reportLogFailure(err)
		}
	}
	mem := d.mu.mem
	seq := d.mu.lastSeq + 1
	for _, g := range group {
		g.batch.setSeq(seq)
		seq += base.SeqNum(g.batch.Count())
	}
	last := seq - 1
	d.mu.lastSeq = last
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
		d.walW.SetSynced(d.walW.Size())
	}
	d.metrics.walBytes.Add(bytes)
	if ws := d.mu.diff.writers.Load(); ws != nil && len(*ws) > 0 {
		// Before the memtable: a read that can see an entry finds it in
		// every filter it may consult.
		var added uint64
		for _, g := range group {
			added += addBatchToDiff(*ws, g.batch.data)
		}
		d.mu.diff.adds.Add(added)
	}
	for _, g := range group {
		mem.mt.Apply((*batchEntries)(g.batch))
	}
	d.visibleSeq.Store(uint64(last))
	return nil
}
