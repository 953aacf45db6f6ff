package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/bloomkv/bloomkv/internal/benchutil"
	"github.com/bloomkv/bloomkv/internal/humanize"
)

// result is one workload's figures on one engine. Pointer fields are absent
// where the engine or the workload does not give them.
type result struct {
	// Run is the run the result comes from, counted from 0 (the text output
	// counts from 1); always 0 with -runs 1.
	Run       int     `json:"run"`
	Workload  string  `json:"workload"`
	Engine    string  `json:"engine"`
	Ops       int64   `json:"ops"`
	Seconds   float64 `json:"seconds"`
	OpsPerSec float64 `json:"ops_per_sec"`
	// P50Micros and P99Micros are per-op latency percentiles.
	P50Micros *float64 `json:"p50_us,omitempty"`
	P99Micros *float64 `json:"p99_us,omitempty"`
	// BlockReadsPerOp is block-cache misses per op: blocks read from table
	// files (data blocks only for bloomkv, which pins index and filter
	// blocks; any block for the others).
	BlockReadsPerOp *float64 `json:"block_reads_per_op,omitempty"`
	// FilterProbesPerOp is the filter probes per op of point reads.
	FilterProbesPerOp *float64 `json:"filter_probes_per_op,omitempty"`
	// FilterFPRate is the share of filter probes that said "maybe" for a
	// key the table lacked.
	FilterFPRate *float64 `json:"filter_fp_rate,omitempty"`
	// DiskBytes is the size of the store's files after the workload;
	// TableBytes of its tables alone (.sst, .ldb), without logs.
	DiskBytes  int64 `json:"disk_bytes"`
	TableBytes int64 `json:"table_bytes"`
	// PinnedBytes is the index and filter memory the engine holds outside
	// its block cache (bloomkv only; the others keep them in the cache).
	PinnedBytes int64 `json:"pinned_bytes,omitempty"`
	// WriteAmp is the table bytes flushes and compactions wrote so far,
	// per key and value byte the benchmark wrote to the store.
	WriteAmp *float64 `json:"write_amp,omitempty"`
	// DiffFilter is what bloomkv's differential-file filter answered to
	// the workload's Gets, on the workloads that report it.
	DiffFilter *diffFilterResult `json:"diff_filter,omitempty"`
	// Paired is the differential filter's reads on and off on this
	// store, measured in alternating phases (bloomkv, diff workloads).
	Paired *pairedResult `json:"paired,omitempty"`
	// Tree is the shape of the store's tree before the timed reads
	// (readbase workloads).
	Tree string `json:"tree,omitempty"`
	Note string `json:"note,omitempty"`
}

// diffFilterResult counts the differential-file filter's answers over a
// workload (DiffFilterMetrics deltas): Skips, the Gets it answered "no"
// (they read the base level only); Maybes, those it answered "maybe";
// FalseMaybes, the maybes that found no version above the base. SkipRate is
// Skips/(Skips+Maybes), absent when the filter answered nothing (it was
// off).
type diffFilterResult struct {
	Skips       int64    `json:"skips"`
	Maybes      int64    `json:"maybes"`
	FalseMaybes int64    `json:"false_maybes"`
	SkipRate    *float64 `json:"skip_rate,omitempty"`
}

func (d *diffFilterResult) String() string {
	if d.SkipRate == nil {
		return "diff filter not consulted"
	}
	return fmt.Sprintf("diff filter skipped %.2f%%, %s false maybes", *d.SkipRate*100, commas(float64(d.FalseMaybes)))
}

