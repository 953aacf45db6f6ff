package bloomkv

// Snapshots: a view of the store fixed at a sequence number.

import (
	"slices"
	"sync/atomic"

	"github.com/bloomkv/bloomkv/internal/base"
)

// Snapshot is a consistent point-in-time view of the store: reads through it
// see the writes made before NewSnapshot and none made after. Compactions
// keep every version an open snapshot can see, so Close it when done.
type Snapshot struct {
	d      *DB
	seq    base.SeqNum // entries below it are visible
	closed atomic.Bool
}

// NewSnapshot returns a view of the store as it is now.
func (d *DB) NewSnapshot() (*Snapshot, error) {
	if d.closedFlag.Load() {
		return nil, ErrClosed
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	s := &Snapshot{d: d, seq: base.SeqNum(d.visibleSeq.Load()) + 1}
	d.mu.snapshots = append(d.mu.snapshots, s.seq) // visibleSeq only grows: still sorted
	d.metrics.snapshots.Add(1)
	return s, nil
}

// Get returns a copy of the value key held when the snapshot was taken, or
// ErrNotFound.
func (s *Snapshot) Get(key []byte) ([]byte, error) {
	if s.closed.Load() || s.d.closedFlag.Load() {
		return nil, ErrClosed
	}
	if err := checkKey(key); err != nil {
		return nil, err
	}
	st := s.d.acquire()
	defer s.d.release(st)
	return s.d.get(st, key, s.seq)
}

// NewIter returns an iterator over the snapshot's view. A nil o means no
// bounds.
func (s *Snapshot) NewIter(o *IterOptions) (*Iterator, error) {
	if s.closed.Load() || s.d.closedFlag.Load() {
		return nil, ErrClosed
	}
	return s.d.newIter(s.d.acquire(), s.seq, o), nil
}

// Close releases the snapshot: compactions may drop what only it could see.
// Later calls return ErrClosed.
func (s *Snapshot) Close() error {
	if s.closed.Swap(true) {
		return ErrClosed
	}
	d := s.d
	d.mu.Lock()
	defer d.mu.Unlock()
	if i := slices.Index(d.mu.snapshots, s.seq); i >= 0 {
		d.mu.snapshots = slices.Delete(d.mu.snapshots, i, i+1)
		d.metrics.snapshots.Add(-1)
		if i == 0 {
			// Deletions it alone kept from every snapshot may now go:
			// the compaction loop looks for an elision-only compaction.
			d.mu.cond.Broadcast()
		}
	}
	return nil
}
