package raftstore

// The snapshot stream: the files of a bloomkv store (a Checkpoint of the
// FSM's DB) in framed, checksummed chunks.
//
//	stream  = magic frame* trailer-frame
//	magic   = "BKVRAFT1"
//	frame   = kind(1) length(4, big-endian) payload crc32c(4)
//
// The checksum covers kind, length and payload. Frames of kind 'H' (first,
// once) carry the stream's version (1 byte), the applied index (8 bytes)
// and, in version 2, a token (16 bytes) naming the snapshot store's reader
// the stream came from, zero otherwise; 'F' starts a file and carries its
// name; 'T' a chunk of the current file's bytes; 'E' the end of a file: its
// name, its length (8 bytes) and the crc32c of its bytes; 'Z' (last) the
// number of files (4 bytes) and their total length (8 bytes). Anything
// after the trailer, a missing trailer, or a failed check is an error.
//
// Version 1 streams, which earlier builds wrote, hold sstables without 'F'
// frames (a table starts with its first chunk) that Restore ingests into a
// new store; they are still read.

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/hashicorp/raft"
)

const (
	snapshotMagic = "BKVRAFT1"
	// streamTables is the version of streams of sstables to ingest;
	// streamFiles of streams of a store's files.
	streamTables = 1
	streamFiles  = 2
	tokenLen     = 16
	// maxFrame bounds a frame's payload, so that a damaged length cannot
	// make the reader allocate without limit.
	maxFrame = 4 << 20
	// chunkSize is the payload of the chunks a stream is written in.
	chunkSize = 1 << 20
	// maxFiles bounds the files of a stream read.
	maxFiles = 1 << 20
	// frameOverhead is a frame's bytes besides its payload.
	frameOverhead = 9
	// restorePrefix starts the names of the directories Restore writes
	// version 1 tables into; checkpointPrefix those of the checkpoints
	// snapshots are taken as.
	restorePrefix    = "restore-"
	checkpointPrefix = "snapshot-"
)

const (
	frameHeader  = 'H'
	frameFile    = 'F'
	frameChunk   = 'T'
	frameEnd     = 'E'
	frameTrailer = 'Z'
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrSnapshotCut is wrapped by Restore's error for a stream that ends
// before its trailer.
var ErrSnapshotCut = errors.New("raftstore: snapshot stream cut short")

// snapFile is a file of a snapshot: its name, its length and, where known,
// the crc32c of its bytes.
type snapFile struct {
	Name string `json:"name"`
	Size int64  `json:"size"`
	CRC  uint32 `json:"crc32c"`
}

// fsmSnapshot is a raft.FSMSnapshot: a Checkpoint of the FSM's DB in dir.
type fsmSnapshot struct {
	dir     string
	files   []snapFile
	applied uint64
}

// Persist writes the snapshot to sink (raft.FSMSnapshot), cancelling the
// sink on failure. A sink of the node's own snapshot store takes the files
// as links; any other gets the stream.
func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	var err error
	if ls, ok := sink.(*storeSink); ok {
		err = ls.link(s.dir, s.files, s.applied)
	} else {
		err = writeFileStream(sink, s.dir, s.files, s.applied, [tokenLen]byte{})
	}
	if err != nil {
		sink.Cancel()
		return fmt.Errorf("raftstore: persist snapshot at %d: %w", s.applied, err)
	}
	return sink.Close()
}

// Release removes the checkpoint (raft.FSMSnapshot).
func (s *fsmSnapshot) Release() { os.RemoveAll(s.dir) }

// listFiles returns the regular files of dir, by name, with their sizes.
func listFiles(dir string) ([]snapFile, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var files []snapFile
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		info, err := e.Info()
		if err != nil {
			return nil, err
		}
		files = append(files, snapFile{Name: e.Name(), Size: info.Size()})
	}
	return files, nil
}

// validFileName reports whether name, read from a stream, may name a file
// in the directory being written: one plain name, nothing of a path.
func validFileName(name string) bool {
	return name != "" && len(name) <= 255 && name != "." && name != ".." && !strings.ContainsAny(name, "/\\\x00")
}

