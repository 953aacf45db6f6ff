package sstable

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"

	"github.com/bloomkv/bloomkv/internal/base"
)

// IngestChecks are the checks a reader makes of each data block it reads
// from the file (a block found in the cache was checked when it was read)
// of a table written for ingestion, which its owner took without reading it
// whole (ReaderOptions.IngestChecks). Every point entry must be stored at
// sequence number 0, be a set or a deletion, have a user key strictly
// greater than the entry's before it (one entry per user key) and sizes
// within the bounds below; the block's keys must lie past the separator of
// the index entry before the block's and at or before its own, so that the
// order holds across blocks as well. A block that fails is an error
// wrapping ErrCorruption naming the file, the block and the entry's offset,
// and is not cached: every read of it fails alike (a size over the bounds
// wraps TooLarge instead, when set). The reader also checks the index
// those checks rely on: its data-block handles in increasing order, none
// overlapping the next or the blocks that follow the data, its separators
// in increasing order. It checks a one-level index when it opens the
// table, and a two-level index's top level then and each partition as it
// is first read, so that opening a table of a large index reads little.
type IngestChecks struct {
	// MaxKeySize and MaxValueSize bound the length of a user key and of a
	// value as stored (0: no bound).
	MaxKeySize, MaxValueSize int
	// TooLarge is the error that a size over those bounds wraps
	// (ErrCorruption when nil).
	TooLarge error
}

// ingestScratch is an iterator's memory for IngestChecks.
type ingestScratch struct {
	block, index blockIter
	prev         []byte
}

// checkIngested checks b, the data block at bh that the index iterator
// points at, against the reader's IngestChecks.
func (it *Iter) checkIngested(bh BlockHandle, b []byte) error {
	if it.chk == nil {
		it.chk = new(ingestScratch)
	}
	t, s := it.t, it.chk
	lo, err := it.index.prevKey(&s.index)
	if err != nil {
		return err
	}
	hi := it.index.cur().key
	if t.quickIngested(s, b, lo, hi) {
		return nil
	}
	return t.checkIngestedBlock(s, b, t.where("data", bh), lo, hi)
}

// checkIngestedBlock checks the data block b, between the index's
// separators lo (of the block before; nil for the first) and hi (its own),
// entry by entry: sequence numbers 0, sets and deletions, sizes within the
// limits, user keys strictly increasing and within the separators.
func (t *Reader) checkIngestedBlock(s *ingestScratch, b []byte, where blockWhere, lo, hi []byte) error {
	c := t.opts.IngestChecks
	bi := &s.block
	if err := bi.init(b, false, where); err != nil {
		return err
	}
	bi.useOrder(t.order)
	n := 0
	for ok := bi.first(); ok; ok = bi.next() {
		k, decoded := base.DecodeInternalKey(bi.key)
		if !decoded {
			return bi.corrupt(bi.offset, fmt.Sprintf("key %x is shorter than a trailer", bi.key))
		}
		k = t.visibleKey(k)
		switch {
		case k.SeqNum() != 0:
			return bi.corrupt(bi.offset, fmt.Sprintf("key %s has sequence number %d: a table for ingestion holds its keys at 0", k, k.SeqNum()))
		case k.Kind() != base.KindSet && k.Kind() != base.KindDelete:
			return bi.corrupt(bi.offset, fmt.Sprintf("key %s is of kind %v: a table for ingestion holds sets and deletions", k, k.Kind()))
		case c.MaxKeySize > 0 && len(k.UserKey) > c.MaxKeySize:
			return c.tooLarge(bi, fmt.Sprintf("key of %d bytes exceeds the limit of %d", len(k.UserKey), c.MaxKeySize))
		case c.MaxValueSize > 0 && t.storedValueLen(k.Kind(), bi.value) > uint64(c.MaxValueSize):
			return c.tooLarge(bi, fmt.Sprintf("value of %d bytes exceeds the limit of %d", t.storedValueLen(k.Kind(), bi.value), c.MaxValueSize))
		case n == 0 && lo != nil && !t.pastSeparator(bi, k.UserKey, lo):
			return bi.corrupt(bi.offset, fmt.Sprintf("key %s is not past the separator of the block before (%x): the table's keys are out of order or repeat", k, lo))
		case n > 0 && bi.compare(bi.key, s.prev) <= 0:
			return bi.corrupt(bi.offset, fmt.Sprintf("key %s is out of order", k))
		case n > 0 && bytes.Equal(k.UserKey, s.prev[:len(s.prev)-base.TrailerLen]):
			return bi.corrupt(bi.offset, fmt.Sprintf("key %s repeats the previous entry's user key: a table for ingestion holds one entry per key", k))
		}
		s.prev = append(s.prev[:0], bi.key...)
		n++
	}
	if bi.err != nil {
		return bi.err
	}
	if n > 0 && bi.compare(s.prev, hi) > 0 {
		return bi.corrupt(len(bi.data), fmt.Sprintf("last key %x is past the block's separator in the index (%x): the table's keys are out of order", s.prev, hi))
	}
	return nil
}

