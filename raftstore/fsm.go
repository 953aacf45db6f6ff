package raftstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/bloomkv/bloomkv"
	"github.com/bloomkv/bloomkv/vfs"
	"github.com/hashicorp/raft"
)

// stateFile names, in an FSM's directory, the subdirectory holding the DB
// in service; Restore replaces it by renaming a new file over it.
const stateFile = "STATE"

// statePrefix starts the names of the subdirectories holding DBs.
const statePrefix = "state-"

// applyBatchBytes bounds the bloomkv batch ApplyBatch gathers before it
// applies it and starts another.
const applyBatchBytes = 64 << 20

// FSM is a raft.FSM (and raft.BatchingFSM) over a bloomkv DB in a directory
// of its own. Commands are batches (Batch.Bytes); each entry's changes and
// the applied index go into the DB in one atomic batch, and entries at or
// below the applied index are skipped, so a restart neither applies an
// entry twice nor skips one. A snapshot is a Checkpoint of the DB, shipped
// as its files (sstables, manifest, logs); Restore opens them as a new DB
// and swaps it in.
type FSM struct {
	dir  string
	opts *bloomkv.Options
	// store is the node's snapshot store, whose own snapshots Restore
	// links instead of reading (nil outside a Node).
	store *snapshotStore
	// snapshots counts the snapshots taken, to name their checkpoints.
	snapshots atomic.Uint64

	// mu guards db and seq: readers hold it shared while they use db,
	// Restore exclusively while it swaps a new DB in.
	mu  sync.RWMutex
	db  *bloomkv.DB
	seq int // number of the state directory in service

	applied atomic.Uint64
	// restores counts the snapshots installed by Restore.
	restores atomic.Uint64

	// marks holds the compare points asked for: a token's channel gets a
	// snapshot of the DB taken right after the entry marking it.
	marksMu sync.Mutex
	marks   map[string]chan markedSnapshot
}

var _ raft.BatchingFSM = (*FSM)(nil)

// OpenFSM opens (creating if needed) the state machine in dir. opts may be
// nil for bloomkv's defaults; its FS must be nil (the FSM renames
// directories on the OS's file system).
func OpenFSM(dir string, opts *bloomkv.Options) (*FSM, error) {
	f := &FSM{dir: dir, opts: opts, marks: map[string]chan markedSnapshot{}}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("raftstore: create FSM directory: %w", err)
	}
	seq, err := f.readState()
	if err != nil {
		return nil, err
	}
	if seq == 0 {
		seq = 1
		if err := f.writeState(seq); err != nil {
			return nil, err
		}
	}
	if err := f.removeStale(seq); err != nil {
		return nil, err
	}
	db, err := bloomkv.Open(f.statePath(seq), opts)
	if err != nil {
		return nil, fmt.Errorf("raftstore: open FSM store: %w", err)
	}
	applied, err := readApplied(db)
	if err != nil {
		db.Close()
		return nil, err
	}
	f.db, f.seq = db, seq
	f.applied.Store(applied)
	return f, nil
}

func (f *FSM) statePath(seq int) string {
	return filepath.Join(f.dir, fmt.Sprintf("%s%06d", statePrefix, seq))
}

// readState returns the number of the state directory STATE names, 0 if
// there is no STATE yet.
func (f *FSM) readState() (int, error) {
	b, err := os.ReadFile(filepath.Join(f.dir, stateFile))
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("raftstore: read FSM state pointer: %w", err)
	}
	name := strings.TrimSpace(string(b))
	n, err := strconv.Atoi(strings.TrimPrefix(name, statePrefix))
	if !strings.HasPrefix(name, statePrefix) || err != nil || n <= 0 {
		return 0, fmt.Errorf("raftstore: FSM state pointer holds %q: %w", name, ErrCorruption)
	}
	return n, nil
}