// streamSize is the length of the version 2 stream of files.
func streamSize(files []snapFile) int64 {
	n := int64(len(snapshotMagic)) + frameOverhead + 1 + 8 + tokenLen
	for _, f := range files {
		chunks := (f.Size + chunkSize - 1) / chunkSize
		n += frameOverhead + int64(len(f.Name)) + chunks*frameOverhead + f.Size + frameOverhead + int64(len(f.Name)) + 12
	}
	return n + frameOverhead + 12
}

// frameWriter writes frames to a buffered writer.
type frameWriter struct {
	w   *bufio.Writer
	err error
}

func (fw *frameWriter) frame(kind byte, payload []byte) {
	if fw.err != nil {
		return
	}
	var hdr [5]byte
	hdr[0] = kind
	binary.BigEndian.PutUint32(hdr[1:], uint32(len(payload)))
	crc := crc32.Update(crc32.Update(0, castagnoli, hdr[:]), castagnoli, payload)
	var tail [4]byte
	binary.BigEndian.PutUint32(tail[:], crc)
	for _, b := range [][]byte{hdr[:], payload, tail[:]} {
		if _, err := fw.w.Write(b); err != nil {
			fw.err = err
			return
		}
	}
}

// endPayload is an 'E' frame's payload.
func endPayload(name string, n uint64, crc uint32) []byte {
	p := append([]byte(name), make([]byte, 12)...)
	binary.BigEndian.PutUint64(p[len(name):], n)
	binary.BigEndian.PutUint32(p[len(name)+8:], crc)
	return p
}

// writeFileStream writes the files of dir as a version 2 stream. A file
// whose length differs from the one listed, or whose crc32c differs from a
// non-zero one listed, fails it with ErrCorruption.
func writeFileStream(w io.Writer, dir string, files []snapFile, applied uint64, token [tokenLen]byte) error {
	bw := bufio.NewWriterSize(w, 256<<10)
	if _, err := bw.WriteString(snapshotMagic); err != nil {
		return err
	}
	fw := &frameWriter{w: bw}
	var hdr [1 + 8 + tokenLen]byte
	hdr[0] = streamFiles
	binary.BigEndian.PutUint64(hdr[1:], applied)
	copy(hdr[9:], token[:])
	fw.frame(frameHeader, hdr[:])
	buf := make([]byte, chunkSize)
	var total uint64
	for _, sf := range files {
		fw.frame(frameFile, []byte(sf.Name))
		n, crc, err := streamFile(fw, filepath.Join(dir, sf.Name), buf)
		if err != nil {
			return err
		}
		if int64(n) != sf.Size || sf.CRC != 0 && crc != sf.CRC {
			return fmt.Errorf("snapshot file %s holds %d bytes of crc32c %08x, its listing %d of %08x: %w",
				filepath.Join(dir, sf.Name), n, crc, sf.Size, sf.CRC, ErrCorruption)
		}
		fw.frame(frameEnd, endPayload(sf.Name, n, crc))
		total += n
	}
	var tr [12]byte
	binary.BigEndian.PutUint32(tr[:4], uint32(len(files)))
	binary.BigEndian.PutUint64(tr[4:], total)
	fw.frame(frameTrailer, tr[:])
	if fw.err != nil {
		return fw.err
	}
	return bw.Flush()
}

// streamFile writes the file at path as chunk frames, and returns its
// length and crc32c.
func streamFile(fw *frameWriter, path string, buf []byte) (uint64, uint32, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	var (
		n   uint64
		crc uint32
	)
	for {
		k, err := io.ReadFull(f, buf)
		if k > 0 {
			n += uint64(k)
			crc = crc32.Update(crc, castagnoli, buf[:k])
			fw.frame(frameChunk, buf[:k])
			if fw.err != nil {
				return 0, 0, fw.err
			}
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return n, crc, nil
		}
		if err != nil {
			return 0, 0, fmt.Errorf("read %s: %w", path, err)
		}
	}
}

// frameReader reads and checks frames.
type frameReader struct {
	r   *bufio.Reader
	buf []byte
	off int64
}