// ratio compares bloomkv with the other engines on one workload: its ops/s
// over theirs, and its bytes on disk over Pebble's. Each ratio is taken
// within a run; in the report's Ratios, the fields without a suffix are the
// median over the runs, the _min and _max ones the range, and Runs holds
// each run's ratios (Runs[i] is run i, without min, max or runs of its own).
type ratio struct {
	Workload       string   `json:"workload"`
	VsNodiff       *float64 `json:"vs_bloomkv_nodiff,omitempty"`
	VsPebble       *float64 `json:"vs_pebble,omitempty"`
	VsGoleveldb    *float64 `json:"vs_goleveldb,omitempty"`
	DiskVsPebble   *float64 `json:"disk_vs_pebble,omitempty"`
	TablesVsPebble *float64 `json:"tables_vs_pebble,omitempty"`
	VsPebbleL6     *float64 `json:"vs_pebble_l6,omitempty"`
	VsBadger       *float64 `json:"vs_badger,omitempty"`
	VsBbolt        *float64 `json:"vs_bbolt,omitempty"`
	// Paired is bloomkv's ops/s with the differential filter's reads on
	// over off on one store (pairedResult.Ratio).
	Paired *float64 `json:"diff_paired,omitempty"`

	VsNodiffMin       *float64 `json:"vs_bloomkv_nodiff_min,omitempty"`
	VsNodiffMax       *float64 `json:"vs_bloomkv_nodiff_max,omitempty"`
	VsPebbleMin       *float64 `json:"vs_pebble_min,omitempty"`
	VsPebbleMax       *float64 `json:"vs_pebble_max,omitempty"`
	VsGoleveldbMin    *float64 `json:"vs_goleveldb_min,omitempty"`
	VsGoleveldbMax    *float64 `json:"vs_goleveldb_max,omitempty"`
	DiskVsPebbleMin   *float64 `json:"disk_vs_pebble_min,omitempty"`
	DiskVsPebbleMax   *float64 `json:"disk_vs_pebble_max,omitempty"`
	TablesVsPebbleMin *float64 `json:"tables_vs_pebble_min,omitempty"`
	TablesVsPebbleMax *float64 `json:"tables_vs_pebble_max,omitempty"`
	VsPebbleL6Min     *float64 `json:"vs_pebble_l6_min,omitempty"`
	VsPebbleL6Max     *float64 `json:"vs_pebble_l6_max,omitempty"`
	VsBadgerMin       *float64 `json:"vs_badger_min,omitempty"`
	VsBadgerMax       *float64 `json:"vs_badger_max,omitempty"`
	VsBboltMin        *float64 `json:"vs_bbolt_min,omitempty"`
	VsBboltMax        *float64 `json:"vs_bbolt_max,omitempty"`
	PairedMin         *float64 `json:"diff_paired_min,omitempty"`
	PairedMax         *float64 `json:"diff_paired_max,omitempty"`

	Runs []ratio `json:"runs,omitempty"`
}

// measures lists a ratio's measures, each as its value (the median, in a
// summary of runs), its min and its max.
func (ra *ratio) measures() [][3]**float64 {
	return [][3]**float64{
		{&ra.VsNodiff, &ra.VsNodiffMin, &ra.VsNodiffMax},
		{&ra.VsPebble, &ra.VsPebbleMin, &ra.VsPebbleMax},
		{&ra.VsGoleveldb, &ra.VsGoleveldbMin, &ra.VsGoleveldbMax},
		{&ra.DiskVsPebble, &ra.DiskVsPebbleMin, &ra.DiskVsPebbleMax},
		{&ra.TablesVsPebble, &ra.TablesVsPebbleMin, &ra.TablesVsPebbleMax},
		{&ra.VsPebbleL6, &ra.VsPebbleL6Min, &ra.VsPebbleL6Max},
		{&ra.VsBadger, &ra.VsBadgerMin, &ra.VsBadgerMax},
		{&ra.VsBbolt, &ra.VsBboltMin, &ra.VsBboltMax},
		{&ra.Paired, &ra.PairedMin, &ra.PairedMax},
	}
}

// versusRange is bloomkv's ops/s ratio over the named engine, with its min
// and max; absent for an engine without a column.
func (ra *ratio) versusRange(engine string) [3]*float64 {
	switch engine {
	case "bloomkv-nodiff":
		return [3]*float64{ra.VsNodiff, ra.VsNodiffMin, ra.VsNodiffMax}
	case "pebble":
		return [3]*float64{ra.VsPebble, ra.VsPebbleMin, ra.VsPebbleMax}
	case "pebble-l6":
		return [3]*float64{ra.VsPebbleL6, ra.VsPebbleL6Min, ra.VsPebbleL6Max}
	case "goleveldb":
		return [3]*float64{ra.VsGoleveldb, ra.VsGoleveldbMin, ra.VsGoleveldbMax}
	case "badger":
		return [3]*float64{ra.VsBadger, ra.VsBadgerMin, ra.VsBadgerMax}
	case "bbolt":
		return [3]*float64{ra.VsBbolt, ra.VsBboltMin, ra.VsBboltMax}
	case pairedColumn:
		return [3]*float64{ra.Paired, ra.PairedMin, ra.PairedMax}
	}
	return [3]*float64{}
}

// versus is bloomkv's ops/s ratio over the named engine.
func (ra *ratio) versus(engine string) *float64 { return ra.versusRange(engine)[0] }

