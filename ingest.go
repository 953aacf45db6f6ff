package bloomkv

// Ingestion of external tables: their checks, hashing, placement in the
// levels and publication through the commit pipeline.

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/bloomkv/bloomkv/filterblock"
	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/manifest"
	"github.com/bloomkv/bloomkv/internal/rangedel"
	"github.com/bloomkv/bloomkv/memtable"
	"github.com/bloomkv/bloomkv/sstable"
	"github.com/bloomkv/bloomkv/vfs"
)

// Ingest adds the tables at paths to the store, atomically: after it
// returns, and after a crash at any point, the store holds every key of
// every table or none. The tables are written with sstable.Writer (Set,
// Delete, DeleteRange at sequence number 0), or by Pebble's writer in its
// RocksDBv2 format; their keys must be at sequence number 0, of user keys
// in strictly increasing order (one entry per key), sets, deletions and
// range deletions only, and the tables' key ranges (range deletions
// included) must not overlap one another. Before anything changes, Ingest
// checks what placing each table needs, as Pebble's Ingest does: its
// footer, index, properties (sequence numbers 0, no merge operands or range
// keys), range deletions and first and last entries; a table that fails is
// refused with an error naming its file (and offset), and nothing is
// ingested. The data blocks between are not read then: the store checks
// each as it first reads it from the file (its checksum, and its entries'
// order, against the index's separators too, sequence numbers, kinds and
// sizes), and a block that fails is an error wrapping ErrCorruption (or
// ErrTooLarge, for a key or value over the limits) for every read of it,
// never an answer from it: a Get or an iterator that
// reaches it fails, and so does a compaction that reads it, which, as for
// any table found damaged, leaves its inputs as they were and stops the
// store's writes until it is reopened. Options.VerifyIngestedTables makes
// Ingest read and check every table whole first, to refuse such a table
// instead. An empty table is skipped.
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
// A path naming one of the store's own files is refused. On success the
// files at paths are removed: the store holds its own link or copy, and a
// file that stays a hard link of a store's table must not be written to.
// On failure they are left as they were. The files must not change during
// the call.
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
	for _, p := range paths {
		if d.isStoreFile(p) {
			// Ingest would link it under a new number, then remove it: a
			// live table's file, or a log or manifest the store needs.
			return fmt.Errorf("bloomkv: Ingest: %s is a file of the store itself, not one to ingest", p)
		}
	}
	op := &ingestOp{}
	defer func() { d.releaseIngest(op.tables) }() // op.tables as they are at the return
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
	if err := d.hashIngestTables(op.tables); err != nil {
		return err
	}
	// From the links to the edit, Close waits for the call (as for a
	// running Compact): it must not let the store go while links no edit
	// names are in its directory, under numbers it has not recorded.
	d.mu.Lock()
	if d.mu.closed {
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
	d.loadFiltersLater(op.adopted)
	for _, t := range op.tables {
		if err := d.fs.Remove(t.path); err != nil {
			d.opts.Logger.Warn("bloomkv: removing an ingested file", "file", t.path, "err", err)
		}
	}
	info := IngestInfo{SeqNum: uint64(op.seq), FlushedMemTable: op.flushed, Duration: time.Since(start)}
	for _, t := range op.tables {
		info.Tables = append(info.Tables, IngestedTable{Path: t.path, FileNum: t.meta.FileNum, Level: t.level, Size: t.meta.Size, Linked: t.linked})
	}
	d.opts.EventListener.TableIngested(info)
	return nil
}

// loadFiltersLater reads, on a goroutine of its own that Close waits for,
// the filters of the tables an Ingest kept the readers of: it opened them
// without (sstable.ReaderOptions.DeferFilter), so that it returns without
// reading every table's filter (500 KiB for 400,000 keys). Until a table's
// filter is read, a Get of a key in its range reads its index and a data
// block. A filter that cannot be read is logged, and its table goes on
// without one (the table's own check reports it: DB.Check).
func (d *DB) loadFiltersLater(rs []adoptedTable) {
	if len(rs) == 0 {
		return
	}
	d.mu.Lock()
	if d.mu.closed {
		d.mu.Unlock()
		return
	}
	d.bgWG.Add(1)
	d.mu.Unlock()
	go func() {
		defer d.bgWG.Done()
		// A reference to the current read state keeps the tables it holds
		// open while their filters are read, as a Get's does; a table no
		// longer in it was compacted away meanwhile.
		s := d.acquire()
		defer d.release(s)
		for _, t := range rs {
			if d.closedFlag.Load() {
				return
			}
			if !s.version.HasFile(t.num) {
				continue
			}
			if err := t.r.LoadFilter(); err != nil {
				d.opts.Logger.Warn("bloomkv: reading an ingested table's filter; the table is read without it", "table", t.num, "err", err)
			}
		}
	}()
}

