package bloomkv

// Batched point reads: MultiGet through the memtables, the differential
// filter and the levels, a batch at a time.

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"slices"

	"github.com/bloomkv/bloomkv/filterblock"
	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/manifest"
	"github.com/bloomkv/bloomkv/internal/rangedel"
	"github.com/bloomkv/bloomkv/sstable"
)

// MultiGet reads keys as Get reads each of them, all from one consistent
// view of the store: values[i] is a copy of the value stored under keys[i],
// or nil with errs[i] set (ErrNotFound, or an error of reading it). Keys may
// come in any order and repeat. An invalid key fails alone. After Close
// every error is ErrClosed.
func (d *DB) MultiGet(keys [][]byte) (values [][]byte, errs []error) {
	values, errs = make([][]byte, len(keys)), make([]error, len(keys))
	if len(keys) == 0 {
		return values, errs
	}
	if d.closedFlag.Load() {
		fillErr(errs, ErrClosed)
		return values, errs
	}
	// The state first, then the sequence number, as Get.
	s := d.acquire()
	defer d.release(s)
	d.multiGet(s, keys, base.SeqNum(d.visibleSeq.Load())+1, values, errs)
	return values, errs
}

// MultiGet is DB.MultiGet reading the values keys held when the snapshot was
// taken. After Close (the snapshot's or the DB's) every error is ErrClosed.
func (s *Snapshot) MultiGet(keys [][]byte) (values [][]byte, errs []error) {
	values, errs = make([][]byte, len(keys)), make([]error, len(keys))
	if len(keys) == 0 {
		return values, errs
	}
	if s.closed.Load() || s.d.closedFlag.Load() {
		fillErr(errs, ErrClosed)
		return values, errs
	}
	st := s.d.acquire()
	defer s.d.release(st)
	s.d.multiGet(st, keys, s.seq, values, errs)
	return values, errs
}

func fillErr(errs []error, err error) {
	for i := range errs {
		errs[i] = err
	}
}

// mgKey is what a batch knows of one of its keys while it reads.
type mgKey struct {
	// from is the first level to read: the differential filter's base
	// for a key it rules out, else 0.
	from int
	// tomb is the newest range deletion seen so far covering the key
	// (getFromLevels).
	tomb base.SeqNum
	// maybe says the differential filter answered maybe.
	maybe bool
	// done says values and errs hold the key's answer.
	done bool
}

// multiGetter is a batch's scratch memory, reused from batch to batch
// (DB.multiGets).
type multiGetter struct {
	d      *DB
	s      *readState
	seq    base.SeqNum
	keys   [][]byte
	values [][]byte
	errs   []error

	hashes  []uint64
	state   []mgKey
	pending []int32 // the unanswered keys' indices, in key order
	// answered counts the keys answered since pending last dropped them.
	answered int
	sorted   []int32  // scratch for sortPending
	windows  []uint64 // scratch for sortPending
	spare    []uint64 // scratch for sortWindows

	// One table's run of keys, in key order.
	run        []int32
	runKeys    [][]byte
	runHashes  []uint64
	runFilters []*filterblock.Filter
	runMay     []bool
	runOut     []sstable.LookupResult
	// The tables of one level the run's keys fall in (one table in level
	// 0).
	tables []mgTable
}

// multiGet answers keys as of seq from the sources of s into values and
// errs.
func (d *DB) multiGet(s *readState, keys [][]byte, seq base.SeqNum, values [][]byte, errs []error) {
	m, _ := d.multiGets.Get().(*multiGetter)
	if m == nil {
		m = &multiGetter{}
	}
	m.d, m.s, m.seq, m.keys, m.values, m.errs = d, s, seq, keys, values, errs
	m.hashes = slices.Grow(m.hashes[:0], len(keys))[:len(keys)]
	m.state = slices.Grow(m.state[:0], len(keys))[:len(keys)]
	m.pending, m.answered = m.pending[:0], 0
	for i, k := range keys {
		m.state[i] = mgKey{}
		if err := checkKey(k); err != nil {
			errs[i], m.state[i].done = err, true
			continue
		}
		m.hashes[i] = filterblock.Hash(k) // for every filter the key meets
		m.pending = append(m.pending, int32(i))
	}
	m.sortPending()
	m.memtables()
	for l := 0; l < manifest.NumLevels && len(m.pending) > 0; l++ {
		m.level(l)
	}
	for _, i := range m.pending {
		errs[i] = ErrNotFound
	}
	m.d, m.s, m.keys, m.values, m.errs = nil, nil, nil, nil, nil
	// A table's run holds at most the batch's keys: what lies beyond was
	// cleared after an earlier, larger batch.
	clear(m.runKeys[:min(len(keys), cap(m.runKeys))])
	clear(m.runOut[:min(len(keys), cap(m.runOut))])
	clear(m.tables[:cap(m.tables)]) // their readers
	d.multiGets.Put(m)
}

