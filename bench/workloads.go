package main

import (
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/bloomkv/bloomkv/internal/benchutil"
)

// workload is one measured step. The steps run in the order of the
// workloads list, each engine through the whole list in its own directory.
type workload struct {
	name string
	desc string
	// needs names the earlier step whose effect on the store this one
	// relies on; it runs, unreported, when only this one is asked for.
	needs string
	// absentReads marks workloads whose reads are all of absent keys, so
	// that every filter "maybe" is a false positive.
	absentReads bool
	// writes marks workloads that change the store, for which write
	// amplification is reported.
	writes bool
	// own marks workloads that run on a store of their own, not on the
	// one fillrandom loaded.
	own bool
	// diff marks the read workloads for which bloomkv's differential-file
	// filter's answers are reported.
	diff bool
	// companion names a later workload reported whenever this one is: the
	// one a goal compares it with.
	companion string
	// engines lists the engines that run the workload, those that can
	// (nil: all); the others skip it, and its ratios against them are
	// absent.
	engines []string
	// named marks workloads that run only when -workloads names them:
	// with them, the default run would pass three minutes on 2 cores.
	named bool
	run   func(r *runner) (*measurement, error)
}

// workloads lists every workload in the order they run.
var workloads = slices.Concat([]workload{
	{name: "fillseq", desc: "n sets in key order, into a store of its own", writes: true, own: true, run: (*runner).fillSeq},
	{name: "fillbatch-100", desc: "n sets in random order, in batches of 100 (one atomic batch or transaction each), into a store of its own; ops are keys, latencies per batch",
		writes: true, own: true, named: true, run: fillBatch(100)},
	{name: "fillbatch-1000", desc: "fillbatch-100 in batches of 1000", writes: true, own: true, named: true, run: fillBatch(1000)},
	{name: "fillrandom", desc: "n sets in random order: the store every later workload uses", writes: true, run: (*runner).fillRandom},
	{name: "overwrite", desc: "n sets of random loaded keys", needs: "fillrandom", writes: true, run: (*runner).overwrite},
	{name: "overwritebatch-100", desc: "n sets of random loaded keys, in batches of 100; ops are keys, latencies per batch", needs: "fillrandom", writes: true, named: true,
		run: overwriteBatch(100)},
	{name: "overwritebatch-1000", desc: "overwritebatch-100 in batches of 1000", needs: "fillrandom", writes: true, named: true, run: overwriteBatch(1000)},
	{name: "readrandom", desc: "gets of random loaded keys", needs: "fillrandom", diff: true, run: (*runner).readRandom},
	{name: "readmissing", desc: "gets of absent keys between loaded ones, uncompacted", needs: "fillrandom", absentReads: true, run: (*runner).readMissing},
	{name: "readhot", desc: "gets of loaded keys, zipfian (theta 0.99, hot keys scattered)", needs: "fillrandom", run: (*runner).readHot},
}, multiGetWorkloads(), []workload{
	{name: "seekrandom", desc: "seek to a random loaded key, then 10 nexts", needs: "fillrandom", run: (*runner).seekRandom},
	{name: "seekrandom-next10", desc: "a new iterator per op: seek to a random loaded key, 10 nexts, close (a short range query as an application makes one; " +
		"seekrandom keeps one iterator)", needs: "fillrandom", named: true, run: (*runner).seekRandomNext10},
	{name: "scan", desc: "full forward scans, repeated for the duration; ops are keys", needs: "fillrandom", run: (*runner).scan},
	{name: "compact", desc: "compact the whole store to the last level; ops are keys (every engine holds the same data here)", needs: "fillrandom", writes: true,
		engines: lsmEngines, run: (*runner).compact},
	{name: "readmissing-compacted", desc: "gets of absent keys after the full compaction", needs: "compact", absentReads: true, engines: lsmEngines, run: (*runner).readMissing},
	{name: "ycsb-a", desc: "50% read, 50% update (zipfian keys)", needs: "fillrandom", writes: true, run: ycsb(ycsbMix{read: 0.5, update: 0.5})},
	{name: "ycsb-b", desc: "95% read, 5% update", needs: "fillrandom", writes: true, diff: true, run: ycsb(ycsbMix{read: 0.95, update: 0.05})},
	{name: "ycsb-c", desc: "100% read", needs: "fillrandom", diff: true, run: ycsb(ycsbMix{read: 1})},
	{name: "ycsb-d", desc: "95% read, 5% insert", needs: "fillrandom", writes: true, run: ycsb(ycsbMix{read: 0.95, insert: 0.05})},
	{name: "ycsb-e", desc: "95% scan (zipfian length 1-1000), 5% insert", needs: "fillrandom", writes: true, run: ycsb(ycsbMix{scan: 0.95, insert: 0.05})},
	{name: "ycsb-f", desc: "100% insert (Pebble's mix for F)", needs: "fillrandom", writes: true, run: ycsb(ycsbMix{insert: 1})},
	{name: "readwhilewriting", desc: "2 readers of random loaded keys while 1 writer overwrites; ops are reads", needs: "fillrandom", writes: true, diff: true, run: (*runner).readWhileWriting},
	{name: "deleterandom", desc: "deletes of half the loaded keys, in random order", needs: "fillrandom", writes: true, run: (*runner).deleteRandom},
	{name: "readrandom-deleted", desc: "gets of random loaded keys after deleterandom (half absent)", needs: "deleterandom", diff: true, run: (*runner).readRandom},
	{name: "readbase-1pct", desc: "on a store of its own: n keys loaded in random order, compacted whole, then 1% of them (a random subset) overwritten " +
		"in 8 rounds, each but the last flushed; once its files settle, gets of random loaded keys", own: true, diff: true,
		companion: "readbase-1pct-compacted", engines: lsmEngines, run: readBase(1)},
	{name: "readbase-absent", desc: "gets of absent keys between loaded ones, on the readbase-1pct store as it is", needs: "readbase-1pct", own: true, diff: true,
		absentReads: true, engines: lsmEngines, run: (*runner).readBaseAbsent},
	{name: "readbase-1pct-compacted", desc: "the readbase-1pct gets (the same keys) after compacting its store whole", needs: "readbase-1pct", own: true, diff: true,
		engines: lsmEngines, run: (*runner).readBaseCompacted},
	{name: "readbase-10pct", desc: "readbase-1pct with 10% of the keys overwritten (on the readbase store readbase-1pct-compacted left, else a new one)", own: true, diff: true,
		engines: lsmEngines, run: readBase(10)},
	{name: "ingest", desc: fmt.Sprintf("on a store of its own: %d tables of n/%d consecutive loaded keys each (disjoint ranges; written untimed, each engine's by its own table writer), "+
		"ingested by one Ingest call, then %d gets of their keys; ops are keys (goleveldb has no ingestion)", ingestTables, ingestTables, ingestChecks),
		own: true, engines: ingestEngines, run: (*runner).ingest},
})

