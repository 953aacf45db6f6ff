package bloomkv

// Point reads: Get through the memtables, the differential filter and the
// levels.

import (
	"github.com/bloomkv/bloomkv/filterblock"
	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/manifest"
	"github.com/bloomkv/bloomkv/internal/rangedel"
)

// Get returns a copy of the value stored under key, or ErrNotFound.
func (d *DB) Get(key []byte) ([]byte, error) {
	if d.closedFlag.Load() {
		return nil, ErrClosed
	}
	if err := checkKey(key); err != nil {
		return nil, err
	}
	// The state first, then the sequence number: a compaction in the state
	// kept the newest version of each key below the visible sequence
	// number of its time, which the one read now is at or above.
	s := d.acquire()
	defer d.release(s)
	seq := base.SeqNum(d.visibleSeq.Load()) + 1
	return d.get(s, key, seq)
}

// get reads key as of seq from the sources of s, newest first. When the
// differential-file filter s carries says key has no version above the
// base, that is the base level alone.
func (d *DB) get(s *readState, key []byte, seq base.SeqNum) ([]byte, error) {
	hash := filterblock.Hash(key) // for every filter: the differential's, the memtables', the tables'
	consulted, unchanged := d.askDiff(s, key, hash, seq)
	if unchanged {
		return d.getFromLevels(s, key, hash, seq, s.diffBase, 0, false)
	}
	var tomb base.SeqNum
	for i := len(s.imm); i >= 0; i-- {
		mt := s.mem.mt
		if i < len(s.imm) {
			mt = s.imm[i].mt
		}
		v, ik, ok := mt.GetHash(key, hash, seq)
		tomb = max(tomb, mt.RangeDelCover(key, seq))
		if ok {
			if ik.Kind() == base.KindSet {
				v = append(make([]byte, 0, len(v)), v...)
			}
			return found(v, ik.Trailer, tomb)
		}
		if tomb != 0 {
			return nil, ErrNotFound
		}
	}
	return d.getFromLevels(s, key, hash, seq, 0, tomb, consulted)
}

// askDiff asks the differential-file filter of s about a point read of key
// (of the given hash) as of seq, when the read should (consultDiff), and
// counts its answer: consulted says it was asked, unchanged that it ruled
// out a version above the base, so that the base level alone holds the
// key's answer.
func (d *DB) askDiff(s *readState, key []byte, hash uint64, seq base.SeqNum) (consulted, unchanged bool) {
	readsOff := d.mu.diff.readsOff.Load()
	if s.diffIdle && !readsOff {
		d.noteIdleGets(1)
	}
	if s.diff == nil || readsOff || !d.mu.diff.consultDiff(hash) {
		return false, false
	}
	unchanged = !s.diffMaybe(key, hash, seq)
	d.mu.diff.noteProbe(unchanged, s.diffSaves)
	return true, unchanged
}

// getFromLevels reads key from the levels of s from level from down, one
// candidate table per level but level 0's; maybe says the differential-file
// filter answered maybe, to count it false if nothing above the base has
// the key. tomb is the newest range deletion seen so far covering key: a
// point entry older than it is deleted, and once one is seen, older
// sources can only hold older entries
// (a table's key range includes its range deletions, so the LSM order holds
// for them as for points).
func (d *DB) getFromLevels(s *readState, key []byte, hash uint64, seq base.SeqNum, from int, tomb base.SeqNum, maybe bool) ([]byte, error) {
	for l := from; l < manifest.NumLevels; l++ {
		if maybe && l == s.diffBase {
			// The filter said maybe, and nothing above the base had
			// the key.
			d.mu.diff.falseMaybes.Add(1)
		}
		for f := range s.version.Containing(l, key) {
			v, tr, ok, t, err := d.getFromTable(f, key, hash, seq)
			if err != nil {
				return nil, err
			}
			tomb = max(tomb, t)
			if ok {
				return found(v, tr, tomb)
			}
			if tomb != 0 {
				return nil, ErrNotFound
			}
		}
	}
	return nil, ErrNotFound
}

// found turns the newest visible point entry (its value, already the
// caller's copy, and its trailer) into Get's answer, given the newest range
// deletion covering it.
func found(v []byte, tr base.Trailer, tomb base.SeqNum) ([]byte, error) {
	if tomb > tr.SeqNum() {
		return nil, ErrNotFound
	}
	switch tr.Kind() {
	case base.KindSet:
		return v, nil
	case base.KindDelete:
		return nil, ErrNotFound
	}
	return nil, base.CorruptionErrorf("bloomkv: entry of unknown kind %v", tr.Kind())
}

// getFromTable looks key up in a table whose range holds it: its range
// deletions, then its filter, then its blocks, counting the filter's
// answers. tomb is the newest range deletion of the table covering key; v is
// a copy of a set's value.
func (d *DB) getFromTable(f *manifest.FileMetadata, key []byte, hash uint64, seq base.SeqNum) (v []byte, tr base.Trailer, ok bool, tomb base.SeqNum, err error) {
	r, err := d.tables.get(f)
	if err != nil {
		return nil, 0, false, 0, err
	}
	tomb = rangedel.Cover(r.RangeDeletions(), key, seq)
	// Asked once: an ingested table's filter may load meanwhile.
	filtered := r.HasFilter()
	if filtered {
		d.metrics.filterProbes.Add(1)
		ok, err := r.MayContainHash(hash)
		if err != nil {
			return nil, 0, false, 0, err
		}
		if !ok {
			d.metrics.filterNegatives.Add(1)
			return nil, 0, false, tomb, nil
		}
	}
	v, tr, ok, err = r.LookupCopy(key, seq)
	if err == nil && !ok && filtered {
		d.metrics.filterFalsePositives.Add(1)
	}
	return v, tr, ok, tomb, err
}
