package bloomkv

// The differential-file filter's probe on the read path: whether a Get
// asks it, and what its answer means (MayHaveChanged).

import (
	"github.com/bloomkv/bloomkv/filterblock"
	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/rangedel"
)

// Every Get that asks the filter pays one probe of it (a cache line of a
// filter as large as the differential, so mostly a miss of the CPU's
// caches) and its counting; one it answers "no" saves the probes of the
// sources above the base (readState.diffSaves): a filter probe per
// memtable, and a table lookup and filter probe per level-0 table and per
// level in between. The filter pays while its skip rate times those
// sources is at least diffMinGain: a store whose only source above the
// base is the memtable gains nothing from it, one with half its keys
// deleted in the memtable and a level-0 table (a skip rate of a half, two
// sources) barely breaks even. Below that the filter is asked about one
// key in diffBypassSample only (one Get in diffBypassSample when the Gets
// spread over many keys), enough to see the skip rate or the sources come
// back; a window is diffWindow probes (diffBypassWindow while bypassed).
const (
	diffMinGain      = 1.5
	diffBypassBits   = 6
	diffBypassSample = 1 << diffBypassBits
	diffWindow       = 1024
	diffBypassWindow = 64
)

// consultDiff reports whether a Get of a key of the given hash asks the
// filter: always, unless it is bypassed (its recent skip rate is too low
// to pay); then only for the keys sampledKey picks, one in
// diffBypassSample. The key's own hash decides, so that a bypassed Get
// pays neither a random draw nor a write to memory other Gets share.
func (ds *diffState) consultDiff(hash uint64) bool {
	return !ds.bypass.Load() || sampledKey(hash, ds.sampleSalt.Load())
}

// sampledKey reports whether a bypassed filter is asked about a key of the
// given hash: when the top bits of hash times salt (odd) are zero, one key
// in diffBypassSample. The salt changes (nextSampleSalt) at the end of each
// window and with each new read state, each key then drawn anew, so that
// a skewed stream of Gets is not judged by the same few keys for long. A
// stream of Gets of a few keys, none of them sampled, leaves the filter
// bypassed until the next read state (a flush, a compaction): that costs
// those Gets what the filter would have saved them, no more.
func sampledKey(hash, salt uint64) bool {
	return (hash*salt)>>(64-diffBypassBits) == 0
}

// nextSampleSalt steps sampledKey's salt (an odd multiplier) to the next.
func (ds *diffState) nextSampleSalt() {
	// A 64-bit linear congruential step (Knuth's MMIX constants), kept odd.
	ds.sampleSalt.Store((ds.sampleSalt.Load()*6364136223846793005 + 1442695040888963407) | 1)
}

// noteProbe counts a probe's answer, for the metrics and in the window,
// and at the window's end sets bypass from its skip rate and the sources
// a skip saves in the state of the Get that ends it. Two atomic additions
// per probe, on a cache line of their own (diffState.probeCounts): the
// window's probes and skips are one word.
func (ds *diffState) noteProbe(skipped bool, saves int) {
	if skipped {
		ds.noteProbes(1, 1, saves)
	} else {
		ds.noteProbes(1, 0, saves)
	}
}

// noteProbes is noteProbe for probes answers at once, skips of them "no"
// (a MultiGet's batch): two atomic additions for all of them.
func (ds *diffState) noteProbes(probes, skips uint64, saves int) {
	if probes == 0 {
		return
	}
	if skips > 0 {
		ds.skips.Add(skips)
	}
	if skips < probes {
		ds.maybes.Add(probes - skips)
	}
	// While bypassed, probes come from one key in diffBypassSample: a
	// window of diffBypassWindow of them (about 4,000 Gets spread over many
	// keys) judges whether to return.
	window := uint64(diffWindow)
	if ds.bypass.Load() {
		window = diffBypassWindow
	}
	w := ds.win.Add(skips<<32 | probes)
	if w&(1<<32-1) < window || !ds.win.CompareAndSwap(w, 0) {
		// The window goes on, or a Get that added to it meanwhile ends
		// it.
		return
	}
	ws, wp := float64(w>>32), float64(w&(1<<32-1))
	ds.bypass.Store(ws*float64(saves) < diffMinGain*wp)
	ds.nextSampleSalt()
}

// SetDiffFilterReads sets whether Gets consult the differential-file
// filter (see MayHaveChanged), which they do from Open on. With on false a
// Get asks the memtables and every level above the base, as with
// Options.DisableDiffFilter, but the filter is kept up to date all the
// same, so that switching it back on takes effect at once, with no build:
// a program can measure what the filter gains its reads on the store as it
// is, or turn the filter's reads off for a stretch of reads it does not
// serve. The filter's counters (Metrics().DiffFilter) count no probe while
// it is off, and Gets then do not bring back a filter dropped for not
// paying. MayHaveChanged asks the filter either way. It is safe to call
// concurrently with Gets, each of which follows the setting of its start.
func (d *DB) SetDiffFilterReads(on bool) {
	d.mu.diff.readsOff.Store(!on)
}

// MayHaveChanged reports whether key may have a version above the base, the
// last level: in a memtable or in a level above it. False is certain: the key's newest version, or its absence, is
// then the base's, and a Get of it reads the base level only. True may be
// wrong at the filter's false-positive rate (Metrics().DiffFilter), and is
// the answer whenever the filter is off: disabled (Options.DisableDiffFilter),
// while the last level holds no table, or while the filter is being built.
//
// After Compact(nil, nil) the last level holds every key the store had;
// MayHaveChanged is then false for all of them until they are written
// again. After a Compact of a range, the last level holds that range's keys,
// and MayHaveChanged is false for them likewise.
func (d *DB) MayHaveChanged(key []byte) bool {
	if d.closedFlag.Load() {
		return true
	}
	s := d.acquire()
	defer d.release(s)
	return s.diffMaybe(key, filterblock.Hash(key), base.SeqNumMax)
}

// diffMaybe reports whether key (of the given hash) may have a version
// above s's base visible at seq: the filter says maybe, or a range deletion
// above the base covers it, or s carries no filter.
func (s *readState) diffMaybe(key []byte, hash uint64, seq base.SeqNum) bool {
	return s.diff == nil || s.diff.MayContainHash(hash) || s.diffCovered(key, seq)
}

// diffCovered reports whether a range deletion above s's base visible at seq
// covers key: a key the filter rules out may still have lost its base
// version to one.
func (s *readState) diffCovered(key []byte, seq base.SeqNum) bool {
	if len(s.diffDels) > 0 && rangedel.Cover(s.diffDels, key, seq) != 0 {
		return true
	}
	for _, m := range s.imm {
		if m.mt.RangeDelCover(key, seq) != 0 {
			return true
		}
	}
	return s.mem.mt.RangeDelCover(key, seq) != 0
}
