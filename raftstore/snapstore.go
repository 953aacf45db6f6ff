package raftstore

// The node's raft.SnapshotStore: each snapshot a directory of a bloomkv
// store's files.

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/bloomkv/bloomkv/vfs"
	"github.com/hashicorp/raft"
)

// A snapshot's directory holds meta.json and, in files, the store's files;
// or, for a version 1 stream (from a node of an earlier build), the
// stream as it came, in stream; raft's own file snapshot store, which
// earlier builds used, left state.bin, the same.
const (
	snapMetaFile   = "meta.json"
	snapFilesDir   = "files"
	snapStreamFile = "stream"
	snapLegacyFile = "state.bin"
	snapTmpExt     = ".tmp"
	snapDelExt     = ".del" + snapTmpExt
)

// snapMeta is a snapshot's meta.json: raft's metadata (whose Size is the
// length of the stream Open gives), the FSM's applied index, the files.
type snapMeta struct {
	raft.SnapshotMeta
	// Format is snapFormat; raft's own file snapshot store writes a
	// meta.json without it.
	Format  string     `json:"format"`
	Applied uint64     `json:"applied"`
	Files   []snapFile `json:"files"`
}

// The formats of a snapshot's directory: files, a stream kept whole, and
// raft's file snapshot store's (no format recorded).
const (
	snapFormat       = "bloomkv-files-1"
	snapFormatStream = "bloomkv-stream-1"
	snapFormatRaft   = ""
)

// rawPath returns the stream file of a snapshot kept as its stream.
func (m *snapMeta) rawPath(dir string) string {
	if m.Format == snapFormatRaft {
		return filepath.Join(dir, snapLegacyFile)
	}
	return filepath.Join(dir, snapStreamFile)
}

// snapshotStore is a raft.SnapshotStore keeping each snapshot as the files
// of a Checkpoint of the FSM's DB, in a directory of its own, with the
// newest retain kept. A snapshot the FSM persists is linked in, not
// copied; one received from the leader is written as its files while it
// arrives, checked against the stream's checksums; and a restore from a
// local snapshot links its files into the new state (FSM.Restore, through
// the token of the reader Open gave) instead of reading the stream. A
// snapshot's directory is renamed into place once its files, its meta.json
// and the directory are synced, so a crash leaves a whole snapshot or a
// .tmp directory, removed at the next open.
type snapshotStore struct {
	dir    string
	retain int

	mu     sync.Mutex
	opened map[[tokenLen]byte]*snapMeta // readers Open gave out, by token
	inUse  map[string]int               // their snapshots' IDs
}

// openSnapshotStore opens the store in dir, creating it if needed, and
// removes what an interrupted snapshot left.
func openSnapshotStore(dir string, retain int) (*snapshotStore, error) {
	if retain < 1 {
		return nil, errors.New("raftstore: snapshot store must retain at least one snapshot")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("raftstore: create snapshot store: %w", err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("raftstore: list snapshot store: %w", err)
	}
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), snapTmpExt) {
			if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
				return nil, fmt.Errorf("raftstore: remove partial snapshot %s: %w", e.Name(), err)
			}
		}
	}
	return &snapshotStore{dir: dir, retain: retain, opened: map[[tokenLen]byte]*snapMeta{}, inUse: map[string]int{}}, nil
}

// Create starts a snapshot (raft.SnapshotStore).
func (s *snapshotStore) Create(version raft.SnapshotVersion, index, term uint64, configuration raft.Configuration,
	configurationIndex uint64, _ raft.Transport) (raft.SnapshotSink, error) {
	if version < raft.SnapshotVersionMin || version > raft.SnapshotVersionMax {
		return nil, fmt.Errorf("raftstore: snapshot version %d not supported", version)
	}
	id := fmt.Sprintf("%d-%d-%d", term, index, time.Now().UnixMilli())
	tmp := filepath.Join(s.dir, id+snapTmpExt)
	if err := os.Mkdir(tmp, 0o755); err != nil {
		return nil, fmt.Errorf("raftstore: create snapshot %s: %w", id, err)
	}
	if err := os.Mkdir(filepath.Join(tmp, snapFilesDir), 0o755); err != nil {
		os.RemoveAll(tmp)
		return nil, fmt.Errorf("raftstore: create snapshot %s: %w", id, err)
	}
	return &storeSink{store: s, tmp: tmp, meta: snapMeta{Format: snapFormat, SnapshotMeta: raft.SnapshotMeta{
		Version: version, ID: id, Index: index, Term: term,
		Configuration: configuration, ConfigurationIndex: configurationIndex,
	}}}, nil
}