// adoptedTable is a table whose reader Ingest opened and the store kept.
type adoptedTable struct {
	num uint64
	r   *sstable.Reader
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
	// Level is the level it went to, and Size its size in bytes.
	Level int
	Size  uint64
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
	// adopted are the tables whose readers the store kept, whose filters
	// Ingest reads once the tables are in (loadFiltersLater).
	adopted []adoptedTable
}

// ingestTable is one table of an ingestion.
type ingestTable struct {
	path string
	// meta holds the table's size, counts and bounds (as stored, at
	// sequence number 0); FileNum, the number it has in the store.
	meta *manifest.FileMetadata
	dels []rangedel.Tombstone // as stored
	// hashes are of its point entries' user keys, for the
	// differential-file filter, once hashed (hashIngestTables).
	hashes []uint64
	hashed bool
	// r reads the table, through f (opened at path), until the store's
	// table cache adopts them (applyIngestLocked) or releaseIngest closes
	// them; nil after either.
	r      *sstable.Reader
	f      vfs.File
	linked bool
	level  int
}

// ingestSyncWidth is how many of the tables Ingest has loaded it syncs at
// once.
const ingestSyncWidth = 4

// isStoreFile reports whether path names a file of the store's own: in
// its directory (by path, or on the operating system's file system as the
// same directory, through symbolic links too), under a name the store
// gives its tables, logs and manifests.
func (d *DB) isStoreFile(path string) bool {
	if k, _ := parseName(filepath.Base(path)); k == kindUnknown {
		return false
	}
	dir, err1 := filepath.Abs(filepath.Dir(path))
	own, err2 := filepath.Abs(d.dir)
	if err1 == nil && err2 == nil && dir == own {
		return true
	}
	if d.fs != vfs.Default {
		return false
	}
	a, err1 := os.Stat(filepath.Dir(path))
	b, err2 := os.Stat(d.dir)
	return err1 == nil && err2 == nil && os.SameFile(a, b)
}

// loadIngestTables loads the tables at paths (loadIngestTable), several at
// once, up to one per core Go may use, and syncs each as its load ends, so
// that the link Ingest makes of it is durable once the store's directory is
// synced; the first failure in paths' order is returned. Its writer may
// not have synced it; and a sync before the link costs less than one
// after: the link dirties the file's inode, whose sync then waits for a
// journal commit of its own, where the one directory sync after the links
// covers them all.
//
// The syncs run apart from the loads: a sync is a wait for the device, not
// for a core (even of a file its writer synced, and the device serves them
// one after another however many are asked at once), and a load that
// waited for its own sync would hold its core idle meanwhile.
func (d *DB) loadIngestTables(paths []string) ([]*ingestTable, error) {
	tables := make([]*ingestTable, len(paths))
	errs := make([]error, len(paths))
	loaded := make(chan int, len(paths))
	var syncers sync.WaitGroup
	for range min(len(paths), ingestSyncWidth) {
		syncers.Add(1)
		go func() {
			defer syncers.Done()
			for i := range loaded {
				if err := tables[i].f.Sync(); err != nil {
					errs[i] = fmt.Errorf("bloomkv: Ingest: syncing %s: %w", paths[i], err)
				}
			}
		}()
	}
	_ = forEachParallel(len(paths), runtime.GOMAXPROCS(0), func(i int) error {
		t, err := d.loadIngestTable(paths[i])
		tables[i], errs[i] = t, err
		if err == nil && t != nil {
			loaded <- i
		}
		return err
	})
	close(loaded)
	syncers.Wait()
	for _, err := range errs {
		if err != nil {
			d.releaseIngest(tables)
			return nil, err
		}
	}
	return tables, nil
}

// releaseIngest closes the readers of tables the table cache did not adopt
// (nil entries are skipped). Blocks a failed Ingest left in the block cache,
// under file numbers no table will have, age out as any other.
func (d *DB) releaseIngest(tables []*ingestTable) {
	for _, t := range tables {
		if t == nil || t.f == nil {
			continue
		}
		t.f.Close()
		t.r, t.f = nil, nil
	}
}

