// Package bloomkv is an embedded LSM key-value store whose sstables each
// carry a cache-line-blocked Bloom filter, so that a read of a key a table
// does not hold costs one cache line of memory instead of a disk read.
//
// Open a store with Open; write with Set, Delete or a Batch and Apply; read
// with Get; Close it when done. A write made with Sync survives a crash or
// power loss once it returns; one made with NoSync may be lost with a recent
// suffix of writes, never leaving the store inconsistent.
package bloomkv

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/bloomkv/bloomkv/filterblock"
	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/batchrepr"
	"github.com/bloomkv/bloomkv/internal/cache"
	"github.com/bloomkv/bloomkv/internal/manifest"
	"github.com/bloomkv/bloomkv/internal/rangedel"
	"github.com/bloomkv/bloomkv/internal/record"
	"github.com/bloomkv/bloomkv/internal/vfs"
	"github.com/bloomkv/bloomkv/memtable"
)

// ErrCorruption is wrapped by every error that reports stored data failing a
// format check or a checksum. Test for it with errors.Is.
var ErrCorruption = base.ErrCorruption

// ErrNotFound is returned by Get for a key the store does not hold.
var ErrNotFound = errors.New("bloomkv: not found")

// ErrClosed is returned by operations on a closed DB.
var ErrClosed = errors.New("bloomkv: closed")

// ErrReadOnly is returned by writes to a store opened ReadOnly.
var ErrReadOnly = errors.New("bloomkv: store opened read-only")

// memEntry is a memtable and the WAL that holds its writes (0 for none).
type memEntry struct {
	mt     *memtable.MemTable
	logNum uint64
}

// readState is what a read needs, swapped atomically as it changes. Its
// reference count keeps its version's tables from deletion while reads use
// them: the DB holds one reference to the current state, each Get another.
type readState struct {
	mem     *memEntry
	imm     []*memEntry // oldest first
	version *manifest.Version
	refs    atomic.Int32
}

// DB is an open store. It is safe for concurrent use.
type DB struct {
	dir  string
	opts *Options
	fs   vfs.FS
	lock io.Closer

	cache  *cache.Cache
	tables *tableCache

	// mu guards the fields below it, and manifest writes.
	mu          sync.Mutex
	cond        *sync.Cond // flushes done, stalls over, background errors
	mem         *memEntry
	imm         []*memEntry
	version     *manifest.Version
	nextFileNum uint64
	logNumber   uint64 // WALs below it are in tables
	lastSeq     base.SeqNum
	manifest    vfs.File
	manifestW   *record.Writer
	manifestNum uint64
	// manifestLastEdit is the offset of the last edit Open read from the
	// manifest, for errors about what it records.
	manifestLastEdit int64
	// closedLogs holds the sizes the manifest recorded for WALs when the
	// store closed cleanly (manifest.ClosedLog), by log number.
	closedLogs map[uint64]uint64
	bgErr      error // a failed flush or WAL write: the store takes no more writes
	closed     bool
	busy       map[uint64]bool // tables being compacted
	running    []*compaction
	fileRefs   map[uint64]int // read states referencing each table
	snapshots  []base.SeqNum  // read sequence numbers of open snapshots, ascending
	// walBroken is set when a WAL write or sync failed. rescuing, set with
	// it, has frozen memtables flushed in spite of bgErr, since they hold
	// acknowledged writes the WAL may lack (walFailed); a failed flush
	// clears it.
	walBroken, rescuing bool
	// compactionGate, when set (tests only), is received from before each
	// compaction starts.
	compactionGate chan struct{}

	// The commit pipeline (commit.go); the WAL belongs to the leader.
	commitMu   sync.Mutex
	commitCond *sync.Cond
	queue      []*commitWaiter
	group      []*commitWaiter // the leader's copy of its group, reused
	batches    sync.Pool       // *Batch for Set, Delete and DeleteRange
	wal        *logFile
	walW       *record.Writer

	visibleSeq atomic.Uint64 // reads see sequence numbers up to this
	state      atomic.Pointer[readState]
	closedFlag atomic.Bool
	bgWG       sync.WaitGroup

	metrics dbMetrics
}

type dbMetrics struct {
	filterProbes, filterNegatives, filterFalsePositives atomic.Uint64
	walBytes, flushes, flushBytes                       atomic.Uint64
	compactions, compactBytesIn, compactBytesOut        atomic.Uint64
	moves                                               atomic.Uint64
	snapshots                                           atomic.Int64
	stalls                                              atomic.Uint64
	stallNanos                                          atomic.Int64
	levels                                              [manifest.NumLevels]levelCounters
}

