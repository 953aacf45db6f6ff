package bloomkv

// Writing a table into the store's directory, as flushes and compactions do:
// synced before it is installed.

import (
	"bufio"
	"bytes"
	"fmt"

	"github.com/bloomkv/bloomkv/filterblock"
	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/manifest"
	"github.com/bloomkv/bloomkv/internal/rangedel"
	"github.com/bloomkv/bloomkv/memtable"
	"github.com/bloomkv/bloomkv/sstable"
	"github.com/bloomkv/bloomkv/vfs"
)

// writeTable writes mt as table num, synced with its directory entry, and
// returns its metadata (nil, and no file, for an empty memtable, or one
// whose every entry is dropped). As a compaction does, it drops the
// versions a newer version of the key hides from every snapshot that sees
// them, snaps holding the open snapshots' read sequence numbers, ascending;
// the newer version must be at or below visible, the visible sequence
// number (a read to come may land between it and one not yet visible).
// It returns how many versions it dropped; when dropped is not nil, the
// hashes of their user keys are appended to it, for the
// differential-file filter.
func (d *DB) writeTable(mt *memtable.MemTable, num uint64, snaps []base.SeqNum, visible base.SeqNum, dropped *[]uint64) (*manifest.FileMetadata, int, error) {
	if mt.Empty() {
		return nil, 0, nil
	}
	b, err := d.newTableBuilder(num)
	if err != nil {
		return nil, 0, err
	}
	n := 0
	it := mt.NewIter()
	var prevUser []byte
	havePrev, lastStripe := false, -1
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if !havePrev || !bytes.Equal(k.UserKey, prevUser) {
			prevUser, havePrev, lastStripe = append(prevUser[:0], k.UserKey...), true, -1
		}
		stripe := snapshotStripe(snaps, k.SeqNum())
		if stripe == lastStripe {
			n++
			if dropped != nil {
				*dropped = append(*dropped, filterblock.Hash(k.UserKey))
			}
			continue // a newer version hides it from every read that sees it
		}
		lastStripe = stripe
		if k.SeqNum() > visible {
			lastStripe = -1 // it hides nothing
		}
		if err := b.add(k, it.Value()); err != nil {
			b.abandon()
			return nil, 0, err
		}
	}
	for _, t := range mt.RangeDels() {
		if err := b.addRangeDel(t); err != nil {
			b.abandon()
			return nil, 0, err
		}
	}
	meta, err := b.finish()
	if err != nil {
		return nil, 0, err
	}
	if err := d.fs.SyncDir(d.dir); err != nil {
		b.remove()
		return nil, 0, fmt.Errorf("bloomkv: syncing %s: %w", d.dir, err)
	}
	return meta, n, nil
}

// tableWriteBuffer is the bytes a table write gathers before handing them to
// the file.
const tableWriteBuffer = 256 << 10

// tableBuilder writes one table file and gathers its metadata.
type tableBuilder struct {
	d       *DB
	name    string
	f       vfs.File
	buf     *bufio.Writer // between w and f: one system call per tableWriteBuffer bytes
	w       *sstable.Writer
	meta    *manifest.FileMetadata
	first   bool   // no key or range deletion added yet
	largest []byte // the largest key's user key, copied (callers reuse theirs)
	dels    []rangedel.Tombstone
}

func (d *DB) newTableBuilder(num uint64) (*tableBuilder, error) {
	name := d.path(tableName(num))
	f, err := d.fs.Create(name)
	if err != nil {
		return nil, fmt.Errorf("bloomkv: creating %s: %w", name, err)
	}
	buf := bufio.NewWriterSize(f, tableWriteBuffer)
	wo := d.opts.writerOptions()
	if d.opts.CacheWrittenBlocks {
		wo.DataBlockWritten = func(off uint64, block []byte) { d.cache.Offer(num, off, block) }
	}
	w, err := sstable.NewWriter(buf, wo)
	if err != nil {
		f.Close()
		d.fs.Remove(name)
		return nil, err
	}
	return &tableBuilder{d: d, name: name, f: f, buf: buf, w: w, first: true,
		meta: &manifest.FileMetadata{FileNum: num, SmallestSeq: base.SeqNumMax}}, nil
}