// lsmEngines are the engines with levels to compact and a memtable to
// flush: all but bbolt, a B+tree, which has neither, and so does not run
// the workloads that time a compaction or build a store of levels.
var lsmEngines = []string{"bloomkv", "bloomkv-nodiff", "pebble", "pebble-l6", "goleveldb", "badger"}

// runsOn reports whether engine runs w.
func (w workload) runsOn(engine string) bool {
	return w.engines == nil || slices.Contains(w.engines, engine)
}

func workloadByName(name string) (workload, bool) {
	for _, w := range workloads {
		if w.name == name {
			return w, true
		}
	}
	return workload{}, false
}

// measurement is what one workload measured on one engine.
type measurement struct {
	ops     int64
	elapsed time.Duration
	// hist holds per-op latencies in nanoseconds; nil where an op is too
	// small to time alone (scan) or there is one op (compact).
	hist *hdrhistogram.Histogram
	note string
	// store is the store the workload ran on when not the main one, closed
	// after it unless keep (the runner's readbase store, which the later
	// readbase workloads use).
	store *store
	keep  bool
	// before is the store's counters when the timed part began, for a
	// workload that first built its store; nil means zero (a new store).
	before *counters
	// tree is the store's shape before the timed part.
	tree string
	// paired is what the paired measurement of the filter counted on each
	// side (paired.go); nil when unpaired.
	paired *pairedCount
}