// sortPending puts pending in key order (equal keys in any order). It
// sorts integers: for each key, the eight bytes after the prefix all the
// keys share, big-endian, their low bits replaced by the key's place in
// pending; keys equal in what is left are then sorted whole.
func (m *multiGetter) sortPending() {
	p := m.pending
	if len(p) < 2 {
		return
	}
	common := m.keys[p[0]]
	for _, i := range p[1:] {
		common = common[:commonPrefix(common, m.keys[i])]
	}
	c := len(common)
	mask := uint64(1)<<bits.Len(uint(len(p)-1)) - 1
	ws := m.windows[:0]
	for j, i := range p {
		var b [8]byte
		copy(b[:], m.keys[i][c:])
		ws = append(ws, binary.BigEndian.Uint64(b[:])&^mask|uint64(j))
	}
	ws, m.spare = sortWindows(ws, m.spare, mask)
	m.windows = ws
	out := slices.Grow(m.sorted[:0], len(p))
	for _, w := range ws {
		out = append(out, p[w&mask])
	}
	for lo := 0; lo < len(ws); {
		hi := lo + 1
		for hi < len(ws) && ws[hi]&^mask == ws[lo]&^mask {
			hi++
		}
		if hi-lo > 1 {
			slices.SortFunc(out[lo:hi], m.compareKeys)
		}
		lo = hi
	}
	m.pending, m.sorted = out, p
}

// commonPrefix returns the length of the longest common prefix of a and b.
func commonPrefix(a, b []byte) int {
	n := min(len(a), len(b))
	c := 0
	for ; c+8 <= n; c += 8 {
		if x := binary.LittleEndian.Uint64(a[c:]) ^ binary.LittleEndian.Uint64(b[c:]); x != 0 {
			return c + bits.TrailingZeros64(x)/8
		}
	}
	for c < n && a[c] == b[c] {
		c++
	}
	return c
}

// maxBucketSort is the most windows sortWindows sorts by buckets; their
// 256 buckets hold a few each up to about this many.
const maxBucketSort = 1024

// maxBucket is the most windows a bucket of sortWindows may hold; a batch
// with a fuller one is sorted by pdqsort instead.
const maxBucket = 32

// maxInsertionSort is the most windows sortWindows sorts by insertion
// alone: below it, filling the buckets costs more than it saves.
const maxInsertionSort = 24

// sortWindows sorts ws, using tmp as scratch, and returns the sorted slice
// and the other one. The bits in ignore are a tie-break only. Windows of
// random keys make a comparison sort mispredict about every other branch;
// up to maxBucketSort of them are instead scattered into 256 buckets by the
// eight highest bits in which they differ, then insertion-sorted, each
// moving only within its bucket (unless a bucket is crowded).
func sortWindows(ws, tmp []uint64, ignore uint64) ([]uint64, []uint64) {
	switch {
	case len(ws) <= maxInsertionSort:
		insertionSort(ws)
		return ws, tmp
	case len(ws) > maxBucketSort:
		slices.Sort(ws)
		return ws, tmp
	}
	var or, and uint64 = 0, ^uint64(0)
	for _, w := range ws {
		or |= w
		and &= w
	}
	diff := (or ^ and) &^ ignore
	if diff == 0 {
		slices.Sort(ws) // equal but for the tie-break
		return ws, tmp
	}
	shift := max(bits.Len64(diff)-8, 0)
	var start [257]int32
	for _, w := range ws {
		start[(w>>shift)&0xff+1]++
	}
	crowded := int32(0)
	for b := 1; b < len(start); b++ {
		crowded = max(crowded, start[b])
		start[b] += start[b-1]
	}
	if crowded > maxBucket {
		// The keys differ little in those bits (one outlier sets them):
		// insertion within the buckets would be quadratic.
		slices.Sort(ws)
		return ws, tmp
	}
	tmp = slices.Grow(tmp[:0], len(ws))[:len(ws)]
	for _, w := range ws {
		b := (w >> shift) & 0xff
		tmp[start[b]] = w
		start[b]++
	}
	insertionSort(tmp)
	return tmp, ws
}

