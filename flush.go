package bloomkv

// Flushes: the background loop that writes frozen memtables to level-0
// tables.

import (
	"fmt"
	"slices"
	"time"

	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/manifest"
)

// flushLoop writes frozen memtables to level-0 tables, oldest first, until
// the DB closes or a flush fails. After a WAL failure it first has the
// failed log's memtable frozen, and flushes in spite of the failure
// (walFailed).
func (d *DB) flushLoop() {
	defer d.bgWG.Done()
	d.mu.Lock()
	defer d.mu.Unlock()
	for {
		for !d.mu.closed && !d.flushDueLocked() && !d.rescueDueLocked() {
			d.mu.cond.Wait()
		}
		if d.mu.closed {
			return // frozen memtables stay in their WALs for the next Open; Close flushes a rescue
		}
		if d.rescueDueLocked() {
			// Freezing the memtable must wait for the commit under way,
			// which may still be adding to it: queue for the lead.
			d.mu.Unlock()
			d.commit(&commitWaiter{flush: true, rescue: true})
			d.mu.Lock()
			continue
		}
		d.flushOldestLocked()
	}
}

// flushDueLocked reports whether a frozen memtable awaits a flush the store may
// make. d.mu is held.
func (d *DB) flushDueLocked() bool {
	return len(d.mu.imm) > 0 && (d.mu.bgErr == nil || d.mu.rescuing)
}

// rescueDueLocked reports whether the memtable of a failed WAL awaits freezing.
// d.mu is held.
func (d *DB) rescueDueLocked() bool {
	return d.mu.rescuing && !d.mu.mem.mt.Empty()
}

// flushOldestLocked writes the oldest frozen memtable to a level-0 table,
// records it in the manifest and removes its WAL. d.mu is held on entry and
// on return, and released while the table is written, while the edit is
// written and synced (logAndApplyLocked), while the WAL is removed and
// while listeners run (FlushBegin, FlushEnd, and BackgroundError for a
// failure, which stops the store).
func (d *DB) flushOldestLocked() error {
	m := d.mu.imm[0]
	num := d.allocFileNumLocked()
	// The flush drops the versions a newer visible one hides from every
	// snapshot open now, and from every read to come: those read at the
	// visible sequence number or above (the state first, then the
	// number), and one that needs an older version reads a state holding
	// m. A snapshot taken meanwhile sees every version visible now.
	snaps, visible := slices.Clone(d.mu.snapshots), base.SeqNum(d.visibleSeq.Load())
	// The dropped versions' hashes, for the filters commits add to; none
	// when there are none (idle or off): a build that starts during the
	// flush counts m whole, and then only over-counts what was dropped.
	var dropped *[]uint64
	if ws := d.mu.diff.writers.Load(); d.mu.diff.enabled && ws != nil && len(*ws) > 0 {
		dropped = new([]uint64)
	}
	d.mu.Unlock()

	start := time.Now()
	info := FlushInfo{FileNum: num, Entries: m.mt.Len()}
	d.opts.EventListener.FlushBegin(info)
	meta, nDropped, err := d.writeTable(m.mt, num, snaps, visible, dropped)
	info.Dropped = nDropped

	d.mu.Lock()
	if err == nil {
		next := d.mu.mem.logNum
		if len(d.mu.imm) > 1 {
			next = d.mu.imm[1].logNum
		}
		edit := &manifest.VersionEdit{LogNumber: next}
		if meta != nil {
			edit.NewFiles = []manifest.NewFile{{Level: 0, Meta: meta}}
		}
		err = d.logAndApplyLocked(edit)
	}
	info.Duration, info.Err = time.Since(start), err
	if meta != nil {
		info.Size = meta.Size
	}
	if err != nil {
		err = fmt.Errorf("bloomkv: flush to table %06d failed; the store takes no more writes until reopened: %w", num, err)
		if d.mu.rescuing {
			// Writes acknowledged since the WAL failed were in this
			// memtable: say so, and stop trying.
			d.mu.rescuing = false
			err = fmt.Errorf("%w; writes acknowledged without Sync before the write-ahead log failed may be lost: %w", err, d.mu.bgErr)
			d.mu.bgErr = nil
		}
		if d.mu.bgErr == nil {
			d.mu.bgErr = err
		}
		d.unlocked(func() {
			d.opts.EventListener.FlushEnd(info)
			d.opts.EventListener.BackgroundError(err)
		})
		d.mu.cond.Broadcast()
		return err
	}
	// Publish the version holding the new table before d.mu is let go: a
	// compaction may take the table from d.mu.version as soon as it is, and a
	// table no published state counted would never be deleted
	// (releaseFilesLocked). Reads of this state find m's entries in m and in
	// the table alike.
	//
	// Until m leaves d.mu.imm, no compaction takes the table (it is marked
	// busy): moved or merged into the base, its versions would leave the
	// differential-file filter while states holding m, the same versions in
	// a memtable, are still being published, and the filter must pass
	// every memtable entry of every state.
	if meta != nil {
		d.mu.busy[meta.FileNum] = true
		m.flushed = true
	}
	d.publishLocked()
	if dropped != nil {
		// The versions the flush dropped leave the differential: out of
		// the filters that count them, which are those commits add to now
		// (a build from now on counts m's table, not m), once the states
		// older than this one are gone, as for a compaction's. Each key
		// keeps its newest version in m and the table, still counted.
		d.queueRemovalLocked(*dropped, baseLevel(d.mu.version))
	}
	// FlushEnd runs before m leaves d.mu.imm, so that a Flush waiting for m
	// returns after it. Only the flusher takes memtables out of d.mu.imm, so m
	// is still its first when d.mu comes back.
	//
	// m's log goes first, without d.mu: what it holds is in a table the
	// manifest names. It may still be being synced by the next log's
	// writer (logFile.follow): removing it meanwhile is allowed, since an
	// open file outlives its name. A failure of that sync still fails the
	// store, as any failed WAL sync does, though no write is lost: a
	// failed fsync is never judged harmless.
	d.unlocked(func() {
		d.removeLog(m.logNum)
		d.opts.EventListener.FlushEnd(info)
	})
	d.mu.imm = d.mu.imm[1:]
	if meta != nil {
		delete(d.mu.busy, meta.FileNum)
	}
	d.publishLocked()
	d.metrics.flushes.Add(1)
	if meta != nil {
		d.metrics.flushBytes.Add(meta.Size)
		d.metrics.levels[0].bytesWritten.Add(meta.Size)
	}
	d.mu.cond.Broadcast()
	return nil
}
