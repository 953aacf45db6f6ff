package main

import (
	"fmt"
	"io"
	"os"
	"time"
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
