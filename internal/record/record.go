// Package record reads and writes the LevelDB log format, which bloomkv's
// write-ahead log and MANIFEST both use: the file is a run of 32 KiB blocks,
// and each record is stored as one or more chunks, each with a 7-byte header
// (masked CRC32C of type and payload, payload length, type). A block whose
// tail is too short for a header is padded with zeros.
//
// A writer that dies mid-record leaves a torn tail; the reader ends the log
// there and says where (TornTail), never replaying a partial record. Damage
// followed by a valid chunk later in the file is corruption in the middle of
// the log: the reader returns an error wrapping ErrCorruption that names the
// file and offset.
package record

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/bloomkv/bloomkv/internal/base"
)

const (
	// BlockSize is the size of a log block.
	BlockSize = 32 << 10
	// HeaderSize is the size of a chunk header.
	HeaderSize = 7

	typeFull   = 1
	typeFirst  = 2
	typeMiddle = 3
	typeLast   = 4
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// chunkCRC is the masked CRC32C of a chunk's type byte and payload.
func chunkCRC(typ byte, payload []byte) uint32 {
	c := ^uint32(0)
	c = crcTable[byte(c)^typ] ^ c>>8
	c = ^c
	c = crc32.Update(c, crcTable, payload)
	return (c>>15 | c<<17) + 0xa282ead8
}

// Writer appends records to a log. It buffers a block at a time; Flush (or
// Sync, through the caller's file) pushes the buffer to the file. It is not
// safe for concurrent use.
type Writer struct {
	w       io.Writer
	buf     []byte // pending bytes, not yet written
	off     int64  // file offset of buf[0]
	blockAt int    // offset within the current block of the next byte
	err     error
}

// NewWriter returns a Writer that appends to w, which holds size bytes of a
// log already (0 for a new one).
func NewWriter(w io.Writer, size int64) *Writer {
	return &Writer{w: w, off: size, blockAt: int(size % BlockSize)}
}

// Write appends rec as one record and returns the file offset at which it
// begins. The record is in the Writer's buffer until Flush.
func (w *Writer) Write(rec []byte) (int64, error) {
	if w.err != nil {
		return 0, w.err
	}
	start := w.off + int64(len(w.buf))
	first := true
	for {
		if left := BlockSize - w.blockAt; left < HeaderSize {
			w.buf = append(w.buf, make([]byte, left)...) // pad the block
			w.blockAt = 0
		}
		avail := BlockSize - w.blockAt - HeaderSize
		n := min(len(rec), avail)
		last := n == len(rec)
		var typ byte
		switch {
		case first && last:
			typ = typeFull
		case first:
			typ = typeFirst
		case last:
			typ = typeLast
		default:
			typ = typeMiddle
		}
		var h [HeaderSize]byte
		binary.LittleEndian.PutUint32(h[0:], chunkCRC(typ, rec[:n]))
		binary.LittleEndian.PutUint16(h[4:], uint16(n))
		h[6] = typ
		w.buf = append(append(w.buf, h[:]...), rec[:n]...)
		w.blockAt += HeaderSize + n
		rec = rec[n:]
		first = false
		if last {
			break
		}
	}
	return start, nil
}

// Flush writes the buffered records to the file. An error sticks: the log
// cannot be appended to after a failed write.
func (w *Writer) Flush() error {
	if w.err != nil {
		return w.err
	}
	if len(w.buf) == 0 {
		return nil
	}
	n, err := w.w.Write(w.buf)
	w.off += int64(n)
	if err == nil && n < len(w.buf) {
		err = io.ErrShortWrite
	}
	if err != nil {
		w.err = fmt.Errorf("record: write at offset %d: %w", w.off, err)
		return w.err
	}
	w.buf = w.buf[:0]
	return nil
}

// Size returns the log's size including buffered records.
func (w *Writer) Size() int64 { return w.off + int64(len(w.buf)) }

// Reader reads the records of a log.
type Reader struct {
	data     []byte // the whole log
	name     string
	off      int // next chunk header
	torn     bool
	tornAt   int64
	tornWhy  string
	rec      []byte
	recOff   int64
	finished bool
}

// NewReader returns a Reader of the log r, named name in errors. It reads the
// whole log into memory.
func NewReader(r io.Reader, name string) (*Reader, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("record: reading %s: %w", name, err)
	}
	return &Reader{data: data, name: name}, nil
}

// TornTail reports whether the log ended in a torn record (a write cut off by
// a crash), at which offset, and why the tail was not a record.
func (r *Reader) TornTail() (offset int64, why string, torn bool) {
	return r.tornAt, r.tornWhy, r.torn
}

// Offset returns the file offset at which the record Next last returned
// begins (its first chunk's header).
func (r *Reader) Offset() int64 { return r.recOff }

