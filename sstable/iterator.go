package sstable

import (
	"encoding/binary"
	"fmt"

	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/cache"
)

// Iter iterates over a table's point entries in internal-key order: the index
// block picks the data block, and a block iterator walks it. Range deletions
// are not among its entries (Reader.RangeDeletions). Keys and values are
// valid until the next move. An Iter is not safe for concurrent use; a
// Reader can serve many.
type Iter struct {
	t     *Reader
	index indexIter
	data  blockIter
	valid bool
	err   error
	seek  []byte // scratch for encoded seek keys
	// reuse: without a cache, read data blocks into bufs, which lasts only
	// until the next block. Iterators from NewIter reuse; point lookups
	// (LookupCopy) do not.
	reuse bool
	bufs  blockBufs
	// bypassCache: read data blocks straight from the file into bufs,
	// neither looking them up in the cache nor adding them.
	bypassCache bool
	// counted: hold the current data block by a counted reference to
	// bloomkv's cache (h), released on the next block or Close, so that
	// the block's memory can be reused afterwards.
	counted bool
	h       cache.Handle
	// ra reads ahead for counted iterators walking blocks in file order.
	ra readahead
	// override, when not 0, replaces the sequence number of every key
	// (ReaderOptions.SeqNumOverride).
	override base.SeqNum
	// plain: keys are returned as stored (no override, no obsolete bits).
	plain bool
	// chk is scratch memory for ReaderOptions.IngestChecks, made on first
	// use.
	chk *ingestScratch
}

// NewIter returns an iterator over the table, positioned nowhere.
func (t *Reader) NewIter() *Iter {
	it := &Iter{}
	t.ResetIter(it)
	return it
}

// ResetIter readies it, an iterator NewIter returned (open or closed), to
// iterate over t as t.NewIter's would, keeping its buffers: a caller moving
// from table to table needs no new iterator for each.
func (t *Reader) ResetIter(it *Iter) {
	it.reset(t, true)
	it.counted = t.cc != nil
}

// NewCompactionIter returns an iterator for one pass over the whole table,
// as a compaction makes: it reads data blocks from the file into buffers of
// its own and leaves the block cache to the blocks reads want.
func (t *Reader) NewCompactionIter() *Iter {
	it := t.NewIter()
	it.bypassCache = true
	// The pass reads every data block in file order: read ahead from the
	// first, in the largest reads.
	it.ra.seq, it.ra.size, it.ra.next = raStart, raMax, 0
	return it
}

// reset readies it for t, keeping its buffers; it holds no block and counts
// no references until told.
func (it *Iter) reset(t *Reader, reuse bool) {
	it.release()
	it.ra.reset()
	it.t, it.valid, it.err, it.reuse, it.bypassCache, it.counted = t, false, nil, reuse, false, false
	it.override = t.opts.SeqNumOverride
	it.plain = it.override == 0 && !t.obsoleteBits
	it.data.err, it.data.valid = nil, false
	if err := it.index.init(t, reuse); err != nil {
		it.err = err // NewReader checked the index; unreachable unless it changed
	}
}

// iterBlock returns the block at bh: through the cache, or read into an
// iterator's buffers when it may reuse them.
// A data block read from the file is checked by chk, when not nil
// (IngestChecks), before it is returned or cached.
func (t *Reader) iterBlock(bh BlockHandle, kind string, reuse bool, bufs *blockBufs, chk *Iter) ([]byte, error) {
	if t.opts.Cache == nil && reuse {
		b, err := t.readBlockInto(bh, kind, bufs)
		if err == nil && chk != nil {
			err = chk.checkIngested(bh, b)
		}
		return b, err
	}
	return t.cachedBlock(bh, kind, chk)
}

// loadBlock loads the data block the index iterator points at.
func (it *Iter) loadBlock() bool { return it.loadBlockAfter(false, nil) }

