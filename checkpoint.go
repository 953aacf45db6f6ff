package bloomkv

// Checkpoint: a consistent copy of the store in another directory, taken
// while writes go on.

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"

	"github.com/bloomkv/bloomkv/internal/manifest"
	"github.com/bloomkv/bloomkv/vfs"
)

// checkpointTmpSuffix names the directory a checkpoint is built in, beside
// its destination, until it is complete.
const checkpointTmpSuffix = ".checkpoint.tmp"

// Checkpoint writes a copy of the store, as it is at one moment during the
// call, into dir, a new directory: a store of its own, which Open opens. The
// copy holds every write acknowledged before Checkpoint was called; of the
// writes made while it runs, those committed before that moment and none
// after. Writes wait only while the moment is taken.
//
// Tables are hard links where the file system allows it (tables are never
// modified, so the copy shares their space, and the store's later
// compactions leave the copy's tables alone), copies otherwise; the
// write-ahead logs are copied. Every file and directory of the copy is
// synced.
//
// dir must not exist: the error then wraps fs.ErrExist. The copy is built in
// dir+".checkpoint.tmp" and renamed to dir once complete, so a crash or
// failure never leaves a partial dir, at worst that temporary directory,
// which the next Checkpoint to dir removes. A read-only store may be
// checkpointed; a store whose write-ahead log failed may not (it holds
// acknowledged writes its logs lack).
func (d *DB) Checkpoint(dir string) (err error) {
	if d.closedFlag.Load() {
		return ErrClosed
	}
	dir = filepath.Clean(dir)
	switch exists, err := d.fs.Exists(dir); {
	case err != nil:
		return fmt.Errorf("bloomkv: checkpoint: looking for %s: %w", dir, err)
	case exists:
		return fmt.Errorf("bloomkv: checkpoint directory %s already exists: %w", dir, fs.ErrExist)
	}
	tmp := dir + checkpointTmpSuffix
	unlock, err := d.prepareCheckpointDir(tmp)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			removeCheckpointDir(d.fs, tmp)
		}
		unlock.Close()
	}()

	p := &checkpointPin{}
	if d.opts.ReadOnly {
		d.mu.Lock()
		err = d.pinCheckpointLocked(p)
		d.mu.Unlock()
	} else {
		// As a request of its own in the commit queue, the pin is taken
		// between two commits.
		err = d.commit(&commitWaiter{checkpoint: p})
	}
	if err != nil {
		return err
	}
	defer d.unpinCheckpoint(p)

	for _, f := range p.state.version.All() {
		src, dst := d.path(tableName(f.FileNum)), vfs.Join(tmp, tableName(f.FileNum))
		if err := vfs.LinkOrCopy(d.fs, src, dst); err != nil {
			return fmt.Errorf("bloomkv: checkpoint: linking %s to %s: %w", src, dst, err)
		}
	}
	for _, l := range p.logs {
		src, dst := d.path(logName(l.num)), vfs.Join(tmp, logName(l.num))
		n, err := vfs.CopyFrom(d.fs, dst, io.NewSectionReader(l.f, 0, l.size))
		if err == nil && n != l.size {
			err = fmt.Errorf("%s holds %d bytes, not the %d noted: %w", src, n, l.size, io.ErrUnexpectedEOF)
		}
		if err != nil {
			return fmt.Errorf("bloomkv: checkpoint: copying %s to %s: %w", src, dst, err)
		}
	}
	mf, _, err := createManifest(d.fs, vfs.Join(tmp, manifestName(p.manifestNum)), p.edits...)
	if err != nil {
		return fmt.Errorf("bloomkv: checkpoint: %w", err)
	}
	if err := mf.Close(); err != nil {
		return fmt.Errorf("bloomkv: checkpoint: closing %s: %w", vfs.Join(tmp, manifestName(p.manifestNum)), err)
	}
	// setCurrent syncs tmp last, which makes every name in it durable.
	if err := setCurrent(d.fs, tmp, p.manifestNum); err != nil {
		return fmt.Errorf("bloomkv: checkpoint: %w", err)
	}
	if err := d.fs.Rename(tmp, dir); err != nil {
		return fmt.Errorf("bloomkv: checkpoint: renaming %s to %s: %w", tmp, dir, err)
	}
	if err := d.fs.SyncDir(filepath.Dir(dir)); err != nil {
		// dir is whole; only its name may not survive a crash.
		return fmt.Errorf("bloomkv: checkpoint: syncing %s after renaming %s to %s: %w", filepath.Dir(dir), tmp, dir, err)
	}
	return nil
}

// prepareCheckpointDir creates tmp, locks it against another checkpoint to
// the same directory, and empties it of what a checkpoint cut short left.
func (d *DB) prepareCheckpointDir(tmp string) (io.Closer, error) {
	if err := d.fs.MkdirAll(tmp); err != nil {
		return nil, fmt.Errorf("bloomkv: checkpoint: creating %s: %w", tmp, err)
	}
	unlock, err := d.fs.Lock(vfs.Join(tmp, lockName))
	if err != nil {
		if errors.Is(err, vfs.ErrLocked) {
			return nil, fmt.Errorf("bloomkv: checkpoint: another checkpoint is being built in %s: %w", tmp, err)
		}
		return nil, fmt.Errorf("bloomkv: checkpoint: locking %s: %w", tmp, err)
	}
	names, err := d.fs.List(tmp)
	for _, n := range names {
		if err == nil && n != lockName {
			err = d.fs.Remove(vfs.Join(tmp, n))
		}
	}
	if err != nil {
		unlock.Close()
		return nil, fmt.Errorf("bloomkv: checkpoint: emptying %s, left by an earlier checkpoint: %w", tmp, err)
	}
	return unlock, nil
}

