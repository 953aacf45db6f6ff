package sstable

import (
	"sync"
	"sync/atomic"
)

// partitions holds the index partitions of a two-level index, which a
// Reader that pins its index keeps: each is read on its first use and kept
// for the reader's life, so that opening a table whose index is large reads
// the top level alone, and a read loads the one partition it needs.
//
// With IngestChecks, a partition is checked as it is read, as the index of
// a one-level table is when the table opens: its data-block handles in
// increasing order, none overlapping the next or the partitions; its
// separators in increasing order and between the top-level separators
// around its own; and the data blocks it names neither among nor between
// those of the partitions checked before it (so that no block is reached
// from two index entries, which a cache hit would serve checked under the
// other's bounds).
type partitions struct {
	slots []partSlot // in the top level's order
	mu    sync.Mutex // serializes loads and their checks
	// start is where the first partition begins: the data blocks end by
	// there.
	start  uint64
	pinned atomic.Uint64 // bytes of the loaded partitions
}

// partSlot is one partition.
type partSlot struct {
	bh  BlockHandle
	sep []byte // its top-level separator
	b   atomic.Pointer[[]byte]
	// checked: with IngestChecks, its entries passed, and they name the
	// data blocks in [dataStart, dataEnd) (nothing when equal).
	checked            bool
	dataStart, dataEnd uint64
}

// newPartitions returns the partitions the top-level index block top names,
// or nil if one of its entries cannot be read or the handles do not lie in
// increasing order without overlap before dataEnd: that table's partitions
// are then read through the cache, and its damage reported as they are.
func (t *Reader) newPartitions(top []byte) *partitions {
	p := &partitions{}
	var prevEnd uint64
	err := t.walkIndexBlock(top, t.where("index", t.footer.index), func(_ int, key, value []byte) error {
		bh, m := decodeHandle(value)
		if m == 0 || bh.Offset < prevEnd || bh.Offset > t.dataEnd || bh.Length > maxBlockLen || bh.Offset+bh.Length+blockTrailerLen > t.dataEnd {
			return errBadPartitions
		}
		if n := len(p.slots); n > 0 && t.compareIndexKeys(key, p.slots[n-1].sep) <= 0 {
			return errBadPartitions
		}
		if len(p.slots) == 0 {
			p.start = bh.Offset
		}
		p.slots = append(p.slots, partSlot{bh: bh, sep: append([]byte(nil), key...)})
		prevEnd = bh.Offset + bh.Length + blockTrailerLen
		return nil
	})
	if err != nil {
		return nil
	}
	return p
}

// errBadPartitions stops newPartitions' walk.
var errBadPartitions = corruptionf("bad index partitions")

// find returns the position of the partition at bh among p's slots (-1 if
// none).
func (p *partitions) find(bh BlockHandle) int {
	lo, hi := 0, len(p.slots)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if p.slots[m].bh.Offset < bh.Offset {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(p.slots) && p.slots[lo].bh == bh {
		return lo
	}
	return -1
}

// partition returns the index partition at bh, which the top-level index
// names, reading (and with IngestChecks checking) it on first use.
func (t *Reader) partition(bh BlockHandle) ([]byte, error) {
	p := t.parts
	i := p.find(bh)
	if i < 0 { // unreachable: the slots are the top level's own handles
		return nil, corruptionf("%s: index partition %s is not in the top-level index", t.opts.FileName, bh)
	}
	s := &p.slots[i]
	if b := s.b.Load(); b != nil {
		return *b, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if b := s.b.Load(); b != nil {
		return *b, nil
	}
	b, err := t.readBlock(bh, "index partition")
	if err == nil && t.opts.IngestChecks != nil {
		err = t.checkPartition(i, b)
	}
	if err != nil {
		return nil, err
	}
	s.b.Store(&b)
	p.pinned.Add(uint64(len(b)))
	return b, nil
}

// checkPartition checks b, the partition of slot i, for IngestChecks;
// p.mu is held.
func (t *Reader) checkPartition(i int, b []byte) error {
	p := t.parts
	s := &p.slots[i]
	c := &indexCheck{t: t, end: p.start, markFirst: true}
	if len(t.valueBlocks) > 0 {
		c.end = min(c.end, t.valueBlocks[0].Offset)
	}
	if err := c.dataBlock(b, t.where("index partition", s.bh)); err != nil {
		return err
	}
	if c.n == 0 {
		s.checked = true
		return nil
	}
	switch {
	case t.compareIndexKeys(c.prevSep, s.sep) > 0:
		return corruptionf("%s: index partition %s: its top-level separator %x is before its partition's last (%x)", t.opts.FileName, s.bh, s.sep, c.prevSep)
	case i > 0 && t.compareIndexKeys(c.firstSep, p.slots[i-1].sep) <= 0:
		return corruptionf("%s: index partition %s: its first separator %x is not past the top-level separator before (%x)", t.opts.FileName, s.bh, c.firstSep, p.slots[i-1].sep)
	}
	start, end := c.firstStart, c.prevEnd
	for j := i - 1; j >= 0; j-- {
		if q := &p.slots[j]; q.checked && q.dataEnd > q.dataStart {
			if q.dataEnd > start {
				return corruptionf("%s: index partition %s: its data blocks [%d, %d) do not follow those of partition %s, which end at offset %d", t.opts.FileName, s.bh, start, end, q.bh, q.dataEnd)
			}
			break
		}
	}
	for j := i + 1; j < len(p.slots); j++ {
		if q := &p.slots[j]; q.checked && q.dataEnd > q.dataStart {
			if end > q.dataStart {
				return corruptionf("%s: index partition %s: its data blocks [%d, %d) do not precede those of partition %s, which begin at offset %d", t.opts.FileName, s.bh, start, end, q.bh, q.dataStart)
			}
			break
		}
	}
	s.checked, s.dataStart, s.dataEnd = true, start, end
	return nil
}