// insertionSort sorts ws by insertion: quick when ws is short or each
// element is near its place.
func insertionSort(ws []uint64) {
	for i := 1; i < len(ws); i++ {
		w, j := ws[i], i
		for j > 0 && ws[j-1] > w {
			ws[j] = ws[j-1]
			j--
		}
		ws[j] = w
	}
}

func (m *multiGetter) compareKeys(a, b int32) int {
	return bytes.Compare(m.keys[a], m.keys[b])
}

// answer sets key i's answer from its newest visible point entry, as found
// does for Get.
func (m *multiGetter) answer(i int32, v []byte, tr base.Trailer) {
	m.values[i], m.errs[i] = found(v, tr, m.state[i].tomb)
	m.state[i].done = true
	m.answered++
}

// fail sets key i's answer to err.
func (m *multiGetter) fail(i int32, err error) {
	m.values[i], m.errs[i], m.state[i].done = nil, err, true
	m.answered++
}

// dropDone removes the answered keys from pending.
func (m *multiGetter) dropDone() {
	if m.answered == 0 {
		return
	}
	m.answered = 0
	m.pending = slices.DeleteFunc(m.pending, func(i int32) bool { return m.state[i].done })
}

// memtables asks the differential filter about every key, then the
// memtables, newest first, about the keys it does not rule out, as get does.
func (m *multiGetter) memtables() {
	s := m.s
	m.askDiff()
	for j := len(s.imm); j >= 0; j-- {
		mt := s.mem.mt
		if j < len(s.imm) {
			mt = s.imm[j].mt
		}
		for _, i := range m.pending {
			st := &m.state[i]
			if st.done || st.from > 0 {
				continue
			}
			k := m.keys[i]
			v, ik, ok := mt.GetHash(k, m.hashes[i], m.seq)
			st.tomb = max(st.tomb, mt.RangeDelCover(k, m.seq))
			if ok {
				if ik.Kind() == base.KindSet {
					v = append(make([]byte, 0, len(v)), v...)
				}
				m.answer(i, v, ik.Trailer)
			} else if st.tomb != 0 {
				m.fail(i, ErrNotFound)
			}
		}
	}
	m.dropDone()
}

// askDiff asks the differential filter about every pending key as askDiff
// does for a Get, its probes counted once for the batch.
func (m *multiGetter) askDiff() {
	d, s := m.d, m.s
	ds := &d.mu.diff
	readsOff := ds.readsOff.Load()
	if s.diffIdle && !readsOff {
		d.noteIdleGets(uint32(len(m.pending)))
	}
	if s.diff == nil || readsOff {
		return
	}
	// The keys to probe (all, or the sample while the filter steps aside)
	// and their hashes, probed together; the run's scratch is free until
	// the levels.
	bypass, salt := ds.bypass.Load(), ds.sampleSalt.Load()
	asked, hs := m.run[:0], m.runHashes[:0]
	for _, i := range m.pending {
		if bypass && !sampledKey(m.hashes[i], salt) {
			continue
		}
		asked = append(asked, i)
		hs = append(hs, m.hashes[i])
	}
	may := slices.Grow(m.runMay[:0], len(hs))[:len(hs)]
	m.run, m.runHashes, m.runMay = asked, hs, may
	s.diff.MayContainHashes(hs, may)
	var skips uint64
	for j, i := range asked {
		if may[j] || s.diffCovered(m.keys[i], m.seq) {
			m.state[i].maybe = true
		} else {
			skips++
			m.state[i].from = s.diffBase
		}
	}
	ds.noteProbes(uint64(len(asked)), skips, s.diffSaves)
}

// level reads the pending keys that reach level l from its tables: in level
// 0 each table newest first, elsewhere the one table holding each key, the
// keys of a table read together.
func (m *multiGetter) level(l int) {
	s := m.s
	if l == s.diffBase {
		n := 0
		for _, i := range m.pending {
			if m.state[i].maybe {
				n++ // the filter said maybe, and nothing above the base had the key
			}
		}
		if n > 0 {
			m.d.mu.diff.falseMaybes.Add(uint64(n))
		}
	}
	if l == 0 {
		for f := range s.version.Level(0) {
			m.run, m.tables = m.run[:0], m.tables[:0]
			for _, i := range m.pending {
				if st := &m.state[i]; !st.done && st.from == 0 && f.Overlaps(m.keys[i], m.keys[i]) {
					m.run = append(m.run, i)
				}
			}
			if len(m.run) > 0 {
				m.tables = append(m.tables, m.openTable(f, 0, len(m.run)))
				m.readTables()
			}
		}
		m.dropDone()
		return
	}
	var f *manifest.FileMetadata
	m.run, m.tables = m.run[:0], m.tables[:0]
	for _, i := range m.pending {
		if m.state[i].from > l {
			continue
		}
		k := m.keys[i]
		if f == nil || f.Before(k) || bytes.Compare(f.Smallest.UserKey, k) > 0 {
			if f = s.version.Find(l, k); f == nil {
				continue
			}
			m.tables = append(m.tables, m.openTable(f, len(m.run), len(m.run)))
		}
		m.run = append(m.run, i)
		m.tables[len(m.tables)-1].hi = len(m.run)
	}
	m.readTables()
	m.dropDone()
}