// ratioColumns lists the engines whose ratio columns the tables show, in
// order: bloomkv-nodiff, the paired measurement beside it when bloomkv
// ran, pebble and goleveldb always; the others when they ran.
func (r *report) ratioColumns() []string {
	cols := []string{"bloomkv-nodiff"}
	if slices.Contains(r.cfg.engines, "bloomkv") {
		cols = append(cols, pairedColumn)
	}
	cols = append(cols, "pebble")
	if slices.Contains(r.cfg.engines, "pebble-l6") {
		cols = append(cols, "pebble-l6")
	}
	cols = append(cols, "goleveldb")
	for _, e := range []string{"badger", "bbolt"} {
		if slices.Contains(r.cfg.engines, e) {
			cols = append(cols, e)
		}
	}
	return cols
}

// ratioHeader is the header of the ratio column against engine.
func ratioHeader(engine string) string {
	switch engine {
	case "bloomkv-nodiff":
		return "bloomkv/nodiff"
	case pairedColumn:
		return "diff on/off paired"
	}
	return "bloomkv/" + engine
}

// fmtVersus formats the ratio over engine with its range.
func (r *report) fmtVersus(ra ratio, engine string) string {
	v := ra.versusRange(engine)
	return r.fmtRange(v[0], v[1], v[2])
}

// summarizeRatios is the median and range of each measure over the runs'
// ratios of one workload, holding those in Runs.
func summarizeRatios(workload string, runs []ratio) ratio {
	sum := ratio{Workload: workload, Runs: runs}
	for i, m := range sum.measures() {
		vals := make([]*float64, len(runs))
		for j := range runs {
			vals[j] = *runs[j].measures()[i][0]
		}
		*m[0], *m[1], *m[2] = medianRange(vals)
	}
	return sum
}

// goal is a target the benchmark checks.
type goal struct {
	Workload string `json:"workload"`
	Measure  string `json:"measure"` // "ops/s", "disk" (all files) or "tables" (table files)
	Versus   string `json:"versus"`
	// VersusWorkload, when set, is the workload of the Versus engine to
	// compare with instead of the same one.
	VersusWorkload string  `json:"versus_workload,omitempty"`
	Target         float64 `json:"target"`
	AtMost         bool    `json:"at_most"`
	// Condition, when set, is what the goal assumes of the run, printed
	// with it.
	Condition string `json:"condition,omitempty"`
	// Got is the measured ratio, the median over the runs of the ratio
	// within each run; absent when a workload or engine did not run.
	// GotMin and GotMax are the range over the runs. Met compares Got.
	Got    *float64 `json:"got,omitempty"`
	GotMin *float64 `json:"got_min,omitempty"`
	GotMax *float64 `json:"got_max,omitempty"`
	Met    bool     `json:"met"`
}

// everyWorkload, as a goal's workload, holds the goal on every workload
// that ran on both engines: the ratio it measures is the least of theirs.
const everyWorkload = "every workload"

// The conditions of the goals against bbolt, whose reads the OS page cache
// serves from the whole file, uncompressed: with a -cache that holds the
// data the two compare like with like, and the goals are higher.
const (
	cacheHoldsData   = "with a -cache that holds the data"
	cacheBelowData   = "with a -cache smaller than the data"
	cacheHoldsTarget = 1.0 // point reads against bbolt, cache holding the data
	cacheBelowTarget = 0.8 // point reads against bbolt, a smaller cache
)

