package sstable

// Point lookups in a table: LookupCopy, the seek to a user key's newest
// version, and the data block it reads, cached only when the cache admits
// it.

import (
	"bytes"
	"errors"

	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/cache"
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
	cur := -1
	if it.seekUserKey(userKey, seq, &cur) {
		value, trailer, found = it.entryCopy()
	}
	err = it.err
	t.putIter(it)
	return value, trailer, found, err
}

// LookupResult is one key's answer from LookupCopyAll, as LookupCopy
// returns it.
type LookupResult struct {
	Value   []byte
	Trailer base.Trailer
	Found   bool
}

// LookupCopyAll is LookupCopy for each of userKeys, which are in ascending
// order (equal keys allowed), setting out[i] for userKeys[i]. Keys that fall
// in one data block share one read of it. On an error, the keys from the one
// that met it on are unanswered: n is how many were answered.
func (t *Reader) LookupCopyAll(userKeys [][]byte, seq base.SeqNum, out []LookupResult) (n int, err error) {
	it := t.getIter()
	cur := -1 // the index entry whose block it.data holds, or -1
	for i, k := range userKeys {
		var r LookupResult
		if it.seekUserKey(k, seq, &cur) {
			r.Value, r.Trailer, r.Found = it.entryCopy()
		}
		if it.err != nil {
			break
		}
		out[i] = r
		n++
	}
	err = it.err
	t.putIter(it)
	return n, err
}

// entryCopy returns the current entry's trailer and, for a set, a copy of
// its value.
func (it *Iter) entryCopy() (value []byte, trailer base.Trailer, found bool) {
	trailer = it.Key().Trailer
	if trailer.Kind() == base.KindSet {
		v := it.Value()
		value = make([]byte, len(v))
		copy(value, v)
	}
	return value, trailer, true
}

