package bloomkv

import (
	"fmt"
	"time"

	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/manifest"
	"github.com/bloomkv/bloomkv/memtable"
	"github.com/bloomkv/bloomkv/sstable"
)

// flushLoop writes frozen memtables to level-0 tables, oldest first, until
// the DB closes or a flush fails.
func (d *DB) flushLoop() {
	defer d.bgWG.Done()
	d.mu.Lock()
	defer d.mu.Unlock()
	for {
		for (len(d.imm) == 0 || d.bgErr != nil) && !d.closed {
			d.cond.Wait()
		}
		if d.closed {
			return // frozen memtables stay in their WALs for the next Open
		}
		m := d.imm[0]
		num := d.allocFileNum()
		d.flushing = true
		d.mu.Unlock()

		start := time.Now()
		info := FlushInfo{FileNum: num, Entries: m.mt.Len()}
		if f := d.opts.EventListener.FlushBegin; f != nil {
			f(info)
		}
		meta, err := d.writeTable(m.mt, num)

		d.mu.Lock()
		d.flushing = false
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
			d.bgErr = fmt.Errorf("bloomkv: flush to table %06d failed; the store takes no more writes until reopened: %w", num, err)
			if f := d.opts.EventListener.BackgroundError; f != nil {
				f(d.bgErr)
			}
			d.cond.Broadcast()
			continue
		}
		d.imm = d.imm[1:]
		d.publish()
		d.metrics.flushes.Add(1)
		if meta != nil {
			d.metrics.flushBytes.Add(meta.Size)
		}
		if err := d.fs.Remove(d.path(logName(m.logNum))); err != nil {
			d.opts.Logger.Warn("bloomkv: removing a flushed write-ahead log", "file", d.path(logName(m.logNum)), "err", err)
		}
		d.cond.Broadcast()
	}
}

// writeTable writes mt as table num, synced with its directory entry, and
// returns its metadata (nil, and no file, for an empty memtable).
func (d *DB) writeTable(mt *memtable.MemTable, num uint64) (*manifest.FileMetadata, error) {
	if mt.Empty() {
		return nil, nil
	}
	name := d.path(tableName(num))
	f, err := d.fs.Create(name)
	if err != nil {
		return nil, fmt.Errorf("bloomkv: creating %s: %w", name, err)
	}
	fail := func(err error) (*manifest.FileMetadata, error) {
		f.Close()
		d.fs.Remove(name)
		return nil, fmt.Errorf("bloomkv: writing %s: %w", name, err)
	}
	w, err := sstable.NewWriter(f, d.opts.writerOptions())
	if err != nil {
		return fail(err)
	}
	meta := &manifest.FileMetadata{FileNum: num, SmallestSeq: base.SeqNumMax}
	it := mt.NewIter()
	first := true
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if err := w.Add(k, it.Value()); err != nil {
			return fail(err)
		}
		if first {
			meta.Smallest, first = k.Clone(), false
		}
		meta.Largest = k
		meta.SmallestSeq = min(meta.SmallestSeq, k.SeqNum())
		meta.LargestSeq = max(meta.LargestSeq, k.SeqNum())
	}
	meta.Largest = meta.Largest.Clone()
	if err := w.Close(); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		d.fs.Remove(name)
		return nil, fmt.Errorf("bloomkv: closing %s: %w", name, err)
	}
	if err := d.fs.SyncDir(d.dir); err != nil {
		return nil, fmt.Errorf("bloomkv: syncing %s: %w", d.dir, err)
	}
	meta.Size = w.Size()
	return meta, nil
}
