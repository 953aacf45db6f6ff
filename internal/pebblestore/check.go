package pebblestore

// Check: the store's tables and blob files read through and compared with
// the manifest.

import (
	"bytes"
	"fmt"
	"maps"
	"slices"

	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/sstable"
)

// CheckStats are what Check read.
type CheckStats struct {
	Tables, Blocks, BlobFiles int
	// Entries counts the tables' point entries; RangeDeletions the
	// tables' range-deletion fragments and the WALs' range deletions as
	// written, unfragmented;
	// LiveKeys the keys a full scan returns.
	Entries, RangeDeletions, LiveKeys uint64
}

// Check verifies every table (sstable.Reader.Check: checksums, structure,
// key order, filter, properties), each table against the manifest (size,
// keys within its bounds, sequence numbers within its range), every blob
// file (checksums and structure of each block, size against the
// manifest), and that a full scan returns keys in increasing order. It
// returns every problem.
func (s *Store) Check() (CheckStats, []error) {
	st := CheckStats{RangeDeletions: uint64(s.walDels)}
	problems := s.checkBlobFiles(&st)
	checked := map[string]bool{} // backing files of virtual tables
	s.tables(func(t *Table) error {
		st.Tables++
		if t.Pebble.Virtual {
			if checked[t.Path] {
				return nil
			}
			checked[t.Path] = true
		}
		tr, err := s.reader(t)
		if err != nil {
			problems = append(problems, err)
			return nil
		}
		rep := tr.r.Check()
		st.Blocks += rep.Blocks
		st.Entries += rep.Entries
		st.RangeDeletions += uint64(rep.RangeDeletions)
		problems = append(problems, rep.Problems...)
		// A flushable table is not in the manifest, and a virtual one's
		// size and bounds are not its file's.
		if t.Level >= 0 && !t.Pebble.Virtual {
			problems = append(problems, s.checkAgainstManifest(tr, rep)...)
		}
		return nil
	})
	var prev []byte
	err := s.Scan(nil, nil, func(k, _ []byte) bool {
		if prev != nil && bytes.Compare(prev, k) >= 0 {
			problems = append(problems, base.CorruptionErrorf("pebblestore: %s: scan returned %q after %q", s.Dir, k, prev))
		}
		prev = append(prev[:0], k...)
		st.LiveKeys++
		return true
	})
	if err != nil {
		problems = append(problems, err)
	}
	return st, problems
}

// checkBlobFiles reads every block of every blob file of the version.
func (s *Store) checkBlobFiles(st *CheckStats) []error {
	var problems []error
	ids := slices.Sorted(maps.Keys(s.BlobFiles))
	for _, id := range ids {
		bf := s.BlobFiles[id]
		st.BlobFiles++
		br, err := s.blobReader(bf)
		if err != nil {
			problems = append(problems, err)
			continue
		}
		if bf.Size != 0 && br.r.Size() != bf.Size {
			problems = append(problems, base.CorruptionErrorf("pebblestore: %s: %d bytes, the manifest records %d", br.path, br.r.Size(), bf.Size))
		}
		for _, b := range br.r.Layout().Blocks {
			if b.Err != nil {
				problems = append(problems, fmt.Errorf("pebblestore: %s: %w", br.path, b.Err))
			}
		}
	}
	return problems
}

// checkAgainstManifest compares a table with what the manifest records of
// it.
func (s *Store) checkAgainstManifest(tr *tableReader, rep *sstable.CheckReport) []error {
	m := tr.t.Meta
	var problems []error
	bad := func(format string, args ...any) {
		problems = append(problems, base.CorruptionErrorf("pebblestore: %s: "+format, append([]any{tr.t.Path}, args...)...))
	}
	lo, hi, err := tr.r.KeyRange()
	if err != nil {
		return append(problems, err)
	}
	if lo != nil && (bytes.Compare(lo.UserKey, m.Smallest.UserKey) < 0 || bytes.Compare(hi.UserKey, m.Largest.UserKey) > 0) {
		bad("keys %q-%q outside the manifest's bounds %q-%q", lo.UserKey, hi.UserKey, m.Smallest.UserKey, m.Largest.UserKey)
	}
	if tr.ov == 0 && rep.Entries > 0 && (rep.SmallestSeq < m.SmallestSeq || rep.LargestSeq > m.LargestSeq) {
		bad("sequence numbers %d-%d outside the manifest's %d-%d", rep.SmallestSeq, rep.LargestSeq, m.SmallestSeq, m.LargestSeq)
	}
	return problems
}
