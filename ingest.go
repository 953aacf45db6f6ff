package bloomkv

import (
	"bytes"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bloomkv/bloomkv/filterblock"
	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/manifest"
	"github.com/bloomkv/bloomkv/internal/rangedel"
	"github.com/bloomkv/bloomkv/internal/vfs"
	"github.com/bloomkv/bloomkv/memtable"
	"github.com/bloomkv/bloomkv/sstable"
)

// Ingest adds the tables at paths to the store, atomically: after it
// returns, and after a crash at any point, the store holds every key of
// every table or none. The tables are written with sstable.Writer (Set,
// Delete, DeleteRange at sequence number 0), or by Pebble's writer in its
// RocksDBv2 format; their keys must be at sequence number 0, of user keys
// in strictly increasing order (one entry per key), sets, deletions and
// range deletions only, and the tables' key ranges (range deletions
// included) must not overlap one another. Each table is read and checked
// whole (every block's checksum, key order, sequence numbers, sizes)
// before anything changes; a table that fails is refused with an error
// naming its file (and offset), and nothing is ingested. An empty table is
// skipped.
//
// All the keys get one new sequence number, above every write before the
// call and below every write after it: they shadow the versions the store
// held, and snapshots taken before do not see them. Writes wait while the
// number is assigned; memtables holding keys (or range deletions) in the
// tables' ranges are flushed first. Each table goes, without a copy where
// the file system can hard-link it into the store's directory, to the
// lowest level from the base level down that no table of it or of a level
// above overlaps and no running compaction writes into over its range;
// one that overlaps level 0, or the base level, goes to level 0. The store
// records the sequence number with the table, whose file keeps its keys
// as written.
//
// On success the files at paths are removed: the store holds its own link
// or copy, and a file that stays a hard link of a store's table must not be
// written to. On failure they are left as they were. The files must not
// change during the call.
//
// Ingest needs format version FormatIngest; on a store of an older version
// it fails with an error wrapping ErrUnsupportedFormat, as raising the
// version (RatchetFormatVersion) locks out builds that do not know it and is
// the caller's decision. It fails with ErrClosed on a closed store and
// ErrReadOnly on one opened read-only.
func (d *DB) Ingest(paths []string) error {
	if d.closedFlag.Load() {
		return ErrClosed
	}
	if d.opts.ReadOnly {
		return ErrReadOnly
	}
	if len(paths) == 0 {
		return nil
	}
	start := time.Now()
	if v := d.FormatVersion(); v < FormatIngest {
		return fmt.Errorf("bloomkv: Ingest needs format version %v, the store is at %v: raise it with DB.RatchetFormatVersion(FormatIngest) "+
			"or Options.FormatVersion (builds that do not know it then cannot open the store): %w", FormatIngest, v, ErrUnsupportedFormat)
	}
	op := &ingestOp{}
	tables, err := d.loadIngestTables(paths)
	if err != nil {
		return err
	}
	for _, t := range tables {
		if t != nil {
			op.tables = append(op.tables, t)
		}
	}
	if err := checkDisjoint(op.tables); err != nil {
		return err
	}
	if len(op.tables) == 0 {
		return nil
	}
	// From the links to the edit, Close waits for the call (as for a
	// running Compact): it must not let the store go while links no edit
	// names are in its directory, under numbers it has not recorded.
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return ErrClosed
	}
	d.bgWG.Add(1)
	d.mu.Unlock()
	defer d.bgWG.Done()
	if err := d.linkIngest(op); err != nil {
		return err
	}
	if err := d.commit(&commitWaiter{ingest: op}); err != nil {
		if op.bgErr != nil {
			d.opts.EventListener.BackgroundError(op.bgErr)
		}
		return err
	}
	for _, t := range op.tables {
		if err := d.fs.Remove(t.path); err != nil {
			d.opts.Logger.Warn("bloomkv: removing an ingested file", "file", t.path, "err", err)
		}
	}
	info := IngestInfo{SeqNum: uint64(op.seq), FlushedMemTable: op.flushed, Duration: time.Since(start)}
	for _, t := range op.tables {
		info.Tables = append(info.Tables, IngestedTable{Path: t.path, FileNum: t.meta.FileNum, Level: t.level, Bytes: t.meta.Size, Linked: t.linked})
	}
	d.opts.EventListener.TableIngested(info)
	return nil
}

