package bloomkv

// Keeping the differential-file filters' counts: commits add to them,
// compactions and flushes remove from them once no older read state needs
// the versions, and filters no state carries retire.

import (
	"slices"

	"github.com/bloomkv/bloomkv/difffile"
	"github.com/bloomkv/bloomkv/filterblock"
	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/batchrepr"
	"github.com/bloomkv/bloomkv/internal/manifest"
)

// diffRemoval is the hashes of versions that left the differential in the
// read state of epoch epoch, to remove from filters once no older state is
// alive.
type diffRemoval struct {
	epoch   uint64
	hashes  []uint64
	filters []*difffile.Filter
}

// diffReleasedLocked forgets a released state: its epoch, and its hold on
// the filter it carried, retiring filters no state carries. Removals that
// were waiting for it are applied. d.mu is held.
func (d *DB) diffReleasedLocked(s *readState) {
	ds := &d.mu.diff
	if i, ok := slices.BinarySearch(ds.live, s.epoch); ok {
		ds.live = slices.Delete(ds.live, i, i+1)
	}
	if s.diff != nil {
		if ds.carried[s.diff]--; ds.carried[s.diff] <= 0 {
			delete(ds.carried, s.diff)
		}
	}
	d.retireFiltersLocked()
	d.applyRemovalsLocked()
}

// retireFiltersLocked drops from writers the filters that are neither
// current, nor being built, nor carried by a live state. d.mu is held.
func (d *DB) retireFiltersLocked() {
	ds := &d.mu.diff
	old := ds.writers.Load()
	if old == nil {
		return
	}
	keep := make([]*difffile.Filter, 0, len(*old))
	for _, f := range *old {
		if f == ds.cur || f == ds.building || ds.carried[f] > 0 {
			keep = append(keep, f)
		} else {
			delete(ds.baseOf, f)
		}
	}
	if len(keep) != len(*old) {
		ds.writers.Store(&keep)
	}
}

// addWriterLocked makes commits add to f as well. d.mu is held, and no
// commit is under way (the caller leads the commit queue).
func (d *DB) addWriterLocked(f *difffile.Filter) {
	var ws []*difffile.Filter
	if old := d.mu.diff.writers.Load(); old != nil {
		ws = slices.Clone(*old)
	}
	ws = append(ws, f)
	d.mu.diff.writers.Store(&ws)
}

// queueRemovalLocked removes hashes from the filters of base level b that
// count them, once every read state older than the one just published is
// gone. d.mu is held.
func (d *DB) queueRemovalLocked(hashes []uint64, b int) {
	ds := &d.mu.diff
	ws := ds.writers.Load()
	if len(hashes) == 0 || ws == nil {
		return
	}
	// Every filter commits add to counts these versions, from their
	// commits or its build (which read a state holding them). A filter of
	// another base counts another differential; older states read it, and
	// nothing is removed from it.
	var fs []*difffile.Filter
	for _, f := range *ws {
		if ds.baseOf[f] == b {
			fs = append(fs, f)
		}
	}
	if len(fs) == 0 {
		return
	}
	ds.pending = append(ds.pending, diffRemoval{epoch: d.state.Load().epoch, hashes: hashes, filters: fs})
	d.applyRemovalsLocked()
}

// applyRemovalsLocked applies the pending removals no older live state
// needs, in order; one that names a filter still being built waits for the
// build. d.mu is held.
func (d *DB) applyRemovalsLocked() {
	ds := &d.mu.diff
	oldest := uint64(0)
	if len(ds.live) > 0 {
		oldest = ds.live[0]
	}
	n := 0
	for _, r := range ds.pending {
		if r.epoch > oldest || slices.Contains(r.filters, ds.building) {
			break
		}
		for _, f := range r.filters {
			for _, h := range r.hashes {
				f.RemoveHash(h)
			}
		}
		n++
	}
	if n > 0 {
		clear(ds.pending[:n])
		ds.pending = ds.pending[n:]
	}
}

// addBatchToDiff adds the point entries of a batch to the filters commits
// add to, and returns how many it added. The caller leads the commit queue,
// before the batch reaches the memtable.
func addBatchToDiff(ws []*difffile.Filter, data []byte) (added uint64) {
	batchrepr.Decode(data, func(_ base.SeqNum, e batchrepr.Entry) {
		if e.Kind == base.KindSet || e.Kind == base.KindDelete {
			h := filterblock.Hash(e.Key)
			for _, f := range ws {
				f.AddHash(h)
			}
			added++
		}
	})
	return added
}

// diffCompactedLocked queues the removal of the versions compaction c, just
// installed and published, took out of the differential: those it dropped
// from inputs above the base, and those it wrote or moved into the base. It
// concerns the filters of the base of the new version. d.mu is held.
func (d *DB) diffCompactedLocked(c *compaction) {
	b := baseLevel(d.mu.version)
	var hs []uint64
	if c.level < b {
		hs = append(hs, c.dropped0...)
		if c.outputLevel == b {
			hs = append(hs, c.written0...)
		}
	}
	if c.outputLevel < b {
		hs = append(hs, c.dropped1...)
	}
	d.queueRemovalLocked(hs, b)
}

// tableHashes returns the hashes of the user keys of every point version
// in the tables. It runs without d.mu.
func (d *DB) tableHashes(files []*manifest.FileMetadata) ([]uint64, error) {
	var hs []uint64
	for _, meta := range files {
		if _, err := d.eachKeyHash(meta, func(h uint64) { hs = append(hs, h) }); err != nil {
			return nil, err
		}
	}
	return hs, nil
}
