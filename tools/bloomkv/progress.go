package main

import (
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"time"

	"github.com/bloomkv/bloomkv/internal/humanize"
	"github.com/bloomkv/bloomkv/vfs"
)

// Progress lines appear once work has run for progressAfter, and are
// redrawn every progressEvery.
const (
	progressAfter = 500 * time.Millisecond
	progressEvery = 200 * time.Millisecond
)

// isTerminal reports whether w is a terminal (a character device).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// startProgress shows, on stderr when it is a terminal, a line that
// describe returns, redrawn while the work runs, with the time elapsed. The
// function it returns erases the line and must be called before anything
// else is written to stderr.
func (e *env) startProgress(describe func() string) (stop func()) {
	if !e.tty {
		return func() {}
	}
	return progressLine(e.errOut, describe, progressAfter, progressEvery)
}

// progressLine draws describe's line on w after a delay of after, and
// every interval after that, until stop is called.
func progressLine(w io.Writer, describe func() string, after, every time.Duration) (stop func()) {
	start := time.Now()
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		shown := false
		delay := time.NewTimer(after)
		defer delay.Stop()
		var tick <-chan time.Time
		for {
			select {
			case <-quit:
				if shown {
					fmt.Fprint(w, "\r\x1b[K")
				}
				return
			case <-delay.C:
				t := time.NewTicker(every)
				defer t.Stop()
				tick = t.C
			case <-tick:
			}
			fmt.Fprintf(w, "\r%s  %.1fs\x1b[K", describe(), time.Since(start).Seconds())
			shown = true
		}
	}()
	return func() {
		close(quit)
		<-done
	}
}

// readCounter is a file system that counts the bytes read through the
// files it opens, for a progress line of work that reads a store.
type readCounter struct {
	vfs.FS
	n atomic.Int64
}

// Open opens name, counting what is read of it.
func (c *readCounter) Open(name string) (vfs.File, error) {
	f, err := c.FS.Open(name)
	if err != nil {
		return nil, err
	}
	return countedFile{File: f, n: &c.n}, nil
}

// countedFile adds the bytes read from a file to n.
type countedFile struct {
	vfs.File
	n *atomic.Int64
}

func (f countedFile) Read(p []byte) (int, error) {
	n, err := f.File.Read(p)
	f.n.Add(int64(n))
	return n, err
}

func (f countedFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.File.ReadAt(p, off)
	f.n.Add(int64(n))
	return n, err
}

// describe is a progress line of the work verb that has read c's bytes of
// total.
func (c *readCounter) describe(verb string, total uint64) string {
	read := uint64(c.n.Load())
	if total == 0 {
		return fmt.Sprintf("%s: %s read", verb, humanize.Bytes(read))
	}
	// A check reads blocks again in its full scan: read may pass total,
	// and the bar stops at its end.
	return fmt.Sprintf("%s %s %s read, the tables hold %s", verb, bar(float64(read)/float64(total)), humanize.Bytes(read), humanize.Bytes(total))
}