type levelCounters struct {
	bytesWritten, bytesRead, bytesMoved, compactions atomic.Uint64
}

// Open opens the store in dir, creating it unless opts.ReadOnly. A nil opts
// means the defaults. Only one DB may have a directory open at a time; a
// second Open fails with an error wrapping vfs.ErrLocked.
func Open(dir string, opts *Options) (*DB, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	d := &DB{dir: dir, opts: o, fs: o.FS, fileRefs: map[uint64]int{}, busy: map[uint64]bool{}}
	d.cond = sync.NewCond(&d.mu)
	d.commitCond = sync.NewCond(&d.commitMu)
	if !o.ReadOnly {
		if err := d.fs.MkdirAll(dir); err != nil {
			return nil, fmt.Errorf("bloomkv: creating %s: %w", dir, err)
		}
	}
	if o.ReadOnly {
		// Look before locking: locking creates LOCK, and a read-only open
		// writes nothing where there is no store.
		f, err := d.fs.Open(vfs.Join(dir, currentName))
		if err != nil {
			return nil, fmt.Errorf("bloomkv: opening %s read-only: no store there: %w", dir, err)
		}
		f.Close()
	}
	if d.lock, err = d.fs.Lock(vfs.Join(dir, lockName)); err != nil {
		if errors.Is(err, vfs.ErrLocked) {
			return nil, fmt.Errorf("bloomkv: %s is in use by another process or DB: %w", dir, err)
		}
		return nil, fmt.Errorf("bloomkv: locking %s: %w", dir, err)
	}
	d.cache = cache.New(o.CacheSize, cache.Options{})
	d.tables = &tableCache{fs: d.fs, dir: dir, cache: d.cache, tables: map[uint64]*openTable{}}
	if err := d.open(); err != nil {
		d.tables.close()
		if d.manifest != nil {
			d.manifest.Close()
		}
		if d.wal != nil {
			d.wal.Close()
		}
		d.lock.Close()
		return nil, err
	}
	if !o.ReadOnly {
		d.bgWG.Add(1 + o.MaxConcurrentCompactions)
		go d.flushLoop()
		for range o.MaxConcurrentCompactions {
			go d.compactLoop()
		}
	}
	return d, nil
}

func (d *DB) path(name string) string { return vfs.Join(d.dir, name) }

func (d *DB) open() error {
	manNum, err := readCurrent(d.fs, d.dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if d.opts.ReadOnly {
			return fmt.Errorf("bloomkv: opening %s read-only: no store there (no %s)", d.dir, currentName)
		}
		if names, lerr := d.fs.List(d.dir); lerr == nil {
			for _, n := range names {
				if k, _ := parseName(n); k == kindTable {
					return fmt.Errorf("bloomkv: %s holds tables but no %s: refusing to start a new store over them", d.dir, currentName)
				}
			}
		}
		d.version = &manifest.Version{}
		d.nextFileNum = 1
	case err != nil:
		return err
	default:
		if d.opts.ErrorIfExists {
			return fmt.Errorf("bloomkv: a store exists in %s (ErrorIfExists)", d.dir)
		}
		if err := d.loadManifest(manNum); err != nil {
			return err
		}
	}

	mem, err := d.replayWALs()
	if err != nil {
		return err
	}
	if d.opts.ReadOnly {
		d.mem = &memEntry{mt: memtable.NewSized(d.opts.MemTableSize)}
		if !mem.Empty() {
			d.imm = []*memEntry{{mt: mem}}
		}
		d.visibleSeq.Store(uint64(d.lastSeq))
		d.publish()
		return nil
	}

	// Flush what the WALs held, start a WAL, and record it all in a new
	// manifest; CURRENT switches to it last, so a crash on the way leaves
	// the old manifest and WALs in charge.
	edit := &manifest.VersionEdit{}
	if !mem.Empty() {
		meta, err := d.writeTable(mem, d.allocFileNum())
		if err != nil {
			return err
		}
		if meta != nil {
			edit.NewFiles = append(edit.NewFiles, manifest.NewFile{Level: 0, Meta: meta})
		}
	}
	if d.version, err = d.version.Apply(edit); err != nil {
		return err
	}
	// The new manifest names the new WAL before the WAL exists: a crash or
	// failure before CURRENT switches leaves the old manifest and WALs in
	// charge with no new log among them (a new empty log there would turn
	// a torn old one into a "torn log that is not the last"); a missing WAL
	// at or above the log number is harmless.
	walNum := d.allocFileNum()
	d.logNumber = walNum
	if err := d.writeNewManifest(); err != nil {
		return err
	}
	if err := d.createWAL(walNum); err != nil {
		return err
	}
	d.mem = &memEntry{mt: memtable.NewSized(d.opts.MemTableSize), logNum: walNum}
	d.visibleSeq.Store(uint64(d.lastSeq))
	d.publish()
	d.deleteObsolete()
	return nil
}