// store is one open store of the engine under test.
type store struct {
	e   engine
	dir string
	// userBytes counts the key and value bytes written to it.
	userBytes int64
}

func (r *runner) openStore(dir string) (*store, error) {
	e, err := openEngine(r.engine, dir, r.s)
	if err != nil {
		return nil, fmt.Errorf("%s: open %s: %w", r.engine, dir, err)
	}
	return &store{e: e, dir: dir}, nil
}

func newHist() *hdrhistogram.Histogram {
	return hdrhistogram.New(1, int64(time.Minute), 3)
}

// runner runs workloads on one engine's stores.
type runner struct {
	cfg    *config
	engine string
	dir    string
	s      settings
	// main is the store fillrandom loaded, which later workloads use.
	main *store
	// base is the store the readbase workloads use; baseCompacted says
	// readbase-1pct-compacted left it compacted whole, for readbase-10pct.
	base          *store
	baseCompacted bool
	// out is where the shape of the tree is printed before the readbase
	// reads (none when nil).
	out  io.Writer
	vals *benchutil.ValueSource
	// inserted counts keys YCSB inserted, which take ids from 2n on.
	inserted uint64
	prog     progress
	// pair, when set, pairs the timed reads of the workload running on the
	// filter's reads on and off (paired.go).
	pair *pairing
}

func (r *runner) n() uint64 { return uint64(r.cfg.n) }

// rng returns the random source for a workload: the same sequence on every
// engine.
func (r *runner) rng(name string) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(name))
	return rand.New(rand.NewPCG(r.cfg.seed, h.Sum64()))
}

// timedOps runs op on one goroutine until the duration passes, recording
// each op's latency; paired when r.pair is set.
func (r *runner) timedOps(label string, op func(rng *rand.Rand, key []byte) error, rng *rand.Rand) (*measurement, error) {
	bar := r.prog.start(label, r.cfg.duration.Milliseconds())
	defer bar.finish()
	m, err := timeLoop(time.Now(), r.cfg.duration, rng, op, bar, r.pair)
	if err == nil && r.pair != nil {
		m.paired = r.pair.finish(m.paired)
	}
	return m, err
}

// timeLoop runs op until start+d, recording each op's latency, and moves
// bar (if any) as time passes. With p set, the ops alternate between the
// filter's reads on and off in phases from start (pairPhaseOf), and the
// measurement's ops, time and latencies are those of the "on" side, its
// paired count each side's.
func timeLoop(start time.Time, d time.Duration, rng *rand.Rand, op func(rng *rand.Rand, key []byte) error, bar phase, p *pairing) (*measurement, error) {
	m := &measurement{hist: newHist()}
	key := make([]byte, benchutil.KeyLen)
	deadline := start.Add(d)
	// At least four phases, however short the run.
	phaseLen, phase, side := min(pairPhase, d/4), int64(-1), 0
	var pc pairedCount
	// The "off" side records its latencies too, here unreported, so that
	// both sides pay for the recording.
	hists := [2]*hdrhistogram.Histogram{m.hist, m.hist}
	if p != nil {
		hists[1] = newHist()
	}
	t := time.Now()
	for {
		if p != nil {
			var ph int64
			if ph, side = pairPhaseOf(t.Sub(start), phaseLen); ph != phase {
				p.enter(ph, side)
				phase, t = ph, time.Now() // the switch is no op's time
			}
		}
		if err := op(rng, key); err != nil {
			return nil, err
		}
		now := time.Now()
		_ = hists[side].RecordValue(int64(now.Sub(t)))
		pc.ops[side]++
		pc.took[side] += now.Sub(t)
		t = now
		m.ops++
		if bar != nil && m.ops&1023 == 0 {
			bar.set(now.Sub(start).Milliseconds())
		}
		// A paired run goes on past the deadline until each side has run
		// an op: a machine busy enough to stall the loop for the whole
		// run must not leave a side empty.
		if !now.Before(deadline) && (p == nil || pc.ops[0] > 0 && pc.ops[1] > 0) {
			break
		}
	}
	m.elapsed = t.Sub(start)
	if p != nil {
		m.ops, m.elapsed, m.paired = pc.ops[0], pc.took[0], &pc
	}
	return m, nil
}