// removeCheckpointDir removes the temporary directory of a failed
// checkpoint, as far as it can.
func removeCheckpointDir(fs vfs.FS, tmp string) {
	names, _ := fs.List(tmp)
	for _, n := range names {
		fs.Remove(vfs.Join(tmp, n))
	}
	fs.Remove(tmp)
}

// checkpointPin is what a checkpoint copies, noted at one moment.
type checkpointPin struct {
	state       *readState // a reference, which keeps its tables from deletion
	logs        []pinnedLog
	manifestNum uint64
	// edits are the copy's manifest: the state, then the size of each log
	// copied.
	edits []*manifest.VersionEdit
}

// pinnedLog is a write-ahead log a checkpoint copies, open, so that a flush
// removing it meanwhile does not take its contents away, and the size to
// copy.
type pinnedLog struct {
	num  uint64
	f    vfs.File
	size int64
}

// pinCheckpointLocked notes in p what a checkpoint copies: the version, the
// write-ahead logs that hold what its tables lack, each up to its last
// acknowledged write, and the counters. d.mu is held, and the caller leads
// the commit queue, or the store is read-only: no commit is under way.
// After it succeeds, unpinCheckpoint lets go; Close waits for that. A
// failure of the write-ahead log comes back as a *logFailure (rotateLocked).
func (d *DB) pinCheckpointLocked(p *checkpointPin) error {
	live := !d.opts.ReadOnly
	if live && !d.mu.closed && !d.wal.readyNow() {
		// The logs before the current one are whole in their files once
		// it may write to its own (its writer writes them out, syncs and
		// closes them first: rotateLocked); wait for that without d.mu,
		// which the sync could hold for long. The caller leads the commit
		// queue, so no log is written or started meanwhile.
		var err error
		d.unlocked(func() { err = d.wal.awaitReady() })
		if err != nil {
			return &logFailure{err}
		}
	}
	if d.mu.closed {
		return ErrClosed
	}
	if d.mu.walBroken {
		return fmt.Errorf("bloomkv: checkpoint: the store's write-ahead log lacks acknowledged writes: %w", d.mu.bgErr)
	}
	if live {
		// Every acknowledged write reaches the file, in whole records; the
		// copy reads it back from there, so no sync is needed.
		if err := d.walW.Flush(); err != nil {
			return &logFailure{err}
		}
		if err := d.wal.Flush(); err != nil {
			return &logFailure{err}
		}
	}
	nums, err := d.checkpointLogsLocked()
	for _, num := range nums {
		if err != nil {
			break
		}
		name := d.path(logName(num))
		var f vfs.File
		if f, err = d.fs.Open(name); err != nil {
			err = fmt.Errorf("bloomkv: checkpoint: opening %s: %w", name, err)
			break
		}
		l := pinnedLog{num: num, f: f}
		if live && num == d.mu.mem.logNum {
			l.size = d.walW.Size()
		} else if size, ok := d.rotatedLogSizeLocked(num); live && ok {
			l.size = size // the file may run on in zeros written ahead
		} else if l.size, err = f.Size(); err != nil {
			err = fmt.Errorf("bloomkv: checkpoint: %s: %w", name, err)
		}
		p.logs = append(p.logs, l)
	}
	if err != nil {
		p.closeLogs()
		return err
	}
	p.state = d.acquire() // d.mu held: the published state is d.mu.version's
	p.manifestNum = d.allocFileNumLocked()
	p.edits = []*manifest.VersionEdit{d.snapshotEditLocked()}
	if live {
		// The copies are whole: a copy found shorter at Open lost writes.
		// (A read-only store's last log may end torn, and is copied so.)
		for _, l := range p.logs {
			p.edits = append(p.edits, &manifest.VersionEdit{ClosedLog: manifest.ClosedLog{Num: l.num, Size: uint64(l.size)}})
		}
	}
	d.bgWG.Add(1)
	return nil
}

// checkpointLogsLocked returns the numbers of the write-ahead logs that hold
// writes the version's tables lack. d.mu is held.
func (d *DB) checkpointLogsLocked() ([]uint64, error) {
	var nums []uint64
	if d.opts.ReadOnly {
		// The logs Open replayed, which nothing removes.
		names, err := d.fs.List(d.dir)
		if err != nil {
			return nil, fmt.Errorf("bloomkv: checkpoint: listing %s: %w", d.dir, err)
		}
		for _, n := range names {
			if k, num := parseName(n); k == kindLog && num >= d.mu.logNumber {
				nums = append(nums, num)
			}
		}
		return nums, nil
	}
	// A flush leaves its memtable among d.mu.imm for a while after the edit
	// that moves the log number past its log.
	for _, m := range append(d.mu.imm[:len(d.mu.imm):len(d.mu.imm)], d.mu.mem) {
		if m.logNum >= d.mu.logNumber {
			nums = append(nums, m.logNum)
		}
	}
	return nums, nil
}

// rotatedLogSizeLocked returns the size of log num, replaced by a later
// log while this store was open (memEntry.logSize). d.mu is held.
func (d *DB) rotatedLogSizeLocked(num uint64) (int64, bool) {
	for _, m := range d.mu.imm {
		if m.logNum == num && m.logSize > 0 {
			return m.logSize, true
		}
	}
	return 0, false
}

// unpinCheckpoint lets go of what pinCheckpointLocked pinned.
func (d *DB) unpinCheckpoint(p *checkpointPin) {
	p.closeLogs()
	d.release(p.state)
	d.bgWG.Done()
}

func (p *checkpointPin) closeLogs() {
	for _, l := range p.logs {
		l.f.Close()
	}
	p.logs = nil
}
