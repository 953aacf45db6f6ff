package bloomkv

// Read states: the memtables and version a read sees, published whole and
// counted by reference.

import (
	"slices"
	"sync/atomic"

	"github.com/bloomkv/bloomkv/difffile"
	"github.com/bloomkv/bloomkv/internal/manifest"
	"github.com/bloomkv/bloomkv/internal/rangedel"
)

// readState is what a read needs, swapped atomically as it changes. Its
// reference count keeps its version's tables from deletion while reads use
// them: the DB holds one reference to the current state, each Get another.
type readState struct {
	mem     *memEntry
	imm     []*memEntry // oldest first
	version *manifest.Version
	refs    atomic.Int32

	// The differential-file filter (difffilter.go): epoch orders the states
	// published; diff is the filter reads of this state may consult (nil:
	// none), counting the versions above level diffBase; diffDels are the
	// range deletions of the tables above it, fragmented. diffIdle says
	// the filter was dropped for not paying (diffPaysLocked). diffSaves
	// counts the sources a Get the filter answers "no" skips: the
	// memtables, the level-0 tables, and the levels between level 0 and
	// the base that hold tables.
	epoch     uint64
	diff      *difffile.Filter
	diffBase  int
	diffDels  []rangedel.Tombstone
	diffIdle  bool
	diffSaves int

	// levels is what its iterators share (levelTables), built by the first.
	levels atomic.Pointer[levelTables]
}

// publishLocked installs the read state for mem, imm and version. d.mu is held (or
// the DB is not yet shared).
func (d *DB) publishLocked() {
	s := &readState{mem: d.mu.mem, imm: slices.Clone(d.mu.imm), version: d.mu.version}
	s.refs.Store(1)
	d.diffForStateLocked(s)
	for _, f := range s.version.All() {
		d.mu.fileRefs[f.FileNum]++
	}
	if old := d.state.Swap(s); old != nil {
		d.unrefLocked(old)
	}
	if d.mu.onPublish != nil {
		d.mu.onPublish(s)
	}
}

// acquire returns the current read state with a reference taken. A state
// whose count has reached zero is being released; the current one is newer.
func (d *DB) acquire() *readState {
	for {
		s := d.state.Load()
		if n := s.refs.Load(); n > 0 && s.refs.CompareAndSwap(n, n+1) {
			return s
		}
	}
}

// release drops a reference acquire took.
func (d *DB) release(s *readState) {
	if s.refs.Add(-1) == 0 {
		d.mu.Lock()
		d.releaseFilesLocked(s)
		d.mu.Unlock()
	}
}

func (d *DB) unrefLocked(s *readState) {
	if s.refs.Add(-1) == 0 {
		d.releaseFilesLocked(s)
	}
}
