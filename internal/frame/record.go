package frame

import (
	"encoding/binary"
	"fmt"
	"io"
)

// MaxFields is the most fields a record can have.
const MaxFields = 255

// A RecordWriter writes records, each a list of byte strings, to a Writer.
// The caller flushes and closes the Writer.
type RecordWriter struct {
	w   *Writer
	tmp [binary.MaxVarintLen64]byte
}

// NewRecordWriter returns a RecordWriter that writes to w.
func NewRecordWriter(w *Writer) *RecordWriter {
	return &RecordWriter{w: w}
}

// Append writes one record of up to MaxFields fields.
func (rw *RecordWriter) Append(fields ...[]byte) error {
	if len(fields) > MaxFields {
		return fmt.Errorf("frame: record of %d fields, more than %d", len(fields), MaxFields)
	}
	rw.tmp[0] = byte(len(fields))
	if _, err := rw.w.Write(rw.tmp[:1]); err != nil {
		return err
	}
	for _, f := range fields {
		n := binary.PutUvarint(rw.tmp[:], uint64(len(f)))
		if _, err := rw.w.Write(rw.tmp[:n]); err != nil {
			return err
		}
		if _, err := rw.w.Write(f); err != nil {
			return err
		}
	}
	return nil
}

// A RecordReader reads the records a RecordWriter wrote.
type RecordReader struct {
	r      *Reader
	max    int
	off    int64 // payload offset of the next byte
	buf    []byte
	ends   []int
	fields [][]byte
}

// NewRecordReader returns a RecordReader of the payload of r that rejects,
// with ErrTooLarge, a field longer than maxField bytes. A maxField below 1
// means DefaultSize.
func NewRecordReader(r *Reader, maxField int) *RecordReader {
	if maxField < 1 {
		maxField = DefaultSize
	}
	return &RecordReader{r: r, max: maxField}
}

// Next returns the next record's fields, which stay valid until the next
// call. At the end of a complete stream it returns io.EOF; a record cut by
// the end of the stream is an error wrapping ErrCorrupt, and the Reader's
// errors are passed on.
func (rr *RecordReader) Next() ([][]byte, error) {
	start := rr.off
	count, err := rr.readByte()
	if err != nil {
		return nil, err // io.EOF here is the clean end
	}
	rr.buf, rr.ends = rr.buf[:0], rr.ends[:0]
	for i := range int(count) {
		n, err := rr.uvarint(start, i)
		if err != nil {
			return nil, rr.cut(start, i, err)
		}
		if n > uint64(rr.max) {
			return nil, fmt.Errorf("%w: record at payload offset %d: field %d is %d bytes, over the limit %d", ErrTooLarge, start, i, n, rr.max)
		}
		for n > 0 {
			if err := rr.r.fill(); err != nil {
				return nil, rr.cut(start, i, err)
			}
			k := min(int(n), len(rr.r.cur))
			rr.buf = append(rr.buf, rr.r.cur[:k]...)
			rr.r.cur = rr.r.cur[k:]
			rr.off += int64(k)
			n -= uint64(k)
		}
		rr.ends = append(rr.ends, len(rr.buf))
	}
	rr.fields = rr.fields[:0]
	prev := 0
	for _, end := range rr.ends {
		rr.fields = append(rr.fields, rr.buf[prev:end:end])
		prev = end
	}
	return rr.fields, nil
}

func (rr *RecordReader) readByte() (byte, error) {
	if err := rr.r.fill(); err != nil {
		return 0, err
	}
	b := rr.r.cur[0]
	rr.r.cur = rr.r.cur[1:]
	rr.off++
	return b, nil
}

// uvarint reads the length of field i of the record at start, which must be
// a uvarint in its shortest encoding.
func (rr *RecordReader) uvarint(start int64, i int) (uint64, error) {
	var v uint64
	for k := 0; k < binary.MaxVarintLen64; k++ {
		b, err := rr.readByte()
		if err != nil {
			return 0, err
		}
		if k == binary.MaxVarintLen64-1 && b > 1 {
			break
		}
		v |= uint64(b&0x7f) << (7 * k)
		if b < 0x80 {
			if b == 0 && k > 0 {
				return 0, fmt.Errorf("%w: record at payload offset %d: field %d: length not in its shortest encoding", ErrCorrupt, start, i)
			}
			return v, nil
		}
	}
	return 0, fmt.Errorf("%w: record at payload offset %d: field %d: length overflows 64 bits", ErrCorrupt, start, i)
}

// cut describes an error met inside the record at start, in field i.
func (rr *RecordReader) cut(start int64, i int, err error) error {
	if err == io.EOF {
		return fmt.Errorf("%w: record at payload offset %d: field %d cut by the end of the stream", ErrCorrupt, start, i)
	}
	return err
}