// putIter returns a lookup's iterator to the pool.
func (t *Reader) putIter(it *Iter) {
	it.release()
	// The pool keeps no buffer of a large block a lookup read uncached.
	if cap(it.bufs.raw) > maxPooledRaw || cap(it.bufs.dec) > maxPooledRaw {
		it.bufs = blockBufs{}
	}
	t.iters.Put(it)
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
// reporting whether there is one. *cur is the index entry whose data block
// it.data holds from the lookup before, or -1 (seekLookup).
func (it *Iter) seekUserKey(userKey []byte, seq base.SeqNum, cur *int) bool {
	if seq == 0 || seq <= it.override {
		return false // a read at seq sees no key of the table
	}
	seq = min(seq, base.SeqNumMax+1) // above it every entry is visible
	kind := base.KindMax
	if it.t.obsoleteBits {
		kind |= obsoleteBit // first among the keys at seq-1 with Pebble's bit too
	}
	it.seek = base.MakeInternalKey(userKey, seq-1, kind).Append(it.seek[:0])
	if !it.seekLookup(it.seek, cur) {
		return false
	}
	k := it.Key().UserKey
	// Distinct keys of a foreign order may compare equal (CockroachDB's
	// timestamps with and without a zero logical time).
	return bytes.Equal(k, userKey) || (it.t.order != orderBytewise && it.t.order.compare(k, userKey) == 0)
}

// seekLookup is seekGEEncoded for a point lookup: the data block the seek
// lands in comes through lookupBlock, found by the index's windows when the
// reader has them. When enc lies past that block's entries (below its
// separator, above its last key: an absent key, or a columnar table's
// versions continuing in the next blocks), the seek is made again as an
// iterator's, which moves on to the next blocks. *cur is the index entry
// whose block it.data holds from the lookup before (-1: none), which is
// used again when enc falls in it; seekLookup sets it for the next.
func (it *Iter) seekLookup(enc []byte, cur *int) bool {
	if it.err != nil {
		return false
	}
	t := it.t
	if w := t.windows; w != nil && t.cc != nil && t.opts.IngestChecks == nil && len(enc) >= base.TrailerLen {
		i, ok := w.seek(&it.index.top, enc)
		if !ok {
			*cur = -1
			return it.seekGEEncoded(enc) // which reports the damage
		}
		if i == w.entries {
			return it.settle(false)
		}
		if i != *cur {
			*cur = -1
			if !it.lookupBlock(w.handles[i], &w.hints[i]) {
				return it.settle(false)
			}
			*cur = i
		}
		ok = it.data.seekGE(enc)
		if !ok && i+1 < w.entries && it.err == nil && it.data.err == nil {
			*cur = -1
			return it.seekGEEncoded(enc)
		}
		return it.settle(ok)
	}
	*cur = -1
	ok := it.index.seekGE(enc) && it.lookupIndexed() && it.data.seekGE(enc)
	if !ok && it.index.valid() && it.err == nil && it.data.err == nil {
		return it.seekGEEncoded(enc)
	}
	return it.settle(ok)
}

// lookupIndexed loads the data block the index iterator points at for a
// point lookup, as lookupBlock does. Without bloomkv's cache, or for an
// ingested table whose blocks are checked as read, it is loadBlock.
func (it *Iter) lookupIndexed() bool {
	bh, n := decodeHandle(it.index.cur().value)
	if n == 0 || it.t.cc == nil || it.t.opts.IngestChecks != nil {
		return it.loadBlock() // which reports a bad handle
	}
	return it.lookupBlock(bh, nil)
}

// lookupBlock loads the data block at bh for a point lookup. A block in
// bloomkv's cache is used there, found through hint when not nil (the
// block's index entry's); a block missing from it is cached only if the
// cache admits it (cache.Cache.Admit: a block missed again soon), and
// otherwise read, verified and decoded into the iterator's own buffers,
// where it lasts until the iterator's next block.
func (it *Iter) lookupBlock(bh BlockHandle, hint *cache.Hint) bool {
	t := it.t
	it.release()
	b, err := it.lookupBytes(bh, hint)
	if err == nil {
		// The cache may hold the block flat, as an iterator left it.
		err = it.data.initCached(b, t.where("data", bh))
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
func (it *Iter) lookupBytes(bh BlockHandle, hint *cache.Hint) ([]byte, error) {
	t := it.t
	if h, ok := t.cc.GetRefHinted(hint, t.opts.FileNum, bh.Offset); ok {
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
	if err == nil {
		hint.Note(it.h)
	}
	return it.h.Value(), err
}

// ErrIterClosed is returned by an iterator used after Close.
var ErrIterClosed = errors.New("sstable: iterator is closed")

// indexWindows speeds up a point lookup's seek in a table's pinned
// single-level index whose every entry is a restart point (no key shares a
// prefix with the one before, as bloomkv's, Pebble's and RocksDB's indexes
// are written). For each entry but the last (whose separator may be a short
// successor of the table's last key, sharing little with the others), in
// order, window holds the eight bytes of its separator's user key that
// follow the prefix those separators share, big-endian, zero-padded: a
// strictly smaller window means a strictly smaller separator, so the seek
// searches a small array of integers and compares whole keys only among the
// entries whose window equals the key's, and with the last. The entries'
// block handles, decoded, spare the lookup the index block altogether, and
// each entry's cache hint the block cache's lookup of its block.
type indexWindows struct {
	common  []byte        // the user-key prefix the windowed separators share
	window  []uint64      // per index entry but the last
	handles []BlockHandle // per index entry
	hints   []cache.Hint  // per index entry
	entries int           // the index's entries
}

// buildIndexWindows returns the windows of index, a single-level index of a
// table ordered bytewise, or nil when an entry is not a restart point or a
// separator is too short for a trailer (the seek then searches the block).
func (t *Reader) buildIndexWindows(index []byte) *indexWindows {
	var it blockIter
	if it.init(index, false, t.where("index", t.footer.index)) != nil {
		return nil
	}
	var w indexWindows
	n := 0
	for ok := it.first(); ok; ok = it.next() {
		if len(it.key) < base.TrailerLen || it.offset != it.restart(n) {
			return nil
		}
		n++
	}
	if it.err != nil || n == 0 || n != it.numRestarts {
		return nil
	}
	w.entries = n
	m := max(n-1, 1) // the windowed entries
	i := 0
	for ok := it.first(); ok && i < m; ok = it.next() {
		uk := it.key[:len(it.key)-base.TrailerLen]
		if i == 0 {
			w.common = append([]byte(nil), uk...)
		}
		c := 0
		for c < len(w.common) && c < len(uk) && w.common[c] == uk[c] {
			c++
		}
		w.common = w.common[:c]
		i++
	}
	w.window = make([]uint64, 0, m)
	w.handles = make([]BlockHandle, 0, n)
	for ok := it.first(); ok; ok = it.next() {
		bh, k := decodeHandle(it.value)
		if k == 0 || k != len(it.value) {
			return nil // the lookup's seek reports the damage
		}
		w.handles = append(w.handles, bh)
		if len(w.window) < m {
			w.window = append(w.window, base.KeyWindow(it.key[:len(it.key)-base.TrailerLen], len(w.common)))
		}
	}
	if it.err != nil || len(w.handles) != n {
		return nil
	}
	w.common = w.common[:len(w.common):len(w.common)]
	if t.cc != nil { // hints are for bloomkv's cache
		w.hints = make([]cache.Hint, n)
	}
	return &w
}

// bytes is the memory the windows hold.
func (w *indexWindows) bytes() uint64 {
	if w == nil {
		return 0
	}
	return uint64(len(w.common) + 8*len(w.window) + 16*len(w.handles) + 8*len(w.hints))
}

// seek returns the first entry of the index whose separator is ≥ enc (a
// key with a trailer), or w.entries when there is none; top is an iterator
// over the index block, for the separators to compare whole. ok is false if
// one of them is damaged.
func (w *indexWindows) seek(top *blockIter, enc []byte) (i int, ok bool) {
	uk := enc[:len(enc)-base.TrailerLen]
	m, n, c := len(w.window), w.entries, len(w.common)
	// The separators in [lo, hi) are the ones to compare whole: those
	// before are below enc, those after above it.
	var lo, hi int
	switch {
	case len(uk) >= c && bytes.Equal(uk[:c], w.common):
		k := base.KeyWindow(uk, c)
		lo = base.SearchWindows(w.window, 0, m, k)
		hi = base.WindowRunEnd(w.window, lo, k)
		if hi == m {
			hi = n // enc may lie above the windowed separators
		}
	case bytes.Compare(uk, w.common) < 0:
		lo, hi = 0, 0 // below every separator
	default:
		lo, hi = m, n // above every windowed separator
	}
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		rk, ok := top.restartKey(mid)
		if !ok {
			return 0, false
		}
		if top.compare(rk, enc) < 0 {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo, true
}
