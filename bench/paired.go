package main

import (
	"fmt"
	"sync"
	"time"
)

// The paired measurement of bloomkv's differential-file filter: on the
// workloads marked diff, bloomkv's timed reads alternate, in phases of
// pairPhase, between the filter's reads on and off on the same store
// (DB.SetDiffFilterReads), the side to go first swapping every pair of
// phases, on one key stream. Both sides then read the same store, through
// the same compactions and the same load from the rest of the machine,
// where bloomkv and bloomkv-nodiff are two stores whose compactions fall at
// different moments. bloomkv's figures for the workload are its "on"
// side's; the ratio of the two sides' ops/s is the paired one.

// pairPhase is how long one side of the paired measurement runs before
// the other takes over: a few milliseconds, a few thousand Gets.
const pairPhase = 4 * time.Millisecond

// pairedColumn names the paired ratio where the report names the engines
// it compares bloomkv with (the ratio columns, the goals).
const pairedColumn = "diff-off-paired"

// diffSwitcher is an engine whose differential-file filter's reads can be
// switched on and off on the open store.
type diffSwitcher interface {
	setDiffReads(on bool)
}

// pairing alternates one workload's reads between the filter's sides, 0
// (on) and 1 (off), and collects the store's counters of each side.
type pairing struct {
	// store is the store the workload reads, asked for when the reads
	// start (a readbase workload builds its own).
	store func() *store
	mu    sync.Mutex
	// phase is the phase the store is switched for (-1: none yet); last
	// the counters when it began; delta what each side added to them.
	phase int64
	last  counters
	delta [2]counters
}

// newPairing returns the pairing of a workload reading the store that
// st returns.
func newPairing(st func() *store) *pairing {
	return &pairing{store: st, phase: -1}
}

// pairPhaseOf is the phase of a paired run at elapsed since its start,
// and the side that runs it (sideOf).
func pairPhaseOf(elapsed, phaseLen time.Duration) (phase int64, side int) {
	phase = int64(elapsed / phaseLen)
	return phase, sideOf(phase)
}

// sideOf is the side that runs a phase: the phases go in pairs, the first
// of each pair on side 0 and on side 1 in turn (0 1, 1 0, 0 1, ...), so
// that neither side always follows the other.
func sideOf(phase int64) int {
	return int((phase/2 + phase%2) % 2)
}

// enter switches the store to a phase's side, unless another reader did,
// charging the counters since the last switch to the side it ends.
func (p *pairing) enter(phase int64, side int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if phase <= p.phase {
		return
	}
	st := p.store()
	c := st.e.counters()
	if p.phase >= 0 {
		ended := sideOf(p.phase)
		p.delta[ended] = p.delta[ended].plus(c.minus(p.last))
	}
	p.phase, p.last = phase, c
	st.e.(diffSwitcher).setDiffReads(side == 0)
}

// finish charges the counters of the last phase to its side, switches the
// filter's reads back on, and returns pc (the ops and time of every
// reader) with each side's counters.
func (p *pairing) finish(pc *pairedCount) *pairedCount {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.store()
	if p.phase >= 0 {
		side := sideOf(p.phase)
		p.delta[side] = p.delta[side].plus(st.e.counters().minus(p.last))
	}
	st.e.(diffSwitcher).setDiffReads(true)
	out := *pc
	out.counters = p.delta
	return &out
}

// pairedCount is what the paired measurement counted on each side: ops,
// time spent in them, and the store's counters.
type pairedCount struct {
	ops      [2]int64
	took     [2]time.Duration
	counters [2]counters
}

// allOps counts the ops a measurement ran: those of both sides when
// paired.
func (m *measurement) allOps() int64 {
	if m.paired != nil {
		return m.paired.ops[0] + m.paired.ops[1]
	}
	return m.ops
}

// pairedResult is the paired measurement of one workload on bloomkv:
// ops/s with the differential filter's reads on and off on the same
// store, in alternating phases, and their ratio.
type pairedResult struct {
	OnOpsPerSec  float64 `json:"on_ops_per_sec"`
	OffOpsPerSec float64 `json:"off_ops_per_sec"`
	// Ratio is OnOpsPerSec over OffOpsPerSec: above 1, the filter made
	// the reads faster.
	Ratio float64 `json:"ratio"`
}

// add sums two readers' counts of ops and time; nil is none.
func (pc *pairedCount) add(o *pairedCount) *pairedCount {
	if pc == nil {
		return o
	}
	if o == nil {
		return pc
	}
	sum := *pc
	for i := range 2 {
		sum.ops[i] += o.ops[i]
		sum.took[i] += o.took[i]
	}
	return &sum
}

// result is the paired measurement's ops/s of each side; nil when a side
// ran no op.
func (pc *pairedCount) result() *pairedResult {
	if pc.took[0] <= 0 || pc.took[1] <= 0 || pc.ops[0] == 0 || pc.ops[1] == 0 {
		return nil
	}
	on := float64(pc.ops[0]) / pc.took[0].Seconds()
	off := float64(pc.ops[1]) / pc.took[1].Seconds()
	return &pairedResult{OnOpsPerSec: on, OffOpsPerSec: off, Ratio: on / off}
}

func (pr *pairedResult) String() string {
	return fmt.Sprintf("diff filter reads on/off on this store, paired: %s/%s ops/s", commas(pr.OnOpsPerSec), commas(pr.OffOpsPerSec))
}

// minus and plus subtract and add counters field by field; a field absent
// (-1) in either stays absent.
func (c counters) minus(o counters) counters { return c.combine(o, -1) }
func (c counters) plus(o counters) counters  { return c.combine(o, 1) }

func (c counters) combine(o counters, sign int64) counters {
	f := func(a, b int64) int64 {
		if a < 0 || b < 0 {
			return -1
		}
		return a + sign*b
	}
	return counters{
		blockReads:           f(c.blockReads, o.blockReads),
		filterProbes:         f(c.filterProbes, o.filterProbes),
		filterMaybes:         f(c.filterMaybes, o.filterMaybes),
		filterFalsePositives: f(c.filterFalsePositives, o.filterFalsePositives),
		tableBytes:           f(c.tableBytes, o.tableBytes),
		pinnedBytes:          f(c.pinnedBytes, o.pinnedBytes),
		diffSkips:            f(c.diffSkips, o.diffSkips),
		diffMaybes:           f(c.diffMaybes, o.diffMaybes),
		diffFalseMaybes:      f(c.diffFalseMaybes, o.diffFalseMaybes),
	}
}
