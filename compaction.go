package bloomkv

import (
	"bytes"
	"container/heap"
	"fmt"
	"time"

	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/manifest"
	"github.com/bloomkv/bloomkv/sstable"
)

// targetFileSize is the size at which a compaction starts a new output table.
const targetFileSize = 2 << 20

// compactLoop merges level 0 into level 1 whenever L0 holds
// L0CompactionThreshold tables or more, until the DB closes or fails.
// (Part 1's compaction: the leveled scheme of part 2 extends it.)
func (d *DB) compactLoop() {
	defer d.bgWG.Done()
	d.mu.Lock()
	defer d.mu.Unlock()
	for {
		for (len(d.version.Levels[0]) < d.opts.L0CompactionThreshold || d.bgErr != nil) && !d.closed {
			d.cond.Wait()
		}
		if d.closed {
			return
		}
		if gate := d.compactionGate; gate != nil {
			d.mu.Unlock()
			<-gate
			d.mu.Lock()
			if d.closed {
				return
			}
		}
		if err := d.compactL0Locked(); err != nil {
			if d.bgErr == nil {
				d.bgErr = fmt.Errorf("bloomkv: compaction failed; the store takes no more writes until reopened: %w", err)
				if f := d.opts.EventListener.BackgroundError; f != nil {
					f(d.bgErr)
				}
			}
		}
		d.cond.Broadcast()
	}
}

// compactL0Locked merges every L0 table and the L1 tables they overlap into
// new L1 tables. d.mu is held, and released while tables are written.
func (d *DB) compactL0Locked() error {
	v := d.version
	inputs0 := v.Levels[0]
	lo, hi := inputs0[0].Smallest.UserKey, inputs0[0].Largest.UserKey
	for _, f := range inputs0[1:] {
		if bytes.Compare(f.Smallest.UserKey, lo) < 0 {
			lo = f.Smallest.UserKey
		}
		if bytes.Compare(f.Largest.UserKey, hi) > 0 {
			hi = f.Largest.UserKey
		}
	}
	var inputs1 []*manifest.FileMetadata
	for _, f := range v.Levels[1] {
		if bytes.Compare(f.Largest.UserKey, lo) >= 0 && bytes.Compare(f.Smallest.UserKey, hi) <= 0 {
			inputs1 = append(inputs1, f)
		}
	}
	// Tombstones can go when nothing below L1 could hold an older version.
	bottom := true
	for l := 2; l < manifest.NumLevels; l++ {
		bottom = bottom && len(v.Levels[l]) == 0
	}
	inputs := append(append([]*manifest.FileMetadata(nil), inputs0...), inputs1...)
	info := CompactionInfo{FromLevel: 0, ToLevel: 1}
	for _, f := range inputs {
		info.Inputs = append(info.Inputs, f.FileNum)
	}
	d.compacting = true
	d.mu.Unlock()

	if f := d.opts.EventListener.CompactionBegin; f != nil {
		f(info)
	}
	start := time.Now()
	outputs, bytesIn, err := d.mergeTables(inputs, bottom)
	end := func(err error) error {
		info.Duration, info.Err, info.BytesIn = time.Since(start), err, bytesIn
		for _, m := range outputs {
			info.Outputs = append(info.Outputs, m.FileNum)
			info.BytesOut += m.Size
		}
		if f := d.opts.EventListener.CompactionEnd; f != nil {
			d.mu.Unlock()
			f(info)
			d.mu.Lock()
		}
		return err
	}

	d.mu.Lock()
	d.compacting = false
	if err != nil {
		for _, m := range outputs {
			d.fs.Remove(d.path(tableName(m.FileNum)))
		}
		return end(err)
	}
	edit := &manifest.VersionEdit{}
	for _, f := range inputs0 {
		edit.DeletedFiles = append(edit.DeletedFiles, manifest.DeletedFile{Level: 0, FileNum: f.FileNum})
	}
	for _, f := range inputs1 {
		edit.DeletedFiles = append(edit.DeletedFiles, manifest.DeletedFile{Level: 1, FileNum: f.FileNum})
	}
	var bytesOut uint64
	for _, m := range outputs {
		edit.NewFiles = append(edit.NewFiles, manifest.NewFile{Level: 1, Meta: m})
		bytesOut += m.Size
	}
	if err := d.logAndApply(edit); err != nil {
		// The edit may have reached the manifest even though the call
		// failed (a failed sync): the outputs stay. The store now takes no
		// more edits, and the next Open removes whichever tables the
		// version it replays does not hold.
		return end(err)
	}
	d.publish()
	d.metrics.compactions.Add(1)
	d.metrics.compactBytesIn.Add(bytesIn)
	d.metrics.compactBytesOut.Add(bytesOut)
	d.opts.Logger.Debug("bloomkv: compacted L0 into L1", "inputs", len(inputs), "outputs", len(outputs), "bytes_in", bytesIn, "bytes_out", bytesOut, "duration", time.Since(start))
	return end(nil)
}