// IngestInfo describes a successful Ingest (EventListener.TableIngested).
type IngestInfo struct {
	// Tables are the tables ingested, in the order Ingest was given them
	// (empty ones left out).
	Tables []IngestedTable
	// SeqNum is the sequence number every key of the tables read at.
	SeqNum uint64
	// FlushedMemTable says memtables holding keys in the tables' ranges
	// were flushed first.
	FlushedMemTable bool
	Duration        time.Duration
}

// IngestedTable is one table Ingest added.
type IngestedTable struct {
	// Path is the file given to Ingest; FileNum its number in the store.
	Path    string
	FileNum uint64
	// Level is the level it went to, and Bytes its size.
	Level int
	Bytes uint64
	// Linked is true when the file was hard-linked into the store, false
	// when it was copied.
	Linked bool
}

// ingestOp is an Ingest under way.
type ingestOp struct {
	tables []*ingestTable
	// Set by applyIngestLocked: the sequence number assigned, whether
	// memtables were flushed, whether the manifest edit was written (it
	// may be durable even if the write failed), and the background error
	// a failed edit set, for the caller to report.
	seq     base.SeqNum
	flushed bool
	edited  bool
	bgErr   error
}

// ingestTable is one table of an ingestion.
type ingestTable struct {
	path string
	// meta holds the table's size, counts and bounds (as stored, at
	// sequence number 0); FileNum once it is linked into the store.
	meta   *manifest.FileMetadata
	dels   []rangedel.Tombstone // as stored
	hashes []uint64             // of its point entries' user keys, for the differential-file filter
	linked bool
	level  int
}

