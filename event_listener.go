package bloomkv

// EventListener: the callbacks a program registers for flushes, compactions,
// ingests and background errors, and what they are told.

import "time"

// EventListener is told of the store's background work as it happens. A nil
// function is not called.
//
// Every function is called with none of the DB's locks held, on the
// goroutine doing the work, which waits while the function runs: a slow
// listener slows flushes, compactions or, for the write-stall functions,
// the writes waiting behind the stall. A listener may read the store (Get,
// NewIter, NewSnapshot, Metrics, SSTables). It must not write to it, Flush,
// Compact or Close it: those wait for work the listener is part of. Calls
// of one function may come from several goroutines at once (concurrent
// compactions), so a listener guards its own state.
type EventListener struct {
	// FlushBegin is called before a frozen memtable is written to a
	// level-0 table; FlushEnd after, with the outcome (when it succeeded,
	// before a Flush call waiting for that memtable returns).
	FlushBegin func(FlushInfo)
	FlushEnd   func(FlushInfo)
	// CompactionBegin is called before a compaction reads its inputs;
	// CompactionEnd after its result is installed (or it failed, or Close
	// stopped it: then its Err wraps ErrClosed, and no BackgroundError
	// follows).
	CompactionBegin func(CompactionInfo)
	CompactionEnd   func(CompactionInfo)
	// WriteStallBegin is called when writes start waiting for flushes or
	// level-0 compactions, with the reason; WriteStallEnd when they resume.
	WriteStallBegin func(reason string)
	WriteStallEnd   func()
	// BackgroundError is called when a flush, compaction or write-ahead
	// log write fails; the store then takes no more writes. It may run
	// after the call that met the failure has returned it.
	BackgroundError func(error)
	// TableIngested is called when Ingest has added its tables, before it
	// returns, on its goroutine.
	TableIngested func(IngestInfo)
}

// withDefaults returns l with a function that does nothing in place of
// each nil one, so that the store calls each without a check.
func (l EventListener) withDefaults() EventListener {
	orNop(&l.FlushBegin)
	orNop(&l.FlushEnd)
	orNop(&l.CompactionBegin)
	orNop(&l.CompactionEnd)
	orNop(&l.WriteStallBegin)
	if l.WriteStallEnd == nil {
		l.WriteStallEnd = func() {}
	}
	orNop(&l.BackgroundError)
	orNop(&l.TableIngested)
	return l
}

// orNop sets *f to a function that does nothing if it is nil.
func orNop[T any](f *func(T)) {
	if *f == nil {
		*f = func(T) {}
	}
}

// unlocked runs fn, a listener call, with d.mu released: no listener runs
// with a lock of the DB held (EventListener). d.mu is held on entry and on
// return; the caller has left the state it guards consistent.
func (d *DB) unlocked(fn func()) {
	d.mu.Unlock()
	defer d.mu.Lock()
	fn()
}

// CompactionInfo describes a compaction of tables from one level into the
// next.
type CompactionInfo struct {
	FromLevel, ToLevel int
	// Move: the tables changed level without being rewritten (no table of
	// the next level overlapped them). Manual: Compact asked for it.
	Move, Manual bool
	// Score is the level's score that called for the compaction (0 for a
	// manual one): its compensated size over its target, or for level 0
	// its depth over L0CompactionThreshold; for an elision-only or
	// tombstone-density compaction, the table's share of deletions.
	Score             float64
	Inputs            []uint64 // table file numbers read
	Outputs           []uint64 // table file numbers written; set at CompactionEnd
	BytesIn, BytesOut uint64
	Duration          time.Duration
	Err               error
}

// FlushInfo describes a flush of a memtable to a table.
type FlushInfo struct {
	FileNum uint64
	// Entries counts the memtable's entries; Dropped, those the flush left
	// out of the table, hidden by a newer version from every snapshot and
	// read (zero at FlushBegin).
	Entries, Dropped int
	Size             uint64 // the table's size in bytes; zero at FlushBegin
	Duration         time.Duration
	Err              error
}