// mergeTables merges the tables (newest data first among equal keys, which
// internal-key order gives) into new tables of about targetFileSize, keeping
// each user key's newest entry only (there are no snapshots to keep older
// ones for) and dropping deletions when bottom.
func (d *DB) mergeTables(inputs []*manifest.FileMetadata, bottom bool) ([]*manifest.FileMetadata, uint64, error) {
	var bytesIn uint64
	mi := &mergingIter{}
	defer mi.close()
	for _, f := range inputs {
		r, err := d.tables.get(f.FileNum)
		if err != nil {
			return nil, 0, err
		}
		bytesIn += f.Size
		mi.add(r.NewIter())
	}
	var outputs []*manifest.FileMetadata
	var out *tableBuilder
	finish := func() error {
		if out == nil {
			return nil
		}
		m, err := out.finish()
		out = nil
		if err != nil {
			return err
		}
		outputs = append(outputs, m)
		return nil
	}
	var prevUser []byte
	havePrev := false // not prevUser != nil: the empty key is a key
	for ok := mi.first(); ok; ok = mi.next() {
		k := mi.key()
		if havePrev && bytes.Equal(k.UserKey, prevUser) {
			continue // an older version of a key already written (or dropped)
		}
		prevUser, havePrev = append(prevUser[:0], k.UserKey...), true
		if k.Kind() == base.KindDelete && bottom {
			continue
		}
		if out != nil && out.size() >= targetFileSize {
			if err := finish(); err != nil {
				return outputs, 0, err
			}
		}
		if out == nil {
			d.mu.Lock()
			num := d.allocFileNum()
			d.mu.Unlock()
			var err error
			if out, err = d.newTableBuilder(num); err != nil {
				return outputs, 0, err
			}
		}
		if err := out.add(k, mi.value()); err != nil {
			out.abandon()
			return outputs, 0, err
		}
	}
	if err := mi.err(); err != nil {
		if out != nil {
			out.abandon()
		}
		return outputs, 0, err
	}
	if err := finish(); err != nil {
		return outputs, 0, err
	}
	if len(outputs) > 0 {
		if err := d.fs.SyncDir(d.dir); err != nil {
			return outputs, 0, fmt.Errorf("bloomkv: syncing %s: %w", d.dir, err)
		}
	}
	return outputs, bytesIn, nil
}

// mergingIter merges table iterators in internal-key order (forward only).
type mergingIter struct {
	iters []*sstable.Iter
	h     iterHeap
	e     error
}

func (m *mergingIter) add(it *sstable.Iter) { m.iters = append(m.iters, it) }

func (m *mergingIter) first() bool {
	m.h = m.h[:0]
	for _, it := range m.iters {
		if it.First() {
			m.h = append(m.h, it)
		} else if err := it.Error(); err != nil {
			m.e = err
			return false
		}
	}
	heap.Init(&m.h)
	return len(m.h) > 0
}

func (m *mergingIter) next() bool {
	if m.e != nil || len(m.h) == 0 {
		return false
	}
	top := m.h[0]
	if top.Next() {
		heap.Fix(&m.h, 0)
	} else {
		if err := top.Error(); err != nil {
			m.e = err
			return false
		}
		heap.Pop(&m.h)
	}
	return len(m.h) > 0
}

func (m *mergingIter) key() base.InternalKey { return m.h[0].Key() }
func (m *mergingIter) value() []byte         { return m.h[0].Value() }

func (m *mergingIter) err() error {
	if m.e != nil {
		return m.e
	}
	for _, it := range m.iters {
		if err := it.Error(); err != nil {
			return err
		}
	}
	return nil
}

// close closes the table iterators.
func (m *mergingIter) close() {
	for _, it := range m.iters {
		it.Close()
	}
	m.iters = nil
}

type iterHeap []*sstable.Iter

func (h iterHeap) Len() int           { return len(h) }
func (h iterHeap) Less(i, j int) bool { return base.CompareInternal(h[i].Key(), h[j].Key()) < 0 }
func (h iterHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *iterHeap) Push(x any)        { *h = append(*h, x.(*sstable.Iter)) }
func (h *iterHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
