package main

import (
	"fmt"
	"io"

	"github.com/schollz/progressbar/v3"
)

// progress shows the phases of a run as they go.
type progress interface {
	forEngine(name string) progress
	// start begins a phase of total units; 0 when the size is unknown.
	start(label string, total int64) phase
}

type phase interface {
	set(done int64)
	finish()
}

// barProgress draws a progress bar per phase, for a terminal.
type barProgress struct {
	w      io.Writer
	engine string
}

func (p barProgress) forEngine(name string) progress { return barProgress{w: p.w, engine: name} }

func (p barProgress) start(label string, total int64) phase {
	if total <= 0 {
		total = -1 // a spinner
	}
	return barPhase{progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(p.w),
		progressbar.OptionSetDescription(fmt.Sprintf("%-10s %-18s", p.engine, label)),
		progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(100_000_000),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionSetPredictTime(false),
	)}
}

type barPhase struct{ b *progressbar.ProgressBar }

func (b barPhase) set(done int64) { _ = b.b.Set64(done) }
func (b barPhase) finish()        { _ = b.b.Finish() }

// lineProgress prints one line per phase, for logs and pipes.
type lineProgress struct {
	w      io.Writer
	engine string
}

func (p lineProgress) forEngine(name string) progress { return lineProgress{w: p.w, engine: name} }

func (p lineProgress) start(label string, total int64) phase {
	fmt.Fprintf(p.w, "%s: %s\n", p.engine, label)
	return nopPhase{}
}

type nopPhase struct{}

func (nopPhase) set(int64) {}
func (nopPhase) finish()   {}