func (d *DB) allocFileNum() uint64 {
	n := d.nextFileNum
	d.nextFileNum++
	return n
}

// loadManifest replays manifest num into the version and counters.
func (d *DB) loadManifest(num uint64) error {
	name := d.path(manifestName(num))
	f, err := d.fs.Open(name)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return base.CorruptionErrorf("bloomkv: %s names %s, which is missing", d.path(currentName), name)
		}
		return fmt.Errorf("bloomkv: opening %s: %w", name, err)
	}
	defer f.Close()
	r, err := record.NewReader(f, name)
	if err != nil {
		return err
	}
	v := &manifest.Version{}
	sawComparer := false
	for i := 0; ; i++ {
		rec, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		d.manifestLastEdit = r.Offset()
		e, err := manifest.Decode(rec)
		if err != nil {
			return fmt.Errorf("%s: edit %d: %w", name, i, err)
		}
		if e.ComparerName != "" {
			if e.ComparerName != base.ComparerName {
				return fmt.Errorf("bloomkv: %s: store ordered by %q, not %q", name, e.ComparerName, base.ComparerName)
			}
			sawComparer = true
		}
		if v, err = v.Apply(e); err != nil {
			return fmt.Errorf("%s: edit %d: %w", name, i, err)
		}
		d.logNumber = max(d.logNumber, e.LogNumber)
		if e.ClosedLog.Num != 0 {
			if d.closedLogs == nil {
				d.closedLogs = map[uint64]uint64{}
			}
			d.closedLogs[e.ClosedLog.Num] = e.ClosedLog.Size
		}
		d.nextFileNum = max(d.nextFileNum, e.NextFileNum)
		d.lastSeq = max(d.lastSeq, e.LastSeq)
	}
	if off, why, torn := r.TornTail(); torn {
		d.opts.Logger.Warn("bloomkv: dropped a torn record at the end of the manifest", "file", name, "offset", off, "reason", why)
	}
	if !sawComparer {
		return base.CorruptionErrorf("bloomkv: %s holds no comparer record (last edit read at offset %d)", name, d.manifestLastEdit)
	}
	for _, f := range v.AllFiles() {
		d.nextFileNum = max(d.nextFileNum, f.FileNum+1)
		d.lastSeq = max(d.lastSeq, f.LargestSeq)
	}
	d.nextFileNum = max(d.nextFileNum, num+1, d.logNumber+1)
	d.manifestNum = num
	d.version = v
	return nil
}