// countedOps runs op for i in [0, count), recording each op's latency.
func (r *runner) countedOps(label string, count uint64, op func(i uint64, key []byte) error) (*measurement, error) {
	m := &measurement{hist: newHist()}
	bar := r.prog.start(label, int64(count))
	defer bar.finish()
	key := make([]byte, benchutil.KeyLen)
	start := time.Now()
	t := start
	for i := uint64(0); i < count; i++ {
		if err := op(i, key); err != nil {
			return nil, err
		}
		now := time.Now()
		_ = m.hist.RecordValue(int64(now.Sub(t)))
		t = now
		if i&1023 == 1023 {
			bar.set(int64(i + 1))
		}
	}
	m.ops = int64(count)
	m.elapsed = t.Sub(start)
	return m, nil
}

func (r *runner) fillSeq() (*measurement, error) {
	st, err := r.openStore(r.dir + "-fillseq")
	if err != nil {
		return nil, err
	}
	rng := r.rng("fillseq")
	m, err := r.countedOps("fillseq", r.n(), func(i uint64, key []byte) error {
		st.userBytes += int64(benchutil.KeyLen + r.cfg.valueSize)
		return st.e.set(benchutil.MakeKey(key, presentID(i)), r.vals.Next(rng))
	})
	if err != nil {
		_ = st.e.close()
		return nil, err
	}
	m.store = st
	return m, nil
}

func (r *runner) fillRandom() (*measurement, error) {
	st, err := r.openStore(r.dir)
	if err != nil {
		return nil, err
	}
	r.main = st
	return r.load(st, "fillrandom", r.rng("fillrandom"))
}

// load sets the n loaded keys into st in random order.
func (r *runner) load(st *store, label string, rng *rand.Rand) (*measurement, error) {
	perm := newPermutation(r.n(), rng)
	return r.countedOps(label, r.n(), func(i uint64, key []byte) error {
		st.userBytes += int64(benchutil.KeyLen + r.cfg.valueSize)
		return st.e.set(benchutil.MakeKey(key, presentID(perm.at(i))), r.vals.Next(rng))
	})
}

func (r *runner) overwrite() (*measurement, error) {
	rng := r.rng("overwrite")
	return r.countedOps("overwrite", r.n(), func(_ uint64, key []byte) error {
		r.main.userBytes += int64(benchutil.KeyLen + r.cfg.valueSize)
		return r.main.e.set(benchutil.MakeKey(key, presentID(rng.Uint64N(r.n()))), r.vals.Next(rng))
	})
}

// fillBatch returns the fillbatch workload of batches of size keys: the n
// loaded keys, in random order, into a store of its own.
func fillBatch(size int) func(r *runner) (*measurement, error) {
	return func(r *runner) (*measurement, error) {
		name := fmt.Sprintf("fillbatch-%d", size)
		st, err := r.openStore(r.dir + "-" + name)
		if err != nil {
			return nil, err
		}
		rng := r.rng(name)
		perm := newPermutation(r.n(), rng)
		m, err := r.batches(st, name, size, func(i uint64) uint64 { return presentID(perm.at(i)) }, rng)
		if err != nil {
			_ = st.e.close()
			return nil, err
		}
		m.store = st
		return m, nil
	}
}

// overwriteBatch returns the overwritebatch workload of batches of size
// keys: n sets of random loaded keys into the main store.
func overwriteBatch(size int) func(r *runner) (*measurement, error) {
	return func(r *runner) (*measurement, error) {
		rng := r.rng(fmt.Sprintf("overwritebatch-%d", size))
		return r.batches(r.main, fmt.Sprintf("overwritebatch-%d", size), size, func(uint64) uint64 { return presentID(rng.Uint64N(r.n())) }, rng)
	}
}