// mgTable is a table a batch reads and the batch's keys it holds,
// m.run[lo:hi], in key order.
type mgTable struct {
	r        *sstable.Reader
	err      error // opening the table, or reading its filter
	filter   filterblock.Filter
	filtered bool // filter holds; its answers are m.runMay[probed:]
	probed   int
	lo, hi   int
}

// openTable returns the mgTable of f for the keys m.run[lo:hi].
func (m *multiGetter) openTable(f *manifest.FileMetadata, lo, hi int) mgTable {
	r, err := m.d.tables.get(f)
	return mgTable{r: r, err: err, lo: lo, hi: hi}
}

// readTables reads the keys of m.run from the tables of m.tables, as
// getFromTable reads one key from one table: each table's range deletions,
// then the filters of all the tables for all their keys together, so that
// the cache misses of keys in different tables are in flight at once, then
// each table's data blocks, each once for the keys in it.
func (m *multiGetter) readTables() {
	d := m.d
	hs, fs := m.runHashes[:0], m.runFilters[:0]
	for t := range m.tables {
		mt := &m.tables[t]
		if mt.err != nil {
			continue
		}
		if dels := mt.r.RangeDeletions(); len(dels) > 0 {
			for _, i := range m.run[mt.lo:mt.hi] {
				st := &m.state[i]
				st.tomb = max(st.tomb, rangedel.Cover(dels, m.keys[i], m.seq))
			}
		}
		// Asked once: an ingested table's filter may load meanwhile.
		mt.filtered, mt.err = mt.r.ProbeFilter(&mt.filter)
		if mt.err != nil || !mt.filtered {
			continue
		}
		mt.probed = len(hs)
		for _, i := range m.run[mt.lo:mt.hi] {
			hs = append(hs, m.hashes[i])
			fs = append(fs, &mt.filter)
		}
	}
	may := slices.Grow(m.runMay[:0], len(hs))[:len(hs)]
	m.runHashes, m.runFilters, m.runMay = hs, fs, may
	if len(hs) > 0 {
		passed := filterblock.MayContainEach(fs, hs, may)
		d.metrics.filterProbes.Add(uint64(len(hs)))
		d.metrics.filterNegatives.Add(uint64(len(hs) - passed))
	}
	clear(fs) // the pointers into m.tables
	var falsePositives uint64
	for t := range m.tables {
		falsePositives += m.lookupTable(&m.tables[t])
	}
	if falsePositives > 0 {
		d.metrics.filterFalsePositives.Add(falsePositives)
	}
}

// lookupTable answers the keys of mt that its filter did not rule out from
// its data blocks, and those it did from its range deletions, and returns
// how many keys its filter passed that it does not hold.
func (m *multiGetter) lookupTable(mt *mgTable) (falsePositives uint64) {
	run := m.run[mt.lo:mt.hi]
	if mt.err != nil {
		for _, i := range run {
			m.fail(i, mt.err)
		}
		return 0
	}
	var may []bool
	if mt.filtered {
		may = m.runMay[mt.probed : mt.probed+len(run)]
	}
	keys := m.runKeys[:0]
	for j, i := range run {
		if !mt.filtered || may[j] {
			keys = append(keys, m.keys[i])
		}
	}
	m.runKeys = keys
	out := slices.Grow(m.runOut[:0], len(keys))[:len(keys)]
	m.runOut = out
	var n int
	var err error
	if len(keys) > 0 {
		n, err = mt.r.LookupCopyAll(keys, m.seq, out)
	}
	j := 0 // the next of keys and out
	for k, i := range run {
		st := &m.state[i]
		if mt.filtered && !may[k] {
			// The filter rules the key out; the table's range
			// deletions still apply.
		} else {
			o := j
			j++
			if o >= n {
				m.fail(i, err)
				continue
			}
			if out[o].Found {
				m.answer(i, out[o].Value, out[o].Trailer)
				continue
			}
			if mt.filtered {
				falsePositives++
			}
		}
		if st.tomb != 0 {
			m.fail(i, ErrNotFound)
		}
	}
	return falsePositives
}