// replayWALs reads the WALs at or above the log number into a memtable.
func (d *DB) replayWALs() (*memtable.MemTable, error) {
	names, err := d.fs.List(d.dir)
	if err != nil {
		return nil, fmt.Errorf("bloomkv: listing %s: %w", d.dir, err)
	}
	var logs []uint64
	for _, n := range names {
		k, num := parseName(n)
		if k == kindLog && num >= d.logNumber {
			logs = append(logs, num)
		}
		if k != kindUnknown {
			d.nextFileNum = max(d.nextFileNum, num+1)
		}
	}
	slices.Sort(logs)
	if err := d.checkFilesPresent(names, logs); err != nil {
		return nil, err
	}
	mem := memtable.NewSized(d.opts.MemTableSize)
	tornIn := "" // a log that ended torn; only later logs without records may follow
	for _, num := range logs {
		name := d.path(logName(num))
		f, err := d.fs.Open(name)
		if err != nil {
			return nil, fmt.Errorf("bloomkv: opening %s: %w", name, err)
		}
		closedSize, closed := d.closedLogs[num]
		if closed {
			size, err := f.Size()
			if err == nil && uint64(size) < closedSize {
				err = base.CorruptionErrorf("bloomkv: %s ends at offset %d, but was %d bytes, synced, when the store last closed: synced writes are lost",
					name, size, closedSize)
			} else if err != nil {
				err = fmt.Errorf("bloomkv: %s: %w", name, err)
			}
			if err != nil {
				f.Close()
				return nil, err
			}
		}
		r, err := record.NewReader(f, name)
		f.Close()
		if err != nil {
			return nil, err
		}
		for {
			rec, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				return nil, err
			}
			if tornIn != "" {
				return nil, base.CorruptionErrorf("bloomkv: %s ends torn but a later log, %s, holds records", tornIn, name)
			}
			seq, count, err := batchrepr.Decode(rec, nil)
			if err != nil {
				return nil, fmt.Errorf("bloomkv: %s: %w", name, err)
			}
			mem.Apply(&batchEntries{data: rec})
			if count > 0 {
				d.lastSeq = max(d.lastSeq, seq+base.SeqNum(count)-1)
			}
		}
		if off, why, torn := r.TornTail(); torn {
			if closed && uint64(off) < closedSize {
				// The store closed cleanly with this log whole: no crash
				// tore it.
				return nil, base.CorruptionErrorf("bloomkv: %s: damaged record at offset %d (%s) in a log the store closed cleanly", name, off, why)
			}
			if tornIn != "" {
				return nil, base.CorruptionErrorf("bloomkv: %s and %s both end torn", tornIn, name)
			}
			tornIn = name
			d.opts.Logger.Warn("bloomkv: dropped a torn record at the end of the write-ahead log", "file", name, "offset", off, "reason", why)
		}
	}
	return mem, nil
}

// checkFilesPresent compares the directory's files with the manifest just
// read: every table it records must exist, and so must the log it names as
// the oldest holding unflushed writes, if any later log exists. Either
// missing means the manifest lost edits it once had (a table or a log is
// deleted only once an edit superseding it is durable), so the state it
// describes is not the store's: opening would return old values or lose
// writes without a word.
func (d *DB) checkFilesPresent(names []string, logs []uint64) error {
	if d.manifestNum == 0 {
		return nil // a new store
	}
	manifestPath := fmt.Sprintf("%s (last edit at offset %d)", d.path(manifestName(d.manifestNum)), d.manifestLastEdit)
	have := make(map[string]bool, len(names))
	for _, n := range names {
		have[n] = true
	}
	for l, files := range d.version.Levels {
		for _, f := range files {
			if !have[tableName(f.FileNum)] {
				return base.CorruptionErrorf("bloomkv: %s records L%d table %s, which is missing: the manifest has lost edits or the table was deleted",
					manifestPath, l, d.path(tableName(f.FileNum)))
			}
		}
	}
	if len(logs) > 0 && logs[0] != d.logNumber {
		return base.CorruptionErrorf("bloomkv: %s records %s as the oldest log with unflushed writes, but it is missing and a later log, %s, exists: the manifest has lost edits",
			manifestPath, d.path(logName(d.logNumber)), d.path(logName(logs[0])))
	}
	return nil
}

// batchEntries is a batch as the memtable reads it (memtable.Batch): its
// encoding, already checked. A pointer to it fits in an interface without
// an allocation, which a commit would otherwise make.
type batchEntries Batch

func (b *batchEntries) Each(fn func(key base.InternalKey, value []byte)) {
	batchrepr.Decode(b.data, func(seq base.SeqNum, e batchrepr.Entry) {
		fn(base.MakeInternalKey(e.Key, seq, e.Kind), e.Value)
	})
}

func (d *DB) createWAL(num uint64) error {
	f, err := d.fs.Create(d.path(logName(num)))
	if err != nil {
		return fmt.Errorf("bloomkv: creating %s: %w", d.path(logName(num)), err)
	}
	if err := d.fs.SyncDir(d.dir); err != nil {
		f.Close()
		return fmt.Errorf("bloomkv: syncing %s: %w", d.dir, err)
	}
	d.wal = newLogFile(f, d.path(logName(num)), 0, func(err error) { d.walFailed(err) })
	d.walW = record.NewWriter(d.wal, 0)
	return nil
}