// batches writes n keys, the i-th id(i), to st in atomic batches of size
// keys (the last one shorter), timing each batch.
func (r *runner) batches(st *store, label string, size int, id func(i uint64) uint64, rng *rand.Rand) (*measurement, error) {
	m := &measurement{hist: newHist(), note: fmt.Sprintf("batches of %d; p50 and p99 per batch", size)}
	bar := r.prog.start(label, int64(r.n()))
	defer bar.finish()
	arena := make([]byte, size*benchutil.KeyLen)
	keys, vals := make([][]byte, size), make([][]byte, size)
	start := time.Now()
	t := start
	for i := uint64(0); i < r.n(); i += uint64(size) {
		k := int(min(uint64(size), r.n()-i))
		for j := range k {
			keys[j] = benchutil.MakeKey(arena[j*benchutil.KeyLen:(j+1)*benchutil.KeyLen], id(i+uint64(j)))
			vals[j] = r.vals.Next(rng)
		}
		if err := st.e.apply(keys[:k], vals[:k]); err != nil {
			return nil, err
		}
		st.userBytes += int64(k * (benchutil.KeyLen + r.cfg.valueSize))
		now := time.Now()
		_ = m.hist.RecordValue(int64(now.Sub(t)))
		t = now
		bar.set(int64(i) + int64(k))
	}
	m.ops = int64(r.n())
	m.elapsed = t.Sub(start)
	return m, nil
}

func (r *runner) deleteRandom() (*measurement, error) {
	rng := r.rng("deleterandom")
	perm := newPermutation(r.n(), rng)
	return r.countedOps("deleterandom", r.n()/2, func(i uint64, key []byte) error {
		r.main.userBytes += benchutil.KeyLen
		return r.main.e.del(benchutil.MakeKey(key, presentID(perm.at(i))))
	})
}

// getOp reads keys drawn by id from e and counts how many were found.
func getOp(e engine, id func(rng *rand.Rand) uint64, found *int64) func(rng *rand.Rand, key []byte) error {
	return func(rng *rand.Rand, key []byte) error {
		ok, err := e.get(benchutil.MakeKey(key, id(rng)))
		if ok {
			*found++
		}
		return err
	}
}

func (r *runner) readRandom() (*measurement, error) {
	var found int64
	m, err := r.timedOps("readrandom", getOp(r.main.e, func(rng *rand.Rand) uint64 { return presentID(rng.Uint64N(r.n())) }, &found), r.rng("readrandom"))
	if m != nil {
		m.note = fmt.Sprintf("%d of %d found", found, m.allOps())
	}
	return m, err
}

func (r *runner) readMissing() (*measurement, error) {
	var found int64
	m, err := r.timedOps("readmissing", getOp(r.main.e, func(rng *rand.Rand) uint64 { return absentID(rng.Uint64N(r.n())) }, &found), r.rng("readmissing"))
	if err == nil && found != 0 {
		return nil, fmt.Errorf("readmissing: %d absent keys were found", found)
	}
	return m, err
}

func (r *runner) readHot() (*measurement, error) {
	z := benchutil.NewZipf(r.n(), 0.99)
	var found int64
	m, err := r.timedOps("readhot", getOp(r.main.e, func(rng *rand.Rand) uint64 { return presentID(benchutil.Scatter(z.Next(rng), r.n())) }, &found), r.rng("readhot"))
	if err == nil && found != m.ops {
		return nil, fmt.Errorf("readhot: %d of %d loaded keys were not found", m.ops-found, m.ops)
	}
	return m, err
}

func (r *runner) seekRandom() (*measurement, error) {
	it, err := r.main.e.newIter()
	if err != nil {
		return nil, err
	}
	m, err := r.timedOps("seekrandom", func(rng *rand.Rand, key []byte) error {
		ok := it.seekGE(benchutil.MakeKey(key, presentID(rng.Uint64N(r.n()))))
		for j := 0; ok && j < 10; j++ {
			_ = it.value()
			ok = it.next()
		}
		return nil
	}, r.rng("seekrandom"))
	if cerr := it.close(); err == nil {
		err = cerr
	}
	return m, err
}

