package frame

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/golang/snappy"
)

// A Reader reads the payload of a frame stream. It returns io.EOF only after
// a valid end frame whose totals match the payload read, followed by the end
// of the underlying reader. Every other failure is an error wrapping
// ErrTruncated, ErrCorrupt or ErrTooLarge, or the underlying reader's error;
// none of them wraps io.EOF. Errors are sticky. A Reader is not safe for
// concurrent use.
type Reader struct {
	r      io.Reader
	max    int
	hdr    [headerLen]byte
	stored []byte // the current frame as stored, reused
	dec    []byte // the current frame decompressed, reused
	cur    []byte // the current frame's unread payload
	off    int64  // stream offset of the next frame
	n      uint64 // payload bytes in data frames read
	frames uint64
	err    error // io.EOF after the end frame
}

// NewReader returns a Reader of the frame stream in r that rejects, with
// ErrTooLarge, a data frame whose stored or uncompressed payload exceeds
// maxFrame bytes. A maxFrame below 1 means DefaultSize.
func NewReader(r io.Reader, maxFrame int) *Reader {
	if maxFrame < 1 {
		maxFrame = DefaultSize
	}
	return &Reader{r: r, max: maxFrame}
}

// Read reads payload into p. It returns as soon as it has some, at most the
// rest of one frame, so a streamed body is delivered frame by frame.
func (r *Reader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if err := r.fill(); err != nil {
		return 0, err
	}
	n := copy(p, r.cur)
	r.cur = r.cur[n:]
	return n, nil
}

// fill makes r.cur non-empty, reading frames as needed, or returns the
// stream's error (io.EOF at a valid end).
func (r *Reader) fill() error {
	for len(r.cur) == 0 {
		if r.err != nil {
			return r.err
		}
		r.err = r.next()
	}
	return nil
}

// next reads one frame.
func (r *Reader) next() error {
	off := r.off
	n, err := io.ReadFull(r.r, r.hdr[:])
	r.off += int64(n)
	if err != nil {
		return readErr(off, err, "header", n, headerLen)
	}
	typ := r.hdr[0]
	stored := binary.LittleEndian.Uint32(r.hdr[1:5])
	sum := binary.LittleEndian.Uint32(r.hdr[5:9])
	switch typ {
	case typeEnd:
		if stored != endLen {
			return corruptf("frame", off, "end frame of %d bytes, want %d", stored, endLen)
		}
	case typeData, typeData | flagSnappy:
		if stored == 0 {
			return corruptf("frame", off, "empty data frame")
		}
		if uint64(stored) > uint64(r.max) {
			return fmt.Errorf("%w: frame at offset %d: stored length %d exceeds the limit %d", ErrTooLarge, off, stored, r.max)
		}
	default:
		return corruptf("frame", off, "unknown frame type %#02x", typ)
	}
	var body []byte
	body, n, err = readGrowing(r.r, r.stored, int(stored))
	r.stored = body
	r.off += int64(n)
	if err != nil {
		return readErr(off, err, "payload", n, int(stored))
	}
	payload := body
	if typ&flagSnappy != 0 {
		dl, err := snappy.DecodedLen(body)
		switch {
		case err != nil:
			return corruptf("frame", off, "bad Snappy header: %v", err)
		case dl > r.max:
			return fmt.Errorf("%w: frame at offset %d: decoded length %d exceeds the limit %d", ErrTooLarge, off, dl, r.max)
		case dl > maxSnappyExpansion*len(body):
			// Snappy's densest element, a 3-byte copy, yields 64 bytes.
			return corruptf("frame", off, "decoded length %d from %d stored bytes: more than Snappy can encode in them", dl, len(body))
		case dl == 0:
			return corruptf("frame", off, "empty data frame")
		}
		if cap(r.dec) < dl {
			r.dec = make([]byte, dl)
		}
		if payload, err = snappy.Decode(r.dec[:dl], body); err != nil {
			return corruptf("frame", off, "bad Snappy data: %v", err)
		}
	}
	if got := checksum(payload); got != sum {
		return corruptf("frame", off, "checksum mismatch: stored 0x%08x, computed 0x%08x", sum, got)
	}
	if typ != typeEnd {
		r.n += uint64(len(payload))
		r.frames++
		r.cur = payload
		return nil
	}
	if n, frames := binary.LittleEndian.Uint64(payload), binary.LittleEndian.Uint64(payload[8:]); n != r.n || frames != r.frames {
		return corruptf("frame", off, "end frame counts %d bytes in %d frames, the stream had %d in %d", n, frames, r.n, r.frames)
	}
	switch n, err := io.ReadFull(r.r, r.hdr[:1]); {
	case err == io.EOF:
		return io.EOF
	case n > 0:
		return corruptf("stream", r.off, "data after the end frame")
	default:
		return fmt.Errorf("frame: reading after the end frame at offset %d: %w", r.off, err)
	}
}

// maxSnappyExpansion bounds the bytes one stored byte of Snappy decodes to.
const maxSnappyExpansion = 22

// readGrowing reads n bytes from r into buf, reusing its memory when it
// has room, and growing it as the bytes arrive otherwise (doubling from
// 64 KiB), so that a frame that states a large length but does not send
// it costs what was sent rather than what was stated. It returns the bytes
// read and their count, with io.ReadFull's errors.
func readGrowing(r io.Reader, buf []byte, n int) ([]byte, int, error) {
	if cap(buf) >= n {
		k, err := io.ReadFull(r, buf[:n])
		return buf[:n], k, err
	}
	b := buf[:0]
	for len(b) < n {
		if len(b) == cap(b) {
			nb := make([]byte, len(b), min(n, max(2*cap(b), 64<<10)))
			copy(nb, b)
			b = nb
		}
		k, err := io.ReadFull(r, b[len(b):cap(b)])
		b = b[:len(b)+k]
		if err != nil {
			if err == io.EOF && len(b) > 0 {
				err = io.ErrUnexpectedEOF
			}
			return b, len(b), err
		}
	}
	return b, n, nil
}

// readErr describes a failed read of part of the frame at off: got of want
// bytes read.
func readErr(off int64, err error, part string, got, want int) error {
	if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("frame: reading frame at offset %d: %w", off, err)
	}
	// Not wrapping err: a truncated stream must not pass for io.EOF.
	if part == "header" && got == 0 {
		return fmt.Errorf("%w: stream ends at offset %d without an end frame", ErrTruncated, off)
	}
	return fmt.Errorf("%w: frame at offset %d: %s cut after %d of %d bytes", ErrTruncated, off, part, got, want)
}

// ReadMessage reads a complete frame stream from r, as AppendMessage or a
// Writer make, and returns its payload. A payload, or a frame, of more than
// max bytes is an error wrapping ErrTooLarge; a max below 1 means
// DefaultSize. Other errors are as Reader's.
func ReadMessage(r io.Reader, max int) ([]byte, error) {
	fr := NewReader(r, max)
	var out []byte
	for {
		off := fr.off
		switch err := fr.fill(); {
		case err == io.EOF:
			if out == nil {
				out = []byte{}
			}
			return out, nil
		case err != nil:
			return nil, err
		}
		if len(out)+len(fr.cur) > fr.max {
			return nil, fmt.Errorf("%w: frame at offset %d: message exceeds the limit of %d bytes", ErrTooLarge, off, fr.max)
		}
		out = append(out, fr.cur...)
		fr.cur = nil
	}
}