// writeNewManifest writes a manifest holding the whole current state and
// points CURRENT at it.
func (d *DB) writeNewManifest() error {
	num := d.allocFileNum()
	name := d.path(manifestName(num))
	f, err := d.fs.Create(name)
	if err != nil {
		return fmt.Errorf("bloomkv: creating %s: %w", name, err)
	}
	w := record.NewWriter(f, 0)
	snap := &manifest.VersionEdit{ComparerName: base.ComparerName, LogNumber: d.logNumber, NextFileNum: d.nextFileNum, LastSeq: d.lastSeq}
	for l, files := range d.version.Levels {
		for _, m := range files {
			snap.NewFiles = append(snap.NewFiles, manifest.NewFile{Level: l, Meta: m})
		}
	}
	_, err = w.Write(snap.Encode())
	if err == nil {
		err = w.Flush()
	}
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = setCurrent(d.fs, d.dir, num)
	}
	if err != nil {
		f.Close()
		return fmt.Errorf("bloomkv: writing %s: %w", name, err)
	}
	if d.manifest != nil {
		d.manifest.Close()
	}
	d.manifest, d.manifestW, d.manifestNum = f, w, num
	return nil
}

// logAndApply records edit in the manifest (synced) and installs the new
// version. d.mu is held.
func (d *DB) logAndApply(edit *manifest.VersionEdit) error {
	edit.NextFileNum, edit.LastSeq = d.nextFileNum, d.lastSeq
	v, err := d.version.Apply(edit)
	if err != nil {
		return err
	}
	if _, err := d.manifestW.Write(edit.Encode()); err != nil {
		return err
	}
	if err := d.manifestW.Flush(); err != nil {
		return err
	}
	if err := d.manifest.Sync(); err != nil {
		return fmt.Errorf("bloomkv: syncing %s: %w", d.path(manifestName(d.manifestNum)), err)
	}
	d.version = v
	if edit.LogNumber != 0 {
		d.logNumber = edit.LogNumber
	}
	return nil
}

// publish installs the read state for mem, imm and version. d.mu is held (or
// the DB is not yet shared).
func (d *DB) publish() {
	s := &readState{mem: d.mem, imm: slices.Clone(d.imm), version: d.version}
	s.refs.Store(1)
	for _, f := range s.version.AllFiles() {
		d.fileRefs[f.FileNum]++
	}
	if old := d.state.Swap(s); old != nil {
		d.unrefLocked(old)
	}
}

// acquire returns the current read state with a reference taken. A state
// whose count has reached zero is being released; the current one is newer.
func (d *DB) acquire() *readState {
	for {
		s := d.state.Load()
		if n := s.refs.Load(); n > 0 && s.refs.CompareAndSwap(n, n+1) {
			return s
		}
	}
}

// release drops a reference acquire took.
func (d *DB) release(s *readState) {
	if s.refs.Add(-1) == 0 {
		d.mu.Lock()
		d.releaseFilesLocked(s)
		d.mu.Unlock()
	}
}

func (d *DB) unrefLocked(s *readState) {
	if s.refs.Add(-1) == 0 {
		d.releaseFilesLocked(s)
	}
}

// releaseFilesLocked drops a released state's references to its tables and
// deletes those no state references and no version holds.
func (d *DB) releaseFilesLocked(s *readState) {
	live := map[uint64]bool{}
	for _, f := range d.version.AllFiles() {
		live[f.FileNum] = true
	}
	for _, f := range s.version.AllFiles() {
		if d.fileRefs[f.FileNum]--; d.fileRefs[f.FileNum] > 0 || live[f.FileNum] {
			continue
		}
		delete(d.fileRefs, f.FileNum)
		d.tables.evict(f.FileNum)
		d.cache.EvictFile(f.FileNum)
		if err := d.fs.Remove(d.path(tableName(f.FileNum))); err != nil {
			d.opts.Logger.Warn("bloomkv: removing an obsolete table", "file", d.path(tableName(f.FileNum)), "err", err)
		}
	}
}

// deleteObsolete removes, at open, WALs below the log number, manifests
// other than the live one, and tables no version holds (a flush cut short by
// a crash). Failures are logged, not fatal.
func (d *DB) deleteObsolete() {
	names, err := d.fs.List(d.dir)
	if err != nil {
		return
	}
	live := map[uint64]bool{}
	for _, f := range d.version.AllFiles() {
		live[f.FileNum] = true
	}
	for _, n := range names {
		kind, num := parseName(n)
		if strings.HasPrefix(n, currentName+".") && strings.HasSuffix(n, ".dbtmp") {
			d.fs.Remove(d.path(n)) // a CURRENT update cut short
			continue
		}
		obsolete := (kind == kindLog && num < d.logNumber) ||
			(kind == kindManifest && num != d.manifestNum) ||
			(kind == kindTable && !live[num])
		if obsolete {
			if err := d.fs.Remove(d.path(n)); err != nil {
				d.opts.Logger.Warn("bloomkv: removing an obsolete file", "file", d.path(n), "err", err)
			}
		}
	}
}