// seekRandomNext10 opens an iterator per op, seeks it to a random loaded
// key, steps 10 keys on and closes it, as an application reads a short
// range: each op sees the writes before it.
func (r *runner) seekRandomNext10() (*measurement, error) {
	return r.timedOps("seekrandom-next10", func(rng *rand.Rand, key []byte) error {
		it, err := r.main.e.newIter()
		if err != nil {
			return err
		}
		if !it.seekGE(benchutil.MakeKey(key, presentID(rng.Uint64N(r.n())))) {
			_ = it.close()
			return fmt.Errorf("seekrandom-next10: loaded key %s not found", key)
		}
		_ = it.value()
		for j := 0; j < 10 && it.next(); j++ {
			_ = it.value()
		}
		return it.close()
	}, r.rng("seekrandom-next10"))
}

// scan runs full forward scans until the duration passes, at least one.
func (r *runner) scan() (*measurement, error) {
	bar := r.prog.start("scan", r.cfg.duration.Milliseconds())
	defer bar.finish()
	m := &measurement{}
	start := time.Now()
	scans := 0
	for scans == 0 || time.Since(start) < r.cfg.duration {
		it, err := r.main.e.newIter()
		if err != nil {
			return nil, err
		}
		var keys int64
		for ok := it.first(); ok; ok = it.next() {
			_ = it.value()
			keys++
			if keys&4095 == 0 {
				bar.set(time.Since(start).Milliseconds())
			}
		}
		if err := it.close(); err != nil {
			return nil, err
		}
		if want := int64(r.n() + r.inserted); keys != want {
			return nil, fmt.Errorf("scan: %d keys, want %d", keys, want)
		}
		m.ops += keys
		scans++
	}
	m.elapsed = time.Since(start)
	m.note = fmt.Sprintf("%d full scans", scans)
	return m, nil
}

func (r *runner) compact() (*measurement, error) {
	bar := r.prog.start("compact", 0)
	start := time.Now()
	err := r.main.e.compact()
	elapsed := time.Since(start)
	bar.finish()
	if err != nil {
		return nil, err
	}
	// The live keys: loaded keys plus YCSB inserts.
	return &measurement{ops: int64(r.n() + r.inserted), elapsed: elapsed}, nil
}

// baseRounds is the number of rounds in which the readbase workloads
// overwrite their keys.
const baseRounds = 8

// readBase returns the readbase workload that overwrites pct % of the keys:
// it builds its store (buildBase) and times gets of random loaded keys.
func readBase(pct uint64) func(r *runner) (*measurement, error) {
	return func(r *runner) (*measurement, error) {
		name := fmt.Sprintf("readbase-%dpct", pct)
		if err := r.buildBase(name, pct); err != nil {
			return nil, err
		}
		return r.baseReads(name, name, false)
	}
}

// buildBase replaces the runner's readbase store with a new one: the n
// loaded keys set in random order, as fillrandom sets them; a compaction of
// the whole store; then pct % of the keys, a random subset, overwritten in
// baseRounds rounds, each round but the last flushed, so that the versions
// above the base level lie in level-0 tables, in whatever levels their
// compactions fill, and in the memtable. It then waits until the store's
// files stop changing, so that those compactions do not run under the
// timed reads.
//
// When readbase-1pct-compacted has just compacted the readbase store whole,
// that store is already what the load and the compaction would make (the
// n keys, compacted), and it is used as it is.
func (r *runner) buildBase(name string, pct uint64) error {
	rng := r.rng(name)
	st := r.base
	if st == nil || !r.baseCompacted {
		if err := r.closeBase(); err != nil {
			return err
		}
		var err error
		if st, err = r.openStore(r.dir + "-" + name); err != nil {
			return err
		}
		r.base = st
		if _, err := r.load(st, name+" load", rng); err != nil {
			return err
		}
		bar := r.prog.start(name+" compact", 0)
		err = st.e.compact()
		bar.finish()
		if err != nil {
			return err
		}
	}
	r.baseCompacted = false
	count := r.n() * pct / 100
	pick := newPermutation(r.n(), rng)
	bar := r.prog.start(name+" overwrite", int64(count))
	defer bar.finish()
	key := make([]byte, benchutil.KeyLen)
	for round := range uint64(baseRounds) {
		for i := count * round / baseRounds; i < count*(round+1)/baseRounds; i++ {
			st.userBytes += int64(benchutil.KeyLen + r.cfg.valueSize)
			if err := st.e.set(benchutil.MakeKey(key, presentID(pick.at(i))), r.vals.Next(rng)); err != nil {
				return err
			}
		}
		if round < baseRounds-1 {
			if err := st.e.flush(); err != nil {
				return fmt.Errorf("flush: %w", err)
			}
		}
		bar.set(int64(count * (round + 1) / baseRounds))
	}
	_, _, err := settledDirBytes(st.dir, true)
	return err
}

