// Package bloomkv is an embedded LSM key-value store whose sstables each
// carry a cache-line-blocked Bloom filter, so that a read of a key a table
// does not hold costs one cache line of memory instead of a disk read.
//
// Open a store with Open; write with Set, Delete or a Batch and Apply; read
// with Get; Close it when done. A write made with Sync survives a crash or
// power loss once it returns; one made with NoSync may be lost with a recent
// suffix of writes, never leaving the store inconsistent.
package bloomkv

import (
	"io"
	"sync"
	"sync/atomic"

	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/cache"
	"github.com/bloomkv/bloomkv/internal/manifest"
	"github.com/bloomkv/bloomkv/internal/record"
	"github.com/bloomkv/bloomkv/vfs"
)

// DB is an open store. It is safe for concurrent use.
type DB struct {
	// The lock map. Each field below belongs to one of these groups, and is
	// read and written only as its group says:
	//
	//   - immutable: set by Open before the DB is shared, then only read;
	//   - d.mu: the fields nested in mu, beside its Mutex, so that the
	//     type says which they are (d.mu.version, d.mu.mem, ...): read and
	//     written with d.mu held, but where a field's comment names who
	//     may read it without the lock. A method named ...Locked
	//     is called with d.mu held, and says so where it releases it for a
	//     while (to write tables, to wait on d.mu.cond, to call a listener);
	//     during Open no other goroutine exists, and Open calls them
	//     without it;
	//   - the commit leader: the writer at the front of the commit queue
	//     (commit.go), alone; Close, once it has emptied the queue while
	//     holding d.commitMu, counts as the leader, and stays it after
	//     (closed is set, so a later writer fails before touching the WAL);
	//   - Open only: written and read while the store opens, then unused;
	//   - tests only: set by a test before it calls Close;
	//   - atomic: read and written without a lock.
	//
	// Where both locks are needed, d.commitMu is taken before d.mu. No
	// listener is called with either held (EventListener).

	// Immutable after Open.
	dir    string
	opts   *Options
	fs     vfs.FS
	lock   io.Closer // the LOCK file, held until Close
	cache  *cache.Cache
	tables *tableCache // safe for concurrent use
	chunks *chunkFeed  // the memtables' arena chunks (nil read-only or under 1 MiB memtables); safe for concurrent use

	// Guarded by d.mu: every field of mu but its Mutex.
	mu struct {
		sync.Mutex
		cond *sync.Cond // on d.mu: flushes done, stalls over, compactions done, background errors, Close
		// mem is the mutable memtable; the commit leader adds to it
		// without d.mu (its skiplist is safe for one writer and many
		// readers), and it is replaced with d.mu held.
		mem         *memEntry
		imm         []*memEntry // frozen memtables awaiting a flush, oldest first
		version     *manifest.Version
		nextFileNum uint64
		logNumber   uint64      // WALs below it are in tables
		lastSeq     base.SeqNum // the last sequence number handed to a batch
		// manifest, manifestW and manifestNum are the manifest open for
		// edits. An edit is written and synced with d.mu released and
		// editing set (logAndApplyLocked); while it is set, no other
		// goroutine touches them or changes version.
		manifest    vfs.File
		manifestW   *record.Writer
		manifestNum uint64
		editing     bool
		// manifestErr is the error of a failed manifest write or sync: the
		// edit may or may not be durable, so no edit follows it.
		manifestErr error
		// formatVersion is the store's format version (format.go).
		formatVersion FormatVersion
		bgErr         error // a failed flush, compaction or WAL write: the store takes no more writes
		// closed is set by Close, with closedFlag. It is the one that
		// background work and waiters on d.mu.cond test, since it changes
		// with d.mu held, where they wait.
		closed  bool
		busy    map[uint64]bool // tables being compacted
		running []*compaction
		// manualCompacts counts the Compact calls under way: while one
		// is, no background compaction starts (pickAutoLocked), and no
		// differential-file filter is built (diffBuilder): Compact moves
		// the differential into the base, so a filter built meanwhile
		// would count versions about to leave, reading every table above
		// the base to do so.
		manualCompacts int
		// elide holds the tables below level 0 that hold deletions (as
		// far as known: those written since Open), for elision-only and
		// tombstone-density compactions (pickElisionLocked).
		elide     map[uint64]elisionCandidate
		fileRefs  map[uint64]int // read states referencing each table
		snapshots []base.SeqNum  // read sequence numbers of open snapshots, ascending
		// walBroken is set when a WAL write or sync failed. rescuing, set
		// with it, has frozen memtables flushed in spite of bgErr, since
		// they hold acknowledged writes the WAL may lack (walFailed); a
		// failed flush clears it.
		walBroken, rescuing bool
		// dirReleased is set by Close once it has deleted the last
		// obsolete tables (releaseDirLocked): from then on nothing touches
		// the directory, not even the release of a read state that
		// outlived Close.
		dirReleased bool
		// obsolete are the numbers of the tables queued for the file
		// deleter (fileDeleter); queued counts the tables ever queued and
		// removed those it has removed. deleter is set while it runs.
		// Without it (read-only, or once Close has stopped it) tables are
		// removed at once.
		obsolete        []uint64
		queued, removed uint64
		deleter         bool
		// diff is the differential-file filter (difffilter.go): guarded by
		// d.mu but for its list of filters commits add to, which the commit
		// leader reads atomically, and its counters.
		diff diffState
		// onPublish, when set (tests only), is called with each read
		// state as it is published, d.mu held.
		onPublish func(*readState)
		// compactionGate, when set (tests only, before any compaction is
		// due), is received from before each compaction starts.
		compactionGate chan struct{}
	}

	// Tests only.
	//
	// onClose, when set, is called by Close once it has begun, without a
	// lock: later calls fail with ErrClosed, and Close has waited for
	// nothing yet.
	onClose func()

	// The commit pipeline (commit.go): queue is guarded by d.commitMu;
	// group, wal and walW belong to the commit leader.
	commitMu   sync.Mutex
	commitCond *sync.Cond      // on d.commitMu: the lead changed hands, a group is done
	queue      []*commitWaiter // writers waiting, the leader first
	group      []*commitWaiter // the leader's copy of its group, reused
	wal        *logFile
	walW       *record.Writer
	// logBufs keeps closed logs' queue buffers for the logs after them.
	logBufs logBuffers

	// Open only.
	//
	// manifestLastEdit is the offset of the last edit Open read from the
	// manifest, for errors about what it records.
	manifestLastEdit int64
	// closedLogs holds the sizes the manifest recorded for WALs when the
	// store closed cleanly (manifest.ClosedLog), by log number.
	closedLogs map[uint64]uint64

	// Atomic, or safe for concurrent use.
	batches    sync.Pool     // *Batch for Set, Delete and DeleteRange
	iterAllocs sync.Pool     // *iterAlloc: closed iterators' memory for NewIter
	multiGets  sync.Pool     // *multiGetter: MultiGet's scratch memory
	visibleSeq atomic.Uint64 // reads see sequence numbers up to this
	// batchBufs holds the memory of unreachable batches from NewBatch
	// (*batchBuf). It is an allocation of its own, which a batch's cleanup
	// refers to without referring to the DB.
	batchBufs *sync.Pool
	state     atomic.Pointer[readState]
	// closedFlag is set by Close, first: every public method tests it
	// without a lock to fail fast with ErrClosed, and Close swaps it so
	// that it runs once. d.mu.closed follows it for the waiters.
	closedFlag atomic.Bool
	// l0Seeks counts the iterator seeks that met level-0 tables since
	// level 0 last changed; at l0SeekLimit (0: level 0 is empty) level 0
	// is due for compaction (noteL0Seek).
	l0Seeks, l0SeekLimit atomic.Int64
	bgWG                 sync.WaitGroup // the flusher, the compactors, the filter builder, the file deleter and running Compact calls
	metrics              dbMetrics
}