// quickIngested checks the data block b as checkIngestedBlock does, in one
// pass, for a table whose keys order bytewise and are stored as written (no
// value prefix, no obsolete bit), over entries whose lengths take a byte
// each. It reports whether it did and every entry passed; where it did not,
// checkIngestedBlock checks the block and names any error. One pass with
// no per-entry decoding costs much less than checkIngestedBlock's walk
// (BenchmarkCheckIngested compares them).
func (t *Reader) quickIngested(s *ingestScratch, b, lo, hi []byte) bool {
	c := t.opts.IngestChecks
	if t.order != orderBytewise || t.valuePrefix || t.obsoleteBits || len(b) < 4 || (lo != nil && len(lo) < base.TrailerLen) {
		return false
	}
	nr := uint64(binary.LittleEndian.Uint32(b[len(b)-4:]))
	if nr == 0 || nr*4+4 > uint64(len(b)) { // as blockIter.init refuses
		return false
	}
	data := b[:uint64(len(b))-4-nr*4]
	if binary.LittleEndian.Uint32(b[len(data):]) != 0 {
		return false // the first restart, where the entries begin (checkBlock checks it)
	}
	key := s.prev[:0] // each entry's key in turn, built on the one before
	for off := 0; off < len(data); {
		p := data[off:]
		if len(p) < 3 || (p[0]|p[1]|p[2]) >= 0x80 {
			return false
		}
		shared, unshared, vlen := int(p[0]), int(p[1]), int(p[2])
		// The trailer is in the key's own bytes, and the user key
		// begins with the shared ones (the first entry, a restart, shares
		// nothing).
		if 3+unshared+vlen > len(p) || unshared < base.TrailerLen || shared > len(key)-base.TrailerLen && off > 0 || off == 0 && shared > 0 {
			return false
		}
		u := p[3 : 3+unshared]
		switch base.Trailer(binary.LittleEndian.Uint64(u[unshared-base.TrailerLen:])) {
		case base.MakeTrailer(0, base.KindSet), base.MakeTrailer(0, base.KindDelete):
		default:
			return false
		}
		n := shared + unshared - base.TrailerLen // the user key's length
		if (c.MaxKeySize > 0 && n > c.MaxKeySize) || (c.MaxValueSize > 0 && vlen > c.MaxValueSize) {
			return false
		}
		if off == 0 {
			if lo != nil && bytes.Compare(u[:unshared-base.TrailerLen], lo[:len(lo)-base.TrailerLen]) <= 0 {
				return false
			}
		} else if bytes.Compare(u[:unshared-base.TrailerLen], key[shared:len(key)-base.TrailerLen]) <= 0 {
			return false // past the shared bytes, the user key is not past the one before
		}
		key = append(key[:shared], u...)
		off += 3 + unshared + vlen
	}
	s.prev = key // (its memory, for the next block)
	return len(data) == 0 || base.CompareEncoded(key, hi) <= 0
}