// closeMain closes the main store, and closeBase the readbase store, if
// open.
func (r *runner) closeMain() error { return closeStore(&r.main) }
func (r *runner) closeBase() error { return closeStore(&r.base) }

func closeStore(st **store) error {
	if *st == nil {
		return nil
	}
	err := (*st).e.close()
	*st = nil
	if err != nil {
		return fmt.Errorf("close: %w", err)
	}
	return nil
}

// baseReads prints the readbase store's shape, then times gets of random
// loaded keys, or absent ones between them, drawn as workload seq draws
// them, and checks that loaded keys were all found and absent ones none.
func (r *runner) baseReads(name, seq string, absent bool) (*measurement, error) {
	if r.base == nil {
		return nil, fmt.Errorf("no readbase store: readbase-1pct has not run")
	}
	st := r.base
	tree := st.e.shape()
	if r.out != nil {
		fmt.Fprintf(r.out, "%s %s, before the reads: %s\n", r.engine, name, tree)
	}
	id := presentID
	if absent {
		id = absentID
	}
	before := st.e.counters()
	var found int64
	m, err := r.timedOps(name, getOp(st.e, func(rng *rand.Rand) uint64 { return id(rng.Uint64N(r.n())) }, &found), r.rng(seq+" reads"))
	if err != nil {
		return nil, err
	}
	switch {
	case absent && found != 0:
		return nil, fmt.Errorf("%s: %d absent keys were found", name, found)
	case !absent && found != m.allOps():
		return nil, fmt.Errorf("%s: %d of %d loaded keys were not found", name, m.allOps()-found, m.allOps())
	}
	m.store, m.keep, m.before, m.tree = st, true, &before, tree
	return m, nil
}

func (r *runner) readBaseAbsent() (*measurement, error) {
	return r.baseReads("readbase-absent", "readbase-absent", true)
}

// readBaseCompacted compacts the readbase-1pct store whole, untimed, waits
// for its files to settle, and times the gets readbase-1pct timed.
func (r *runner) readBaseCompacted() (*measurement, error) {
	if r.base == nil {
		return nil, fmt.Errorf("no readbase store: readbase-1pct has not run")
	}
	bar := r.prog.start("readbase compact", 0)
	err := r.base.e.compact()
	bar.finish()
	if err != nil {
		return nil, err
	}
	if _, _, err := settledDirBytes(r.base.dir, true); err != nil {
		return nil, err
	}
	r.baseCompacted = true
	return r.baseReads("readbase-1pct-compacted", "readbase-1pct", false)
}

// ycsbMix is the share of each operation in a YCSB workload.
type ycsbMix struct{ read, update, insert, scan float64 }