// List returns the snapshots, newest first (raft.SnapshotStore).
func (s *snapshotStore) List() ([]*raft.SnapshotMeta, error) {
	metas, err := s.all()
	if err != nil {
		return nil, err
	}
	out := make([]*raft.SnapshotMeta, 0, min(len(metas), s.retain))
	for _, m := range metas[:min(len(metas), s.retain)] {
		out = append(out, &m.SnapshotMeta)
	}
	return out, nil
}

// all returns every whole snapshot's meta, newest first.
func (s *snapshotStore) all() ([]*snapMeta, error) {
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("raftstore: list snapshots: %w", err)
	}
	var metas []*snapMeta
	for _, e := range ents {
		if !e.IsDir() || strings.HasSuffix(e.Name(), snapTmpExt) {
			continue
		}
		// A directory without a readable meta.json is one a crash caught
		// being removed (reap): not a snapshot.
		if m, err := s.readMeta(e.Name()); err == nil {
			metas = append(metas, m)
		}
	}
	slices.SortFunc(metas, func(a, b *snapMeta) int {
		switch {
		case a.Term != b.Term:
			return cmpDesc(a.Term, b.Term)
		case a.Index != b.Index:
			return cmpDesc(a.Index, b.Index)
		}
		return strings.Compare(b.ID, a.ID)
	})
	return metas, nil
}

func cmpDesc(a, b uint64) int {
	if a > b {
		return -1
	}
	return 1
}

func (s *snapshotStore) readMeta(id string) (*snapMeta, error) {
	path := filepath.Join(s.dir, id, snapMetaFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("raftstore: read snapshot %s: %w", id, err)
	}
	var m snapMeta
	if err := json.Unmarshal(b, &m); err != nil || m.ID != id {
		return nil, fmt.Errorf("raftstore: snapshot metadata %s unreadable (%v): %w", path, err, ErrCorruption)
	}
	switch m.Format {
	case snapFormat, snapFormatStream:
	case snapFormatRaft:
		if _, err := os.Stat(m.rawPath(filepath.Join(s.dir, id))); err != nil {
			return nil, fmt.Errorf("raftstore: snapshot %s of raft's file store format: %w", id, err)
		}
	default:
		return nil, fmt.Errorf("raftstore: snapshot %s is of format %q, which this build does not know: %w", filepath.Join(s.dir, id), m.Format, ErrCorruption)
	}
	return &m, nil
}

// Open returns a snapshot's metadata and its stream (raft.SnapshotStore).
// The stream is generated from the snapshot's files, each checked against
// its length and checksum as it is read.
func (s *snapshotStore) Open(id string) (*raft.SnapshotMeta, io.ReadCloser, error) {
	// In use before its metadata is read, so that reap leaves it.
	s.mu.Lock()
	s.inUse[id]++
	s.mu.Unlock()
	release := func() {
		s.mu.Lock()
		if s.inUse[id]--; s.inUse[id] <= 0 {
			delete(s.inUse, id)
		}
		s.mu.Unlock()
	}
	m, err := s.readMeta(id)
	if err != nil {
		release()
		return nil, nil, err
	}
	if m.Format != snapFormat {
		f, err := os.Open(m.rawPath(filepath.Join(s.dir, id)))
		if err != nil {
			release()
			return nil, nil, fmt.Errorf("raftstore: open snapshot %s: %w", id, err)
		}
		return &m.SnapshotMeta, &rawReader{File: f, release: release}, nil
	}
	var token [tokenLen]byte
	if _, err := rand.Read(token[:]); err != nil {
		release()
		return nil, nil, fmt.Errorf("raftstore: open snapshot %s: %w", id, err)
	}
	s.mu.Lock()
	s.opened[token] = m
	s.mu.Unlock()
	pr, pw := io.Pipe()
	r := &snapReader{store: s, token: token, id: id, pr: pr, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		pw.CloseWithError(writeFileStream(pw, filepath.Join(s.dir, id, snapFilesDir), m.Files, m.Applied, token))
	}()
	return &m.SnapshotMeta, r, nil
}

// local returns the snapshot whose reader, still open, carries token, and
// its directory.
func (s *snapshotStore) local(token [tokenLen]byte) (*snapMeta, string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.opened[token]
	if !ok {
		return nil, "", false
	}
	return m, filepath.Join(s.dir, m.ID, snapFilesDir), true
}

// rawReader is a snapshot kept as its stream, as Open gives it.
type rawReader struct {
	*os.File
	release func()
	once    sync.Once
}

func (r *rawReader) Close() error {
	err := r.File.Close()
	r.once.Do(r.release)
	return err
}