// pastSeparator reports whether userKey, the first of a data block that
// bi reads, lies past lo, the separator of the index entry before: its
// user key beyond lo's, as every writer's separator of two user keys is
// below the second (one key repeated across the boundary fails too).
func (t *Reader) pastSeparator(bi *blockIter, userKey, lo []byte) bool {
	if t.order != orderBytewise || len(lo) < base.TrailerLen {
		return bi.compare(bi.key, lo) > 0
	}
	return bytes.Compare(userKey, lo[:len(lo)-base.TrailerLen]) > 0
}

// storedValueLen returns the length of the value of an entry of kind k
// stored as v: v's own, or, in a table whose values carry Pebble's prefix
// byte, the value's after it, or in the value block its handle names.
func (t *Reader) storedValueLen(k base.Kind, v []byte) uint64 {
	if !t.valuePrefix || k != base.KindSet || len(v) == 0 {
		return uint64(len(v))
	}
	switch v[0] & valueKindMask {
	case 0:
		return uint64(len(v) - 1)
	case valueKindHandle:
		if n, m := binary.Uvarint(v[1:]); m > 0 {
			return n
		}
	}
	return uint64(len(v))
}

// checkIngestIndex checks, for IngestChecks, the index that the data
// blocks' checks rely on: data-block handles in strictly increasing order
// of offset, each block ending before the next begins and before the
// blocks that follow the data (value blocks, index partitions and the
// rest); separators in strictly increasing order. A two-level index's
// partitions, when the reader keeps them (partitions), are checked as each
// is first read (checkPartition); otherwise they are read here, and each
// top-level separator must be at or past its partition's last and before
// the next partition's first.
func (t *Reader) checkIngestIndex() error {
	top, err := t.indexBlock()
	if err != nil {
		return err
	}
	c := &indexCheck{t: t, end: t.dataEnd}
	if len(t.valueBlocks) > 0 {
		c.end = min(c.end, t.valueBlocks[0].Offset)
	}
	topWhere := t.where("index", t.footer.index)
	if t.props.IndexType != indexTypeTwoLevel {
		return c.dataBlock(top, topWhere)
	}
	if t.parts != nil {
		// Its top level passed newPartitions' checks; each partition is
		// checked as it is first read (checkPartition).
		return nil
	}
	partStart := uint64(math.MaxUint64)
	var prevTop []byte
	err = t.walkIndexBlock(top, topWhere, func(off int, key, value []byte) error {
		ph, m := decodeHandle(value)
		if m == 0 {
			return corruptionf("%s: index block %s: offset %d in block: bad index partition handle %x", t.opts.FileName, t.footer.index, off, value)
		}
		partStart = min(partStart, ph.Offset)
		b, err := t.iterBlock(ph, "index partition", false, nil, nil)
		if err != nil {
			return err
		}
		first := c.n
		c.markFirst = true
		if err := c.dataBlock(b, t.where("index partition", ph)); err != nil {
			return err
		}
		switch {
		case c.n > first && t.compareIndexKeys(c.prevSep, key) > 0:
			return corruptionf("%s: index block %s: offset %d in block: separator %x is before its partition's last (%x)", t.opts.FileName, t.footer.index, off, key, c.prevSep)
		case c.n > first && prevTop != nil && t.compareIndexKeys(c.firstSep, prevTop) <= 0:
			return corruptionf("%s: index partition %s: its first separator %x is not past the top-level separator before (%x)", t.opts.FileName, ph, c.firstSep, prevTop)
		}
		prevTop = append(prevTop[:0], key...)
		return nil
	})
	if err != nil {
		return err
	}
	if partStart < c.prevEnd {
		return corruptionf("%s: index partition at offset %d lies among the data blocks (which end at offset %d)", t.opts.FileName, partStart, c.prevEnd)
	}
	return nil
}

