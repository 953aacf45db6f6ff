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
//
// A Reader made with Options.Pebble also reads the chunk formats Pebble
// writes to its write-ahead logs: recyclable chunks, whose header adds the
// low 32 bits of the log's number (so that a log file reused under a new
// number ends where the new log's chunks end), and WAL-sync chunks, which add
// the offset up to which the writer had synced the log. Pebble ends a log it
// closes with an EOF trailer: an empty recyclable chunk of the next log
// number.
//
// A Writer made with WriterOptions.SyncOffsets writes WAL-sync chunks, so
// that its log may be written into zeroed space prepared ahead of it. Only
// what was synced must survive a crash, and in prepared space the disk may
// keep a later unsynced write and lose an earlier one; each chunk's synced
// offset lets the reader tell such a tail (damage past every offset synced)
// from corruption (damage before one), and zeroed space with nothing synced
// after it is the log's end.
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

	// Pebble's chunk types: the recyclable ones (5-8) and the WAL-sync
	// ones (9-12) are the four above plus 4 and 8, with longer headers.
	typeRecyclableFull = 5
	typeWALSyncFull    = 9
	typeMaxPebble      = 12
	recyclableHeader   = HeaderSize + 4 // and the log number
	walSyncHeader      = recyclableHeader + 8
)

// Options configure a Reader.
type Options struct {
	// Pebble accepts Pebble's recyclable and WAL-sync chunks besides
	// LevelDB's.
	Pebble bool
	// LogNum is the log's file number, whose low 32 bits recyclable chunks
	// carry: a chunk of another number ends the log (the tail of the file's
	// previous use). Zero takes the first such chunk's number.
	LogNum uint64
}

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// maskedCRC is the masked CRC32C of b.
func maskedCRC(b []byte) uint32 {
	c := crc32.Checksum(b, crcTable)
	return (c>>15 | c<<17) + 0xa282ead8
}

// chunkCRC is the masked CRC32C of a chunk's header past its checksum and
// length (its type, and its log number and synced offset where present)
// followed by its payload.
func chunkCRC(head, payload []byte) uint32 {
	// The header bytes byte by byte: handing crc32 the header array would
	// move it to the heap.
	c := ^uint32(0)
	for _, b := range head {
		c = crcTable[byte(c)^b] ^ c>>8
	}
	c = crc32.Update(^c, crcTable, payload)
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
	opts    WriterOptions
	synced  int64 // SetSynced's offset, written into WAL-sync chunks
}

// WriterOptions configure a Writer.
type WriterOptions struct {
	// SyncOffsets writes WAL-sync chunks (Pebble's types 9 to 12): each
	// header also holds the low 32 bits of LogNum and the offset through
	// which the log was synced when the chunk was written (SetSynced).
	// Readers need Options.Pebble.
	SyncOffsets bool
	// LogNum is the log's file number.
	LogNum uint64
}

// NewWriter returns a Writer that appends to w, which holds size bytes of a
// log already (0 for a new one).
func NewWriter(w io.Writer, size int64) *Writer {
	return NewWriterOptions(w, size, WriterOptions{})
}

// NewWriterOptions returns a Writer configured by o that appends to w,
// which holds size bytes of a log already (0 for a new one).
func NewWriterOptions(w io.Writer, size int64, o WriterOptions) *Writer {
	return &Writer{w: w, off: size, blockAt: int(size % BlockSize), opts: o}
}

// SetSynced records that the log is durable through offset off: chunks
// written from now on say so (WriterOptions.SyncOffsets).
func (w *Writer) SetSynced(off int64) { w.synced = max(w.synced, off) }