// reap removes the snapshots past the newest retain, but none a reader
// has open. Each is first renamed out of the listing (and the rename
// synced), so that a crash part way through a removal leaves a directory
// the next open removes, not a snapshot without its metadata.
func (s *snapshotStore) reap() error {
	metas, err := s.all()
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var gone []string
	for _, m := range metas[min(len(metas), s.retain):] {
		if s.inUse[m.ID] > 0 {
			continue
		}
		del := filepath.Join(s.dir, m.ID+snapDelExt)
		if err := os.Rename(filepath.Join(s.dir, m.ID), del); err != nil {
			return fmt.Errorf("raftstore: remove old snapshot %s: %w", m.ID, err)
		}
		gone = append(gone, del)
	}
	if len(gone) == 0 {
		return nil
	}
	if err := vfs.Default.SyncDir(s.dir); err != nil {
		return fmt.Errorf("raftstore: remove old snapshots: %w", err)
	}
	for _, del := range gone {
		if err := os.RemoveAll(del); err != nil {
			return fmt.Errorf("raftstore: remove old snapshot %s: %w", del, err)
		}
	}
	return nil
}

// snapReader is a snapshot's stream, as Open gives it.
type snapReader struct {
	store *snapshotStore
	token [tokenLen]byte
	id    string
	pr    *io.PipeReader
	done  chan struct{}
	once  sync.Once
}

func (r *snapReader) Read(p []byte) (int, error) { return r.pr.Read(p) }

// Close stops the stream and forgets its token.
func (r *snapReader) Close() error {
	r.once.Do(func() {
		r.pr.Close()
		<-r.done
		r.store.mu.Lock()
		delete(r.store.opened, r.token)
		if r.store.inUse[r.id]--; r.store.inUse[r.id] <= 0 {
			delete(r.store.inUse, r.id)
		}
		r.store.mu.Unlock()
	})
	return nil
}

// storeSink is a raft.SnapshotSink of the store: the FSM links its files
// in (link), or the stream written to it is parsed as it comes, its files
// written into the snapshot's directory; a version 1 stream is kept as it
// comes (raw).
type storeSink struct {
	store *snapshotStore
	tmp   string
	meta  snapMeta

	head   []byte // a stream's first bytes, until its header frame is whole
	pw     *io.PipeWriter
	parsed chan error
	raw    *os.File
	linked bool
	done   bool
}

// ID returns the snapshot's ID (raft.SnapshotSink).
func (k *storeSink) ID() string { return k.meta.ID }