// loadBlockAfter is loadBlock; after says the block follows the one held,
// for a walk forward, whose block the cache can find without a lookup
// (cache.Handle.Follow), as it can through hint when not nil (the index
// entry's, cache.GetRefHinted).
func (it *Iter) loadBlockAfter(after bool, hint *cache.Hint) bool {
	cur := it.index.cur()
	bh, n := decodeHandle(cur.value)
	if n == 0 {
		it.err = cur.corrupt(cur.offset, fmt.Sprintf("bad block handle %x", cur.value))
		return false
	}
	var prev cache.Handle // held until the next block is
	if after {
		prev, it.h = it.h, cache.Handle{}
	}
	it.release()
	var b []byte
	var err error
	var chk *Iter // checks the block as read, for IngestChecks
	if it.t.opts.IngestChecks != nil {
		chk = it
	}
	switch {
	case it.bypassCache:
		// A failed read-ahead is the block's error: a compaction does not
		// retry a read the file system failed.
		it.ra.saw(bh)
		var raw []byte
		if raw, err = it.ra.read(it.t, bh); err != nil {
			err = fmt.Errorf("data block %s: %w", bh, err)
		} else if raw != nil {
			b, err = it.t.checkDecode(bh, "data", raw, &it.bufs, nil)
		} else {
			b, err = it.t.readBlockInto(bh, "data", &it.bufs)
		}
		if err == nil && chk != nil {
			err = chk.checkIngested(bh, b)
		}
	case it.counted:
		b, it.h, err = it.t.countedBlock(bh, &it.ra, chk, it.reuse, prev, hint)
	default:
		b, err = it.t.iterBlock(bh, "data", it.reuse, &it.bufs, chk)
	}
	prev.Release()
	if err != nil {
		it.err = err
		return false
	}
	if it.counted {
		err = it.data.initCached(b, it.t.where("data", bh))
	} else {
		err = it.data.init(b, false, it.t.where("data", bh))
	}
	if err != nil {
		it.err = err
		return false
	}
	it.data.useOrder(it.t.order)
	return true
}

// release drops the reference to the current data block, if any; the data
// iterator must not be used until the next loadBlock.
func (it *Iter) release() {
	it.h.Release()
	it.h = cache.Handle{}
	it.data.data, it.data.value, it.data.valid = nil, nil, false
}

// settle records the state after a move and checks the block iterators'
// errors.
func (it *Iter) settle(ok bool) bool {
	if it.err == nil {
		if it.data.err != nil {
			it.err = it.data.err
		} else if err := it.index.error(); err != nil {
			it.err = err
		}
	}
	if it.err != nil {
		ok = false
	}
	if ok {
		if _, decoded := base.DecodeInternalKey(it.data.key); !decoded {
			it.err = it.data.corrupt(it.data.offset, fmt.Sprintf("key %x is shorter than a trailer", it.data.key))
			ok = false
		}
	}
	it.valid = ok
	return ok
}

// skipForward moves to the first entry of the following non-empty blocks when
// the data iterator is exhausted.
func (it *Iter) skipForward(ok bool) bool {
	for !ok && it.err == nil && it.data.err == nil {
		if !it.index.next() || !it.loadBlockAfter(true, nil) {
			return false
		}
		ok = it.data.first()
	}
	return ok
}

// skipBackward moves to the last entry of the preceding non-empty blocks.
func (it *Iter) skipBackward(ok bool) bool {
	for !ok && it.err == nil && it.data.err == nil {
		if !it.index.prev() || !it.loadBlock() {
			return false
		}
		ok = it.data.last()
	}
	return ok
}

// First moves to the first entry.
func (it *Iter) First() bool {
	if it.err != nil {
		return false
	}
	ok := it.index.first() && it.loadBlock() && it.data.first()
	return it.settle(it.skipForward(ok))
}

// Last moves to the last entry.
func (it *Iter) Last() bool {
	if it.err != nil {
		return false
	}
	ok := it.index.last() && it.loadBlock() && it.data.last()
	return it.settle(it.skipBackward(ok))
}

// Next moves to the next entry.
func (it *Iter) Next() bool {
	if it.err != nil || !it.valid {
		return false
	}
	ok := it.data.next()
	if ok && len(it.data.key) >= base.TrailerLen {
		// Within the block: no error can have arisen (the data iterator
		// decoded the entry, the index did not move), and the key holds a
		// trailer.
		return true
	}
	return it.settle(it.skipForward(ok))
}

// NextKey moves to the next entry, as Next does, and returns its key, as
// Key does; ok is false where Next returns false.
func (it *Iter) NextKey() (k base.InternalKey, ok bool) {
	if d := &it.data; d.tab != nil && d.valid && it.valid && it.plain && it.err == nil {
		if d.flatAt(d.i + 1) {
			return flatInternalKey(d.key), true
		}
	}
	if !it.Next() {
		return base.InternalKey{}, false
	}
	return it.Key(), true
}

// BlockRest reports, in a data block cached flat, the entries after the
// current one, which the next Nexts reach in order without leaving the
// block, so that a merge that finds some of them below every other
// source's key can step through those without comparing (RestKey). It is 0
// in a block cached as stored, at a block's last entry, and where the
// iterator rewrites keys (ReaderOptions.SeqNumOverride, obsolete bits).
func (it *Iter) BlockRest() int {
	d := &it.data
	if d.tab == nil || !d.valid || !it.valid || !it.plain {
		return 0
	}
	return d.n - 1 - d.i
}