// writeState points STATE at state directory seq, durably: a new file,
// synced, renamed over the old, and the directory synced.
func (f *FSM) writeState(seq int) error {
	tmp := filepath.Join(f.dir, stateFile+".tmp")
	if err := writeFileSync(tmp, []byte(fmt.Sprintf("%s%06d\n", statePrefix, seq))); err != nil {
		return fmt.Errorf("raftstore: write FSM state pointer: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(f.dir, stateFile)); err != nil {
		return fmt.Errorf("raftstore: install FSM state pointer: %w", err)
	}
	if err := vfs.Default.SyncDir(f.dir); err != nil {
		return fmt.Errorf("raftstore: sync FSM directory: %w", err)
	}
	return nil
}

// removeStale removes what a restore left behind: state directories other
// than seq's and partial restores.
func (f *FSM) removeStale(seq int) error {
	ents, err := os.ReadDir(f.dir)
	if err != nil {
		return fmt.Errorf("raftstore: list FSM directory: %w", err)
	}
	keep := filepath.Base(f.statePath(seq))
	for _, e := range ents {
		n := e.Name()
		if (strings.HasPrefix(n, statePrefix) && n != keep) || strings.HasPrefix(n, restorePrefix) || strings.HasPrefix(n, checkpointPrefix) {
			if err := os.RemoveAll(filepath.Join(f.dir, n)); err != nil {
				return fmt.Errorf("raftstore: remove stale %s: %w", n, err)
			}
		}
	}
	return nil
}

func writeFileSync(path string, data []byte) error {
	fh, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := fh.Write(data); err != nil {
		fh.Close()
		return err
	}
	if err := fh.Sync(); err != nil {
		fh.Close()
		return err
	}
	return fh.Close()
}

type getter interface {
	Get([]byte) ([]byte, error)
}

func readApplied(db getter) (uint64, error) {
	v, err := db.Get(appliedKey)
	if errors.Is(err, bloomkv.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("raftstore: read applied index: %w", err)
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("raftstore: applied index of %d bytes: %w", len(v), ErrCorruption)
	}
	return binary.BigEndian.Uint64(v), nil
}

func setApplied(b *bloomkv.Batch, index uint64) error {
	var v [8]byte
	binary.BigEndian.PutUint64(v[:], index)
	return b.Set(appliedKey, v[:])
}

// Applied returns the index of the last log entry applied.
func (f *FSM) Applied() uint64 { return f.applied.Load() }

// Close closes the FSM's DB.
func (f *FSM) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.db.Close()
}

// Get returns the value of a user key, bloomkv.ErrNotFound if none.
func (f *FSM) Get(key []byte) ([]byte, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.db.Get(userKey(key))
}

// meta returns the value of a metadata key, bloomkv.ErrNotFound if none.
func (f *FSM) meta(key []byte) ([]byte, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.db.Get(metaKey(key))
}

// Apply applies one log entry (raft.FSM).
func (f *FSM) Apply(l *raft.Log) interface{} {
	return f.ApplyBatch([]*raft.Log{l})[0]
}

// ApplyBatch applies log entries in one bloomkv batch (raft.BatchingFSM),
// not synced: bloomkv's log keeps a prefix of the batches across a crash,
// and raft replays the entries after the applied index. The response for
// a command entry is nil or the error that kept it from applying; an
// entry that fails applies nothing, and the others apply.
func (f *FSM) ApplyBatch(logs []*raft.Log) []interface{} {
	resp := make([]interface{}, len(logs))
	f.mu.RLock()
	defer f.mu.RUnlock()
	b := f.db.NewBatch()
	applied := f.applied.Load()
	last := applied
	commit := func() error {
		if last == applied {
			return nil
		}
		if err := setApplied(b, last); err != nil {
			return err
		}
		if err := f.db.Apply(b, bloomkv.NoSync); err != nil {
			return err
		}
		b.Reset()
		applied = last
		f.applied.Store(last)
		return nil
	}
	for i, l := range logs {
		if l.Index <= applied {
			continue
		}
		last = l.Index
		if l.Type != raft.LogCommand {
			continue
		}
		ops, err := decodeCommand(l.Data)
		if err != nil {
			resp[i] = fmt.Errorf("raftstore: log entry %d: %w", l.Index, err)
			continue
		}
		// A batch past applyBatchBytes is applied before the next entry,
		// keeping it far below bloomkv.MaxBatchSize.
		if b.Len() > applyBatchBytes {
			last = l.Index - 1
			if err := commit(); err != nil {
				panic(fmt.Sprintf("raftstore: apply log entries up to %d: %v", last, err))
			}
			last = l.Index
		}
		if err := addOps(b, ops); err != nil {
			// The checks of decodeCommand leave nothing for bloomkv to
			// refuse; a refusal here is a fault of the store.
			panic(fmt.Sprintf("raftstore: log entry %d: %v", l.Index, err))
		}
		for _, o := range ops {
			if o.kind == opMark {
				if ch := f.takeMark(string(o.key)); ch != nil {
					if err := commit(); err != nil {
						panic(fmt.Sprintf("raftstore: apply log entries up to %d: %v", l.Index, err))
					}
					snap, err := f.db.NewSnapshot()
					if err == nil {
						ch <- markedSnapshot{snap: snap, index: l.Index}
					}
					close(ch)
				}
			}
		}
	}
	if err := commit(); err != nil {
		// raft has no way back from an FSM that cannot apply a committed
		// entry: a replica that went on would diverge.
		panic(fmt.Sprintf("raftstore: apply log entries up to %d: %v", last, err))
	}
	return resp
}

