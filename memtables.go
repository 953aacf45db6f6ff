package bloomkv

// The memtables: making one, making room for writes, and rotating the
// mutable one.

import (
	"fmt"
	"time"

	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/batchrepr"
	"github.com/bloomkv/bloomkv/memtable"
)

// memEntry is a memtable and the WAL that holds its writes (0 for none).
type memEntry struct {
	mt     *memtable.MemTable
	logNum uint64
	// logSize is the size of log logNum once a later log has replaced it
	// (rotateLocked), under d.mu; the file may be longer, by zeros
	// written ahead.
	logSize int64
	// flushed is set, under d.mu, once a level-0 table holding mt's
	// entries is in the version (while mt is still in d.mu.imm).
	flushed bool
}

// batchEntries is a batch as the memtable reads it (memtable.Batch): its
// encoding, already checked. A pointer to it fits in an interface without
// an allocation, which a commit would otherwise make.
type batchEntries Batch

func (b *batchEntries) Each(fn func(key base.InternalKey, value []byte)) {
	batchrepr.Decode(b.data, func(seq base.SeqNum, e batchrepr.Entry) {
		fn(base.MakeInternalKey(e.Key, seq, e.Kind), e.Value)
	})
}

// stallReasonLocked says why writes must wait before the memtable can be
// frozen, or "" when they need not. d.mu is held.
func (d *DB) stallReasonLocked() string {
	switch {
	case len(d.mu.imm) >= d.opts.MaxImmutableMemTables:
		return "too many memtables waiting for a flush"
	case d.mu.version.NumFiles(0) >= d.opts.L0StopWritesThreshold:
		return "too many level-0 tables waiting for compaction"
	}
	return ""
}

// makeRoomLocked freezes the full memtable, first waiting while too many
// frozen ones await a flush or too many level-0 tables await compaction.
// d.mu is held on entry and on return, and released while it waits and
// while the WriteStallBegin and WriteStallEnd listeners run; the caller
// leads the commit queue, so no write gets in meanwhile.
func (d *DB) makeRoomLocked() error {
	if reason := d.stallReasonLocked(); reason != "" {
		start := time.Now()
		d.metrics.stalls.Add(1)
		d.unlocked(func() { d.opts.EventListener.WriteStallBegin(reason) })
		for d.stallReasonLocked() != "" && d.mu.bgErr == nil && !d.mu.closed {
			d.mu.cond.Wait()
		}
		d.metrics.stallNanos.Add(int64(time.Since(start)))
		d.unlocked(d.opts.EventListener.WriteStallEnd)
		if d.mu.bgErr != nil {
			return d.mu.bgErr
		}
		if d.mu.closed {
			return ErrClosed
		}
	}
	return d.rotateLocked()
}

// rotateLocked freezes the memtable and starts a new WAL and memtable. The
// new WAL writes nothing to its file until the old one is written out,
// synced and closed, which the new one's writer does (createWAL), so that
// only the newest WAL can end torn while commits go on. d.mu is held
// throughout, so rotateLocked never waits for a sync: when the old WAL may
// already write to its file, its queue is written out here, at the cost of
// a write; when it still waits for the WAL before it, its queue stays
// queued, since writing it would wait for that WAL's sync, and the new WAL's
// writer writes it out before its sync. The caller leads the commit queue
// (or no one else runs). A failure of the WAL comes back as a *logFailure
// for the caller to report once it has released d.mu (reportLogFailure).
func (d *DB) rotateLocked() error {
	if err := d.walW.Flush(); err != nil {
		return &logFailure{err}
	}
	if d.wal.readyNow() {
		if err := d.wal.Flush(); err != nil {
			return &logFailure{err}
		}
	}
	old, oldW := d.wal, d.walW
	num := d.allocFileNumLocked()
	// The old log, replaced, ends with a mark, queued once the new log's
	// file exists (a log that failed to start leaves the old one taking
	// records) and before the new log's writer syncs and closes the old
	// one: zeros written ahead end a log too, and only the mark tells its
	// end from lost writes (replayWALs). An error here is the old log's,
	// which its sync reports to the new one.
	seal := func() {
		old.seal()
		if oldW.WriteEOFTrailer() == nil {
			oldW.Flush()
		}
	}
	if err := d.createWAL(num, old, seal); err != nil {
		d.wal, d.walW = old, oldW
		return &logFailure{fmt.Errorf("starting %s: %w", d.path(logName(num)), err)}
	}
	d.mu.mem.logSize = oldW.Size()
	d.mu.imm = append(d.mu.imm, d.mu.mem)
	d.mu.mem = &memEntry{mt: d.newMemTable(), logNum: num}
	d.publishLocked()
	d.mu.cond.Broadcast() // wake the flusher
	return nil
}

// newMemTable returns an empty memtable of the store's size, its arena fed
// by the store's chunk feed.
func (d *DB) newMemTable() *memtable.MemTable {
	if d.chunks == nil {
		return memtable.NewSized(d.opts.MemTableSize)
	}
	return memtable.NewSizedFrom(d.opts.MemTableSize, d.chunks.take)
}
