package frame

import (
	"errors"
	"io"
)

var errClosed = errors.New("frame: write after Close")

// An Option configures a Writer.
type Option func(*Writer)

// WithSize sets the number of uncompressed payload bytes in a full data
// frame. Values below 1 mean DefaultSize; values above MaxSize mean MaxSize.
// Readers of the stream need a limit of at least this size.
func WithSize(n int) Option {
	return func(w *Writer) {
		switch {
		case n < 1:
			n = DefaultSize
		case n > MaxSize:
			n = MaxSize
		}
		w.size = n
	}
}

// WithFlush sets the function Flush and Close call after writing their frames
// to push them through the underlying writer, such as
// http.NewResponseController(rw).Flush. Nil means none. Without this option
// the Writer uses the underlying writer's own Flush method, if it has one
// (Flush() error, as bufio.Writer, or Flush(), as http.Flusher).
func WithFlush(f func() error) Option {
	return func(w *Writer) { w.flush = f }
}

// A Writer writes a frame stream to an underlying writer. It buffers payload
// and writes a data frame whenever a frame's worth is buffered, and on Flush.
// A Writer is not safe for concurrent use. After an error from the
// underlying writer every call returns that error.
type Writer struct {
	w      io.Writer
	flush  func() error
	size   int
	buf    []byte // payload not yet framed, cap size
	out    []byte // the frame being written, reused
	n      uint64 // payload bytes in data frames written
	frames uint64
	err    error
	closed bool
}

// NewWriter returns a Writer that writes a frame stream to w.
func NewWriter(w io.Writer, opts ...Option) *Writer {
	fw := &Writer{w: w, size: DefaultSize}
	switch f := w.(type) {
	case interface{ Flush() error }:
		fw.flush = f.Flush
	case interface{ Flush() }:
		fw.flush = func() error { f.Flush(); return nil }
	}
	for _, o := range opts {
		o(fw)
	}
	return fw
}

// Write adds p to the stream. It writes data frames as they fill; the rest
// of p stays buffered until a later Write, Flush or Close.
func (w *Writer) Write(p []byte) (int, error) {
	if err := w.check(); err != nil {
		return 0, err
	}
	total := len(p)
	for len(p) > 0 {
		if len(w.buf) == 0 && len(p) >= w.size {
			if err := w.emit(p[:w.size]); err != nil {
				return total - len(p), err
			}
			p = p[w.size:]
			continue
		}
		if w.buf == nil {
			w.buf = make([]byte, 0, w.size)
		}
		n := copy(w.buf[len(w.buf):w.size], p)
		w.buf = w.buf[:len(w.buf)+n]
		p = p[n:]
		if len(w.buf) == w.size {
			if err := w.emit(w.buf); err != nil {
				return total - len(p) - n, err
			}
			w.buf = w.buf[:0]
		}
	}
	return total, nil
}

// Flush writes the buffered payload as a data frame, if there is any, and
// then flushes the underlying writer (see WithFlush), so that a reader at
// the other end can have everything written so far.
func (w *Writer) Flush() error {
	if err := w.check(); err != nil {
		return err
	}
	if err := w.emitBuffered(); err != nil {
		return err
	}
	return w.flushUnder()
}

// Close writes the buffered payload and the end frame, which records how
// much payload the stream holds, and flushes as Flush does. It does not
// close the underlying writer. Calling Close again does nothing.
func (w *Writer) Close() error {
	if w.closed {
		return w.err
	}
	if err := w.check(); err != nil {
		return err
	}
	if err := w.emitBuffered(); err != nil {
		return err
	}
	w.out = appendEnd(w.out[:0], w.n, w.frames)
	if err := w.writeOut(); err != nil {
		return err
	}
	w.closed = true
	w.buf, w.out = nil, nil
	return w.flushUnder()
}

func (w *Writer) check() error {
	if w.err != nil {
		return w.err
	}
	if w.closed {
		return errClosed
	}
	return nil
}

func (w *Writer) emitBuffered() error {
	if len(w.buf) == 0 {
		return nil
	}
	err := w.emit(w.buf)
	w.buf = w.buf[:0]
	return err
}

func (w *Writer) emit(payload []byte) error {
	w.out = appendData(w.out[:0], payload)
	if err := w.writeOut(); err != nil {
		return err
	}
	w.n += uint64(len(payload))
	w.frames++
	return nil
}

func (w *Writer) writeOut() error {
	n, err := w.w.Write(w.out)
	if err == nil && n < len(w.out) {
		err = io.ErrShortWrite
	}
	if err != nil {
		w.err = err
	}
	return err
}

func (w *Writer) flushUnder() error {
	if w.flush == nil {
		return nil
	}
	if err := w.flush(); err != nil {
		w.err = err
		return err
	}
	return nil
}
