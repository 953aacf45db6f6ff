package bloomkv

// Open: creating a store, or recovering one from its manifest and write-
// ahead logs.

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strings"
	"sync"

	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/batchrepr"
	"github.com/bloomkv/bloomkv/internal/cache"
	"github.com/bloomkv/bloomkv/internal/manifest"
	"github.com/bloomkv/bloomkv/internal/record"
	"github.com/bloomkv/bloomkv/memtable"
	"github.com/bloomkv/bloomkv/sstable"
	"github.com/bloomkv/bloomkv/vfs"
)

// Open opens the store in dir, creating it unless opts.ReadOnly. A nil opts
// means the defaults. Only one DB may have a directory open at a time; a
// second Open fails with an error wrapping ErrLocked.
func Open(dir string, opts *Options) (*DB, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	d := &DB{dir: dir, opts: o, fs: o.FS, batchBufs: new(sync.Pool)}
	d.mu.fileRefs = map[uint64]int{}
	d.mu.busy = map[uint64]bool{}
	d.mu.elide = map[uint64]elisionCandidate{}
	d.initDiff()
	d.mu.cond = sync.NewCond(&d.mu)
	d.commitCond = sync.NewCond(&d.commitMu)
	if !o.ReadOnly {
		if err := d.fs.MkdirAll(dir); err != nil {
			return nil, fmt.Errorf("bloomkv: creating %s: %w", dir, err)
		}
	}
	// Before locking: another engine's store has a LOCK file of its own. A
	// directory that cannot be listed fails below.
	names, _ := d.fs.List(dir)
	if name, engine := foreignStoreFile(names); name != "" {
		return nil, fmt.Errorf("bloomkv: %s holds %s store (it has %s), which bloomkv does not open: %w", dir, engine, name, ErrUnsupportedFormat)
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
	d.tables = &tableCache{fs: d.fs, dir: dir, cache: d.cache, tables: map[uint64]*openTable{}, mmap: !o.DisableMmapReads,
		ingestChecks: sstable.IngestChecks{MaxKeySize: MaxKeySize, MaxValueSize: MaxValueSize, TooLarge: ErrTooLarge}}
	if !o.ReadOnly {
		d.chunks = newChunkFeed(o.MemTableSize)
	}
	if err := d.open(names); err != nil {
		d.chunks.close()
		d.tables.close()
		if d.mu.manifest != nil {
			d.mu.manifest.Close()
		}
		if d.wal != nil {
			d.wal.Close()
		}
		d.lock.Close()
		return nil, err
	}
	if !o.ReadOnly {
		d.bgWG.Add(3 + o.MaxConcurrentCompactions)
		d.mu.deleter = true
		go d.flushLoop()
		go d.diffBuilder()
		go d.fileDeleter()
		for range o.MaxConcurrentCompactions {
			go d.compactLoop()
		}
	}
	return d, nil
}

// open loads or starts the store; names are its directory's files as Open
// found them before locking it.
func (d *DB) open(names []string) error {
	manNum, err := readCurrent(d.fs, d.dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if d.opts.ReadOnly {
			return fmt.Errorf("bloomkv: opening %s read-only: no store there (no %s)", d.dir, currentName)
		}
		// A crash in a new store's first Open may leave a manifest without
		// CURRENT, never a table or a log: those are another store's.
		for _, n := range names {
			if k, _ := parseName(n); k == kindTable || k == kindLog {
				return fmt.Errorf("bloomkv: %s holds %s but no %s: refusing to start a new store over it", d.dir, n, currentName)
			}
		}
		d.mu.version = &manifest.Version{}
		d.mu.nextFileNum = 1
		d.mu.formatVersion = FormatNewest
		if d.opts.FormatVersion != 0 {
			d.mu.formatVersion = d.opts.FormatVersion
		}
	case err != nil:
		return err
	default:
		if d.opts.ErrorIfExists {
			return fmt.Errorf("bloomkv: a store exists in %s (ErrorIfExists)", d.dir)
		}
		if err := d.loadManifest(manNum); err != nil {
			return err
		}
		if d.opts.FormatVersion > d.mu.formatVersion && !d.opts.ReadOnly {
			// The new manifest Open writes below records it.
			d.opts.Logger.Info("bloomkv: raising the format version as Options.FormatVersion asks", "dir", d.dir,
				"from", d.mu.formatVersion.String(), "to", d.opts.FormatVersion.String())
			d.mu.formatVersion = d.opts.FormatVersion
		}
	}

	mem, err := d.replayWALs()
	if err != nil {
		return err
	}
	if d.opts.ReadOnly {
		d.mu.mem = &memEntry{mt: d.newMemTable()}
		if !mem.Empty() {
			d.mu.imm = []*memEntry{{mt: mem}}
		}
		d.visibleSeq.Store(uint64(d.mu.lastSeq))
		d.publishLocked()
		// No writes will come: build the filter now, as the builder
		// would, with no commit to wait for.
		n, err := d.diffEntries()
		if err != nil {
			d.opts.Logger.Warn(diffBuildFailedMessage, "err", err)
			return nil
		}
		if b := d.beginDiffBuildLocked(n); b != nil {
			if err := d.finishDiffBuild(b); err != nil {
				d.opts.Logger.Warn(diffBuildFailedMessage, "err", err)
			}
		}
		return nil
	}

	// Flush what the WALs held, start a WAL, and record it all in a new
	// manifest; CURRENT switches to it last, so a crash on the way leaves
	// the old manifest and WALs in charge.
	edit := &manifest.VersionEdit{}
	if !mem.Empty() {
		// No snapshot, no read: only each key's newest version matters
		// (the filter is built after, from the tables).
		meta, _, err := d.writeTable(mem, d.allocFileNumLocked(), nil, base.SeqNumMax, nil)
		if err != nil {
			return err
		}
		if meta != nil {
			edit.NewFiles = append(edit.NewFiles, manifest.NewFile{Level: 0, Meta: meta})
		}
	}
	if d.mu.version, err = d.mu.version.Apply(edit); err != nil {
		return err
	}
	d.resetL0SeeksLocked()
	// The new manifest names the new WAL before the WAL exists: a crash or
	// failure before CURRENT switches leaves the old manifest and WALs in
	// charge with no new log among them (a new empty log there would turn
	// a torn old one into a "torn log that is not the last"); a missing WAL
	// at or above the log number is harmless.
	walNum := d.allocFileNumLocked()
	d.mu.logNumber = walNum
	if err := d.writeNewManifest(); err != nil {
		return err
	}
	if err := d.createWAL(walNum, nil, nil); err != nil {
		return err
	}
	d.mu.mem = &memEntry{mt: d.newMemTable(), logNum: walNum}
	d.visibleSeq.Store(uint64(d.mu.lastSeq))
	d.publishLocked()
	d.deleteObsolete()
	return nil
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
	var format FormatVersion
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
		if newer, ok := asUnsupported(err); ok {
			return errStoreTooNew(name, d.manifestLastEdit, newer)
		}
		if err != nil {
			return fmt.Errorf("%s: edit %d: %w", name, i, err)
		}
		if format, err = noteFormat(name, i, format, e); err != nil {
			return err
		}
		if err := checkEditFormat(name, i, format, e); err != nil {
			return err
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
		d.mu.logNumber = max(d.mu.logNumber, e.LogNumber)
		if e.ClosedLog.Num != 0 {
			if d.closedLogs == nil {
				d.closedLogs = map[uint64]uint64{}
			}
			d.closedLogs[e.ClosedLog.Num] = e.ClosedLog.Size
		}
		d.mu.nextFileNum = max(d.mu.nextFileNum, e.NextFileNum)
		d.mu.lastSeq = max(d.mu.lastSeq, e.LastSeq)
	}
	if off, why, torn := r.TornTail(); torn {
		d.opts.Logger.Warn("bloomkv: dropped a torn record at the end of the manifest", "file", name, "offset", off, "reason", why)
	}
	if !sawComparer {
		return base.CorruptionErrorf("bloomkv: %s holds no comparer record (last edit read at offset %d)", name, d.manifestLastEdit)
	}
	for _, f := range v.All() {
		d.mu.nextFileNum = max(d.mu.nextFileNum, f.FileNum+1)
		d.mu.lastSeq = max(d.mu.lastSeq, f.LargestSeq)
	}
	d.mu.nextFileNum = max(d.mu.nextFileNum, num+1, d.mu.logNumber+1)
	d.mu.manifestNum = num
	d.mu.version = v
	d.mu.formatVersion = format
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
		if k == kindLog && num >= d.mu.logNumber {
			logs = append(logs, num)
		}
		if k != kindUnknown {
			d.mu.nextFileNum = max(d.mu.nextFileNum, num+1)
		}
	}
	slices.Sort(logs)
	if err := d.checkFilesPresent(names, logs); err != nil {
		return nil, err
	}
	mem := d.newMemTable()
	tornIn := "" // a log that ended torn; only later logs without records may follow
	// unmarked is a WAL-sync log that ended without the mark rotateLocked
	// gives a replaced log (its zeros, or its end, may hide lost writes);
	// only later logs without records may follow it too.
	unmarked := ""
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
		// Pebble's chunk formats include the WAL-sync chunks of
		// FormatWALSyncOffsets; chunks of another log number are a reused
		// file's old contents.
		r, err := record.NewReaderOptions(f, name, record.Options{Pebble: true, LogNum: num})
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
			if unmarked != "" {
				return nil, base.CorruptionErrorf("bloomkv: %s ends without the mark of a replaced log, but a later log, %s, holds records: writes at its end are lost", unmarked, name)
			}
			seq, count, err := batchrepr.Decode(rec, nil)
			if err != nil {
				return nil, fmt.Errorf("bloomkv: %s: %w", name, err)
			}
			mem.Apply(&batchEntries{data: rec})
			if count > 0 {
				d.mu.lastSeq = max(d.mu.lastSeq, seq+base.SeqNum(count)-1)
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
		} else if off, zeroed := r.ZeroedTail(); zeroed && closed && uint64(off) < closedSize {
			// Zeros written ahead end a log, but not before the size it
			// had when the store closed cleanly.
			return nil, base.CorruptionErrorf("bloomkv: %s: zeroed space at offset %d in a log the store closed cleanly at %d bytes: synced writes are lost", name, off, closedSize)
		}
		if r.WALSync() && !r.EOFTrailer() {
			unmarked = name
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
	if d.mu.manifestNum == 0 {
		return nil // a new store
	}
	manifestPath := fmt.Sprintf("%s (last edit at offset %d)", d.path(manifestName(d.mu.manifestNum)), d.manifestLastEdit)
	have := make(map[string]bool, len(names))
	for _, n := range names {
		have[n] = true
	}
	for l, f := range d.mu.version.All() {
		if !have[tableName(f.FileNum)] {
			return base.CorruptionErrorf("bloomkv: %s records L%d table %s, which is missing: the manifest has lost edits or the table was deleted",
				manifestPath, l, d.path(tableName(f.FileNum)))
		}
	}
	if len(logs) > 0 && logs[0] != d.mu.logNumber {
		return base.CorruptionErrorf("bloomkv: %s records %s as the oldest log with unflushed writes, but it is missing and a later log, %s, exists: the manifest has lost edits",
			manifestPath, d.path(logName(d.mu.logNumber)), d.path(logName(logs[0])))
	}
	return nil
}

// foreignStoreFile returns a file of names that another engine writes and
// bloomkv never does, and that engine, or "" when there is none: Pebble's
// format markers, Pebble's and RocksDB's OPTIONS files, RocksDB's
// IDENTITY, LevelDB's and RocksDB's info logs, LevelDB's .ldb tables. Such
// a store's manifest and logs may read as bloomkv's, which would then
// replace and delete them.
func foreignStoreFile(names []string) (name, engine string) {
	for _, n := range names {
		switch {
		case strings.HasPrefix(n, "marker."):
			return n, "a Pebble"
		case strings.HasPrefix(n, "OPTIONS-"):
			return n, "a Pebble or RocksDB"
		case n == "IDENTITY":
			return n, "a RocksDB"
		case n == "LOG" || strings.HasPrefix(n, "LOG.old"):
			return n, "a LevelDB or RocksDB"
		case strings.HasSuffix(n, ".ldb"):
			return n, "a LevelDB"
		}
	}
	return "", ""
}
