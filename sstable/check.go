package sstable

// Check: a full consistency check of a table, for tools (tools/bloomkv) and
// the store's Check. It reads blocks without the cache.

import (
	"bytes"
	"fmt"

	"github.com/bloomkv/bloomkv/internal/base"
)

// Point-deletion kinds of RocksDB and Pebble that bloomkv does not write but
// counts, as they do, among a table's deletions.
const (
	kindSingleDelete base.Kind = 7
	kindDeleteSized  base.Kind = 23
)

// CheckReport is what Check found.
type CheckReport struct {
	// Blocks is the number of blocks read and verified.
	Blocks int
	// Entries is the number of point entries walked, UserKeys the distinct
	// user keys among them (each probed in the filter when there is one),
	// RangeDeletions the range-deletion fragments.
	Entries, UserKeys uint64
	RangeDeletions    int
	// SmallestSeq and LargestSeq bound the sequence numbers seen.
	SmallestSeq, LargestSeq base.SeqNum
	// Smallest and Largest are the first and last point keys read (nil
	// when none was).
	Smallest, Largest *base.InternalKey
	// Complete is true when every data block was read: the counts, key
	// and sequence ranges above are then the table's, not a part of it.
	Complete bool
	// Problems lists what is wrong, at most MaxCheckProblems of them;
	// MoreProblems counts those left out.
	Problems     []error
	MoreProblems int
}

// MaxCheckProblems bounds the problems a CheckReport lists.
const MaxCheckProblems = 100

func (r *CheckReport) problem(err error) {
	if len(r.Problems) < MaxCheckProblems {
		r.Problems = append(r.Problems, err)
	} else {
		r.MoreProblems++
	}
}

// Err returns the first problem, noting how many more there are, or nil.
func (r *CheckReport) Err() error {
	if len(r.Problems) == 0 {
		return nil
	}
	if n := len(r.Problems) - 1 + r.MoreProblems; n > 0 {
		return fmt.Errorf("%w (and %d more problems)", r.Problems[0], n)
	}
	return r.Problems[0]
}

// Check verifies the whole table: the checksum and structure of every block;
// that point keys are in strictly increasing internal-key order, within and
// across blocks; that each index separator lies between its block's last key
// and the next block's first; that every user key passes the table's filter
// (a filter must have no false negatives); that range deletions are sound;
// and that the properties' counts match the entries. It reads every block
// and does not stop at the first problem.
func (t *Reader) Check() *CheckReport { return t.CheckEntries(nil) }

// CheckEntries is Check, which also calls visit, when not nil, with each
// point entry it reads, in order (the key as stored), with the handle of
// the data block that holds it and the entry's offset in the block; an
// error visit returns is listed among the problems. The value is valid
// only during the call.
func (t *Reader) CheckEntries(visit func(key base.InternalKey, value []byte, bh BlockHandle, offset int) error) *CheckReport {
	r := &CheckReport{}
	// Data blocks are verified by the key walk below, which reads each
	// once; the others here.
	layout := t.Blocks()
	bad := map[uint64]bool{}
	for _, b := range layout.Blocks {
		r.Blocks++
		if b.Err == nil && b.Kind != BlockData {
			b = t.inspect(b.Kind, b.Name, b.Handle)
		}
		if b.Err != nil {
			r.problem(b.Err)
			bad[b.Handle.Offset] = true
		}
	}
	filter, err := t.TableFilter()
	if err != nil {
		filter = nil // already a problem: its block is in the layout
	}
	var (
		prev, prevSep, last   []byte // encoded internal keys; last is the last read
		prevUser              []byte
		deletions, dataBlocks uint64
		haveSeq               bool
		unread                bool // a block could not be read: counts are partial
		smallest, largest     base.InternalKey
		bufs                  blockBufs // each data block's memory, reused for the next
	)
	values := valueBlockMemo{t: t}
	t.eachDataHandle(func(kind BlockKind, bh BlockHandle, sep []byte, err error) bool {
		if err != nil {
			if !bad[bh.Offset] {
				r.problem(err)
			}
			unread = true
			return true
		}
		if kind != BlockData {
			return true
		}
		dataBlocks++
		where := t.where("data", bh)
		if _, ok := base.DecodeInternalKey(sep); !ok {
			r.problem(corruptionf("%s: index entry for data block %s: separator %x is not an internal key", t.opts.FileName, bh, sep))
		}
		if bad[bh.Offset] {
			prev, prevSep = nil, append(prevSep[:0], sep...)
			unread = true
			return true
		}
		b, err := t.readBlockInto(bh, "data", &bufs) // read before the next block's
		var it blockIter
		if err == nil {
			err = it.init(b, false, where)
		}
		if err != nil {
			r.problem(err)
			unread = true
			return true
		}
		first := true
		for ok := it.first(); ok; ok = it.next() {
			k, ok := base.DecodeInternalKey(it.key)
			k = t.visibleKey(k)
			if !ok {
				r.problem(it.corrupt(it.offset, fmt.Sprintf("key %x is not an internal key", it.key)))
				break
			}
			if first && prevSep != nil && t.separatorAbove(prevSep, it.key) {
				r.problem(corruptionf("%s: data block %s: first key %s does not sort after the previous block's separator", t.opts.FileName, bh, k))
			}
			first = false
			if prev != nil && t.order.compareEncoded(prev, it.key) >= 0 {
				r.problem(corruptionf("%s: data block %s: offset %d in block: key %s is out of order after %s", t.opts.FileName, bh, it.offset, k, mustDecode(prev)))
			}
			if t.order.compareEncoded(it.key, sep) > 0 {
				r.problem(corruptionf("%s: data block %s: offset %d in block: key %s sorts after the block's index separator %s", t.opts.FileName, bh, it.offset, k, mustDecode(sep)))
			}
			if visit != nil {
				if err := visit(k, it.value, bh, it.offset); err != nil {
					r.problem(err)
				}
			}
			prev = append(prev[:0], it.key...)
			last = append(last[:0], it.key...)
			r.Entries++
			switch k.Kind() {
			case base.KindDelete, kindSingleDelete, kindDeleteSized:
				deletions++
			}
			if t.valuePrefix && (k.Kind() == base.KindSet || t.columnar) {
				if _, err := t.pebbleValueFrom(it.value, values.get); err != nil {
					r.problem(fmt.Errorf("%w (key %s, data block %s)", err, k, bh))
				}
			}
			if !haveSeq {
				r.SmallestSeq, r.LargestSeq, haveSeq = k.SeqNum(), k.SeqNum(), true
			}
			r.SmallestSeq, r.LargestSeq = min(r.SmallestSeq, k.SeqNum()), max(r.LargestSeq, k.SeqNum())
			if r.Entries == 1 {
				smallest = k.Clone()
			}
			if r.UserKeys == 0 || !bytes.Equal(prevUser, k.UserKey) {
				r.UserKeys++
				prevUser = append(prevUser[:0], k.UserKey...)
				if filter != nil && !filter.MayContain(k.UserKey) {
					r.problem(corruptionf("%s: data block %s: offset %d in block: key %q fails the table's %s filter (a false negative)", t.opts.FileName, bh, it.offset, k.UserKey, filter.Policy))
				}
			}
		}
		if it.err != nil {
			r.problem(it.err)
		}
		prevSep = append(prevSep[:0], sep...)
		return true
	})
	if last != nil {
		largest = mustDecode(last).Clone()
		r.Smallest, r.Largest = &smallest, &largest
	}
	for _, d := range t.storedDels {
		r.RangeDeletions++
		if !haveSeq {
			r.SmallestSeq, r.LargestSeq, haveSeq = d.SeqNum, d.SeqNum, true
		}
		r.SmallestSeq, r.LargestSeq = min(r.SmallestSeq, d.SeqNum), max(r.LargestSeq, d.SeqNum)
	}
	r.Complete = !unread
	if r.Complete {
		t.checkProperties(r, dataBlocks, deletions)
	}
	t.checkFooterPadding(r, layout)
	return r
}