// loadIngestTable reads and checks the table at path for Ingest (what
// placing it needs, checkIngestEnds, or with Options.VerifyIngestedTables
// all of it); an empty table gives nil. loadIngestTables syncs it.
func (d *DB) loadIngestTable(path string) (_ *ingestTable, err error) {
	f, err := d.fs.Open(path)
	if err != nil {
		return nil, fmt.Errorf("bloomkv: Ingest: opening %s: %w", path, err)
	}
	size, err := f.Size()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("bloomkv: Ingest: %s: %w", path, err)
	}
	if d.tables.mmap {
		f = vfs.MapForReading(f, size)
	}
	// Opened as the table cache opens the store's tables, under the file
	// number the table will have, so that the store keeps this reader.
	d.mu.Lock()
	num := d.allocFileNumLocked()
	d.mu.Unlock()
	t := &ingestTable{path: path, f: f, meta: &manifest.FileMetadata{FileNum: num}}
	defer func() {
		if err != nil || t.r == nil {
			d.releaseIngest([]*ingestTable{t})
		}
	}()
	// The override is set when the store assigns the sequence number
	// (Reassign), but the reader checks the data blocks it reads (its
	// first and last here, the hashes', the store's) from now on.
	ro := d.tables.readerOptions(num, path, 0)
	ro.IngestChecks = &d.tables.ingestChecks
	// The filter is read once the table is in (loadFiltersLater).
	ro.DeferFilter = true
	r, err := sstable.NewReader(f, size, ro)
	if err != nil {
		return nil, fmt.Errorf("bloomkv: Ingest: %s refused: %w", path, err)
	}
	var entries, deletions uint64
	if d.opts.VerifyIngestedTables {
		if entries, deletions, err = d.checkIngestEntries(r, t); err != nil {
			return nil, fmt.Errorf("bloomkv: Ingest: %s refused: %w", path, err)
		}
	} else {
		if err := checkIngestEnds(r, path); err != nil {
			return nil, fmt.Errorf("bloomkv: Ingest: %s refused: %w", path, err)
		}
		p := r.Properties()
		entries = p.NumEntries - min(p.NumRangeDeletions, p.NumEntries)
		deletions = min(p.NumDeletions-min(p.NumRangeDeletions, p.NumDeletions), entries)
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
		return nil, nil // (t.r is nil: the deferred release closes f)
	}
	n := uint64(len(t.dels))
	t.meta = &manifest.FileMetadata{FileNum: num, Size: uint64(size), Smallest: *lo, Largest: *hi, Entries: entries + n, Deletions: deletions + n}
	t.r = r
	return t, nil
}

