package bloomkv

import (
	"bufio"
	"fmt"
	"time"

	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/manifest"
	"github.com/bloomkv/bloomkv/internal/rangedel"
	"github.com/bloomkv/bloomkv/internal/vfs"
	"github.com/bloomkv/bloomkv/memtable"
	"github.com/bloomkv/bloomkv/sstable"
)

// flushLoop writes frozen memtables to level-0 tables, oldest first, until
// the DB closes or a flush fails. After a WAL failure it first has the
// failed log's memtable frozen, and flushes in spite of the failure
// (walFailed).
func (d *DB) flushLoop() {
	defer d.bgWG.Done()
	d.mu.Lock()
	defer d.mu.Unlock()
	for {
		for !d.closed && !d.flushDue() && !d.rescueDue() {
			d.cond.Wait()
		}
		if d.closed {
			return // frozen memtables stay in their WALs for the next Open; Close flushes a rescue
		}
		if d.rescueDue() {
			// Freezing the memtable must wait for the commit under way,
			// which may still be adding to it: queue for the lead.
			d.mu.Unlock()
			d.commit(&commitWaiter{flush: true, rescue: true})
			d.mu.Lock()
			continue
		}
		d.flushOldestLocked()
	}
}

// flushDue reports whether a frozen memtable awaits a flush the store may
// make. d.mu is held.
func (d *DB) flushDue() bool {
	return len(d.imm) > 0 && (d.bgErr == nil || d.rescuing)
}

// rescueDue reports whether the memtable of a failed WAL awaits freezing.
// d.mu is held.
func (d *DB) rescueDue() bool {
	return d.rescuing && !d.mem.mt.Empty()
}

// flushOldestLocked writes the oldest frozen memtable to a level-0 table,
// records it in the manifest and removes its WAL. d.mu is held, and released
// while the table is written. A failure stops the store (bgErr).
func (d *DB) flushOldestLocked() error {
	m := d.imm[0]
	num := d.allocFileNum()
	d.mu.Unlock()

	start := time.Now()
	info := FlushInfo{FileNum: num, Entries: m.mt.Len()}
	if f := d.opts.EventListener.FlushBegin; f != nil {
		f(info)
	}
	meta, err := d.writeTable(m.mt, num)

	d.mu.Lock()
	if err == nil {
		next := d.mem.logNum
		if len(d.imm) > 1 {
			next = d.imm[1].logNum
		}
		edit := &manifest.VersionEdit{LogNumber: next}
		if meta != nil {
			edit.NewFiles = []manifest.NewFile{{Level: 0, Meta: meta}}
		}
		err = d.logAndApply(edit)
	}
	info.Duration, info.Err = time.Since(start), err
	if meta != nil {
		info.Bytes = meta.Size
	}
	if f := d.opts.EventListener.FlushEnd; f != nil {
		f(info)
	}
	if err != nil {
		err = fmt.Errorf("bloomkv: flush to table %06d failed; the store takes no more writes until reopened: %w", num, err)
		if d.rescuing {
			// Writes acknowledged since the WAL failed were in this
			// memtable: say so, and stop trying.
			d.rescuing = false
			err = fmt.Errorf("%w; writes acknowledged without Sync before the write-ahead log failed may be lost: %w", err, d.bgErr)
			d.bgErr = nil
		}
		if d.bgErr == nil {
			d.bgErr = err
		}
		if f := d.opts.EventListener.BackgroundError; f != nil {
			f(err)
		}
		d.cond.Broadcast()
		return err
	}
	d.imm = d.imm[1:]
	d.publish()
	d.metrics.flushes.Add(1)
	if meta != nil {
		d.metrics.flushBytes.Add(meta.Size)
		d.metrics.levels[0].bytesWritten.Add(meta.Size)
	}
	if err := d.fs.Remove(d.path(logName(m.logNum))); err != nil {
		d.opts.Logger.Warn("bloomkv: removing a flushed write-ahead log", "file", d.path(logName(m.logNum)), "err", err)
	}
	d.cond.Broadcast()
	return nil
}

// writeTable writes mt as table num, synced with its directory entry, and
// returns its metadata (nil, and no file, for an empty memtable).
func (d *DB) writeTable(mt *memtable.MemTable, num uint64) (*manifest.FileMetadata, error) {
	if mt.Empty() {
		return nil, nil
	}
	b, err := d.newTableBuilder(num)
	if err != nil {
		return nil, err
	}
	it := mt.NewIter()
	for ok := it.First(); ok; ok = it.Next() {
		if err := b.add(it.Key(), it.Value()); err != nil {
			b.abandon()
			return nil, err
		}
	}
	for _, t := range mt.RangeDels() {
		if err := b.addRangeDel(t); err != nil {
			b.abandon()
			return nil, err
		}
	}
	meta, err := b.finish()
	if err != nil {
		return nil, err
	}
	if err := d.fs.SyncDir(d.dir); err != nil {
		return nil, fmt.Errorf("bloomkv: syncing %s: %w", d.dir, err)
	}
	return meta, nil
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
}

func (d *DB) newTableBuilder(num uint64) (*tableBuilder, error) {
	name := d.path(tableName(num))
	f, err := d.fs.Create(name)
	if err != nil {
		return nil, fmt.Errorf("bloomkv: creating %s: %w", name, err)
	}
	buf := bufio.NewWriterSize(f, tableWriteBuffer)
	w, err := sstable.NewWriter(buf, d.opts.writerOptions())
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
	b.meta.Largest = b.meta.Largest.Clone()
	err := b.w.Close()
	if err == nil {
		err = b.buf.Flush()
	}
	if err == nil {
		err = b.f.Sync()
	}
	if cerr := b.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		b.d.fs.Remove(b.name)
		return nil, fmt.Errorf("bloomkv: writing %s: %w", b.name, err)
	}
	b.meta.Size = b.w.Size()
	return b.meta, nil
}

// abandon removes a table that will not be finished.
func (b *tableBuilder) abandon() {
	b.f.Close()
	b.d.fs.Remove(b.name)
}