// Next returns the next record; it aliases the Reader's memory until the next
// call. At the end of the log, clean or torn, it returns io.EOF.
func (r *Reader) Next() ([]byte, error) {
	if r.finished {
		return nil, io.EOF
	}
	r.rec = r.rec[:0]
	inRecord := false
	recStart := r.off
	for {
		c, err := r.chunk()
		if err != nil {
			return nil, err
		}
		if c.eof {
			if inRecord {
				return nil, r.tear(recStart, "log ends inside a record")
			}
			r.finished = true
			return nil, io.EOF
		}
		if c.bad != "" {
			return nil, r.tear(c.at, c.bad)
		}
		switch c.typ {
		case typeFull, typeFirst:
			if inRecord {
				return nil, r.tear(c.at, "record starts inside another record")
			}
			recStart = c.at
			r.rec = append(r.rec, c.payload...)
			if c.typ == typeFull {
				r.recOff = int64(recStart)
				return r.rec, nil
			}
			inRecord = true
		case typeMiddle, typeLast:
			if !inRecord {
				return nil, r.tear(c.at, "continuation chunk with no record begun")
			}
			r.rec = append(r.rec, c.payload...)
			if c.typ == typeLast {
				r.recOff = int64(recStart)
				return r.rec, nil
			}
		}
	}
}

type chunk struct {
	typ     byte
	payload []byte
	at      int
	eof     bool
	bad     string
}

// chunk reads the chunk at r.off, skipping block padding.
func (r *Reader) chunk() (chunk, error) {
	for {
		if r.off >= len(r.data) {
			return chunk{eof: true}, nil
		}
		blockLeft := BlockSize - r.off%BlockSize
		if blockLeft < HeaderSize { // padding
			if !allZero(r.data[r.off:min(r.off+blockLeft, len(r.data))]) {
				return chunk{at: r.off, bad: "non-zero block padding"}, nil
			}
			r.off += blockLeft
			continue
		}
		if len(r.data)-r.off < HeaderSize {
			return chunk{at: r.off, bad: "truncated chunk header"}, nil
		}
		h := r.data[r.off : r.off+HeaderSize]
		n := int(binary.LittleEndian.Uint16(h[4:]))
		typ := h[6]
		if typ == 0 && n == 0 && binary.LittleEndian.Uint32(h) == 0 {
			// Zeros: preallocated or padded space. The log ends here
			// unless a chunk follows.
			return chunk{at: r.off, bad: "zeroed space"}, nil
		}
		if typ < typeFull || typ > typeLast {
			return chunk{at: r.off, bad: fmt.Sprintf("unknown chunk type %d", typ)}, nil
		}
		if HeaderSize+n > blockLeft {
			return chunk{at: r.off, bad: fmt.Sprintf("chunk of %d bytes crosses its block", n)}, nil
		}
		if r.off+HeaderSize+n > len(r.data) {
			return chunk{at: r.off, bad: "truncated chunk"}, nil
		}
		payload := r.data[r.off+HeaderSize : r.off+HeaderSize+n]
		if binary.LittleEndian.Uint32(h) != chunkCRC(typ, payload) {
			return chunk{at: r.off, bad: "checksum mismatch"}, nil
		}
		c := chunk{typ: typ, payload: payload, at: r.off}
		r.off += HeaderSize + n
		return c, nil
	}
}

// tear ends the log at off when nothing valid follows it (a torn tail), and
// reports corruption otherwise.
func (r *Reader) tear(off int, why string) error {
	if at, ok := r.validChunkAfter(off); ok {
		return base.CorruptionErrorf("record: %s: %s at offset %d, but a valid chunk follows at offset %d", r.name, why, off, at)
	}
	r.torn, r.tornAt, r.tornWhy, r.finished = true, int64(off), why, true
	return io.EOF
}

// validChunkAfter reports whether a chunk with a valid checksum starts after
// off: at any later block boundary (every block that holds data begins with a
// chunk), or at a plausible header later in off's own block.
func (r *Reader) validChunkAfter(off int) (int, bool) {
	probe := Reader{data: r.data}
	blockEnd := (off/BlockSize + 1) * BlockSize
	for at := off + 1; at+HeaderSize <= min(blockEnd, len(r.data)); at++ {
		h := r.data[at : at+HeaderSize]
		n := int(binary.LittleEndian.Uint16(h[4:]))
		if h[6] < typeFull || h[6] > typeLast || at%BlockSize+HeaderSize+n > BlockSize || at+HeaderSize+n > len(r.data) {
			continue // not a plausible header: skip the checksum
		}
		probe.off = at
		if c, _ := probe.chunk(); c.bad == "" && !c.eof && c.at == at {
			return at, true
		}
	}
	for at := blockEnd; at+HeaderSize <= len(r.data); at += BlockSize {
		probe.off = at
		if c, _ := probe.chunk(); c.bad == "" && !c.eof && c.at == at {
			return at, true
		}
	}
	return 0, false
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