// loadIngestTables loads the tables at paths (loadIngestTable), several at
// once, up to one per core Go may use; the first failure in paths' order
// is returned.
func (d *DB) loadIngestTables(paths []string) ([]*ingestTable, error) {
	tables := make([]*ingestTable, len(paths))
	errs := make([]error, len(paths))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(len(paths), runtime.GOMAXPROCS(0)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < len(paths); i = int(next.Add(1) - 1) {
				tables[i], errs[i] = d.loadIngestTable(paths[i])
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return tables, nil
}

// loadIngestTable reads and checks the table at path for Ingest, whole, and
// syncs it, so that the link Ingest makes of it is durable once the store's
// directory is synced; an empty table gives nil.
func (d *DB) loadIngestTable(path string) (*ingestTable, error) {
	f, err := d.fs.Open(path)
	if err != nil {
		return nil, fmt.Errorf("bloomkv: Ingest: opening %s: %w", path, err)
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, fmt.Errorf("bloomkv: Ingest: %s: %w", path, err)
	}
	r, err := sstable.NewReader(f, size, sstable.ReaderOptions{FileName: path})
	if err != nil {
		return nil, fmt.Errorf("bloomkv: Ingest: %s refused: %w", path, err)
	}
	t := &ingestTable{path: path}
	var prev []byte
	havePrev := false // not prev != nil: the empty key is a key
	var entries, deletions uint64
	hash := d.diff.enabled
	if hash {
		t.hashes = make([]uint64, 0, min(r.Properties().NumEntries, 1<<20))
	}
	rep := r.CheckEntries(func(k base.InternalKey, v []byte, bh sstable.BlockHandle, off int) error {
		var why string
		switch {
		case k.SeqNum() != 0:
			why = fmt.Sprintf("has sequence number %d: a table for Ingest holds its keys at 0, and the store assigns their number", k.SeqNum())
		case k.Kind() != base.KindSet && k.Kind() != base.KindDelete:
			why = fmt.Sprintf("is of kind %v: Ingest takes sets, deletions and range deletions", k.Kind())
		case len(k.UserKey) > MaxKeySize:
			return fmt.Errorf("%s: data block %s: offset %d in block: %w: key of %d bytes exceeds MaxKeySize (%d)", path, bh, off, ErrTooLarge, len(k.UserKey), MaxKeySize)
		case len(v) > MaxValueSize:
			return fmt.Errorf("%s: data block %s: offset %d in block: %w: value of %d bytes exceeds MaxValueSize (%d)", path, bh, off, ErrTooLarge, len(v), MaxValueSize)
		case havePrev && bytes.Equal(prev, k.UserKey):
			why = "repeats the previous entry's user key: a table for Ingest holds one entry per key"
		}
		if why != "" {
			return fmt.Errorf("%s: data block %s: offset %d in block: key %s %s", path, bh, off, k, why)
		}
		prev, havePrev = append(prev[:0], k.UserKey...), true
		entries++
		if k.Kind() == base.KindDelete {
			deletions++
		}
		if hash {
			t.hashes = append(t.hashes, filterblock.Hash(k.UserKey))
		}
		return nil
	})
	if err := rep.Err(); err != nil {
		return nil, fmt.Errorf("bloomkv: Ingest: %s refused: %w", path, err)
	}
	t.dels = r.RangeDeletions()
	for _, rd := range t.dels {
		switch {
		case rd.SeqNum != 0:
			return nil, fmt.Errorf("bloomkv: Ingest: %s refused: range deletion [%q, %q) has sequence number %d: a table for Ingest holds its keys at 0", path, rd.Start, rd.End, rd.SeqNum)
		case len(rd.Start) > MaxKeySize || len(rd.End) > MaxKeySize:
			return nil, fmt.Errorf("bloomkv: Ingest: %s refused: %w: a range deletion's bound exceeds MaxKeySize (%d)", path, ErrTooLarge, MaxKeySize)
		}
	}
	lo, hi, err := r.KeyRange()
	if err != nil {
		return nil, fmt.Errorf("bloomkv: Ingest: %s refused: %w", path, err)
	}
	if lo == nil {
		return nil, nil
	}
	// Its writer may not have synced it; a sync of a synced file is cheap,
	// and one before the link costs less than one after: the link dirties
	// the file's inode, whose sync then waits for a journal commit of its
	// own, where the one directory sync after the links covers them all.
	if err := f.Sync(); err != nil {
		return nil, fmt.Errorf("bloomkv: Ingest: syncing %s: %w", path, err)
	}
	n := uint64(len(t.dels))
	t.meta = &manifest.FileMetadata{Size: uint64(size), Smallest: *lo, Largest: *hi, Entries: entries + n, Deletions: deletions + n}
	return t, nil
}

// checkDisjoint refuses tables whose key ranges overlap.
func checkDisjoint(tables []*ingestTable) error {
	sorted := slices.Clone(tables)
	slices.SortFunc(sorted, func(a, b *ingestTable) int { return bytes.Compare(a.meta.Smallest.UserKey, b.meta.Smallest.UserKey) })
	for i := 1; i < len(sorted); i++ {
		a, b := sorted[i-1], sorted[i]
		if !a.meta.Before(b.meta.Smallest.UserKey) {
			return fmt.Errorf("bloomkv: Ingest: %s (keys %q to %q) and %s (keys %q to %q) overlap: Ingest takes tables with disjoint key ranges",
				a.path, a.meta.Smallest.UserKey, a.meta.Largest.UserKey, b.path, b.meta.Smallest.UserKey, b.meta.Largest.UserKey)
		}
	}
	return nil
}

// linkIngest gives each table a file number and hard-links (or copies) it
// into the store's directory under that number, and syncs the directory
// (loadIngestTable synced the contents). On failure it removes what it
// added.
func (d *DB) linkIngest(op *ingestOp) error {
	d.mu.Lock()
	for _, t := range op.tables {
		t.meta.FileNum = d.allocFileNumLocked()
	}
	d.mu.Unlock()
	for i, t := range op.tables {
		name := d.path(tableName(t.meta.FileNum))
		if l, ok := d.fs.(vfs.Linker); ok {
			t.linked = l.Link(t.path, name) == nil
		}
		if !t.linked {
			// A copy (or a link, if it works this time), synced.
			if err := vfs.LinkOrCopy(d.fs, t.path, name); err != nil {
				d.removeIngested(op.tables[:i])
				return fmt.Errorf("bloomkv: Ingest: adding %s to the store as %s: %w", t.path, name, err)
			}
		}
	}
	if err := d.fs.SyncDir(d.dir); err != nil {
		d.removeIngested(op.tables)
		return fmt.Errorf("bloomkv: Ingest: syncing %s: %w", d.dir, err)
	}
	return nil
}

// removeIngested removes the store's links or copies of tables no edit
// names.
func (d *DB) removeIngested(tables []*ingestTable) {
	for _, t := range tables {
		if err := d.fs.Remove(d.path(tableName(t.meta.FileNum))); err != nil {
			d.opts.Logger.Warn("bloomkv: removing a table of a failed Ingest", "file", d.path(tableName(t.meta.FileNum)), "err", err)
		}
	}
}

// ingestStepLocked is an Ingest's step of the commit pipeline: it installs
// the tables (applyIngestLocked) unless the store is closed or has failed,
// and when no edit names them, removes their links. d.mu is held, and the
// caller leads the commit queue.
func (d *DB) ingestStepLocked(op *ingestOp) error {
	var err error
	switch {
	case d.closed:
		err = ErrClosed
	case d.bgErr != nil:
		err = d.bgErr
	default:
		err = d.applyIngestLocked(op)
	}
	if err != nil && !op.edited {
		// (An edit whose write failed may be durable: the next Open keeps
		// the tables or removes them as the manifest it replays says.)
		d.removeIngested(op.tables)
	}
	return err
}

// applyIngestLocked installs the tables of op, linked into the store, as a
// step of the commit pipeline: the caller leads the commit queue, so no
// write is under way and none starts until it is done. Memtables holding
// keys in the tables' ranges are frozen and flushed first (d.mu is released
// while it waits for the flush); then each table's level is picked, the
// next sequence number assigned, the edit logged and the state published
// with that number visible. d.mu is held on entry and on return. A WAL
// failure while freezing comes back as a *logFailure (reportLogFailure).
func (d *DB) applyIngestLocked(op *ingestOp) error {
	overlaps := func(m *memEntry) bool {
		return slices.ContainsFunc(op.tables, func(t *ingestTable) bool { return memOverlaps(m.mt, t.meta) })
	}
	if !d.mem.mt.Empty() && overlaps(d.mem) {
		if err := d.rotateLocked(); err != nil {
			return err
		}
	}
	for slices.ContainsFunc(d.imm, overlaps) {
		op.flushed = true
		if d.closed {
			return ErrClosed
		}
		if d.bgErr != nil {
			return d.bgErr
		}
		d.cond.Wait()
	}

	lbase := d.levelTargets(d.version, d.running).base
	seq := d.lastSeq + 1
	edit := &manifest.VersionEdit{}
	for _, t := range op.tables {
		t.level = d.ingestLevelLocked(t.meta, lbase)
		m := t.meta
		m.SmallestSeq, m.LargestSeq, m.SeqNumOverride = seq, seq, seq
		m.Smallest.Trailer = base.MakeTrailer(seq, m.Smallest.Kind())
		if !m.Largest.IsExclusiveSentinel() {
			m.Largest.Trailer = base.MakeTrailer(seq, m.Largest.Kind())
		}
		edit.NewFiles = append(edit.NewFiles, manifest.NewFile{Level: t.level, Meta: m})
	}
	if _, err := d.version.Apply(edit); err != nil {
		return fmt.Errorf("bloomkv: Ingest: placing the tables: %w", err) // nothing written
	}
	d.lastSeq = seq
	op.seq, op.edited = seq, true
	if err := d.logAndApplyLocked(edit); err != nil {
		// The edit may be durable though its write failed: as after a
		// failed compaction edit, the store takes no more edits, and the
		// next Open keeps the tables or removes them as the manifest it
		// replays says.
		err = fmt.Errorf("bloomkv: Ingest: recording the tables in the manifest failed; the store takes no more writes until reopened: %w", err)
		if d.bgErr == nil {
			d.bgErr, op.bgErr = err, err
		}
		d.cond.Broadcast()
		return err
	}
	// Before the state that reads the tables is published: the filter
	// counts every version above its base (difffilter.go), and the range
	// deletions there. A table in the base itself overlaps nothing above
	// it, so the filter's "no" for its keys is right as it is.
	b := baseLevel(d.version)
	ws := d.diff.writers.Load()
	for _, t := range op.tables {
		if len(t.dels) > 0 {
			dels := slices.Clone(t.dels)
			for i := range dels {
				dels[i].SeqNum = seq
			}
			d.diff.tableDels[t.meta.FileNum] = dels
		}
		if ws != nil && t.level < b {
			for _, f := range *ws {
				for _, h := range t.hashes {
					f.AddHash(h)
				}
			}
		}
	}
	d.publishLocked()
	d.visibleSeq.Store(uint64(seq))
	d.metrics.ingests.Add(1)
	for _, t := range op.tables {
		d.metrics.ingestedTables.Add(1)
		d.metrics.ingestedBytes.Add(t.meta.Size)
		d.metrics.levels[t.level].bytesIngested.Add(t.meta.Size)
	}
	d.cond.Broadcast() // the levels changed: compactions may be due
	return nil
}

// ingestLevelLocked returns the level for an ingested table with bounds m:
// the lowest level L from the base down such that no table of levels 0 to
// L overlaps m and no running compaction writes into L over m's range; level
// 0 when there is none (m overlaps level 0 or the base level). As in
// Pebble, a compaction writing into a level only keeps the table out of
// that level: its inputs lie in the levels it reads, which m does not
// overlap down to L, so its outputs hold no key of m's range, even if their
// bounds span it. The levels between 0 and the base hold no table, and none
// is put there: the dynamic level targets keep them empty. d.mu is held.
func (d *DB) ingestLevelLocked(m *manifest.FileMetadata, lbase int) int {
	lo, hi := m.Smallest.UserKey, m.Largest.UserKey // hi inclusive: safe for an exclusive end
	if len(d.version.Overlapping(0, lo, hi)) > 0 {
		return 0
	}
	target := 0
	for l := 1; l < manifest.NumLevels; l++ {
		if len(d.version.Overlapping(l, lo, hi)) > 0 {
			break
		}
		busy := slices.ContainsFunc(d.running, func(c *compaction) bool {
			return c.outputLevel == l && bytes.Compare(c.lo, hi) <= 0 && bytes.Compare(lo, c.hi) <= 0
		})
		if l >= lbase && !busy {
			target = l
		}
	}
	return target
}

// memOverlaps reports whether mt holds a point entry or a range deletion
// in m's key range.
func memOverlaps(mt *memtable.MemTable, m *manifest.FileMetadata) bool {
	lo := m.Smallest.UserKey
	it := mt.NewIter()
	ok := it.SeekGE(base.MakeInternalKey(lo, base.SeqNumMax, base.KindMax))
	in := ok && !m.Before(it.Key().UserKey) // its key is at most the table's largest
	it.Close()
	if in {
		return true
	}
	for _, t := range mt.RangeDels() {
		if bytes.Compare(t.End, lo) > 0 && !m.Before(t.Start) {
			return true
		}
	}
	return false
}