// checkFooterPadding checks that the footer's bytes after its two block
// handles are zero, as every writer leaves them. Readers ignore them, so
// only a check notices a flipped bit there.
func (t *Reader) checkFooterPadding(r *CheckReport, l *Layout) {
	ft := make([]byte, l.FooterLength)
	if err := t.readAt(ft, l.FooterOffset); err != nil {
		r.problem(err)
		return
	}
	start := 0 // the handles' 40 bytes: after the checksum type in RocksDB's footer
	if l.Format != TableFormatLevelDB {
		start = 1
	}
	handles := ft[start : start+40]
	_, n1 := decodeHandle(handles)
	_, n2 := decodeHandle(handles[n1:])
	for i, c := range handles[n1+n2:] {
		if c != 0 {
			off := l.FooterOffset + uint64(start+n1+n2+i)
			r.problem(corruptionf("%s: footer at offset %d: padding byte at offset %d is %#x, not zero", t.opts.FileName, l.FooterOffset, off, c))
			return
		}
	}
}

// checkProperties compares the properties' counts with what Check counted.
func (t *Reader) checkProperties(r *CheckReport, dataBlocks, deletions uint64) {
	if _, ok := t.meta[metaPropertiesName]; !ok {
		return
	}
	p := &t.props
	mismatch := func(what string, stated, counted uint64) {
		if stated != counted {
			r.problem(corruptionf("%s: properties state %d %s, the table holds %d", t.opts.FileName, stated, what, counted))
		}
	}
	mismatch("data blocks", p.NumDataBlocks, dataBlocks)
	if _, v1 := t.meta[metaRangeDelV1Name]; !v1 {
		// Fragments as stored: one entry per fragment and sequence number.
		dels := uint64(len(t.storedDels))
		mismatch("entries", p.NumEntries, r.Entries+dels)
		mismatch("range deletions", p.NumRangeDeletions, dels)
		mismatch("deletions", p.NumDeletions, deletions+dels)
	}
	if p.HasSeqNums && (r.SmallestSeq < p.SmallestSeqNum || r.LargestSeq > p.LargestSeqNum) {
		r.problem(corruptionf("%s: properties state sequence numbers %d-%d, the table holds %d-%d", t.opts.FileName, p.SmallestSeqNum, p.LargestSeqNum, r.SmallestSeq, r.LargestSeq))
	}
}

// separatorAbove reports whether the previous block's index separator sep
// fails to sort before key, the first key of the next block. A columnar
// table's separators are user keys (read with trailer 0): one may equal
// the next block's first user key, when a user key's versions straddle the
// blocks.
func (t *Reader) separatorAbove(sep, key []byte) bool {
	if !t.columnar || len(sep) < base.TrailerLen || len(key) < base.TrailerLen {
		return t.order.compareEncoded(sep, key) >= 0
	}
	return t.order.compare(sep[:len(sep)-base.TrailerLen], key[:len(key)-base.TrailerLen]) > 0
}

// mustDecode decodes an internal key already known to be well formed.
func mustDecode(enc []byte) base.InternalKey {
	k, _ := base.DecodeInternalKey(enc)
	return k
}