// Get returns a copy of the value stored under key, or ErrNotFound.
func (d *DB) Get(key []byte) ([]byte, error) {
	if d.closedFlag.Load() {
		return nil, ErrClosed
	}
	if err := checkKey(key); err != nil {
		return nil, err
	}
	// The state first, then the sequence number: a compaction in the state
	// kept the newest version of each key below the visible sequence
	// number of its time, which the one read now is at or above.
	s := d.acquire()
	defer d.release(s)
	seq := base.SeqNum(d.visibleSeq.Load()) + 1
	return d.get(s, key, seq)
}

// get reads key as of seq from the sources of s, newest first. tomb is the
// newest range deletion seen so far covering key: a point entry older than
// it is deleted, and once one is seen, older sources can only hold older
// entries (a table's key range includes its range deletions, so the LSM
// order holds for them as for points).
func (d *DB) get(s *readState, key []byte, seq base.SeqNum) ([]byte, error) {
	var tomb base.SeqNum
	hash := filterblock.Hash(key) // for the memtables' filters and the tables'
	for i := len(s.imm); i >= 0; i-- {
		mt := s.mem.mt
		if i < len(s.imm) {
			mt = s.imm[i].mt
		}
		v, ik, ok := mt.GetHash(key, hash, seq)
		tomb = max(tomb, mt.RangeDelCover(key, seq))
		if ok {
			if ik.Kind() == base.KindSet {
				v = append(make([]byte, 0, len(v)), v...)
			}
			return found(v, ik.Trailer, tomb)
		}
		if tomb != 0 {
			return nil, ErrNotFound
		}
	}
	for l := range manifest.NumLevels {
		files := s.version.Levels[l]
		if l > 0 {
			f := s.version.Find(l, key)
			if f == nil {
				continue
			}
			files = []*manifest.FileMetadata{f}
		}
		for _, f := range files {
			if !f.Overlaps(key, key) {
				continue
			}
			v, tr, ok, t, err := d.getFromTable(f, key, hash, seq)
			if err != nil {
				return nil, err
			}
			tomb = max(tomb, t)
			if ok {
				return found(v, tr, tomb)
			}
			if tomb != 0 {
				return nil, ErrNotFound
			}
		}
	}
	return nil, ErrNotFound
}

// found turns the newest visible point entry (its value, already the
// caller's copy, and its trailer) into Get's answer, given the newest range
// deletion covering it.
func found(v []byte, tr base.Trailer, tomb base.SeqNum) ([]byte, error) {
	if tomb > tr.SeqNum() {
		return nil, ErrNotFound
	}
	switch tr.Kind() {
	case base.KindSet:
		return v, nil
	case base.KindDelete:
		return nil, ErrNotFound
	}
	return nil, base.CorruptionErrorf("bloomkv: entry of unknown kind %v", tr.Kind())
}

// getFromTable looks key up in a table whose range holds it: its range
// deletions, then its filter, then its blocks, counting the filter's
// answers. tomb is the newest range deletion of the table covering key; v is
// a copy of a set's value.
func (d *DB) getFromTable(f *manifest.FileMetadata, key []byte, hash uint64, seq base.SeqNum) (v []byte, tr base.Trailer, ok bool, tomb base.SeqNum, err error) {
	r, err := d.tables.get(f.FileNum)
	if err != nil {
		return nil, 0, false, 0, err
	}
	tomb = rangedel.Cover(r.RangeDeletions(), key, seq)
	if r.HasFilter() {
		d.metrics.filterProbes.Add(1)
		ok, err := r.MayContainHash(hash)
		if err != nil {
			return nil, 0, false, 0, err
		}
		if !ok {
			d.metrics.filterNegatives.Add(1)
			return nil, 0, false, tomb, nil
		}
	}
	v, tr, ok, err = r.LookupCopy(key, seq)
	if err == nil && !ok && r.HasFilter() {
		d.metrics.filterFalsePositives.Add(1)
	}
	return v, tr, ok, tomb, err
}