// goals are the ratios bloomkv aims for, bloomkv over the other engine in
// the same run. A goal against pebble-l6 is reported only when it ran;
// those against badger and bbolt always, "not run" when they did not.
var goals = []goal{
	{Workload: "readmissing-compacted", Measure: "ops/s", Versus: "pebble", Target: 5},
	{Workload: "readmissing-compacted", Measure: "ops/s", Versus: "pebble-l6", Target: 2},
	{Workload: "readmissing-compacted", Measure: "ops/s", Versus: "goleveldb", Target: 1.5},
	{Workload: "readmissing", Measure: "ops/s", Versus: "pebble", Target: 2},
	{Workload: "readrandom", Measure: "ops/s", Versus: "pebble", Target: 1.2},
	{Workload: "fillrandom", Measure: "ops/s", Versus: "pebble", Target: 1},
	{Workload: "scan", Measure: "ops/s", Versus: "pebble", Target: 1},
	{Workload: "ycsb-b", Measure: "ops/s", Versus: "pebble", Target: 1.2},
	{Workload: "ycsb-c", Measure: "ops/s", Versus: "pebble", Target: 1.2},
	{Workload: "compact", Measure: "disk", Versus: "pebble", Target: 1.05, AtMost: true},
	{Workload: "compact", Measure: "tables", Versus: "pebble", Target: 1.05, AtMost: true},
	// A read of a store whose newest 1% sits above the base is nearly as
	// fast as one of the same store compacted.
	{Workload: "readbase-1pct", Measure: "ops/s", Versus: "bloomkv", VersusWorkload: "readbase-1pct-compacted", Target: 0.95},
	// Against the stores Go programs embed instead: batched writes well
	// ahead of Pebble's, reads on par with a B+tree's, and every workload
	// well ahead of Badger's.
	{Workload: "fillbatch-100", Measure: "ops/s", Versus: "pebble", Target: 1.2},
	{Workload: "fillbatch-1000", Measure: "ops/s", Versus: "pebble", Target: 1.2},
	{Workload: "overwritebatch-100", Measure: "ops/s", Versus: "pebble", Target: 1.2},
	{Workload: "overwritebatch-1000", Measure: "ops/s", Versus: "pebble", Target: 1.2},
	{Workload: "readrandom", Measure: "ops/s", Versus: "bbolt", Target: cacheHoldsTarget, Condition: cacheHoldsData},
	{Workload: "readmissing", Measure: "ops/s", Versus: "bbolt", Target: cacheHoldsTarget, Condition: cacheHoldsData},
	{Workload: "readhot", Measure: "ops/s", Versus: "bbolt", Target: cacheHoldsTarget, Condition: cacheHoldsData},
	{Workload: "seekrandom-next10", Measure: "ops/s", Versus: "bbolt", Target: 0.8, Condition: cacheHoldsData},
	{Workload: "scan", Measure: "ops/s", Versus: "bbolt", Target: 0.8, Condition: cacheHoldsData},
	{Workload: everyWorkload, Measure: "ops/s", Versus: "badger", Target: 1.5},
	// The differential filter pays or stays out of the way: on every read
	// workload it serves, the reads with it are at most 3 % slower than
	// without it on the same store.
	{Workload: everyWorkload, Measure: "ops/s", Versus: pairedColumn, Target: 0.97, Condition: pairedCondition},
	// MultiGet over the same keys read one by one: by bloomkv's Gets,
	// Pebble's, and Pebble's fanned out over goroutines (ratios per key).
	{Workload: "multiget-present-100", Measure: "ops/s", Versus: "bloomkv", VersusWorkload: "multiget-present-100-gets", Target: 2},
	{Workload: "multiget-present-100", Measure: "ops/s", Versus: "pebble", Target: 4},
	{Workload: "multiget-present-100", Measure: "ops/s", Versus: "pebble", VersusWorkload: "multiget-present-100-fanout", Target: 1.5},
	{Workload: "multiget-absent-100", Measure: "ops/s", Versus: "bloomkv", VersusWorkload: "multiget-absent-100-gets", Target: 3},
	{Workload: "multiget-present-16", Measure: "ops/s", Versus: "bloomkv", VersusWorkload: "multiget-present-16-gets", Target: 1.3},
	{Workload: "multiget-absent-16", Measure: "ops/s", Versus: "bloomkv", VersusWorkload: "multiget-absent-16-gets", Target: 1.3},
	{Workload: "multiget-zipf-16", Measure: "ops/s", Versus: "bloomkv", VersusWorkload: "multiget-zipf-16-gets", Target: 1.3},
}

// pairedCondition says what the goal on the paired measurement compares.
const pairedCondition = "bloomkv's diff workloads, the filter's reads on over off on one store (paired)"

// goalsFor returns the goals that apply to a run with cfg's settings. The
// goals against bbolt assume a -cache that holds the data (the keys and
// values, uncompressed, as the cache keeps blocks); with a smaller one the
// point reads aim lower, and seeks and scans, which then decompress the
// blocks they walk, have no goal.
func goalsFor(cfg *config) []goal {
	if cfg.cacheHoldsData() {
		return goals
	}
	var gs []goal
	for _, g := range goals {
		if g.Condition == cacheHoldsData {
			if g.Target != cacheHoldsTarget {
				continue
			}
			g.Target, g.Condition = cacheBelowTarget, cacheBelowData
		}
		gs = append(gs, g)
	}
	return gs
}

// cacheHoldsData reports whether the block cache holds every key and value
// loaded, uncompressed.
func (cfg *config) cacheHoldsData() bool {
	return cfg.cache >= int64(cfg.n)*int64(benchutil.KeyLen+cfg.valueSize)
}