// checkIngestEntries reads every entry of r and checks it for Ingest:
// sequence number 0, a set or a deletion, sizes within the limits, user keys
// strictly increasing (with every block's checksum and the table's
// structure, Reader.CheckEntries). It returns the counts of point entries
// and deletions, and fills t.hashes for the differential-file filter.
func (d *DB) checkIngestEntries(r *sstable.Reader, t *ingestTable) (entries, deletions uint64, err error) {
	var prev []byte
	havePrev := false // not prev != nil: the empty key is a key
	hash := d.mu.diff.enabled
	if hash {
		t.hashes = make([]uint64, 0, min(r.Properties().NumEntries, 1<<20))
		t.hashed = true
	}
	rep := r.CheckEntries(func(k base.InternalKey, v []byte, bh sstable.BlockHandle, off int) error {
		if err := checkIngestEntry(k, v); err != nil {
			return fmt.Errorf("%s: data block %s: offset %d in block: %w", t.path, bh, off, err)
		}
		if havePrev && bytes.Equal(prev, k.UserKey) {
			return fmt.Errorf("%s: data block %s: offset %d in block: key %s repeats the previous entry's user key: a table for Ingest holds one entry per key", t.path, bh, off, k)
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
	return entries, deletions, rep.Err()
}

// checkIngestEntry checks one entry of a table for Ingest: sequence number
// 0, a set or a deletion, key and value within MaxKeySize and MaxValueSize.
func checkIngestEntry(k base.InternalKey, v []byte) error {
	switch {
	case len(k.UserKey) > MaxKeySize:
		return fmt.Errorf("%w: key of %d bytes exceeds MaxKeySize (%d)", ErrTooLarge, len(k.UserKey), MaxKeySize)
	case len(v) > MaxValueSize:
		return fmt.Errorf("%w: value of %d bytes exceeds MaxValueSize (%d)", ErrTooLarge, len(v), MaxValueSize)
	case k.SeqNum() != 0:
		return fmt.Errorf("key %s has sequence number %d: a table for Ingest holds its keys at 0, and the store assigns their number", k, k.SeqNum())
	case k.Kind() != base.KindSet && k.Kind() != base.KindDelete:
		return fmt.Errorf("key %s is of kind %v: Ingest takes sets, deletions and range deletions", k, k.Kind())
	}
	return nil
}

// checkIngestEnds checks, without reading the table's data blocks but its
// first and last, what Ingest needs of the table at path to place it, as
// Pebble's Ingest does: its properties (sequence numbers 0 where it records
// them, no merge operands, no range keys), and its first and last entries
// (checkIngestEntry).
func checkIngestEnds(r *sstable.Reader, path string) error {
	p := r.Properties()
	if p.LargestSeqNum != 0 {
		return fmt.Errorf("%s: its properties record keys up to sequence number %d: a table for Ingest holds its keys at 0, and the store assigns their number", path, p.LargestSeqNum)
	}
	for _, name := range []string{"rocksdb.merge.operands", "pebble.num.range-key-sets", "pebble.num.range-key-unsets", "pebble.num.range-key-dels"} {
		if n, _ := binary.Uvarint(p.User[name]); n > 0 {
			return fmt.Errorf("%s: property %s is %d: Ingest takes sets, deletions and range deletions", path, name, n)
		}
	}
	it := r.NewIter()
	for i, end := range []func() bool{it.First, it.Last} {
		if !end() {
			break
		}
		if err := checkIngestEntry(it.Key(), it.Value()); err != nil {
			it.Close()
			return fmt.Errorf("%s: its %s entry: %w", path, [2]string{"first", "last"}[i], err)
		}
	}
	return it.Close()
}

// hashIngestTables hashes the keys of the tables that, as the store stands,
// go above the last level, for the differential-file filter; a table bound
// for the last level is either the base, whose keys the filter does not
// hold, or goes there into an empty store. applyIngestLocked hashes any
// table the store's changes since then put above the base after all.
func (d *DB) hashIngestTables(tables []*ingestTable) error {
	if !d.mu.diff.enabled {
		return nil
	}
	var todo []*ingestTable
	d.mu.Lock()
	lbase := d.levelTargets(d.mu.version, d.mu.running).base
	for _, t := range tables {
		if !t.hashed && d.ingestLevelLocked(t.meta, lbase) < manifest.NumLevels-1 {
			todo = append(todo, t)
		}
	}
	d.mu.Unlock()
	return forEachParallel(len(todo), runtime.GOMAXPROCS(0), func(i int) error { return d.hashIngestTable(todo[i]) })
}

// hashIngestTable fills t.hashes with the hashes of the user keys of its
// point entries, read past the block cache.
func (d *DB) hashIngestTable(t *ingestTable) error {
	hashes := make([]uint64, 0, min(t.r.Properties().NumEntries, 1<<20))
	it := t.r.NewCompactionIter()
	for ok := it.First(); ok; ok = it.Next() {
		hashes = append(hashes, filterblock.Hash(it.Key().UserKey))
	}
	if err := it.Close(); err != nil {
		return fmt.Errorf("bloomkv: Ingest: reading %s: %w", t.path, err)
	}
	t.hashes, t.hashed = hashes, true
	return nil
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

// linkIngest hard-links (or copies) each table into the store's directory
// under its file number, and syncs the directory
// (loadIngestTables synced the contents). On failure it removes what it
// added.
func (d *DB) linkIngest(op *ingestOp) error {
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
	case d.mu.closed:
		err = ErrClosed
	case d.mu.bgErr != nil:
		err = d.mu.bgErr
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
// while it waits for the flush, and for an edit under way); then each
// table's level is picked, the next sequence number assigned, the edit
// logged (d.mu released while it is synced; no compaction is picked
// meanwhile) and the state published with that number visible. d.mu is
// held on entry and on return. A WAL
// failure while freezing comes back as a *logFailure (reportLogFailure).
func (d *DB) applyIngestLocked(op *ingestOp) error {
	overlaps := func(m *memEntry) bool {
		return slices.ContainsFunc(op.tables, func(t *ingestTable) bool { return memOverlaps(m.mt, t.meta) })
	}
	if !d.mu.mem.mt.Empty() && overlaps(d.mu.mem) {
		if err := d.rotateLocked(); err != nil {
			return err
		}
	}
	for slices.ContainsFunc(d.mu.imm, overlaps) {
		op.flushed = true
		if d.mu.closed {
			return ErrClosed
		}
		if d.mu.bgErr != nil {
			return d.mu.bgErr
		}
		d.mu.cond.Wait()
	}
	// The levels are picked from the version the edit will apply to: not
	// one that an edit being written is about to replace.
	d.waitEditLocked()

	lbase := d.levelTargets(d.mu.version, d.mu.running).base
	seq := d.mu.lastSeq + 1
	edit := &manifest.VersionEdit{}
	for _, t := range op.tables {
		t.level = d.ingestLevelLocked(t.meta, lbase)
		if d.mu.diff.enabled && t.level < manifest.NumLevels-1 && !t.hashed {
			// hashIngestTables found it bound for the last level, but
			// the store changed since. Rare: hashed here, with writes
			// waiting.
			if err := d.hashIngestTable(t); err != nil {
				return err // nothing written
			}
		}
		m := t.meta
		m.SmallestSeq, m.LargestSeq, m.SeqNumOverride = seq, seq, seq
		m.Smallest.Trailer = base.MakeTrailer(seq, m.Smallest.Kind())
		if !m.Largest.IsExclusiveSentinel() {
			m.Largest.Trailer = base.MakeTrailer(seq, m.Largest.Kind())
		}
		edit.NewFiles = append(edit.NewFiles, manifest.NewFile{Level: t.level, Meta: m})
	}
	if _, err := d.mu.version.Apply(edit); err != nil {
		return fmt.Errorf("bloomkv: Ingest: placing the tables: %w", err) // nothing written
	}
	if err := d.mu.manifestErr; err != nil {
		// Nothing of this ingest is written: its links go (ingestStepLocked).
		return fmt.Errorf("bloomkv: Ingest: an earlier edit of the manifest failed: %w", err)
	}
	d.mu.lastSeq = seq
	op.seq, op.edited = seq, true
	if err := d.logAndApplyLocked(edit); err != nil {
		// The edit may be durable though its write failed: as after a
		// failed compaction edit, the store takes no more edits, and the
		// next Open keeps the tables or removes them as the manifest it
		// replays says.
		err = fmt.Errorf("bloomkv: Ingest: recording the tables in the manifest failed; the store takes no more writes until reopened: %w", err)
		if d.mu.bgErr == nil {
			d.mu.bgErr, op.bgErr = err, err
		}
		d.mu.cond.Broadcast()
		return err
	}
	// Before the state that reads the tables is published: the filter
	// counts every version above its base (difffilter.go), and the range
	// deletions there. A table in the base itself overlaps nothing above
	// it, so the filter's "no" for its keys is right as it is.
	b := baseLevel(d.mu.version)
	ws := d.mu.diff.writers.Load()
	for _, t := range op.tables {
		if len(t.dels) > 0 {
			dels := slices.Clone(t.dels)
			for i := range dels {
				dels[i].SeqNum = seq
			}
			d.mu.diff.tableDels[t.meta.FileNum] = dels
		}
		if ws != nil && t.level < b {
			for _, f := range *ws {
				for _, h := range t.hashes {
					f.AddHash(h)
				}
			}
		}
	}
	// The readers Ingest opened become the store's, for the tables it
	// linked (a copy is another file), before any read can reach them.
	for _, t := range op.tables {
		if t.linked && t.r.Reassign(d.path(tableName(t.meta.FileNum)), seq) == nil {
			d.tables.adopt(t.meta.FileNum, t.r, t.f)
			op.adopted = append(op.adopted, adoptedTable{t.meta.FileNum, t.r})
			t.r, t.f = nil, nil
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
	d.mu.cond.Broadcast() // the levels changed: compactions may be due
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
	if len(d.mu.version.Overlapping(0, lo, hi)) > 0 {
		return 0
	}
	target := 0
	for l := 1; l < manifest.NumLevels; l++ {
		if len(d.mu.version.Overlapping(l, lo, hi)) > 0 {
			break
		}
		busy := slices.ContainsFunc(d.mu.running, func(c *compaction) bool {
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
