package sstable

// Point lookups in a table: LookupCopy and the seek to a user key's newest
// version.

import (
	"bytes"
	"errors"

	"github.com/bloomkv/bloomkv/internal/base"
)

// LookupCopy returns the newest point entry for userKey written before seq (a
// read at seq sees sequence numbers below it): its trailer (sequence number
// and kind: KindSet or KindDelete in tables bloomkv writes; a table from
// another engine may hold other kinds) and, for a set, its value copied into
// new memory, as the block it lay in may be reused once the call returns (a
// value held in a blob file as its reference: see Iter.IsBlobReference).
// found is false when the table holds no such entry. It does not consult the
// filter: the caller probes it first (MayContainHash) and counts its answers.
// Range deletions are the caller's to apply (RangeDeletions).
func (t *Reader) LookupCopy(userKey []byte, seq base.SeqNum) (value []byte, trailer base.Trailer, found bool, err error) {
	it := t.getIter()
	if it.seekUserKey(userKey, seq) {
		trailer, found = it.Key().Trailer, true
		if trailer.Kind() == base.KindSet {
			v := it.Value()
			value = make([]byte, len(v))
			copy(value, v)
		}
	}
	err = it.err
	it.release()
	t.iters.Put(it)
	return value, trailer, found, err
}

// getIter returns an iterator from the pool for a point lookup. It holds
// counted references to blocks of bloomkv's cache.
func (t *Reader) getIter() *Iter {
	it, _ := t.iters.Get().(*Iter)
	if it == nil {
		it = &Iter{}
	}
	it.reset(t, false)
	it.counted = t.cc != nil
	return it
}

// seekUserKey positions it at the newest entry for userKey written before seq,
// reporting whether there is one.
func (it *Iter) seekUserKey(userKey []byte, seq base.SeqNum) bool {
	if seq == 0 || seq <= it.override {
		return false // a read at seq sees no key of the table
	}
	seq = min(seq, base.SeqNumMax+1) // above it every entry is visible
	kind := base.KindMax
	if it.t.obsoleteBits {
		kind |= obsoleteBit // first among the keys at seq-1 with Pebble's bit too
	}
	it.seek = base.MakeInternalKey(userKey, seq-1, kind).Append(it.seek[:0])
	if !it.seekGEEncoded(it.seek) {
		return false
	}
	k := it.Key().UserKey
	// Distinct keys of a foreign order may compare equal (CockroachDB's
	// timestamps with and without a zero logical time).
	return bytes.Equal(k, userKey) || (it.t.order != orderBytewise && it.t.order.compare(k, userKey) == 0)
}

// ErrIterClosed is returned by an iterator used after Close.
var ErrIterClosed = errors.New("sstable: iterator is closed")