// AtBlockStart reports whether the iterator is at the first entry of a data
// block cached flat.
func (it *Iter) AtBlockStart() bool {
	d := &it.data
	return d.tab != nil && d.valid && it.valid && d.i == 0
}

// RestKey returns the key of the j-th entry after the current one, for
// 1 ≤ j ≤ BlockRest(); it is valid while the iterator stays in the block.
func (it *Iter) RestKey(j int) InternalKey {
	return flatInternalKey(it.data.flatKey(it.data.i + j))
}

// flatInternalKey decodes k, a key of a flat block, which always holds a
// trailer (flattenBlock), without the checks base.DecodeInternalKey makes.
func flatInternalKey(k []byte) InternalKey {
	n := len(k) - base.TrailerLen
	return InternalKey{UserKey: k[:n:n], Trailer: base.Trailer(binary.LittleEndian.Uint64(k[n:]))}
}

// NextKeepsKey reports whether the next Next stays within the data block of
// the current entry, whose Key then stays valid across it: it holds the
// block, and keys alias it, only in a block cached flat.
func (it *Iter) NextKeepsKey() bool {
	d := &it.data
	return d.tab != nil && d.valid && it.valid && it.counted && d.i+1 < d.n
}

// Prev moves to the previous entry.
func (it *Iter) Prev() bool {
	if it.err != nil || !it.valid {
		return false
	}
	return it.settle(it.skipBackward(it.data.prev()))
}

// SeekGE moves to the first entry whose user key is ≥ userKey.
func (it *Iter) SeekGE(userKey []byte) bool {
	it.seek = base.MakeInternalKey(userKey, base.SeqNumMax, base.KindMax).Append(it.seek[:0])
	return it.seekGEEncoded(it.seek)
}

// SeekGEInternal moves to the first entry whose internal key is ≥ key.
func (it *Iter) SeekGEInternal(key base.InternalKey) bool {
	if it.override != 0 {
		// The stored numbers are not the ones returned: seek to the
		// user key, then past its entries below key (as returned).
		ok := it.SeekGE(key.UserKey)
		for ok && it.t.order.compareInternal(it.Key(), key) < 0 {
			ok = it.Next()
		}
		return ok
	}
	it.seek = key.Append(it.seek[:0])
	return it.seekGEEncoded(it.seek)
}

func (it *Iter) seekGEEncoded(enc []byte) bool {
	if it.err != nil {
		return false
	}
	ok := it.seekIndexed(enc) && it.data.seekGE(enc)
	if !ok && it.index.valid() && it.err == nil && it.data.err == nil {
		// Every key of this block is below enc; the answer starts the next.
		ok = it.skipForward(false)
		// Unless the table is columnar: its separators are user keys, and
		// the versions of the separator's user key below enc may continue
		// in the next blocks.
		for ok && it.t.columnar && it.data.compare(it.data.key, enc) < 0 {
			ok = it.skipForward(it.data.seekGE(enc))
		}
	}
	return it.settle(ok)
}

// seekIndexed positions the index at the first data block whose separator
// is ≥ enc and loads that block. Through bloomkv's cache, in a table whose
// index has windows (indexWindows), the windows find the entry and its
// hint the block.
func (it *Iter) seekIndexed(enc []byte) bool {
	t := it.t
	if w := t.windows; w != nil && t.cc != nil && it.counted && !it.index.twoLevel && t.opts.IngestChecks == nil && len(enc) >= base.TrailerLen {
		if i, ok := w.seek(&it.index.top, enc); ok && i < w.entries {
			return it.index.top.seekRestart(i) && it.loadBlockAfter(false, &w.hints[i])
		}
		// Past the last separator, or a damaged index: the index's own
		// seek says which.
	}
	return it.index.seekGE(enc) && it.loadBlock()
}

// SeekLT moves to the last entry whose user key is < userKey.
func (it *Iter) SeekLT(userKey []byte) bool {
	if it.err != nil {
		return false
	}
	enc := base.MakeInternalKey(userKey, base.SeqNumMax, base.KindMax).Append(it.seek[:0])
	it.seek = enc
	if !it.index.seekGE(enc) {
		if it.index.error() != nil {
			return it.settle(false)
		}
		return it.Last() // every block ends below enc
	}
	ok := it.loadBlock() && it.data.seekLT(enc)
	return it.settle(it.skipBackward(ok))
}

// Valid reports whether the iterator is at an entry.
func (it *Iter) Valid() bool { return it.valid }

