package bloomkv

import "time"

// EventListener's functions, those set, are called as events happen; they
// must not block for long or call back into the DB.
type EventListener struct {
	FlushBegin      func(FlushInfo)
	FlushEnd        func(FlushInfo)
	CompactionBegin func(CompactionInfo)
	CompactionEnd   func(CompactionInfo)
	WriteStallBegin func(reason string)
	WriteStallEnd   func()
	BackgroundError func(error)
}

// CompactionInfo describes a compaction of tables from one level into the
// next.
type CompactionInfo struct {
	FromLevel, ToLevel int
	// Move: the tables changed level without being rewritten (no table of
	// the next level overlapped them). Manual: Compact asked for it.
	Move, Manual bool
	// Score is the level's score that called for the compaction (0 for a
	// manual one): its size over its target, or for level 0 its table count
	// over L0CompactionThreshold.
	Score             float64
	Inputs            []uint64 // table file numbers read
	Outputs           []uint64 // table file numbers written; set at CompactionEnd
	BytesIn, BytesOut uint64
	Duration          time.Duration
	Err               error
}

// FlushInfo describes a flush of a memtable to a table.
type FlushInfo struct {
	FileNum  uint64
	Entries  int
	Bytes    uint64 // table size; zero at FlushBegin
	Duration time.Duration
	Err      error
}