// Write takes the next bytes of a stream (io.Writer). Its header frame
// decides how: a version 1 stream is kept raw, any other parsed.
func (k *storeSink) Write(p []byte) (int, error) {
	if k.done || k.linked {
		return 0, fmt.Errorf("raftstore: write to snapshot %s after its files were set or it was closed", k.meta.ID)
	}
	switch {
	case k.raw != nil:
		return k.raw.Write(p)
	case k.pw != nil:
		return k.pw.Write(p)
	}
	k.head = append(k.head, p...)
	const at = len(snapshotMagic)
	if len(k.head) < at+5 {
		return len(p), nil
	}
	n := int(binary.BigEndian.Uint32(k.head[at+1:]))
	if n <= maxFrame && len(k.head) < at+frameOverhead+n {
		return len(p), nil
	}
	head := k.head
	k.head = nil
	if n == 9 && len(head) >= at+frameOverhead+n && head[at] == frameHeader && head[at+5] == streamTables {
		if err := k.startRaw(binary.BigEndian.Uint64(head[at+6:])); err != nil {
			return 0, err
		}
		if _, err := k.raw.Write(head); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	k.startParse()
	if _, err := k.pw.Write(head); err != nil {
		return 0, err
	}
	return len(p), nil
}

// startParse starts parsing the stream, into the snapshot's files.
func (k *storeSink) startParse() {
	pr, pw := io.Pipe()
	k.pw, k.parsed = pw, make(chan error, 1)
	go func() {
		err := k.parse(pr)
		pr.CloseWithError(err) // a failed parse fails the writes
		k.parsed <- err
	}()
}

// startRaw starts keeping a version 1 stream of applied index applied as
// it comes; its frames are checked when it is restored.
func (k *storeSink) startRaw(applied uint64) error {
	f, err := os.OpenFile(filepath.Join(k.tmp, snapStreamFile), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	k.raw = f
	k.meta.Format, k.meta.Applied = snapFormatStream, applied
	return nil
}

// parse reads a version 2 stream from r into the snapshot's directory.
func (k *storeSink) parse(r io.Reader) error {
	fr, h, err := readStreamHeader(r)
	if err != nil {
		return err
	}
	if h.version != streamFiles {
		return fmt.Errorf("snapshot stream of version %d where version %d was expected: %w", h.version, streamFiles, ErrCorruption)
	}
	files, err := fr.readFiles(filepath.Join(k.tmp, snapFilesDir))
	if err != nil {
		return err
	}
	k.meta.Applied, k.meta.Files = h.applied, files
	return nil
}

// link gives the snapshot the files of dir, as links where it can. It
// reads each file but the tables once for its checksum; a table's blocks
// carry their own, and its stream's end frame gets the one computed as
// Open streams it.
func (k *storeSink) link(dir string, files []snapFile, applied uint64) error {
	if k.pw != nil || k.raw != nil || k.head != nil || k.done {
		return fmt.Errorf("raftstore: snapshot %s already written", k.meta.ID)
	}
	out := make([]snapFile, 0, len(files))
	for _, f := range files {
		src, dst := filepath.Join(dir, f.Name), filepath.Join(k.tmp, snapFilesDir, f.Name)
		if err := vfs.LinkOrCopy(vfs.Default, src, dst); err != nil {
			return fmt.Errorf("link %s into snapshot %s: %w", src, k.meta.ID, err)
		}
		var (
			crc uint32
			n   int64
			err error
		)
		if strings.HasSuffix(f.Name, ".sst") {
			var info os.FileInfo
			if info, err = os.Stat(dst); err == nil {
				n = info.Size()
			}
		} else {
			crc, n, err = fileCRC(dst)
		}
		if err != nil {
			return err
		}
		if n != f.Size {
			return fmt.Errorf("snapshot file %s holds %d bytes, its listing %d: %w", dst, n, f.Size, ErrCorruption)
		}
		out = append(out, snapFile{Name: f.Name, Size: n, CRC: crc})
	}
	k.meta.Applied, k.meta.Files, k.linked = applied, out, true
	return nil
}

func fileCRC(path string) (uint32, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	h := crc32.New(castagnoli)
	n, err := io.Copy(h, f)
	if err != nil {
		return 0, 0, fmt.Errorf("read %s: %w", path, err)
	}
	return h.Sum32(), n, nil
}

// Close finishes the snapshot: the stream's last checks, meta.json, syncs,
// the rename into place, and the removal of snapshots past those retained
// (raft.SnapshotSink).
func (k *storeSink) Close() error {
	if k.done {
		return nil
	}
	k.done = true
	if k.head != nil {
		// A stream shorter than its header frame: the parse says so.
		k.startParse()
		k.pw.Write(k.head)
		k.head = nil
	}
	switch {
	case k.pw != nil:
		k.pw.Close()
		if err := <-k.parsed; err != nil {
			os.RemoveAll(k.tmp)
			return fmt.Errorf("raftstore: snapshot %s: %w", k.meta.ID, err)
		}
		k.meta.Size = streamSize(k.meta.Files)
	case k.raw != nil:
		err := k.raw.Sync()
		if cerr := k.raw.Close(); err == nil {
			err = cerr
		}
		var info os.FileInfo
		if err == nil {
			info, err = os.Stat(k.raw.Name())
		}
		if err != nil {
			os.RemoveAll(k.tmp)
			return fmt.Errorf("raftstore: snapshot %s: %w", k.meta.ID, err)
		}
		k.meta.Size = info.Size()
	case k.linked:
		k.meta.Size = streamSize(k.meta.Files)
	default:
		os.RemoveAll(k.tmp)
		return fmt.Errorf("raftstore: snapshot %s closed with nothing written: %w", k.meta.ID, ErrSnapshotCut)
	}
	if err := k.finish(); err != nil {
		os.RemoveAll(k.tmp)
		return fmt.Errorf("raftstore: snapshot %s: %w", k.meta.ID, err)
	}
	// The snapshot is in place; old ones that stay for a failed removal
	// go at the next snapshot, or the next open.
	k.store.reap()
	return nil
}

func (k *storeSink) finish() error {
	b, err := json.Marshal(&k.meta)
	if err != nil {
		return err
	}
	if err := writeFileSync(filepath.Join(k.tmp, snapMetaFile), b); err != nil {
		return err
	}
	if err := vfs.Default.SyncDir(filepath.Join(k.tmp, snapFilesDir)); err != nil {
		return err
	}
	if err := vfs.Default.SyncDir(k.tmp); err != nil {
		return err
	}
	if err := os.Rename(k.tmp, filepath.Join(k.store.dir, k.meta.ID)); err != nil {
		return err
	}
	return vfs.Default.SyncDir(k.store.dir)
}

// Cancel abandons the snapshot (raft.SnapshotSink).
func (k *storeSink) Cancel() error {
	if k.done {
		return nil
	}
	k.done = true
	if k.pw != nil {
		k.pw.CloseWithError(errors.New("raftstore: snapshot cancelled"))
		<-k.parsed
	}
	if k.raw != nil {
		k.raw.Close()
	}
	return os.RemoveAll(k.tmp)
}