// Set writes value under key.
func (d *DB) Set(key, value []byte, o *WriteOptions) error {
	b := d.getBatch()
	defer d.putBatch(b)
	if err := b.Set(key, value); err != nil {
		return err
	}
	return d.Apply(b, o)
}

// Delete removes key.
func (d *DB) Delete(key []byte, o *WriteOptions) error {
	b := d.getBatch()
	defer d.putBatch(b)
	if err := b.Delete(key); err != nil {
		return err
	}
	return d.Apply(b, o)
}

// DeleteRange removes every key in [start, end) written before it. start
// must not sort after end; an empty range does nothing.
func (d *DB) DeleteRange(start, end []byte, o *WriteOptions) error {
	b := d.getBatch()
	defer d.putBatch(b)
	if err := b.DeleteRange(start, end); err != nil {
		return err
	}
	return d.Apply(b, o)
}

// Apply writes every write of b atomically: after a crash all of them are in
// the store or none is. A nil o means NoSync. b may be reused once Apply
// returns, and must not be applied by two calls at once.
func (d *DB) Apply(b *Batch, o *WriteOptions) error {
	if d.closedFlag.Load() {
		return ErrClosed
	}
	if d.opts.ReadOnly {
		return ErrReadOnly
	}
	if b == nil || b.Empty() {
		return nil
	}
	w := &b.waiter
	*w = commitWaiter{batch: b, sync: o != nil && o.Sync}
	err := d.commit(w)
	*w = commitWaiter{}
	return err
}

// Flush writes the memtable to a table and waits for it.
func (d *DB) Flush() error {
	if d.closedFlag.Load() {
		return ErrClosed
	}
	if d.opts.ReadOnly {
		return ErrReadOnly
	}
	w := &commitWaiter{flush: true}
	if err := d.commit(w); err != nil {
		return err
	}
	if w.flushed == nil {
		return nil // nothing to flush
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for slices.Contains(d.imm, w.flushed) && d.bgErr == nil && !d.closed {
		d.cond.Wait()
	}
	if d.bgErr != nil {
		return d.bgErr
	}
	if d.closed {
		return ErrClosed
	}
	return nil
}

// Close flushes the write-ahead log to stable storage, waits for background
// work and releases the store. It returns the first error met, including a
// flush or compaction that failed in the background. Later calls return
// ErrClosed.
func (d *DB) Close() error {
	if d.closedFlag.Swap(true) {
		return ErrClosed
	}
	// Writes arriving from now on fail with ErrClosed; let those under way
	// finish, then flush the WAL.
	d.mu.Lock()
	d.closed = true
	d.cond.Broadcast()
	d.mu.Unlock()
	// From here no Compact starts; bgWG.Wait below waits for those running.
	d.commitMu.Lock()
	for len(d.queue) > 0 {
		d.commitCond.Wait()
	}
	if d.walW != nil {
		// After a failed WAL write or sync a second sync must not pass off
		// the failure as success: Flush and Sync return the first error.
		if werr := d.walW.Flush(); werr != nil {
			d.walFailed(werr)
		} else if werr := d.wal.Sync(); werr != nil {
			d.walFailed(werr)
		}
	}
	d.mu.Lock()
	d.rescueLocked() // the queue is empty: no commit is adding to the memtable
	d.mu.Unlock()
	d.commitMu.Unlock()
	d.bgWG.Wait()
	d.mu.Lock()
	// Writes the failed WAL lacks are in frozen memtables, which the
	// flusher left when it stopped; they must reach tables before the
	// store lets go of them.
	for d.rescuing && len(d.imm) > 0 {
		d.flushOldestLocked()
	}
	// A WAL, flush or compaction failure, in the background or above.
	err := d.bgErr
	if err == nil && d.walW != nil {
		// The WAL is whole and synced: record its size, so that the
		// next Open can tell it cut short from a crash's torn tail.
		err = d.logAndApply(&manifest.VersionEdit{ClosedLog: manifest.ClosedLog{Num: d.mem.logNum, Size: uint64(d.walW.Size())}})
	}
	d.mu.Unlock()

	if d.wal != nil {
		if cerr := d.wal.Close(); err == nil {
			err = cerr
		}
	}
	if d.manifest != nil {
		if cerr := d.manifest.Close(); err == nil {
			err = cerr
		}
	}
	if cerr := d.tables.close(); err == nil {
		err = cerr
	}
	if cerr := d.lock.Close(); err == nil {
		err = cerr
	}
	return err
}
