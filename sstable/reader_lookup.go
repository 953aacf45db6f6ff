package sstable

// Point lookups in a table: LookupCopy, the seek to a user key's newest
// version, and the data block it reads, cached only when the cache admits
// it.

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
	if !it.seekLookup(it.seek) {
		return false
	}
	k := it.Key().UserKey
	// Distinct keys of a foreign order may compare equal (CockroachDB's
	// timestamps with and without a zero logical time).
	return bytes.Equal(k, userKey) || (it.t.order != orderBytewise && it.t.order.compare(k, userKey) == 0)
}

// seekLookup is seekGEEncoded for a point lookup: the data block the seek
// lands in comes through lookupBlock. When enc lies past that block's
// entries (below its separator, above its last key: an absent key, or a
// columnar table's versions continuing in the next blocks), the seek is
// made again as an iterator's, which moves on to the next blocks.
func (it *Iter) seekLookup(enc []byte) bool {
	if it.err != nil {
		return false
	}
	ok := it.index.seekGE(enc) && it.lookupBlock() && it.data.seekGE(enc)
	if !ok && it.index.valid() && it.err == nil && it.data.err == nil {
		return it.seekGEEncoded(enc)
	}
	return it.settle(ok)
}

// lookupBlock loads the data block the index iterator points at for a point
// lookup. A block in bloomkv's cache is used there; a block missing from it
// is cached only if the cache admits it (cache.Cache.Admit: a block missed
// again soon), and otherwise read, verified and decoded into the iterator's
// own buffers, where it lasts until the iterator's next block. Without
// bloomkv's cache, or for an ingested table whose blocks are checked as read,
// it is loadBlock.
func (it *Iter) lookupBlock() bool {
	t := it.t
	bh, n := decodeHandle(it.index.cur().value)
	if n == 0 || t.cc == nil || t.opts.IngestChecks != nil {
		return it.loadBlock() // which reports a bad handle
	}
	it.release()
	b, err := it.lookupBytes(bh)
	if err == nil {
		err = it.data.init(b, false, t.where("data", bh))
	}
	if err != nil {
		it.err = err
		return false
	}
	it.data.useOrder(t.order)
	return true
}

// lookupBytes returns the data block at bh for lookupBlock: from the cache,
// held by it.h, or read into the iterator's buffers.
func (it *Iter) lookupBytes(bh BlockHandle) ([]byte, error) {
	t := it.t
	if h, ok := t.cc.GetRef(t.opts.FileNum, bh.Offset); ok {
		it.h = h
		return h.Value(), nil
	}
	if !t.cc.Admit(t.opts.FileNum, bh.Offset) {
		return t.readBlockInto(bh, "data", &it.bufs)
	}
	var err error
	it.h, err = t.cc.LoadRef(t.opts.FileNum, bh.Offset, func() ([]byte, error) {
		return t.readBlockAlloc(bh, "data", t.cc.Alloc)
	})
	return it.h.Value(), err
}

// ErrIterClosed is returned by an iterator used after Close.
var ErrIterClosed = errors.New("sstable: iterator is closed")
