package raftstore

// The snapshot stream: a DB's keys as sstables in framed, checksummed
// chunks.
//
//	stream  = magic frame* trailer-frame
//	magic   = "BKVRAFT1"
//	frame   = kind(1) length(4, big-endian) payload crc32c(4)
//
// The checksum covers kind, length and payload. Frames of kind 'H' (first,
// once) carry the format version and the applied index (8 bytes); 'T' a
// chunk of the current table's bytes; 'E' the end of a table: its name, its
// length (8 bytes) and the crc32c of its bytes; 'Z' (last) the number of
// tables (4 bytes) and their total length (8 bytes). Anything after the
// trailer, a missing trailer, or a failed check is an error.

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"

	"github.com/bloomkv/bloomkv"
	"github.com/bloomkv/bloomkv/sstable"
	"github.com/hashicorp/raft"
)

const (
	snapshotMagic   = "BKVRAFT1"
	snapshotVersion = 1
	// maxFrame bounds a frame's payload, so that a damaged length cannot
	// make the reader allocate without limit.
	maxFrame = 4 << 20
	// chunkSize is the payload of the table chunks Persist writes.
	chunkSize = 1 << 20
	// restorePrefix starts the names of the directories Restore writes
	// tables into.
	restorePrefix = "restore-"
)

const (
	frameHeader  = 'H'
	frameChunk   = 'T'
	frameEnd     = 'E'
	frameTrailer = 'Z'
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrSnapshotCut is wrapped by Restore's error for a stream that ends
// before its trailer.
var ErrSnapshotCut = errors.New("raftstore: snapshot stream cut short")

// fsmSnapshot is a raft.FSMSnapshot of a pinned bloomkv snapshot.
type fsmSnapshot struct {
	snap      *bloomkv.Snapshot
	applied   uint64
	tableSize uint64
}

// Persist writes the snapshot to sink as sstables (raft.FSMSnapshot),
// cancelling the sink on failure.
func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if err := s.write(sink); err != nil {
		sink.Cancel()
		return fmt.Errorf("raftstore: persist snapshot at %d: %w", s.applied, err)
	}
	return sink.Close()
}

// Release unpins the bloomkv snapshot (raft.FSMSnapshot).
func (s *fsmSnapshot) Release() { s.snap.Close() }

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

// tableStream is the io.Writer an sstable.Writer writes a table to: it
// sends the bytes as chunk frames and keeps the table's length and crc.
type tableStream struct {
	fw   *frameWriter
	buf  []byte
	n    uint64
	crc  uint32
	name string
}

func (t *tableStream) Write(p []byte) (int, error) {
	written := len(p)
	t.n += uint64(len(p))
	t.crc = crc32.Update(t.crc, castagnoli, p)
	for len(p) > 0 {
		k := min(len(p), chunkSize-len(t.buf))
		t.buf = append(t.buf, p[:k]...)
		p = p[k:]
		if len(t.buf) == chunkSize {
			t.flush()
		}
	}
	if t.fw.err != nil {
		return 0, t.fw.err
	}
	return written, nil
}

func (t *tableStream) flush() {
	if len(t.buf) > 0 {
		t.fw.frame(frameChunk, t.buf)
		t.buf = t.buf[:0]
	}
}

// end finishes the table with its end frame.
func (t *tableStream) end() error {
	t.flush()
	p := append([]byte(t.name), make([]byte, 12)...)
	binary.BigEndian.PutUint64(p[len(t.name):], t.n)
	binary.BigEndian.PutUint32(p[len(t.name)+8:], t.crc)
	t.fw.frame(frameEnd, p)
	return t.fw.err
}

func (s *fsmSnapshot) write(w io.Writer) error {
	bw := bufio.NewWriterSize(w, 256<<10)
	if _, err := bw.WriteString(snapshotMagic); err != nil {
		return err
	}
	fw := &frameWriter{w: bw}
	var hdr [9]byte
	hdr[0] = snapshotVersion
	binary.BigEndian.PutUint64(hdr[1:], s.applied)
	fw.frame(frameHeader, hdr[:])

	it, err := s.snap.NewIter(nil)
	if err != nil {
		return err
	}
	defer it.Close()
	var (
		tables int
		total  uint64
		tw     *sstable.Writer
		ts     *tableStream
	)
	finish := func() error {
		if err := tw.Close(); err != nil {
			return fmt.Errorf("write table %s: %w", ts.name, err)
		}
		if err := ts.end(); err != nil {
			return err
		}
		tables++
		total += ts.n
		tw = nil
		return nil
	}
	for ok := it.First(); ok; ok = it.Next() {
		if tw == nil {
			ts = &tableStream{fw: fw, name: fmt.Sprintf("%06d.sst", tables+1)}
			if tw, err = sstable.NewWriter(ts, sstable.WriterOptions{}); err != nil {
				return err
			}
		}
		if err := tw.Set(it.Key(), it.Value()); err != nil {
			tw.Abort()
			return fmt.Errorf("write table %s: %w", ts.name, err)
		}
		if fw.err != nil {
			tw.Abort()
			return fw.err
		}
		if tw.Size() >= s.tableSize {
			if err := finish(); err != nil {
				return err
			}
		}
	}
	if err := it.Error(); err != nil {
		if tw != nil {
			tw.Abort()
		}
		return fmt.Errorf("read snapshot: %w", err)
	}
	if tw != nil {
		if err := finish(); err != nil {
			return err
		}
	}
	var tr [12]byte
	binary.BigEndian.PutUint32(tr[:4], uint32(tables))
	binary.BigEndian.PutUint64(tr[4:], total)
	fw.frame(frameTrailer, tr[:])
	if fw.err != nil {
		return fw.err
	}
	return bw.Flush()
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
	fr.off += int64(n) + 9
	return hdr[0], b[:n], nil
}