// ycsb returns a YCSB workload: reads are gets, updates sets of loaded keys,
// both zipfian over the loaded keys; inserts set new keys above them; scans
// start at a zipfian loaded key and read a zipfian number of keys in
// [1, 1000].
func ycsb(mix ycsbMix) func(r *runner) (*measurement, error) {
	return func(r *runner) (*measurement, error) {
		keys := benchutil.NewZipf(r.n(), 0.99)
		lengths := benchutil.NewZipf(1000, 0.99)
		label := fmt.Sprintf("ycsb %v", mix)
		m, err := r.timedOps(label, func(rng *rand.Rand, key []byte) error {
			p := rng.Float64()
			switch {
			case p < mix.read:
				found, err := r.main.e.get(benchutil.MakeKey(key, presentID(benchutil.Scatter(keys.Next(rng), r.n()))))
				if err == nil && !found {
					err = fmt.Errorf("ycsb read: loaded key %s not found", key)
				}
				return err
			case p < mix.read+mix.update:
				r.main.userBytes += int64(benchutil.KeyLen + r.cfg.valueSize)
				return r.main.e.set(benchutil.MakeKey(key, presentID(benchutil.Scatter(keys.Next(rng), r.n()))), r.vals.Next(rng))
			case p < mix.read+mix.update+mix.insert:
				r.main.userBytes += int64(benchutil.KeyLen + r.cfg.valueSize)
				id := presentID(r.n() + r.inserted)
				r.inserted++
				return r.main.e.set(benchutil.MakeKey(key, id), r.vals.Next(rng))
			default:
				// A new iterator per scan, as YCSB opens a cursor per
				// scan: it sees the inserts before it.
				it, err := r.main.e.newIter()
				if err != nil {
					return err
				}
				n := 1 + lengths.Next(rng)
				ok := it.seekGE(benchutil.MakeKey(key, presentID(benchutil.Scatter(keys.Next(rng), r.n()))))
				for j := uint64(0); ok && j < n; j++ {
					_ = it.value()
					ok = it.next()
				}
				return it.close()
			}
		}, r.rng(fmt.Sprint(mix)))
		return m, err
	}
}

// readWhileWriting runs two readers of random loaded keys, each for the
// duration, while one writer overwrites random loaded keys until they stop.
func (r *runner) readWhileWriting() (*measurement, error) {
	const readers = 2
	var (
		stop     atomic.Bool
		wg       sync.WaitGroup
		writeErr error
		writes   int64
	)
	writerRng := r.rng("readwhilewriting-writer")
	wg.Add(1)
	go func() {
		defer wg.Done()
		key := make([]byte, benchutil.KeyLen)
		for !stop.Load() {
			if err := r.main.e.set(benchutil.MakeKey(key, presentID(writerRng.Uint64N(r.n()))), r.vals.Next(writerRng)); err != nil {
				writeErr = err
				return
			}
			writes++
		}
	}()
	bar := r.prog.start("readwhilewriting", r.cfg.duration.Milliseconds())
	results := make([]*measurement, readers)
	errs := make([]error, readers)
	var rwg sync.WaitGroup
	start := time.Now()
	for i := range readers {
		rwg.Add(1)
		go func() {
			defer rwg.Done()
			var readerBar phase
			if i == 0 {
				readerBar = bar
			}
			read := func(rng *rand.Rand, key []byte) error {
				_, err := r.main.e.get(benchutil.MakeKey(key, presentID(rng.Uint64N(r.n()))))
				return err
			}
			m, err := timeLoop(start, r.cfg.duration, r.rng(fmt.Sprintf("readwhilewriting-reader-%d", i)), read, readerBar, r.pair)
			if err != nil {
				errs[i] = err
				return
			}
			results[i] = m
		}()
	}
	rwg.Wait()
	elapsed := time.Since(start)
	stop.Store(true)
	wg.Wait()
	bar.finish()
	r.main.userBytes += writes * int64(benchutil.KeyLen+r.cfg.valueSize)
	if writeErr != nil {
		return nil, writeErr
	}
	total := &measurement{hist: newHist(), elapsed: elapsed}
	for i, m := range results {
		if errs[i] != nil {
			return nil, errs[i]
		}
		total.ops += m.ops
		total.hist.Merge(m.hist)
		total.paired = total.paired.add(m.paired)
	}
	if r.pair != nil {
		// Ops/s of each side: the readers' reads over the time they spent
		// in it together, the sum of each reader's time over the readers.
		total.paired = r.pair.finish(total.paired)
		total.paired.took[0] /= readers
		total.paired.took[1] /= readers
		total.elapsed = total.paired.took[0]
	}
	total.note = fmt.Sprintf("%d writes, %.0f writes/s", writes, float64(writes)/elapsed.Seconds())
	return total, nil
}
