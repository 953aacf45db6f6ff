package sstable

// The reader's filter: reading the filter block, deferring and loading it,
// and probing it.

import (
	"fmt"

	"github.com/bloomkv/bloomkv/filterblock"
)

// readFilter reads bloomkv's filter block, if the table has one, and pins it
// or hands it to the cache.
func (t *Reader) readFilter() error {
	bh, ok := t.meta[metaFilterName]
	if !ok {
		return nil
	}
	if t.opts.DeferFilter && !t.opts.CacheIndexAndFilterBlocks {
		t.hasFilter, t.filterBH = true, bh
		return nil
	}
	b, err := t.readBlock(bh, "filter")
	if err != nil {
		return err
	}
	if t.filter, err = filterblock.Decode(b); err != nil {
		return fmt.Errorf("sstable: %s: filter block %s: %w", t.opts.FileName, bh, err)
	}
	t.hasFilter, t.filterBH = true, bh
	if t.opts.CacheIndexAndFilterBlocks {
		t.handToCache(bh, b)
		t.filter = filterblock.Filter{}
	}
	return nil
}

// MayContainHash probes the table's filter with a key's filterblock.Hash: false
// means the table certainly lacks the key. A table without a filter (or
// whose deferred filter is not loaded yet) answers true.
func (t *Reader) MayContainHash(hash uint64) (bool, error) {
	if !t.hasFilter {
		return true, nil
	}
	return t.mayContain(hash)
}

// HasFilter reports whether the table has a bloomkv filter that probes
// consult: false until LoadFilter has read a deferred one.
func (t *Reader) HasFilter() bool {
	return t.hasFilter && (!t.deferFilter() || t.deferred.Load() != nil)
}

// deferFilter reports whether the filter is read by LoadFilter.
func (t *Reader) deferFilter() bool {
	return t.opts.DeferFilter && !t.opts.CacheIndexAndFilterBlocks
}

// LoadFilter reads the table's filter when the reader was opened with
// DeferFilter and has not read it yet; from then on probes consult it. It
// is safe to call concurrently with reads, and more than once. A damaged
// filter block is an error wrapping ErrCorruption, and the table goes on
// answering "maybe".
func (t *Reader) LoadFilter() error {
	if !t.hasFilter || !t.deferFilter() || t.deferred.Load() != nil {
		return nil
	}
	t.filterMu.Lock()
	defer t.filterMu.Unlock()
	if t.deferred.Load() != nil {
		return nil
	}
	b, err := t.readBlock(t.filterBH, "filter")
	if err != nil {
		return err
	}
	f, err := filterblock.Decode(b)
	if err != nil {
		return fmt.Errorf("sstable: %s: filter block %s: %w", t.opts.FileName, t.filterBH, err)
	}
	t.deferred.Store(&f)
	return nil
}

// mayContain probes the table's filter with a key's hash: the pinned filter,
// the deferred one once loaded, or the filter block through the cache.
func (t *Reader) mayContain(hash uint64) (bool, error) {
	var f filterblock.Filter
	ok, err := t.probeFilter(&f)
	if !ok || err != nil {
		return !ok, err
	}
	return f.MayContainHash(hash), nil
}

// probeFilter sets *f to the filter a probe consults; ok is false, and *f
// untouched, while a deferred filter is not loaded (every key is then a
// "maybe").
func (t *Reader) probeFilter(f *filterblock.Filter) (ok bool, err error) {
	if !t.opts.CacheIndexAndFilterBlocks {
		if t.opts.DeferFilter {
			if p := t.deferred.Load(); p != nil {
				*f = *p
				return true, nil
			}
			return false, nil
		}
		*f = t.filter
		return true, nil
	}
	b, err := t.cachedBlock(t.filterBH, "filter", nil)
	if err != nil {
		return false, err
	}
	if *f, err = filterblock.Decode(b); err != nil {
		return false, fmt.Errorf("sstable: %s: filter block %s: %w", t.opts.FileName, t.filterBH, err)
	}
	return true, nil
}

// Filter returns the table's blocked filter and whether it has one.
func (t *Reader) Filter() (filterblock.Filter, bool, error) {
	if t.hasFilter && t.deferFilter() {
		if err := t.LoadFilter(); err != nil {
			return filterblock.Filter{}, true, err
		}
		return *t.deferred.Load(), true, nil
	}
	if !t.hasFilter {
		return filterblock.Filter{}, false, nil
	}
	var f filterblock.Filter
	_, err := t.probeFilter(&f) // pinned, or through the cache
	return f, true, err
}

// ProbeFilter sets *f to the filter a probe of the table consults now, for
// a caller that probes several tables' filters together
// (filterblock.MayContainEach). ok is false, and *f untouched, when there is
// none to consult (the table has no filter, or a deferred one is not loaded
// yet): every key is then a "maybe", as MayContainHash answers.
func (t *Reader) ProbeFilter(f *filterblock.Filter) (ok bool, err error) {
	if !t.hasFilter {
		return false, nil
	}
	return t.probeFilter(f)
}

// MayContainHashes is MayContainHash for several keys' hashes at once,
// setting may[i] for hs[i] (filterblock.Filter.MayContainHashes) and
// returning how many answered true. It does not allocate.
func (t *Reader) MayContainHashes(hs []uint64, may []bool) (int, error) {
	var f filterblock.Filter
	ok, err := t.ProbeFilter(&f)
	if err != nil {
		return 0, err
	}
	if !ok {
		for i := range hs {
			may[i] = true
		}
		return len(hs), nil
	}
	return f.MayContainHashes(hs, may), nil
}
