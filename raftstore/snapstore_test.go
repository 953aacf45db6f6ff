package raftstore

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bloomkv/bloomkv/sstable"
	"github.com/hashicorp/raft"
)

// hidden hides a reader's type, as raft's wrappers do.
type hidden struct{ io.ReadCloser }

func testConf() raft.Configuration {
	return raft.Configuration{Servers: []raft.Server{{ID: "n1", Address: "127.0.0.1:1", Suffrage: raft.Voter}}}
}

func openTestStore(t *testing.T, dir string, retain int) *snapshotStore {
	t.Helper()
	s, err := openSnapshotStore(dir, retain)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// persistTo takes a snapshot of f into store as (term, index).
func persistTo(t *testing.T, f *FSM, store *snapshotStore, term, index uint64) string {
	t.Helper()
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Release()
	sink, err := store.Create(raft.SnapshotVersionMax, index, term, testConf(), 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	return sink.ID()
}

func readAll(t *testing.T, store *snapshotStore, id string) (*raft.SnapshotMeta, []byte) {
	t.Helper()
	meta, rc, err := store.Open(id)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return meta, b
}

// TestSnapshotStoreLocal: a snapshot the FSM persists into the store is
// linked in; its stream is as long as its metadata says; restoring it on
// the same node links its tables into the new state.
func TestSnapshotStoreLocal(t *testing.T) {
	src := openTestFSM(t, t.TempDir())
	defer src.Close()
	fillFSM(t, src, 3000)
	if err := src.db.Flush(); err != nil {
		t.Fatal(err)
	}
	store := openTestStore(t, t.TempDir(), 2)
	id := persistTo(t, src, store, 2, src.Applied())
	metas, err := store.List()
	if err != nil || len(metas) != 1 || metas[0].ID != id || metas[0].Index != src.Applied() || len(metas[0].Configuration.Servers) != 1 {
		t.Fatalf("List = %+v, %v", metas, err)
	}
	meta, stream := readAll(t, store, id)
	if int64(len(stream)) != meta.Size {
		t.Fatalf("stream of %d bytes, metadata says %d", len(stream), meta.Size)
	}

	dst := openTestFSM(t, t.TempDir())
	defer dst.Close()
	dst.store = store
	restoreFrom(t, dst, store, id)
	wantValue(t, dst, "key002999", filledValue(2999))
	// The restored tables are the snapshot's, linked.
	m, err := store.readMeta(id)
	if err != nil {
		t.Fatal(err)
	}
	linked := 0
	for _, f := range m.Files {
		if !strings.HasSuffix(f.Name, ".sst") {
			continue
		}
		a, errA := os.Stat(filepath.Join(store.dir, id, snapFilesDir, f.Name))
		b, errB := os.Stat(filepath.Join(dst.statePath(dst.seq), f.Name))
		if errA == nil && errB == nil && os.SameFile(a, b) {
			linked++
		}
	}
	if linked == 0 {
		t.Fatal("no table of the local snapshot was linked into the restored state")
	}
	// A stream from the same snapshot restores elsewhere the same.
	other := openTestFSM(t, t.TempDir())
	defer other.Close()
	if err := other.Restore(io.NopCloser(bytes.NewReader(stream))); err != nil {
		t.Fatal(err)
	}
	wantValue(t, other, "key000000", filledValue(0))
}

// TestSnapshotStoreReceives: a stream written to a sink in pieces, as a
// follower receives the leader's, becomes a snapshot whose files restore;
// a damaged or cut stream fails Close and leaves nothing.
func TestSnapshotStoreReceives(t *testing.T) {
	src := openTestFSM(t, t.TempDir())
	defer src.Close()
	fillFSM(t, src, 2000)
	stream := snapshotOf(t, src).Bytes()
	store := openTestStore(t, t.TempDir(), 2)
	receive := func(data []byte) (string, error) {
		sink, err := store.Create(raft.SnapshotVersionMax, 9, 1, testConf(), 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(1, uint64(len(data))))
		for p := data; len(p) > 0; {
			n := min(len(p), 1+rng.IntN(100<<10))
			if _, err := sink.Write(p[:n]); err != nil {
				sink.Cancel()
				return "", err
			}
			p = p[n:]
		}
		return sink.ID(), sink.Close()
	}
	check := func(name string, data []byte, want error) {
		t.Helper()
		if _, err := receive(data); !errors.Is(err, want) {
			t.Fatalf("%s: %v, want an error wrapping %v", name, err, want)
		}
		if metas, _ := store.List(); len(metas) != 0 {
			t.Fatalf("%s: the store lists %d snapshots", name, len(metas))
		}
		if ents, _ := os.ReadDir(store.dir); len(ents) != 0 {
			t.Fatalf("%s: the store holds %v", name, ents)
		}
	}
	check("cut", stream[:len(stream)/2], ErrSnapshotCut)
	flipped := bytes.Clone(stream)
	flipped[len(flipped)/2] ^= 1
	check("flipped", flipped, ErrCorruption)

	// A version 1 stream, as a node of an earlier build sends, is kept as
	// it came, and restores.
	v1 := v1Stream(t, src)
	id1, err := receive(v1)
	if err != nil {
		t.Fatal(err)
	}
	if meta, got := readAll(t, store, id1); !bytes.Equal(got, v1) || meta.Size != int64(len(v1)) {
		t.Fatalf("the version 1 stream read back differs (%d bytes of %d, size %d)", len(got), len(v1), meta.Size)
	}
	old := openTestFSM(t, t.TempDir())
	defer old.Close()
	restoreFrom(t, old, store, id1)
	wantValue(t, old, "key001999", filledValue(1999))

	id, err := receive(stream)
	if err != nil {
		t.Fatal(err)
	}
	dst := openTestFSM(t, t.TempDir())
	defer dst.Close()
	dst.store = store
	restoreFrom(t, dst, store, id)
	wantValue(t, dst, "key001999", filledValue(1999))
}

// TestSnapshotStreamFileNames: a stream naming a file outside the directory
// it is written into is refused before anything is written.
func TestSnapshotStreamFileNames(t *testing.T) {
	for _, name := range []string{"../escape", "a/b", "..", "", "x\x00y"} {
		var buf bytes.Buffer
		bw := &frameWriter{w: newBufWriter(&buf)}
		buf.WriteString(snapshotMagic)
		var hdr [1 + 8 + tokenLen]byte
		hdr[0] = streamFiles
		bw.frame(frameHeader, hdr[:])
		bw.frame(frameFile, []byte(name))
		bw.frame(frameChunk, []byte("data"))
		bw.w.Flush()
		dir := t.TempDir()
		fr, _, err := readStreamHeader(bytes.NewReader(buf.Bytes()))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fr.readFiles(filepath.Join(dir, "in")); !errors.Is(err, ErrCorruption) {
			t.Fatalf("file named %q: %v, want ErrCorruption", name, err)
		}
		if _, err := os.Stat(filepath.Join(dir, "escape")); err == nil {
			t.Fatalf("file named %q was written outside", name)
		}
	}
}

// TestSnapshotStoreRetains: the newest snapshots are kept, the others
// removed, except one a reader has open; a partial snapshot is removed at
// open, and a snapshot of raft's own file store format is refused.
func TestSnapshotStoreRetains(t *testing.T) {
	src := openTestFSM(t, t.TempDir())
	defer src.Close()
	fillFSM(t, src, 100)
	dir := t.TempDir()
	store := openTestStore(t, dir, 2)
	first := persistTo(t, src, store, 1, 10)
	_, rc, err := store.Open(first)
	if err != nil {
		t.Fatal(err)
	}
	persistTo(t, src, store, 1, 20)
	persistTo(t, src, store, 2, 30)
	if _, err := os.Stat(filepath.Join(dir, first)); err != nil {
		t.Fatalf("a snapshot with an open reader was removed: %v", err)
	}
	rc.Close()
	persistTo(t, src, store, 2, 40)
	metas, err := store.List()
	if err != nil || len(metas) != 2 || metas[0].Index != 40 || metas[1].Index != 30 {
		t.Fatalf("List = %+v, %v; want indexes 40 and 30", metas, err)
	}
	if _, err := os.Stat(filepath.Join(dir, first)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the oldest snapshot stayed: %v", err)
	}
	if err := os.Mkdir(filepath.Join(dir, "1-1-1"+snapTmpExt), 0o755); err != nil {
		t.Fatal(err)
	}
	store = openTestStore(t, dir, 2)
	if _, err := os.Stat(filepath.Join(dir, "1-1-1"+snapTmpExt)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a partial snapshot survived open: %v", err)
	}
	// A removal a crash interrupted: no meta.json; not a snapshot.
	if err := os.MkdirAll(filepath.Join(dir, "1-5-1", snapFilesDir), 0o755); err != nil {
		t.Fatal(err)
	}
	// A snapshot of raft's own file store, as earlier builds kept them: its
	// state.bin is a version 1 stream.
	v1 := v1Stream(t, src)
	legacy := filepath.Join(dir, "3-50-7")
	if err := os.MkdirAll(legacy, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(legacy, snapLegacyFile), v1, 0o644)
	os.WriteFile(filepath.Join(legacy, snapMetaFile), []byte(fmt.Sprintf(`{"ID":"3-50-7","Index":50,"Term":3,"Size":%d,"Version":1,"CRC":"AAA="}`, len(v1))), 0o644)
	metas, err = store.List()
	if err != nil || len(metas) != 2 || metas[0].ID != "3-50-7" {
		t.Fatalf("List = %+v, %v; want raft's snapshot first", metas, err)
	}
	dst := openTestFSM(t, t.TempDir())
	defer dst.Close()
	restoreFrom(t, dst, store, "3-50-7")
	wantValue(t, dst, "key000099", filledValue(99))
}

// TestFSMRestoresVersion1Streams: streams of tables, which earlier builds
// wrote, still restore.
func TestFSMRestoresVersion1Streams(t *testing.T) {
	src := openTestFSM(t, t.TempDir())
	defer src.Close()
	fillFSM(t, src, 2000)
	dst := openTestFSM(t, t.TempDir())
	defer dst.Close()
	if err := dst.Restore(io.NopCloser(bytes.NewReader(v1Stream(t, src)))); err != nil {
		t.Fatal(err)
	}
	if dst.Applied() != src.Applied() {
		t.Fatalf("applied %d, want %d", dst.Applied(), src.Applied())
	}
	wantValue(t, dst, "key001234", filledValue(1234))
}

// v1Stream writes f's state as a version 1 stream: its keys as sstables of
// about 16 KiB, each chunk and end frame as earlier builds wrote them.
func v1Stream(t *testing.T, f *FSM) []byte {
	t.Helper()
	var buf bytes.Buffer
	buf.WriteString(snapshotMagic)
	fw := &frameWriter{w: newBufWriter(&buf)}
	var hdr [9]byte
	hdr[0] = streamTables
	binary.BigEndian.PutUint64(hdr[1:], f.Applied())
	fw.frame(frameHeader, hdr[:])
	it, err := f.db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var (
		tables int
		total  uint64
		tb     bytes.Buffer
		tw     *sstable.Writer
	)
	finish := func() {
		if err := tw.Close(); err != nil {
			t.Fatal(err)
		}
		data := tb.Bytes()
		fw.frame(frameChunk, data)
		fw.frame(frameEnd, endPayload(fmt.Sprintf("%06d.sst", tables+1), uint64(len(data)), crcOf(data)))
		tables++
		total += uint64(len(data))
		tb.Reset()
		tw = nil
	}
	for ok := it.First(); ok; ok = it.Next() {
		if tw == nil {
			if tw, err = sstable.NewWriter(&tb, sstable.WriterOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		if err := tw.Set(it.Key(), it.Value()); err != nil {
			t.Fatal(err)
		}
		if tw.Size() >= 16<<10 {
			finish()
		}
	}
	if tw != nil {
		finish()
	}
	var tr [12]byte
	binary.BigEndian.PutUint32(tr[:4], uint32(tables))
	binary.BigEndian.PutUint64(tr[4:], total)
	fw.frame(frameTrailer, tr[:])
	fw.w.Flush()
	if tables == 0 {
		t.Fatal("a version 1 stream of no table")
	}
	return buf.Bytes()
}

func newBufWriter(w io.Writer) *bufio.Writer { return bufio.NewWriter(w) }

func crcOf(b []byte) uint32 { return crc32.Update(0, castagnoli, b) }

// restoreFrom restores f from the snapshot id of store, through a reader
// whose type is hidden as raft hides it.
func restoreFrom(t *testing.T, f *FSM, store *snapshotStore, id string) {
	t.Helper()
	_, rc, err := store.Open(id)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Restore(hidden{rc}); err != nil {
		t.Fatal(err)
	}
}