// expectMark asks for a snapshot of the DB right after the entry that
// marks token; the channel gets it (and is closed) when that entry applies.
func (f *FSM) expectMark(token string) <-chan markedSnapshot {
	ch := make(chan markedSnapshot, 1)
	f.marksMu.Lock()
	f.marks[token] = ch
	f.marksMu.Unlock()
	return ch
}

// dropMark forgets token.
func (f *FSM) dropMark(token string) {
	f.marksMu.Lock()
	delete(f.marks, token)
	f.marksMu.Unlock()
}

// markedSnapshot is a snapshot taken right after the entry at index.
type markedSnapshot struct {
	snap  *bloomkv.Snapshot
	index uint64
}

func (f *FSM) takeMark(token string) chan markedSnapshot {
	f.marksMu.Lock()
	defer f.marksMu.Unlock()
	ch := f.marks[token]
	delete(f.marks, token)
	return ch
}

// Snapshot returns a snapshot of the state (raft.FSM): a Checkpoint of the
// DB (its tables linked, not copied), which Persist ships as files.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	dir := filepath.Join(f.dir, fmt.Sprintf("%s%06d-%d", checkpointPrefix, f.seq, f.snapshots.Add(1)))
	if err := f.db.Checkpoint(dir); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("raftstore: snapshot: %w", err)
	}
	files, err := listFiles(dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("raftstore: snapshot: %w", err)
	}
	return &fsmSnapshot{dir: dir, files: files, applied: f.applied.Load()}, nil
}

// Restore replaces the state with the snapshot read from rc (raft.FSM).
// The store's files are written to a new state directory, checked against
// the stream's checksums (or, for a snapshot of the node's own store,
// linked from it), the store opened, and swapped in; a version 1 stream's
// tables are ingested into a new store instead. On any failure the state in
// service stays as it was.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	f.mu.RLock()
	seq := f.seq + 1
	f.mu.RUnlock()
	tmp := filepath.Join(f.dir, fmt.Sprintf("%s%06d", restorePrefix, seq))
	newDir := f.statePath(seq)
	cleanup := func() {
		os.RemoveAll(tmp)
		os.RemoveAll(newDir)
	}
	cleanup()
	db, applied, err := f.restoreInto(rc, newDir, tmp)
	if err != nil {
		cleanup()
		return fmt.Errorf("raftstore: restore: %w", err)
	}
	got, err := readApplied(db)
	if err == nil && got != applied {
		err = fmt.Errorf("raftstore: snapshot of applied index %d holds index %d: %w", applied, got, ErrCorruption)
	}
	if err == nil {
		err = db.Flush()
	}
	if err == nil {
		err = f.writeState(seq)
	}
	if err != nil {
		db.Close()
		cleanup()
		return fmt.Errorf("raftstore: restore: %w", err)
	}
	f.mu.Lock()
	old, oldSeq := f.db, f.seq
	f.db, f.seq = db, seq
	f.applied.Store(applied)
	f.mu.Unlock()
	f.restores.Add(1)
	os.RemoveAll(tmp)
	if err := old.Close(); err != nil {
		return fmt.Errorf("raftstore: restore: close replaced store: %w", err)
	}
	if err := os.RemoveAll(f.statePath(oldSeq)); err != nil {
		return fmt.Errorf("raftstore: restore: remove replaced store: %w", err)
	}
	return nil
}