func (fr *frameReader) cut(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w at offset %d, before its trailer", ErrSnapshotCut, fr.off)
	}
	return fmt.Errorf("read snapshot stream at offset %d: %w", fr.off, err)
}

// readSnapshotStream reads a stream of fsmSnapshot.write, writing its
// tables into dir, synced; it returns their paths and the applied index.
func readSnapshotStream(r io.Reader, dir string) (paths []string, applied uint64, err error) {
	br := bufio.NewReaderSize(r, 256<<10)
	var magic [len(snapshotMagic)]byte
	if _, err := io.ReadFull(br, magic[:]); err != nil {
		return nil, 0, fmt.Errorf("%w: no magic", ErrSnapshotCut)
	}
	if string(magic[:]) != snapshotMagic {
		return nil, 0, fmt.Errorf("stream starts with %q, not %q: %w", magic[:], snapshotMagic, ErrCorruption)
	}
	fr := &frameReader{r: br, off: int64(len(snapshotMagic))}
	kind, p, err := fr.next()
	if err != nil {
		return nil, 0, err
	}
	if kind != frameHeader || len(p) != 9 || p[0] != snapshotVersion {
		return nil, 0, fmt.Errorf("snapshot header frame of kind %q, %d bytes: %w", kind, len(p), ErrCorruption)
	}
	applied = binary.BigEndian.Uint64(p[1:])

	var (
		f     *os.File
		n     uint64
		crc   uint32
		total uint64
	)
	defer func() {
		if f != nil {
			f.Close()
		}
	}()
	for {
		kind, p, err := fr.next()
		if err != nil {
			return nil, 0, err
		}
		switch kind {
		case frameChunk:
			if f == nil {
				path := filepath.Join(dir, fmt.Sprintf("%06d.sst", len(paths)+1))
				if f, err = os.Create(path); err != nil {
					return nil, 0, err
				}
				paths = append(paths, path)
				n, crc = 0, 0
			}
			if _, err := f.Write(p); err != nil {
				return nil, 0, err
			}
			n += uint64(len(p))
			crc = crc32.Update(crc, castagnoli, p)
		case frameEnd:
			if f == nil || len(p) < 12 {
				return nil, 0, fmt.Errorf("table end frame at offset %d without a table: %w", fr.off, ErrCorruption)
			}
			name := string(p[:len(p)-12])
			wantN := binary.BigEndian.Uint64(p[len(p)-12:])
			wantCRC := binary.BigEndian.Uint32(p[len(p)-4:])
			if n != wantN || crc != wantCRC {
				return nil, 0, fmt.Errorf("table %s: %d bytes of crc32c %08x, its end frame says %d bytes of %08x: %w", name, n, crc, wantN, wantCRC, ErrCorruption)
			}
			if err := f.Sync(); err != nil {
				return nil, 0, err
			}
			if err := f.Close(); err != nil {
				return nil, 0, err
			}
			f = nil
			total += n
		case frameTrailer:
			if f != nil || len(p) != 12 {
				return nil, 0, fmt.Errorf("trailer at offset %d inside a table or of %d bytes: %w", fr.off, len(p), ErrCorruption)
			}
			if c, t := binary.BigEndian.Uint32(p), binary.BigEndian.Uint64(p[4:]); int(c) != len(paths) || t != total {
				return nil, 0, fmt.Errorf("trailer counts %d tables of %d bytes, the stream held %d of %d: %w", c, t, len(paths), total, ErrCorruption)
			}
			if _, err := br.ReadByte(); err != io.EOF {
				return nil, 0, fmt.Errorf("data after the snapshot's trailer: %w", ErrCorruption)
			}
			return paths, applied, nil
		default:
			return nil, 0, fmt.Errorf("frame of unknown kind %q at offset %d: %w", kind, fr.off, ErrCorruption)
		}
	}
}