// Write appends rec as one record and returns the file offset at which it
// begins. The record is in the Writer's buffer until Flush.
func (w *Writer) Write(rec []byte) (int64, error) {
	if w.err != nil {
		return 0, w.err
	}
	start := w.off + int64(len(w.buf))
	first := true
	hl := HeaderSize
	if w.opts.SyncOffsets {
		hl = walSyncHeader
	}
	for {
		if left := BlockSize - w.blockAt; left < hl {
			w.buf = append(w.buf, make([]byte, left)...) // pad the block
			w.blockAt = 0
		}
		avail := BlockSize - w.blockAt - hl
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
		var h [walSyncHeader]byte
		binary.LittleEndian.PutUint16(h[4:], uint16(n))
		if w.opts.SyncOffsets {
			typ += typeWALSyncFull - typeFull
			binary.LittleEndian.PutUint32(h[HeaderSize:], uint32(w.opts.LogNum))
			binary.LittleEndian.PutUint64(h[recyclableHeader:], uint64(w.synced))
		}
		h[6] = typ
		binary.LittleEndian.PutUint32(h[0:], chunkCRC(h[6:hl], rec[:n]))
		w.buf = append(append(w.buf, h[:hl]...), rec[:n]...)
		w.blockAt += hl + n
		rec = rec[n:]
		first = false
		if last {
			break
		}
	}
	return start, nil
}

// WriteEOFTrailer ends a WAL-sync log (WriterOptions.SyncOffsets) with
// Pebble's EOF trailer, an empty recyclable chunk of the next log number:
// the mark that the log ended there when a later log replaced it, which
// zeros after it cannot give. Nothing may be written after it. It does
// nothing for other logs.
func (w *Writer) WriteEOFTrailer() error {
	if w.err != nil {
		return w.err
	}
	if !w.opts.SyncOffsets {
		return nil
	}
	if left := BlockSize - w.blockAt; left < walSyncHeader {
		w.buf = append(w.buf, make([]byte, left)...) // pad as chunks do
		w.blockAt = 0
	}
	var h [recyclableHeader]byte
	h[6] = typeRecyclableFull
	binary.LittleEndian.PutUint32(h[HeaderSize:], uint32(w.opts.LogNum+1))
	binary.LittleEndian.PutUint32(h[0:], chunkCRC(h[6:], nil))
	w.buf = append(w.buf, h[:]...)
	w.blockAt += recyclableHeader
	return nil
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
	opts     Options
	logNum   uint32 // the low 32 bits of opts.LogNum, or the first recyclable chunk's
	haveNum  bool
	trailer  bool // the log ended at Pebble's EOF trailer
	// synced is the highest synced offset a WAL-sync chunk read so far
	// holds; sawSync says one was read.
	synced  int64
	sawSync bool
	// zeroAt is where zeroed space ended the log (zeroEnd).
	zeroAt  int64
	zeroEnd bool
	// chunksAfter says valid chunks follow the torn tail: unsynced
	// writes a crash kept past a lost one.
	chunksAfter bool
}

// NewReader returns a Reader of the log r, named name in errors. It reads the
// whole log into memory.
func NewReader(r io.Reader, name string) (*Reader, error) {
	return NewReaderOptions(r, name, Options{})
}

// NewReaderOptions returns a Reader of the log r, named name in errors,
// configured by o. It reads the whole log into memory.
func NewReaderOptions(r io.Reader, name string, o Options) (*Reader, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("record: reading %s: %w", name, err)
	}
	return &Reader{data: data, name: name, opts: o, logNum: uint32(o.LogNum), haveNum: o.LogNum != 0}, nil
}

// EOFTrailer reports whether the log ended at Pebble's EOF trailer, the
// mark Pebble writes when it closes a log.
func (r *Reader) EOFTrailer() bool { return r.trailer }

// TornTail reports whether the log ended in a torn record (a write cut off by
// a crash), at which offset, and why the tail was not a record.
func (r *Reader) TornTail() (offset int64, why string, torn bool) {
	return r.tornAt, r.tornWhy, r.torn
}

// WALSync reports whether the log holds WAL-sync chunks
// (WriterOptions.SyncOffsets), as far as it was read.
func (r *Reader) WALSync() bool { return r.sawSync }

// ZeroedTail reports whether the log ended at zeroed space (space prepared
// ahead of a WAL-sync log's writes, with nothing synced after it), and at
// which offset. That is the log's clean end, not a torn tail.
func (r *Reader) ZeroedTail() (offset int64, ok bool) { return r.zeroAt, r.zeroEnd }