// report is the whole run: how to reproduce it, and what it measured.
type report struct {
	Command string `json:"command"`
	Date    string `json:"date"`
	// Commit is the source revision the benchmark ran, "-dirty" when the
	// tree had changes, or "unknown" (see sourceCommit).
	Commit    string            `json:"commit"`
	Machine   machine           `json:"machine"`
	Settings  reportSettings    `json:"settings"`
	Engines   map[string]string `json:"engines"`
	Workloads map[string]string `json:"workloads"`
	Results   []result          `json:"results"`
	Ratios    []ratio           `json:"ratios"`
	Goals     []goal            `json:"goals"`
	// NodiffWorkloads lists the workloads bloomkv-nodiff reports, when not
	// all.
	NodiffWorkloads []string `json:"nodiff_workloads,omitempty"`
	// Runs is how many times the comparison ran (-runs); Orders[i] is the
	// engine order of run i: the -engines order in even runs, reversed in
	// odd ones.
	Runs    int        `json:"runs"`
	Orders  [][]string `json:"orders"`
	Seconds float64    `json:"seconds"`
	// Semijoin is the semijoin workload's, when it ran.
	Semijoin *semijoinReport `json:"semijoin,omitempty"`
	// Raft is the raft workload's, when it ran.
	Raft *raftReport `json:"raft,omitempty"`

	cfg *config
}

type machine struct {
	CPU  string `json:"cpu"`
	CPUs int    `json:"cpus"`
	// MemoryBytes is the machine's memory, where the system says; 0 when
	// it does not.
	MemoryBytes int64  `json:"memory_bytes,omitempty"`
	OS          string `json:"os"`
	Arch        string `json:"arch"`
	GoVersion   string `json:"go_version"`
}

type reportSettings struct {
	Keys          int    `json:"keys"`
	KeySize       int    `json:"key_size"`
	ValueSize     int    `json:"value_size"`
	CacheBytes    int64  `json:"cache_bytes"`
	MemtableBytes int64  `json:"memtable_bytes"`
	BitsPerKey    int    `json:"bits_per_key"`
	BlockSize     int    `json:"block_size"`
	Compression   string `json:"compression"`
	Sync          bool   `json:"sync"`
	Duration      string `json:"duration"`
	Seed          uint64 `json:"seed"`
}

func newReport(cfg *config, s settings) *report {
	r := &report{
		Command: "go run ./bench " + strings.Join(os.Args[1:], " "),
		Date:    time.Now().UTC().Format(time.RFC3339),
		Commit:  sourceCommit(),
		Machine: machine{CPU: cpuModel(), CPUs: runtime.NumCPU(), MemoryBytes: memTotal(), OS: runtime.GOOS, Arch: runtime.GOARCH,
			GoVersion: runtime.Version()},
		Settings: reportSettings{Keys: cfg.n, KeySize: benchutil.KeyLen, ValueSize: cfg.valueSize, CacheBytes: s.cacheBytes,
			MemtableBytes: s.memtableBytes, BitsPerKey: s.bitsPerKey, BlockSize: s.blockSize, Compression: "snappy",
			Sync: s.sync, Duration: cfg.duration.String(), Seed: cfg.seed},
		Engines:   map[string]string{},
		Workloads: map[string]string{},
		Runs:      max(cfg.runs, 1),
		cfg:       cfg,
	}
	for run := range r.Runs {
		order := slices.Clone(cfg.engines)
		if run%2 == 1 {
			slices.Reverse(order)
		}
		r.Orders = append(r.Orders, order)
	}
	r.Command = strings.TrimSpace(r.Command)
	for _, e := range cfg.engines {
		r.Engines[e] = describeEngine(e, s)
		if e == "bloomkv-nodiff" {
			r.NodiffWorkloads = cfg.nodiffOnly
		}
	}
	for _, w := range cfg.workloads {
		wl, _ := workloadByName(w)
		r.Workloads[w] = wl.desc
	}
	return r
}

// cpuModel names the processor, where the system says.
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// moduleVersion is the version of a module the binary was built with.
func moduleVersion(path string) string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown version)"
	}
	for _, d := range info.Deps {
		if d.Path == path {
			return d.Version
		}
	}
	return "(unknown version)"
}

var (
	pebbleVersion    = moduleVersion("github.com/cockroachdb/pebble/v2")
	goleveldbVersion = moduleVersion("github.com/syndtr/goleveldb")
)