// add adds a point entry; entries come in internal-key order.
func (b *tableBuilder) add(k base.InternalKey, value []byte) error {
	if err := b.w.Add(k, value); err != nil {
		return fmt.Errorf("bloomkv: writing %s: %w", b.name, err)
	}
	b.extend(k, k)
	return nil
}

// addRangeDel adds a range deletion, in any order relative to the points.
// The table's key range grows to hold it, its end as an exclusive bound.
func (b *tableBuilder) addRangeDel(t rangedel.Tombstone) error {
	if err := b.w.DeleteRange(t.Start, t.End, t.SeqNum); err != nil {
		return fmt.Errorf("bloomkv: writing %s: %w", b.name, err)
	}
	b.extend(base.MakeInternalKey(t.Start, t.SeqNum, base.KindRangeDelete), base.MakeRangeDeleteSentinel(t.End))
	b.dels = append(b.dels, t)
	return nil
}

// extend grows the table's bounds to hold [lo, hi] and its sequence
// numbers to hold lo's.
func (b *tableBuilder) extend(lo, hi base.InternalKey) {
	if b.first || base.CompareInternal(lo, b.meta.Smallest) < 0 {
		b.meta.Smallest = lo.Clone()
	}
	if b.first || base.CompareInternal(hi, b.meta.Largest) > 0 {
		b.largest = append(b.largest[:0], hi.UserKey...)
		b.meta.Largest = base.InternalKey{UserKey: b.largest, Trailer: hi.Trailer} // cloned in finish
	}
	b.first = false
	b.meta.SmallestSeq = min(b.meta.SmallestSeq, lo.SeqNum())
	b.meta.LargestSeq = max(b.meta.LargestSeq, lo.SeqNum())
}

// size returns the bytes written so far.
func (b *tableBuilder) size() uint64 { return b.w.Size() }

// finish completes and syncs the table; the caller syncs the directory.
func (b *tableBuilder) finish() (*manifest.FileMetadata, error) {
	m, err := b.complete()
	if err != nil {
		return nil, err
	}
	if err := b.sync(); err != nil {
		return nil, err
	}
	return m, nil
}

// complete writes the rest of the table to the file without syncing it,
// and returns its metadata; sync must follow before anything names the
// table. On failure the file is closed and removed.
func (b *tableBuilder) complete() (*manifest.FileMetadata, error) {
	b.meta.Largest = b.meta.Largest.Clone()
	err := b.w.Close()
	if err == nil {
		err = b.buf.Flush()
	}
	if err != nil {
		b.f.Close()
		b.remove()
		return nil, fmt.Errorf("bloomkv: writing %s: %w", b.name, err)
	}
	b.meta.Size = b.w.Size()
	p := b.w.Properties()
	b.meta.Entries, b.meta.Deletions = p.NumEntries, p.NumDeletions
	if len(b.dels) > 0 {
		// For the differential-file filter, whose reads must not skip a
		// range deletion above the base.
		b.d.mu.Lock()
		b.d.mu.diff.tableDels[b.meta.FileNum] = b.dels
		b.d.mu.Unlock()
	}
	return b.meta, nil
}

// sync syncs and closes the file complete wrote; on failure it removes it.
// It may run on another goroutine than the one that wrote the table.
func (b *tableBuilder) sync() error {
	err := b.f.Sync()
	if err != nil {
		err = fmt.Errorf("bloomkv: syncing %s: %w", b.name, err)
	}
	if cerr := b.f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("bloomkv: closing %s: %w", b.name, cerr)
	}
	if err != nil {
		b.remove()
	}
	return err
}

// abandon removes a table that will not be finished.
func (b *tableBuilder) abandon() {
	b.w.Abort()
	b.f.Close()
	b.remove()
}

// remove deletes the table's file and what the store holds of it
// (removeTableLocked): the blocks the cache took as they were written, the
// range deletions complete kept. d.mu is not held.
func (b *tableBuilder) remove() {
	b.d.mu.Lock()
	defer b.d.mu.Unlock()
	b.d.removeTableLocked(b.meta.FileNum, "a table not finished")
}