// indexCheck is checkIngestIndex's walk over the data-block entries.
type indexCheck struct {
	t                 *Reader
	end               uint64 // the data blocks end by here
	n                 int    // entries seen
	prevEnd           uint64 // where the last entry's block ends
	prevSep, firstSep []byte // the last entry's separator; the first of the current partition's
	firstStart        uint64 // where the first entry's block of the current partition begins
	markFirst         bool   // the next entry is the first of a partition
}

// dataBlock checks the data-block entries of the index block b (the
// index, or a partition of a two-level one) at w, as data does.
func (c *indexCheck) dataBlock(b []byte, w blockWhere) error {
	if c.quick(b) {
		return nil
	}
	return c.t.walkIndexBlock(b, w, c.data)
}

// quick checks the index block b as dataBlock does, in one pass over its
// entries, where the table orders keys bytewise and every entry is whole
// with its lengths one byte each (as bloomkv, Pebble and RocksDB write the
// entries of keys up to 119 bytes). It reports whether it did, and that
// every entry passed; where it did not, c is as it was, for the entries
// to be checked one by one (and any error be named). One pass with no
// per-entry decoding costs much less than the walk entry by entry
// (BenchmarkOpenIngestChecks compares them).
func (c *indexCheck) quick(b []byte) bool {
	t := c.t
	if t.order != orderBytewise || len(b) < 4 {
		return false
	}
	nr := uint64(binary.LittleEndian.Uint32(b[len(b)-4:]))
	if nr == 0 || nr*4+4 > uint64(len(b)) { // as blockIter.init refuses
		return false
	}
	data := b[:uint64(len(b))-4-nr*4]
	n, prevEnd, prev := c.n, c.prevEnd, c.prevSep
	var first []byte
	var firstStart uint64
	for off := 0; off < len(data); {
		p := data[off:]
		if len(p) < 3 || p[0] != 0 || p[1]|p[2] >= 0x80 {
			return false
		}
		k := 3 + int(p[1])
		e := k + int(p[2])
		if int(p[1]) < base.TrailerLen || e > len(p) {
			return false
		}
		key := p[3:k]
		bh, m := decodeHandle(p[k:e])
		if m == 0 || bh.Offset > c.end || bh.Offset < prevEnd || bh.Length > maxBlockLen || bh.Offset+bh.Length+blockTrailerLen > c.end ||
			(n > 0 && base.CompareEncoded(key, prev) <= 0) {
			return false
		}
		if first == nil {
			first, firstStart = key, bh.Offset
		}
		prevEnd, prev = bh.Offset+bh.Length+blockTrailerLen, key
		n++
		off += e
	}
	if first != nil && c.markFirst {
		c.firstSep, c.firstStart, c.markFirst = append(c.firstSep[:0], first...), firstStart, false
	}
	c.n, c.prevEnd, c.prevSep = n, prevEnd, append(c.prevSep[:0], prev...)
	return true
}

// data checks the data-block entry of an index block at off.
func (c *indexCheck) data(off int, key, value []byte) error {
	t := c.t
	bh, m := decodeHandle(value)
	switch {
	case m == 0:
		return corruptionf("%s: index: offset %d in block: bad block handle %x", t.opts.FileName, off, value)
	case bh.Offset > c.end || bh.Offset < c.prevEnd || bh.Length > maxBlockLen || bh.Offset+bh.Length+blockTrailerLen > c.end:
		return corruptionf("%s: index: offset %d in block: data block handle %s overlaps the block before or lies past the data blocks (which end by offset %d)", t.opts.FileName, off, bh, c.end)
	case c.n > 0 && t.compareIndexKeys(key, c.prevSep) <= 0:
		return corruptionf("%s: index: offset %d in block: separator %x is not past the one before (%x)", t.opts.FileName, off, key, c.prevSep)
	}
	c.prevEnd, c.prevSep = bh.Offset+bh.Length+blockTrailerLen, append(c.prevSep[:0], key...)
	if c.markFirst {
		c.firstSep, c.firstStart, c.markFirst = append(c.firstSep[:0], key...), bh.Offset, false
	}
	c.n++
	return nil
}