func (r *report) header() string {
	var b strings.Builder
	fmt.Fprintf(&b, "bloomkv bench: %s\n", r.Command)
	fmt.Fprintf(&b, "machine: %s, %d CPUs, %s/%s, %s\n", r.Machine.CPU, r.Machine.CPUs, r.Machine.OS, r.Machine.Arch, r.Machine.GoVersion)
	st := r.Settings
	fmt.Fprintf(&b, "data: %d keys of %d bytes, values of %d bytes (compressible to about half), seed %d; timed workloads run %s per engine\n",
		st.Keys, st.KeySize, st.ValueSize, st.Seed, st.Duration)
	fmt.Fprintf(&b, "settings for every engine: cache %s, memtable %s, %d bits/key Bloom filters on every level, %d-byte blocks, snappy, sync=%v, a fresh directory\n",
		humanize.Bytes(uint64(st.CacheBytes)), humanize.Bytes(uint64(st.MemtableBytes)), st.BitsPerKey, st.BlockSize, st.Sync)
	for _, e := range r.cfg.engines {
		fmt.Fprintf(&b, "  %s\n", r.Engines[e])
	}
	if r.NodiffWorkloads != nil {
		fmt.Fprintf(&b, "bloomkv-nodiff reports only %s, and runs unreported the steps before them that change the store they read "+
			"(-nodiff-workloads all runs every workload on it)\n", strings.Join(r.NodiffWorkloads, ", "))
	}
	if r.Runs > 1 {
		fmt.Fprintf(&b, "%d runs, engine order alternating (run 1: %s; run 2: %s)\n",
			r.Runs, strings.Join(r.Orders[0], ","), strings.Join(r.Orders[1], ","))
	}
	b.WriteString("\n")
	return b.String()
}

// summarize turns a measurement into a result, reading the store's
// counters and size.
func (r *runner) summarize(w workload, m *measurement, st *store, before counters) (result, error) {
	res := result{Workload: w.name, Engine: r.engine, Ops: m.ops, Seconds: m.elapsed.Seconds(), Note: m.note, Tree: m.tree}
	after := st.e.counters()
	if m.paired != nil {
		// The figures per op are the "on" side's: its ops, and what it
		// added to the counters.
		before = after.minus(m.paired.counters[0])
		res.Paired = m.paired.result()
	}
	if m.elapsed > 0 {
		res.OpsPerSec = float64(m.ops) / m.elapsed.Seconds()
	}
	if m.hist != nil && m.hist.TotalCount() > 0 {
		res.P50Micros = ptr(float64(m.hist.ValueAtQuantile(50)) / 1e3)
		res.P99Micros = ptr(float64(m.hist.ValueAtQuantile(99)) / 1e3)
	}
	if m.ops > 0 && before.blockReads >= 0 && after.blockReads >= 0 {
		res.BlockReadsPerOp = ptr(float64(after.blockReads-before.blockReads) / float64(m.ops))
	}
	if probes := after.filterProbes - before.filterProbes; probes > 0 && before.filterProbes >= 0 {
		res.FilterProbesPerOp = ptr(float64(probes) / float64(m.ops))
		switch {
		case after.filterFalsePositives >= 0:
			res.FilterFPRate = ptr(float64(after.filterFalsePositives-before.filterFalsePositives) / float64(probes))
		case w.absentReads:
			res.FilterFPRate = ptr(float64(after.filterMaybes-before.filterMaybes) / float64(probes))
		}
	}
	if w.diff && after.diffSkips >= 0 {
		d := &diffFilterResult{Skips: after.diffSkips - before.diffSkips, Maybes: after.diffMaybes - before.diffMaybes,
			FalseMaybes: after.diffFalseMaybes - before.diffFalseMaybes}
		if probes := d.Skips + d.Maybes; probes > 0 {
			d.SkipRate = ptr(float64(d.Skips) / float64(probes))
		}
		res.DiffFilter = d
	}
	if w.writes && st.userBytes > 0 && after.tableBytes >= 0 {
		res.WriteAmp = ptr(float64(after.tableBytes) / float64(st.userBytes))
	}
	disk, tables, err := settledDirBytes(st.dir, w.writes)
	if err != nil {
		return res, err
	}
	res.DiskBytes, res.TableBytes = disk, tables
	if after.pinnedBytes > 0 {
		res.PinnedBytes = after.pinnedBytes
	}
	return res, nil
}

func ptr(f float64) *float64 { return &f }

// resultIn is the result of a workload on an engine in one run; nil when
// it did not run.
func (r *report) resultIn(run int, workload, engine string) *result {
	for i := range r.Results {
		if res := &r.Results[i]; res.Run == run && res.Workload == workload && res.Engine == engine {
			return res
		}
	}
	return nil
}