// End returns the offset at which the log's records end once Next has
// returned io.EOF: where a torn tail or zeroed space begins, or the end of
// the file.
func (r *Reader) End() int64 {
	switch {
	case r.torn:
		return r.tornAt
	case r.zeroEnd:
		return r.zeroAt
	}
	return int64(len(r.data))
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
		if c.trailer && !inRecord {
			r.trailer, r.finished = true, true
			return nil, io.EOF
		}
		if c.eof {
			if inRecord {
				return nil, r.tear(recStart, "log ends inside a record")
			}
			r.finished = true
			return nil, io.EOF
		}
		if c.bad != "" {
			err := r.tear(c.at, c.bad)
			if err == io.EOF && c.zeroed && !inRecord && r.sawSync && !r.chunksAfter {
				// Space prepared ahead of the writes, which no write
				// reached: the log's end.
				r.torn, r.tornAt, r.tornWhy = false, 0, ""
				r.zeroAt, r.zeroEnd = int64(c.at), true
			}
			return nil, err
		}
		if c.hasSync {
			r.sawSync = true
			r.synced = max(r.synced, c.synced)
		}
		if c.typ >= typeRecyclableFull {
			c.typ = (c.typ-1)%4 + 1 // Pebble's: as LevelDB's of the same position
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
	trailer bool // Pebble's EOF trailer
	bad     string
	zeroed  bool // bad: an all-zero header
	// synced is a WAL-sync chunk's synced offset (hasSync).
	synced  int64
	hasSync bool
}

// chunk reads the chunk at r.off, skipping block padding.
func (r *Reader) chunk() (chunk, error) {
	for {
		if r.off >= len(r.data) {
			return chunk{eof: true}, nil
		}
		blockLeft := BlockSize - r.off%BlockSize
		if blockLeft < HeaderSize || (r.opts.Pebble && blockLeft < walSyncHeader && allZero(r.data[r.off:min(r.off+blockLeft, len(r.data))])) { // padding
			if !allZero(r.data[r.off:min(r.off+blockLeft, len(r.data))]) {
				return chunk{at: r.off, bad: "non-zero block padding"}, nil
			}
			r.off += blockLeft
			continue
		}
		if len(r.data)-r.off < HeaderSize {
			if allZero(r.data[r.off:]) {
				return chunk{at: r.off, bad: "zeroed space", zeroed: true}, nil
			}
			return chunk{at: r.off, bad: "truncated chunk header"}, nil
		}
		h := r.data[r.off : r.off+HeaderSize]
		n := int(binary.LittleEndian.Uint16(h[4:]))
		typ := h[6]
		if typ == 0 && n == 0 && binary.LittleEndian.Uint32(h) == 0 {
			// Zeros: preallocated or padded space. The log ends here
			// unless a chunk follows.
			return chunk{at: r.off, bad: "zeroed space", zeroed: true}, nil
		}
		hl := HeaderSize
		switch {
		case typ >= typeFull && typ <= typeLast:
		case r.opts.Pebble && typ >= typeRecyclableFull && typ <= typeMaxPebble:
			hl = recyclableHeader
			if typ > typeRecyclableFull+3 {
				hl = walSyncHeader
			}
		default:
			return chunk{at: r.off, bad: fmt.Sprintf("unknown chunk type %d", typ)}, nil
		}
		if hl > blockLeft || r.off+hl > len(r.data) {
			return chunk{at: r.off, bad: "truncated chunk header"}, nil
		}
		if hl > HeaderSize {
			num := binary.LittleEndian.Uint32(r.data[r.off+HeaderSize:])
			if !r.haveNum {
				r.logNum, r.haveNum = num, true
			}
			if num != r.logNum {
				// Pebble writes its trailer with a zero checksum, the
				// Writer with the header's.
				if crc := binary.LittleEndian.Uint32(h); num == r.logNum+1 && n == 0 && typ == typeRecyclableFull && (crc == 0 || crc == maskedCRC(r.data[r.off+6:r.off+hl])) {
					return chunk{at: r.off, trailer: true, eof: true}, nil
				}
				return chunk{at: r.off, bad: fmt.Sprintf("chunk of log %d, not %d (the file's previous use)", num, r.logNum)}, nil
			}
		}
		if hl+n > blockLeft {
			return chunk{at: r.off, bad: fmt.Sprintf("chunk of %d bytes crosses its block", n)}, nil
		}
		if r.off+hl+n > len(r.data) {
			return chunk{at: r.off, bad: "truncated chunk"}, nil
		}
		if binary.LittleEndian.Uint32(h) != maskedCRC(r.data[r.off+6:r.off+hl+n]) {
			return chunk{at: r.off, bad: "checksum mismatch"}, nil
		}
		c := chunk{typ: typ, payload: r.data[r.off+hl : r.off+hl+n], at: r.off}
		if hl == walSyncHeader {
			c.synced, c.hasSync = int64(binary.LittleEndian.Uint64(r.data[r.off+recyclableHeader:])), true
		}
		r.off += hl + n
		return c, nil
	}
}

// tear ends the log at off when nothing valid follows it (a torn tail), and
// reports corruption otherwise: when a WAL-sync chunk read says the log was
// synced past off, or a chunk after off is valid. Of the WAL-sync chunks
// after off only those that say so count: the others are writes that were
// never synced, which a crash may keep while losing earlier ones.
func (r *Reader) tear(off int, why string) error {
	if r.synced > int64(off) {
		return base.CorruptionErrorf("record: %s: %s at offset %d, but the log was synced through offset %d", r.name, why, off, r.synced)
	}
	c, vouches, found := r.validChunkAfter(off)
	if vouches && c.hasSync {
		return base.CorruptionErrorf("record: %s: %s at offset %d, but the chunk at offset %d says the log was synced through offset %d",
			r.name, why, off, c.at, c.synced)
	}
	if vouches {
		return base.CorruptionErrorf("record: %s: %s at offset %d, but a valid chunk follows at offset %d", r.name, why, off, c.at)
	}
	r.torn, r.tornAt, r.tornWhy, r.finished, r.chunksAfter = true, int64(off), why, true, found
	return io.EOF
}

// validChunkAfter returns the first chunk after off with a valid checksum
// that vouches for off, if any (vouches): at a plausible header later in
// off's own block, or in the chain of chunks that begins each later block
// (every block that holds data begins with a chunk). A chunk vouches
// unless it is a WAL-sync chunk whose synced offset is at most off (or any
// other chunk, in a log known to hold WAL-sync chunks); found says whether
// a valid chunk was found at all.
func (r *Reader) validChunkAfter(off int) (c chunk, vouches, found bool) {
	probe := Reader{data: r.data, opts: r.opts, logNum: r.logNum, haveNum: r.haveNum}
	maxType := byte(typeLast)
	if r.opts.Pebble {
		maxType = typeMaxPebble
	}
	// valid returns the chunk at at, whether it is a valid one, and
	// whether it vouches for off; probe.off is then past it.
	valid := func(at int) (c chunk, ok, vouches bool) {
		probe.off = at
		c, _ = probe.chunk()
		if c.bad != "" || c.eof || c.at != at {
			return c, false, false
		}
		// In a log known to hold WAL-sync chunks only they can vouch:
		// the writer wrote no other kind.
		if c.hasSync {
			return c, true, c.synced > int64(off)
		}
		return c, true, !r.sawSync
	}
	blockEnd := (off/BlockSize + 1) * BlockSize
	for at := off + 1; at+HeaderSize <= min(blockEnd, len(r.data)); at++ {
		h := r.data[at : at+HeaderSize]
		n := int(binary.LittleEndian.Uint16(h[4:]))
		if h[6] < typeFull || h[6] > maxType || at%BlockSize+HeaderSize+n > BlockSize || at+HeaderSize+n > len(r.data) {
			continue // not a plausible header: skip the checksum
		}
		c, ok, v := valid(at)
		if v {
			return c, true, true
		}
		found = found || ok
	}
	for b := blockEnd; b+HeaderSize <= len(r.data); b += BlockSize {
		for at := b; at < min(b+BlockSize, len(r.data)); at = probe.off {
			c, ok, v := valid(at)
			if v {
				return c, true, true
			}
			if !ok {
				break
			}
			found = true
		}
	}
	return chunk{}, false, found
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