// compareIndexKeys orders two encoded internal keys of the table's index.
func (t *Reader) compareIndexKeys(a, b []byte) int {
	if t.order == orderBytewise {
		return base.CompareEncoded(a, b)
	}
	return t.order.compareEncoded(a, b)
}

// walkIndexBlock calls fn with each entry of the index block b, and the
// entry's offset: where every entry is whole (none shares a prefix with the
// one before, as the index blocks of bloomkv, Pebble and RocksDB are
// written) it reads them in place, else through a blockIter; key and value
// are valid during the call.
func (t *Reader) walkIndexBlock(b []byte, w blockWhere, fn func(off int, key, value []byte) error) error {
	var bi blockIter
	if err := bi.init(b, false, w); err != nil {
		return err
	}
	if wholeEntries(bi.data) {
		for off := 0; off < len(bi.data); {
			key, value, next := wholeEntryAt(bi.data, off)
			if err := fn(off, key, value); err != nil {
				return err
			}
			off = next
		}
		return nil
	}
	bi.useOrder(t.order)
	for ok := bi.first(); ok; ok = bi.next() {
		if err := fn(bi.offset, bi.key, bi.value); err != nil {
			return err
		}
	}
	return bi.err
}

// wholeEntries reports whether every entry of data (a block's entries)
// is whole (shares no prefix) and lies within it.
func wholeEntries(data []byte) bool {
	for off := 0; off < len(data); {
		p := data[off:]
		shared, n1 := uvarint(p)
		unshared, n2 := uvarint(p[max(n1, 0):])
		vlen, n3 := uvarint(p[max(n1, 0)+max(n2, 0):])
		if n1 <= 0 || n2 <= 0 || n3 <= 0 || shared != 0 {
			return false
		}
		h := uint64(n1 + n2 + n3)
		if unshared > uint64(len(p))-h || vlen > uint64(len(p))-h-unshared {
			return false
		}
		off += int(h + unshared + vlen)
	}
	return true
}

// wholeEntryAt returns the key and value of the whole entry at off in data
// (wholeEntries said every entry is), and where the next begins.
func wholeEntryAt(data []byte, off int) (key, value []byte, next int) {
	p := data[off:]
	_, n1 := uvarint(p)
	unshared, n2 := uvarint(p[n1:])
	vlen, n3 := uvarint(p[n1+n2:])
	h := n1 + n2 + n3
	k := h + int(unshared)
	return p[h:k:k], p[k : k+int(vlen) : k+int(vlen)], off + k + int(vlen)
}

// tooLarge returns the error of an entry of bi, the block being checked,
// over a size bound.
func (c *IngestChecks) tooLarge(bi *blockIter, msg string) error {
	if c.TooLarge == nil {
		return bi.corrupt(bi.offset, msg)
	}
	w := bi.where
	return fmt.Errorf("sstable: %s: %s block %s: offset %d in block: %s: %w", w.file, w.kind, w.bh, bi.offset, msg, c.TooLarge)
}

// prevKey returns the separator of the index entry before the current one
// (nil at the first), decoded by s, which it overwrites.
func (x *indexIter) prevKey(s *blockIter) ([]byte, error) {
	for _, level := range []*blockIter{x.cur(), &x.top} {
		buf := s.key[:0]
		*s = *level
		s.key = buf
		if s.prev() {
			return s.key, nil
		}
		if s.err != nil {
			return nil, s.err
		}
		if !x.twoLevel {
			break
		}
	}
	return nil, nil
}