// medianOpsPerSec is the median over the runs of a workload's ops/s on an
// engine; nil when it did not run.
func (r *report) medianOpsPerSec(workload, engine string) *float64 {
	vals := make([]*float64, r.Runs)
	for run := range vals {
		if res := r.resultIn(run, workload, engine); res != nil {
			vals[run] = &res.OpsPerSec
		}
	}
	med, _, _ := medianRange(vals)
	return med
}

// finish computes the ratios and checks the goals.
func (r *report) finish(elapsed time.Duration) {
	r.Seconds = elapsed.Seconds()
	for _, w := range r.cfg.workloads {
		runs := make([]ratio, r.Runs)
		for run := range runs {
			runs[run] = r.ratioIn(run, w)
		}
		r.Ratios = append(r.Ratios, summarizeRatios(w, runs))
	}
	for _, g := range goalsFor(r.cfg) {
		if g.Versus == "pebble-l6" && !slices.Contains(r.cfg.engines, g.Versus) {
			continue
		}
		vals := make([]*float64, r.Runs)
		for run := range vals {
			vals[run] = r.goalIn(run, g)
		}
		g.Got, g.GotMin, g.GotMax = medianRange(vals)
		if g.Got != nil {
			g.Met = *g.Got >= g.Target
			if g.AtMost {
				g.Met = *g.Got <= g.Target
			}
		}
		r.Goals = append(r.Goals, g)
	}
}

// ratioIn compares bloomkv with the other engines on a workload in one run.
func (r *report) ratioIn(run int, w string) ratio {
	ra := ratio{Workload: w}
	b := r.resultIn(run, w, "bloomkv")
	if b == nil {
		return ra
	}
	if nd := r.resultIn(run, w, "bloomkv-nodiff"); nd != nil {
		ra.VsNodiff = div(b.OpsPerSec, nd.OpsPerSec)
	}
	if p := r.resultIn(run, w, "pebble"); p != nil {
		ra.VsPebble = div(b.OpsPerSec, p.OpsPerSec)
		ra.DiskVsPebble = div(float64(b.DiskBytes), float64(p.DiskBytes))
		ra.TablesVsPebble = div(float64(b.TableBytes), float64(p.TableBytes))
	}
	if p := r.resultIn(run, w, "pebble-l6"); p != nil {
		ra.VsPebbleL6 = div(b.OpsPerSec, p.OpsPerSec)
	}
	if l := r.resultIn(run, w, "goleveldb"); l != nil {
		ra.VsGoleveldb = div(b.OpsPerSec, l.OpsPerSec)
	}
	if o := r.resultIn(run, w, "badger"); o != nil {
		ra.VsBadger = div(b.OpsPerSec, o.OpsPerSec)
	}
	if o := r.resultIn(run, w, "bbolt"); o != nil {
		ra.VsBbolt = div(b.OpsPerSec, o.OpsPerSec)
	}
	if b.Paired != nil {
		ra.Paired = ptr(b.Paired.Ratio)
	}
	return ra
}

// goalIn is the ratio a goal measures in one run (finish has computed the
// runs' ratios); nil when a workload or engine did not run.
func (r *report) goalIn(run int, g goal) *float64 {
	if g.VersusWorkload != "" {
		a, b := r.resultIn(run, g.Workload, "bloomkv"), r.resultIn(run, g.VersusWorkload, g.Versus)
		if a == nil || b == nil {
			return nil
		}
		return div(a.OpsPerSec, b.OpsPerSec)
	}
	if g.Workload == everyWorkload {
		var least *float64
		for _, sum := range r.Ratios {
			if v := sum.Runs[run].versus(g.Versus); finite(v) && (least == nil || *v < *least) {
				least = v
			}
		}
		return least
	}
	for _, sum := range r.Ratios {
		if sum.Workload != g.Workload {
			continue
		}
		ra := sum.Runs[run]
		switch {
		case g.Measure == "disk":
			return ra.DiskVsPebble
		case g.Measure == "tables":
			return ra.TablesVsPebble
		default:
			return ra.versus(g.Versus)
		}
	}
	return nil
}

func div(a, b float64) *float64 {
	if b == 0 {
		return nil
	}
	return ptr(a / b)
}