// next returns the next frame; its payload is valid until the next call.
func (fr *frameReader) next() (byte, []byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(fr.r, hdr[:]); err != nil {
		return 0, nil, fr.cut(err)
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n > maxFrame {
		return 0, nil, fmt.Errorf("frame at offset %d of %d bytes, over the %d-byte limit: %w", fr.off, n, maxFrame, ErrCorruption)
	}
	if cap(fr.buf) < int(n)+4 {
		fr.buf = make([]byte, n+4)
	}
	b := fr.buf[:n+4]
	if _, err := io.ReadFull(fr.r, b); err != nil {
		return 0, nil, fr.cut(err)
	}
	crc := crc32.Update(crc32.Update(0, castagnoli, hdr[:]), castagnoli, b[:n])
	if crc != binary.BigEndian.Uint32(b[n:]) {
		return 0, nil, fmt.Errorf("frame at offset %d fails its checksum: %w", fr.off, ErrCorruption)
	}
	fr.off += int64(n) + frameOverhead
	return hdr[0], b[:n], nil
}

func (fr *frameReader) cut(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w at offset %d, before its trailer", ErrSnapshotCut, fr.off)
	}
	return fmt.Errorf("read snapshot stream at offset %d: %w", fr.off, err)
}

// streamHeader is a stream's header frame.
type streamHeader struct {
	version byte
	applied uint64
	token   [tokenLen]byte
}

// readStreamHeader reads a stream's magic and header frame.
func readStreamHeader(r io.Reader) (*frameReader, streamHeader, error) {
	br := bufio.NewReaderSize(r, 256<<10)
	var h streamHeader
	var magic [len(snapshotMagic)]byte
	if _, err := io.ReadFull(br, magic[:]); err != nil {
		return nil, h, fmt.Errorf("%w: no magic", ErrSnapshotCut)
	}
	if string(magic[:]) != snapshotMagic {
		return nil, h, fmt.Errorf("stream starts with %q, not %q: %w", magic[:], snapshotMagic, ErrCorruption)
	}
	fr := &frameReader{r: br, off: int64(len(snapshotMagic))}
	kind, p, err := fr.next()
	if err != nil {
		return nil, h, err
	}
	switch {
	case kind == frameHeader && len(p) == 9 && p[0] == streamTables:
	case kind == frameHeader && len(p) == 9+tokenLen && p[0] == streamFiles:
		copy(h.token[:], p[9:])
	default:
		return nil, h, fmt.Errorf("snapshot header frame of kind %q, %d bytes: %w", kind, len(p), ErrCorruption)
	}
	h.version, h.applied = p[0], binary.BigEndian.Uint64(p[1:])
	return fr, h, nil
}

// fileWriter writes a stream's file into a directory.
type fileWriter struct {
	f    *os.File
	name string
	n    uint64
	crc  uint32
}

func (w *fileWriter) write(p []byte) error {
	if _, err := w.f.Write(p); err != nil {
		return err
	}
	w.n += uint64(len(p))
	w.crc = crc32.Update(w.crc, castagnoli, p)
	return nil
}

// end checks the file against its end frame's payload p; the name too
// when the stream named the file.
func (w *fileWriter) end(fr *frameReader, p []byte, named bool) error {
	if len(p) < 12 {
		return fmt.Errorf("end frame at offset %d of %d bytes: %w", fr.off, len(p), ErrCorruption)
	}
	name := string(p[:len(p)-12])
	wantN := binary.BigEndian.Uint64(p[len(p)-12:])
	wantCRC := binary.BigEndian.Uint32(p[len(p)-4:])
	if (named && name != w.name) || w.n != wantN || w.crc != wantCRC {
		return fmt.Errorf("file %s: %d bytes of crc32c %08x, its end frame says %s, %d bytes of %08x: %w", w.name, w.n, w.crc, name, wantN, wantCRC, ErrCorruption)
	}
	return nil
}

// syncer syncs and closes files on a goroutine of its own, so that a
// stream's next file arrives while the last one's sync runs.
type syncer struct {
	files  chan *os.File
	done   chan error
	waited bool
}