// restoreInto reads the stream r into a store in newDir (tables of a
// version 1 stream go through tmp) and opens it; it returns the store and
// the applied index the stream names.
func (f *FSM) restoreInto(r io.Reader, newDir, tmp string) (*bloomkv.DB, uint64, error) {
	fr, h, err := readStreamHeader(r)
	if err != nil {
		return nil, 0, err
	}
	if h.version == streamTables {
		if err := os.MkdirAll(tmp, 0o755); err != nil {
			return nil, 0, err
		}
		paths, err := fr.readTables(tmp)
		if err != nil {
			return nil, 0, err
		}
		db, err := bloomkv.Open(newDir, f.opts)
		if err != nil {
			return nil, 0, fmt.Errorf("open new store: %w", err)
		}
		if len(paths) > 0 {
			if err := db.Ingest(paths); err != nil {
				db.Close()
				return nil, 0, fmt.Errorf("ingest snapshot tables: %w", err)
			}
		}
		return db, h.applied, nil
	}
	if err := os.MkdirAll(newDir, 0o755); err != nil {
		return nil, 0, err
	}
	if m, dir, ok := f.local(h.token); ok && m.Applied == h.applied {
		err = linkFiles(dir, newDir, m.Files)
	} else {
		_, err = fr.readFiles(newDir)
	}
	if err == nil {
		err = vfs.Default.SyncDir(newDir)
	}
	if err != nil {
		return nil, 0, err
	}
	db, err := bloomkv.Open(newDir, f.opts)
	if err != nil {
		return nil, 0, fmt.Errorf("open the snapshot's store: %w", err)
	}
	return db, h.applied, nil
}

// local returns the snapshot of the node's own snapshot store a stream's
// token names, if any.
func (f *FSM) local(token [tokenLen]byte) (*snapMeta, string, bool) {
	if f.store == nil || token == ([tokenLen]byte{}) {
		return nil, "", false
	}
	return f.store.local(token)
}

// linkFiles gives dst the files of a local snapshot in src: its tables as
// links (a store never writes a table again; each block carries its own
// checksum), each checked against the length listed, and the rest as
// synced copies, checked against the crc32c listed too.
func linkFiles(src, dst string, files []snapFile) error {
	for _, sf := range files {
		from, to := filepath.Join(src, sf.Name), filepath.Join(dst, sf.Name)
		var (
			crc uint32
			err error
		)
		if strings.HasSuffix(sf.Name, ".sst") {
			err = vfs.LinkOrCopy(vfs.Default, from, to)
		} else {
			crc, err = copyFileSync(from, to)
		}
		if err != nil {
			return fmt.Errorf("link snapshot file %s: %w", from, err)
		}
		if info, err := os.Stat(to); err != nil || info.Size() != sf.Size {
			return fmt.Errorf("snapshot file %s: %v, not %d bytes: %w", from, err, sf.Size, ErrCorruption)
		}
		if !strings.HasSuffix(sf.Name, ".sst") && sf.CRC != 0 && crc != sf.CRC {
			return fmt.Errorf("snapshot file %s of crc32c %08x, listed as %08x: %w", from, crc, sf.CRC, ErrCorruption)
		}
	}
	return nil
}

// copyFileSync copies the file src to a new file dst, synced, and returns
// the crc32c of the bytes copied.
func copyFileSync(src, dst string) (uint32, error) {
	in, err := os.Open(src)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	h := crc32.New(castagnoli)
	if _, err := vfs.CopyFrom(vfs.Default, dst, io.TeeReader(in, h)); err != nil {
		return 0, err
	}
	return h.Sum32(), nil
}