// table formats the results: throughput and ratios, the per-engine details,
// and the goals. With several runs, the throughputs are medians and the
// ratios medians with their range; the details are run 1's.
func (r *report) table() string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "workload\t")
	for _, e := range r.cfg.engines {
		fmt.Fprintf(tw, "%s ops/s\t", e)
	}
	// The columns against pebble-l6, badger and bbolt show only when they
	// ran: the default run leaves them out.
	cols := r.ratioColumns()
	for _, e := range cols {
		fmt.Fprintf(tw, "%s\t", ratioHeader(e))
	}
	fmt.Fprint(tw, "\n")
	for i, w := range r.cfg.workloads {
		fmt.Fprintf(tw, "%s\t", w)
		for _, e := range r.cfg.engines {
			if ops := r.medianOpsPerSec(w, e); ops != nil {
				fmt.Fprintf(tw, "%s\t", commas(*ops))
			} else {
				fmt.Fprint(tw, "-\t")
			}
		}
		for _, e := range cols {
			fmt.Fprintf(tw, "%s\t", r.fmtVersus(r.Ratios[i], e))
		}
		fmt.Fprint(tw, "\n")
	}
	tw.Flush()

	b.WriteString("\n")
	if r.Runs > 1 {
		fmt.Fprintf(&b, "details of run 1 (engine order %s; -json holds every run's):\n", strings.Join(r.Orders[0], ","))
	}
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "workload\tengine\tp50 µs\tp99 µs\tblock reads/op\tfilter probes/op\tfilter FP\ton disk\ttables\twrite amp\tnote\t\n")
	for _, w := range r.cfg.workloads {
		for _, e := range r.cfg.engines {
			res := r.resultIn(0, w, e)
			if res == nil {
				continue
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", w, e,
				fmtFloat(res.P50Micros, "%.1f"), fmtFloat(res.P99Micros, "%.1f"),
				fmtFloat(res.BlockReadsPerOp, "%.3f"), fmtFloat(res.FilterProbesPerOp, "%.2f"),
				fmtPercent(res.FilterFPRate), humanize.Bytes(uint64(res.DiskBytes)), humanize.Bytes(uint64(res.TableBytes)),
				fmtFloat(res.WriteAmp, "%.2f"), noteOf(res))
		}
	}
	tw.Flush()

	if r.Runs > 1 {
		fmt.Fprintf(&b, "\ngoals (bloomkv over the other engine, same run; median of %d runs, min–max in brackets):\n", r.Runs)
	} else {
		b.WriteString("\ngoals (bloomkv over the other engine, same run):\n")
	}
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, g := range r.Goals {
		op := ">="
		if g.AtMost {
			op = "<="
		}
		state := "not run"
		if g.Got != nil {
			state = "MISSED"
			if g.Met {
				state = "met"
			}
		}
		fmt.Fprintf(tw, "  %s\t%s %.2f\t%s\t%s\n", goalName(g), op, g.Target, r.fmtRange(g.Got, g.GotMin, g.GotMax), state)
	}
	tw.Flush()
	fmt.Fprintf(&b, "\ntotal time %.0f s\n", r.Seconds)
	return b.String()
}

// finite says whether f holds a number to print: not absent, NaN or
// infinite.
func finite(f *float64) bool {
	return f != nil && !math.IsNaN(*f) && !math.IsInf(*f, 0)
}

func fmtRatio(f *float64) string {
	if !finite(f) {
		return "-"
	}
	return fmt.Sprintf("%.2f", *f)
}

// fmtRange formats a ratio's median and, with several runs, its range over
// them: "0.97 (0.91–1.03)".
func (r *report) fmtRange(med, lo, hi *float64) string {
	if r.Runs <= 1 || !finite(med) || !finite(lo) || !finite(hi) {
		return fmtRatio(med)
	}
	return fmt.Sprintf("%.2f (%.2f–%.2f)", *med, *lo, *hi)
}

func fmtFloat(f *float64, format string) string {
	if !finite(f) {
		return "-"
	}
	return fmt.Sprintf(format, *f)
}

func fmtPercent(f *float64) string {
	if !finite(f) {
		return "-"
	}
	return fmt.Sprintf("%.2f%%", *f*100)
}

// commas formats a rate as a whole number with thousands separators.
func commas(f float64) string {
	s := fmt.Sprintf("%.0f", f)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

func (r *report) writeJSON(path string) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

// noteOf is a result's note, with the differential filter's answers and
// the memory pinned outside the cache.
func noteOf(res *result) string {
	parts := []string{res.Note}
	if res.DiffFilter != nil {
		parts = append(parts, res.DiffFilter.String())
	}
	if res.Paired != nil {
		parts = append(parts, res.Paired.String())
	}
	if res.PinnedBytes != 0 {
		parts = append(parts, humanize.Bytes(uint64(res.PinnedBytes))+" pinned outside the cache")
	}
	return strings.TrimPrefix(strings.Join(parts, "; "), "; ")
}