func newSyncer() *syncer {
	s := &syncer{files: make(chan *os.File, 64), done: make(chan error, 1)}
	go func() {
		var first error
		for f := range s.files {
			err := f.Sync()
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil && first == nil {
				first = fmt.Errorf("sync %s: %w", f.Name(), err)
			}
		}
		s.done <- first
	}()
	return s
}

// add hands f, whole, to the syncer.
func (s *syncer) add(f *os.File) { s.files <- f }

// wait returns once every file added is synced and closed, with the first
// error.
func (s *syncer) wait() error {
	if s.waited {
		return nil
	}
	s.waited = true
	close(s.files)
	return <-s.done
}

// readFiles reads the rest of a version 2 stream, writing its files into
// dir, each synced; it returns them with their crc32c.
func (fr *frameReader) readFiles(dir string) ([]snapFile, error) {
	return fr.readInto(dir, true)
}

// readTables reads the rest of a version 1 stream, writing its tables into
// dir, each synced; it returns their paths.
func (fr *frameReader) readTables(dir string) ([]string, error) {
	files, err := fr.readInto(dir, false)
	if err != nil {
		return nil, err
	}
	paths := make([]string, len(files))
	for i, f := range files {
		paths[i] = filepath.Join(dir, f.Name)
	}
	return paths, nil
}

// readInto reads the rest of a stream, writing its files into dir, each
// synced. In a version 2 stream (named) a file frame starts each file and
// names it; in a version 1 stream a table starts with its first chunk and
// is named by its place.
func (fr *frameReader) readInto(dir string, named bool) (files []snapFile, err error) {
	var cur *fileWriter
	sy := newSyncer()
	defer func() {
		if cur != nil {
			cur.f.Close()
		}
		sy.wait()
	}()
	create := func(name string) error {
		f, err := os.OpenFile(filepath.Join(dir, name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return err
		}
		cur = &fileWriter{f: f, name: name}
		return nil
	}
	var total uint64
	seen := map[string]bool{}
	for {
		kind, p, err := fr.next()
		if err != nil {
			return nil, err
		}
		switch {
		case named && kind == frameFile && cur == nil:
			name := string(p)
			if !validFileName(name) || seen[name] || len(seen) >= maxFiles {
				return nil, fmt.Errorf("file frame at offset %d names %q, not a new plain file name, or one past %d: %w", fr.off, name, maxFiles, ErrCorruption)
			}
			seen[name] = true
			if err := create(name); err != nil {
				return nil, err
			}
		case kind == frameChunk && (cur != nil || !named):
			if cur == nil {
				if err := create(fmt.Sprintf("%06d.sst", len(files)+1)); err != nil {
					return nil, err
				}
			}
			if err := cur.write(p); err != nil {
				return nil, err
			}
		case kind == frameEnd && cur != nil:
			if err := cur.end(fr, p, named); err != nil {
				return nil, err
			}
			sy.add(cur.f)
			files = append(files, snapFile{Name: cur.name, Size: int64(cur.n), CRC: cur.crc})
			total += cur.n
			cur = nil
		case kind == frameTrailer && cur == nil:
			if err := fr.trailer(p, len(files), total); err != nil {
				return nil, err
			}
			if err := sy.wait(); err != nil {
				return nil, err
			}
			return files, nil
		default:
			return nil, fmt.Errorf("frame of kind %q at offset %d out of place: %w", kind, fr.off, ErrCorruption)
		}
	}
}

// trailer checks the trailer's payload p against the files read, and that
// nothing follows it.
func (fr *frameReader) trailer(p []byte, files int, total uint64) error {
	if len(p) != 12 {
		return fmt.Errorf("trailer at offset %d of %d bytes: %w", fr.off, len(p), ErrCorruption)
	}
	if c, t := binary.BigEndian.Uint32(p), binary.BigEndian.Uint64(p[4:]); int(c) != files || t != total {
		return fmt.Errorf("trailer counts %d files of %d bytes, the stream held %d of %d: %w", c, t, files, total, ErrCorruption)
	}
	if _, err := fr.r.ReadByte(); err != io.EOF {
		return fmt.Errorf("data after the snapshot's trailer: %w", ErrCorruption)
	}
	return nil
}