// Key returns the current entry's internal key, with the reader's
// sequence-number override, if any.
func (it *Iter) Key() base.InternalKey {
	k, _ := base.DecodeInternalKey(it.data.key)
	if it.plain {
		return k
	}
	if it.t.obsoleteBits {
		k = it.t.visibleKey(k)
	}
	if it.override != 0 {
		k.Trailer = base.MakeTrailer(it.override, k.Kind())
	}
	return k
}

// Value returns the current entry's value; it aliases a block and must not be
// modified. A value a Pebblev6+ table holds in a blob file is returned as
// the reference the table stores (see IsBlobReference).
func (it *Iter) Value() []byte {
	if it.t.valuePrefix {
		return it.iterValue()
	}
	return it.data.value
}

// Error returns the error that stopped the iterator, if any.
func (it *Iter) Error() error { return it.err }

// Close releases the iterator and returns its error.
func (it *Iter) Close() error {
	err := it.err
	it.release()
	it.ra.release()
	it.valid = false
	it.err = ErrIterClosed
	return err
}

// indexIter walks a table's index: one block of data-block handles, or, for a
// two-level index, a top-level block of partition handles whose partitions
// hold the data-block handles.
type indexIter struct {
	t        *Reader
	top      blockIter
	twoLevel bool
	part     blockIter
	err      error
	reuse    bool
	bufs     blockBufs // for partitions read without a cache
}

func (x *indexIter) init(t *Reader, reuse bool) error {
	x.t, x.err, x.reuse = t, nil, reuse
	x.twoLevel = t.props.IndexType == indexTypeTwoLevel
	x.part.valid, x.part.err = false, nil
	index, err := t.indexBlock()
	if err != nil {
		x.err = err
		return err
	}
	err = x.top.init(index, false, t.where("index", t.footer.index))
	x.top.useOrder(t.order)
	return err
}

// cur returns the block iterator whose value is the current data-block
// handle.
func (x *indexIter) cur() *blockIter {
	if x.twoLevel {
		return &x.part
	}
	return &x.top
}

func (x *indexIter) valid() bool { return x.top.valid && x.cur().valid }

func (x *indexIter) error() error {
	if x.err != nil {
		return x.err
	}
	if x.top.err != nil {
		return x.top.err
	}
	return x.part.err
}

// loadPart loads the partition the top-level iterator points at.
func (x *indexIter) loadPart() bool {
	bh, n := decodeHandle(x.top.value)
	if n == 0 {
		x.err = x.top.corrupt(x.top.offset, fmt.Sprintf("bad index partition handle %x", x.top.value))
		return false
	}
	var b []byte
	var err error
	if x.t.parts != nil {
		b, err = x.t.partition(bh)
	} else {
		b, err = x.t.iterBlock(bh, "index partition", x.reuse, &x.bufs, nil)
	}
	if err == nil {
		err = x.part.init(b, false, x.t.where("index partition", bh))
		x.part.useOrder(x.t.order)
	}
	if err != nil {
		x.err = err
		return false
	}
	return true
}

// forward moves to the first entry of the following partitions while the
// current one is exhausted.
func (x *indexIter) forward(ok bool) bool {
	for !ok && x.error() == nil {
		if !x.top.next() || !x.loadPart() {
			return false
		}
		ok = x.part.first()
	}
	return ok
}

// backward moves to the last entry of the preceding partitions while the
// current one is exhausted.
func (x *indexIter) backward(ok bool) bool {
	for !ok && x.error() == nil {
		if !x.top.prev() || !x.loadPart() {
			return false
		}
		ok = x.part.last()
	}
	return ok
}

func (x *indexIter) first() bool {
	if !x.twoLevel {
		return x.top.first()
	}
	return x.forward(x.top.first() && x.loadPart() && x.part.first())
}

func (x *indexIter) last() bool {
	if !x.twoLevel {
		return x.top.last()
	}
	return x.backward(x.top.last() && x.loadPart() && x.part.last())
}

func (x *indexIter) next() bool {
	if !x.twoLevel {
		return x.top.next()
	}
	return x.forward(x.part.next())
}

func (x *indexIter) prev() bool {
	if !x.twoLevel {
		return x.top.prev()
	}
	return x.backward(x.part.prev())
}

// seekGE moves to the first data-block handle whose separator is ≥ key.
func (x *indexIter) seekGE(key []byte) bool {
	if !x.twoLevel {
		return x.top.seekGE(key)
	}
	if !x.top.seekGE(key) || !x.loadPart() {
		return false
	}
	return x.forward(x.part.seekGE(key))
}