func (d *DB) path(name string) string { return vfs.Join(d.dir, name) }

// Close flushes the write-ahead log to stable storage, waits for background
// work and releases the store. A flush under way completes; a compaction
// under way stops, and its outputs are deleted, as are the tables no
// version holds that only iterators still open kept: once Close returns, the
// directory holds only the store's live files (the deletions synced), and
// nothing touches it, not even the Close of an iterator left open. It
// returns the first error met, including a flush or compaction that failed
// in the background. Later calls return ErrClosed.
func (d *DB) Close() error {
	if d.closedFlag.Swap(true) {
		return ErrClosed
	}
	if d.onClose != nil {
		d.onClose()
	}
	// Writes arriving from now on fail with ErrClosed; let those under way
	// finish, then flush the WAL.
	d.mu.Lock()
	d.mu.closed = true
	d.mu.cond.Broadcast()
	d.mu.Unlock()
	// From here no Compact starts; bgWG.Wait below waits for those running.
	d.commitMu.Lock()
	for len(d.queue) > 0 {
		d.commitCond.Wait()
	}
	var werr error
	if d.walW != nil {
		// After a failed WAL write or sync a second sync must not pass off
		// the failure as success: Flush and Sync return the first error.
		if werr = d.walW.Flush(); werr == nil {
			werr = d.wal.Sync()
		}
	}
	d.mu.Lock()
	var walErr error
	reportWAL := false
	if werr != nil {
		walErr, reportWAL = d.walFailedLocked(werr)
	}
	d.rescueLocked() // the queue is empty: no commit is adding to the memtable
	d.mu.Unlock()
	d.commitMu.Unlock()
	if reportWAL {
		d.opts.EventListener.BackgroundError(walErr)
	}
	d.bgWG.Wait()
	d.chunks.close()
	d.mu.Lock()
	// The compactors may have queued removals after the deleter stopped.
	d.mu.deleter = false
	d.removeQueuedLocked()
	// Writes the failed WAL lacks are in frozen memtables, which the
	// flusher left when it stopped; they must reach tables before the
	// store lets go of them.
	for d.mu.rescuing && len(d.mu.imm) > 0 {
		d.flushOldestLocked()
	}
	// A WAL, flush or compaction failure, in the background or above.
	err := d.mu.bgErr
	if err == nil && d.walW != nil {
		// The WAL is whole and synced: record its size, so that the
		// next Open can tell it cut short from a crash's torn tail.
		err = d.logAndApplyLocked(&manifest.VersionEdit{ClosedLog: manifest.ClosedLog{Num: d.mu.mem.logNum, Size: uint64(d.walW.Size())}})
	}
	d.waitEditLocked() // a format raise under way: the manifest closes below
	if derr := d.releaseDirLocked(); err == nil {
		err = derr
	}
	d.mu.Unlock()

	if d.wal != nil {
		if cerr := d.wal.Close(); err == nil {
			err = cerr
		}
	}
	if d.mu.manifest != nil {
		if cerr := d.mu.manifest.Close(); err == nil {
			err = cerr
		}
	}
	if cerr := d.tables.close(); err == nil {
		err = cerr
	}
	if cerr := d.lock.Close(); err == nil {
		err = cerr
	}
	return err
}
