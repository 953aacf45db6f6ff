// Command bench runs the same workloads on bloomkv, Pebble and goleveldb
// (and, when named, on Badger and bbolt), with the same settings and the same keys and values, and prints each
// engine's throughput, the ratios between them, latencies, block reads,
// filter false positives, bytes on disk and write amplification.
//
//	go run ./bench                       # the default size: a few minutes on 2 cores
//	go run ./bench -n 10000000 -cache 64MiB -json out.json -png out.png
//	go run ./bench -runs 3               # three runs: the median and range of each ratio
//	go run ./bench -engines bloomkv,pebble,pebble-l6   # Pebble with last-level filters on its point reads too
//	go run ./bench -engines bloomkv,pebble,badger,bbolt -workloads fillbatch-1000,readrandom,seekrandom-next10,scan
//	                                     # the other stores Go programs embed, and the named-only workloads
//	go run ./bench -runs 3 -png docs/benchmarks.png -markdown docs/benchmarks.md -readme README.md
//	                                     # the published report, and the README's headline table
//
// Each engine runs the whole list of workloads in a directory of its own,
// one engine after another. -runs N repeats the whole comparison N times,
// in fresh directories, reversing the engine order every other run, and
// reports the median and the min–max of each ratio over the runs (the JSON
// holds every run). See -h for the flags.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/term"
)

// config is what the flags set.
type config struct {
	n          int
	valueSize  int
	workloads  []string
	engines    []string
	cache      int64
	memtable   int64
	bits       int
	sync       bool
	dir        string
	keep       bool
	duration   time.Duration
	jsonPath   string
	pngPath    string
	cpuProfile string
	seed       uint64
	progress   bool
	// runs is how many times the whole comparison runs (-runs).
	runs int
	// nodiffOnly lists the workloads bloomkv-nodiff reports; nil: all.
	nodiffOnly []string
	// semijoin runs the semijoin workload (bloomkv only, once).
	semijoin bool
	// raft runs the raft workload (raft.go), only when named.
	raft bool
	// markdownPath is where -markdown writes the Markdown report; readmePath
	// the file whose headline block -readme rewrites.
	markdownPath string
	readmePath   string
}

func main() {
	cfg, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	cfg.progress = term.IsTerminal(int(os.Stderr.Fd()))
	if err := run(cfg, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func parseFlags(args []string, stderr io.Writer) (*config, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg := &config{}
	var workloadList, engineList, nodiffList, cache, memtable string
	fs.IntVar(&cfg.n, "n", 500_000, "keys to load; the data is about n*(16+value-size) bytes before compression")
	fs.IntVar(&cfg.valueSize, "value-size", 100, "value size in bytes (values compress to about half)")
	fs.StringVar(&workloadList, "workloads", "all", "comma-separated workloads to report, or all ("+
		"readbase-1pct brings readbase-1pct-compacted, which its goal compares it with; semijoin runs on bloomkv alone, once; "+
		"raft (raftstore's log store, cluster and Compare against raft-boltdb and raft-wal) and "+
		strings.Join(namedWorkloads(), ", ")+" run only when named): "+strings.Join(append(workloadNames(), "semijoin", "raft"), ","))
	fs.StringVar(&engineList, "engines", strings.Join(defaultEngines, ","), "comma-separated engines to run, some of "+strings.Join(engineNames, ",")+
		" (pebble-l6, Pebble whose point reads consult last-level filters, badger and bbolt run only when named)")
	fs.StringVar(&nodiffList, "nodiff-workloads", strings.Join(nodiffDefault, ","),
		"comma-separated workloads bloomkv-nodiff reports (it also runs, unreported, the steps before them that change the store they read), or all")
	fs.StringVar(&cache, "cache", "8MiB", "block cache size of every engine (B, KiB, MiB, GiB)")
	fs.StringVar(&memtable, "memtable", "4MiB", "memtable (write buffer) size of every engine")
	fs.IntVar(&cfg.bits, "bits", 10, "Bloom filter bits per key, on every level of every engine")
	fs.BoolVar(&cfg.sync, "sync", false, "sync every write to stable storage")
	fs.StringVar(&cfg.dir, "dir", "", "directory for the stores (default: a new temporary directory, removed at the end)")
	fs.BoolVar(&cfg.keep, "keep", false, "keep the stores after the run")
	// 1.5 s keeps the default run (every workload, four engines, the
	// semi-joins) under three minutes on 2 cores; -runs N or a longer
	// -duration steadies the figures.
	fs.DurationVar(&cfg.duration, "duration", 1500*time.Millisecond, "how long each timed workload (reads, seeks, YCSB) runs per engine")
	fs.StringVar(&cfg.jsonPath, "json", "", "write the results as JSON to this file")
	fs.StringVar(&cfg.pngPath, "png", "", "write a bar chart of the ratios to this PNG file")
	fs.StringVar(&cfg.markdownPath, "markdown", "", "write a Markdown report of the run (machine, commit, settings, every table, the goals) to this file")
	fs.StringVar(&cfg.readmePath, "readme", "", "rewrite, in this file, the lines between "+headlineBegin+" and "+headlineEnd+
		" with a headline table of the run (the markers must be there)")
	fs.StringVar(&cfg.cpuProfile, "cpuprofile", "", "write a CPU profile of the run to this file")
	fs.Uint64Var(&cfg.seed, "seed", 1, "seed of the key and value streams")
	fs.IntVar(&cfg.runs, "runs", 1, "run the whole comparison this many times, the engine order reversed every other run, "+
		"and report the median and min–max of each ratio")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var err error
	if cfg.cache, err = parseSize(cache); err != nil {
		return nil, fmt.Errorf("-cache: %w", err)
	}
	if cfg.memtable, err = parseSize(memtable); err != nil {
		return nil, fmt.Errorf("-memtable: %w", err)
	}
	switch {
	case cfg.n < 2:
		return nil, fmt.Errorf("-n %d: need at least 2 keys", cfg.n)
	case cfg.n > 1e15:
		return nil, fmt.Errorf("-n %d: keys are 16 decimal digits, so at most 1e15", cfg.n)
	case cfg.valueSize < 1:
		return nil, fmt.Errorf("-value-size %d: need at least 1 byte", cfg.valueSize)
	case cfg.bits < 1 || cfg.bits > 64:
		return nil, fmt.Errorf("-bits %d: want 1 to 64", cfg.bits)
	case cfg.duration <= 0:
		return nil, fmt.Errorf("-duration %v: must be positive", cfg.duration)
	case cfg.memtable < 64<<10:
		return nil, fmt.Errorf("-memtable %d: need at least 64 KiB", cfg.memtable)
	case cfg.runs < 1:
		return nil, fmt.Errorf("-runs %d: need at least 1 run", cfg.runs)
	}
	// The outputs written at the end are checked now, so that a long run
	// is not wasted on a file it cannot write.
	if cfg.markdownPath != "" {
		if err := checkDir(cfg.markdownPath); err != nil {
			return nil, fmt.Errorf("-markdown: %w", err)
		}
	}
	if cfg.readmePath != "" {
		data, err := os.ReadFile(cfg.readmePath)
		if err != nil {
			return nil, fmt.Errorf("-readme: %w", err)
		}
		if _, _, err := headlineBlock(data); err != nil {
			return nil, fmt.Errorf("-readme %s: %w", cfg.readmePath, err)
		}
	}
	if cfg.engines, err = parseList(engineList, engineNames, "engine"); err != nil {
		return nil, err
	}
	if workloadList == "all" {
		cfg.workloads, cfg.semijoin = defaultWorkloads(), true
	} else {
		if cfg.workloads, err = parseList(workloadList, append(workloadNames(), "semijoin", "raft"), "workload"); err != nil {
			return nil, err
		}
		if i := slices.Index(cfg.workloads, "semijoin"); i >= 0 {
			cfg.workloads, cfg.semijoin = slices.Delete(cfg.workloads, i, i+1), true
		}
		if i := slices.Index(cfg.workloads, "raft"); i >= 0 {
			cfg.workloads, cfg.raft = slices.Delete(cfg.workloads, i, i+1), true
		}
	}
	if nodiffList != "all" {
		if cfg.nodiffOnly, err = parseList(nodiffList, workloadNames(), "workload"); err != nil {
			return nil, fmt.Errorf("-nodiff-workloads: %w", err)
		}
		cfg.nodiffOnly = withCompanions(cfg.nodiffOnly)
	}
	cfg.workloads = withCompanions(cfg.workloads)
	return cfg, nil
}

// withCompanions adds to the workloads selected the companions of each, and
// theirs, in the order of the list.
func withCompanions(selected []string) []string {
	for {
		var out []string
		for _, w := range workloads {
			if slices.Contains(selected, w.name) || slices.ContainsFunc(workloads, func(o workload) bool {
				return o.companion == w.name && slices.Contains(selected, o.name)
			}) {
				out = append(out, w.name)
			}
		}
		if len(out) == len(selected) {
			return out
		}
		selected = out
	}
}

// nodiffDefault lists the workloads bloomkv-nodiff reports by default: those
// where the differential-file filter can matter, the reads of a store
// mostly at its base level. Running all of them on a fourth engine would
// make the default run too long.
var nodiffDefault = []string{"readrandom", "ycsb-b", "ycsb-c", "readbase-1pct", "readbase-absent", "readbase-1pct-compacted", "readbase-10pct"}

// namedWorkloads lists the workloads that run only when -workloads names
// them.
func namedWorkloads() []string {
	var names []string
	for _, w := range workloads {
		if w.named {
			names = append(names, w.name)
		}
	}
	return names
}

// defaultWorkloads lists the workloads -workloads all runs: all but the
// named ones.
func defaultWorkloads() []string {
	return slices.DeleteFunc(workloadNames(), func(w string) bool { return slices.Contains(namedWorkloads(), w) })
}

func workloadNames() []string {
	names := make([]string, len(workloads))
	for i, w := range workloads {
		names[i] = w.name
	}
	return names
}

// parseList splits a comma-separated list, checks every item is known, and
// returns them in the order of known.
func parseList(list string, known []string, what string) ([]string, error) {
	want := map[string]bool{}
	for _, item := range strings.Split(list, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		found := false
		for _, k := range known {
			found = found || k == item
		}
		if !found {
			return nil, fmt.Errorf("unknown %s %q (want some of %s)", what, item, strings.Join(known, ","))
		}
		want[item] = true
	}
	var out []string
	for _, k := range known {
		if want[k] {
			out = append(out, k)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no %s given", what)
	}
	return out, nil
}

// parseSize parses a byte count with an optional B, KiB, MiB or GiB suffix
// (KB, MB and GB mean the same powers of two).
func parseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1 << 10}, {"MB", 1 << 20}, {"GB", 1 << 30}, {"B", 1}} {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	v, err := strconv.ParseInt(t, 10, 64)
	if err != nil || v < 0 || v > (1<<62)/mult {
		return 0, fmt.Errorf("bad size %q (want e.g. 8MiB)", s)
	}
	return v * mult, nil
}

// run runs every selected workload on every selected engine, -runs times,
// and writes the report.
func run(cfg *config, stdout, stderr io.Writer) (err error) {
	if cfg.cpuProfile != "" {
		f, err := os.Create(cfg.cpuProfile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return err
		}
		defer func() {
			pprof.StopCPUProfile()
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}()
	}
	base := cfg.dir
	if base == "" {
		if base, err = os.MkdirTemp("", "bloomkv-bench-"); err != nil {
			return err
		}
		if !cfg.keep {
			defer os.RemoveAll(base)
		}
	} else if err := os.MkdirAll(base, 0o755); err != nil {
		return err
	}
	s := settings{cacheBytes: cfg.cache, memtableBytes: cfg.memtable, bitsPerKey: cfg.bits, blockSize: 4096, sync: cfg.sync}
	rep := newReport(cfg, s)
	fmt.Fprint(stdout, rep.header())

	var prog progress = lineProgress{w: stderr}
	if cfg.progress {
		prog = barProgress{w: stderr}
	}
	steps := plan(cfg.workloads)
	start := time.Now()
	for run, order := range rep.Orders {
		// One run keeps the stores directly under base; several give each
		// run a directory of its own, so that every run starts afresh.
		runBase, label := base, ""
		if len(rep.Orders) > 1 {
			runBase = filepath.Join(base, fmt.Sprintf("run-%d", run))
			label = fmt.Sprintf("run %d/%d ", run+1, len(rep.Orders))
			fmt.Fprintf(stdout, "run %d of %d: %s\n", run+1, len(rep.Orders), strings.Join(order, ", "))
		}
		for _, name := range order {
			dir := filepath.Join(runBase, name)
			r := &runner{cfg: cfg, engine: name, dir: dir, s: s, vals: newValues(cfg.valueSize, cfg.seed), prog: prog.forEngine(label + name), out: stdout}
			engineSteps := steps
			if name == "bloomkv-nodiff" && cfg.nodiffOnly != nil {
				engineSteps = restrict(steps, cfg.nodiffOnly)
			}
			results, err := r.runAll(engineSteps)
			if err != nil {
				return fmt.Errorf("%s%s: %w", label, name, err)
			}
			for i := range results {
				results[i].Run = run
			}
			rep.Results = append(rep.Results, results...)
			if !cfg.keep {
				for _, d := range []string{dir, dir + "-fillseq", dir + "-fillbatch-100", dir + "-fillbatch-1000", dir + "-readbase-1pct", dir + "-readbase-10pct", dir + "-ingest", dir + "-ingest-tables"} {
					if err := os.RemoveAll(d); err != nil {
						return err
					}
				}
			}
			runtime.GC()
		}
		if runBase != base && !cfg.keep {
			// Empty now, unless something else was put there: then it stays.
			_ = os.Remove(runBase)
		}
	}
	if cfg.semijoin {
		if rep.Semijoin, err = runSemijoin(cfg, s, base, func(what string) { fmt.Fprintln(stderr, what) }); err != nil {
			return fmt.Errorf("semijoin: %w", err)
		}
	}
	if cfg.raft {
		if rep.Raft, err = runRaft(cfg, base, func(what string) { fmt.Fprintln(stderr, what) }); err != nil {
			return fmt.Errorf("raft: %w", err)
		}
	}
	rep.finish(time.Since(start))
	if len(cfg.workloads) > 0 {
		fmt.Fprint(stdout, rep.table())
	}
	if rep.Semijoin != nil {
		fmt.Fprint(stdout, rep.Semijoin.table())
	}
	if rep.Raft != nil {
		fmt.Fprint(stdout, rep.Raft.table())
	}
	if cfg.jsonPath != "" {
		if err := rep.writeJSON(cfg.jsonPath); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote %s\n", cfg.jsonPath)
	}
	if cfg.pngPath != "" {
		if err := rep.writePNG(cfg.pngPath); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote %s\n", cfg.pngPath)
	}
	if cfg.markdownPath != "" {
		if err := rep.writeMarkdown(cfg.markdownPath); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote %s\n", cfg.markdownPath)
	}
	if cfg.readmePath != "" {
		if err := rep.rewriteReadme(cfg.readmePath); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "rewrote the headline of %s\n", cfg.readmePath)
	}
	return nil
}

// step is a workload to run, and whether its result is reported.
type step struct {
	w      workload
	report bool
}

// plan lists the workloads to run for the selected ones: each selected
// workload, and the earlier ones whose effect it needs, in list order.
func plan(selected []string) []step {
	need := map[string]bool{}
	report := map[string]bool{}
	for _, name := range selected {
		report[name] = true
		for n := name; n != ""; {
			need[n] = true
			w, _ := workloadByName(n)
			n = w.needs
		}
	}
	var steps []step
	for _, w := range workloads {
		if need[w.name] {
			steps = append(steps, step{w: w, report: report[w.name]})
		}
	}
	return steps
}

// restrict returns the steps of an engine that reports only the workloads
// in only: those, the steps they need, and every earlier step that changes
// the main store one of them reads, so that it reads the store the engines
// that run every step read.
func restrict(steps []step, only []string) []step {
	var out []step
	need := map[string]bool{}
	mainLater := false
	for i := len(steps) - 1; i >= 0; i-- {
		st := steps[i]
		st.report = st.report && slices.Contains(only, st.w.name)
		if !st.report && !need[st.w.name] && !(st.w.writes && !st.w.own && mainLater) {
			continue
		}
		out = append(out, st)
		if st.w.needs != "" {
			need[st.w.needs] = true
		}
		mainLater = mainLater || !st.w.own
	}
	slices.Reverse(out)
	return out
}

// runAll runs the steps on one engine and returns the reported results.
func (r *runner) runAll(steps []step) (results []result, err error) {
	defer func() {
		for _, closeFn := range []func() error{r.closeMain, r.closeBase} {
			if cerr := closeFn(); err == nil {
				err = cerr
			}
		}
	}()
	for i, st := range steps {
		if !st.w.runsOn(r.engine) {
			continue
		}
		// Once only workloads on stores of their own remain, the main
		// store is closed: its background work would run under theirs.
		if !slices.ContainsFunc(steps[i:], func(s step) bool { return !s.w.own }) {
			if err := r.closeMain(); err != nil {
				return nil, err
			}
		}
		var before counters
		if r.main != nil {
			before = r.main.e.counters()
		}
		r.pair = nil
		if st.w.diff && r.engine == "bloomkv" {
			own := st.w.own
			r.pair = newPairing(func() *store {
				if own {
					return r.base
				}
				return r.main
			})
		}
		m, err := st.w.run(r)
		if err != nil {
			if m != nil && m.store != nil && !m.keep {
				_ = m.store.e.close()
			}
			return nil, fmt.Errorf("%s: %w", st.w.name, err)
		}
		target := r.main
		if m.store != nil {
			target, before = m.store, counters{}
		}
		if m.before != nil {
			before = *m.before
		}
		res, err := r.summarize(st.w, m, target, before)
		if m.store != nil && !m.keep {
			if cerr := m.store.e.close(); err == nil && cerr != nil {
				err = fmt.Errorf("close: %w", cerr)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", st.w.name, err)
		}
		if st.report {
			results = append(results, res)
		}
	}
	return results, nil
}

// settledDirBytes is dirBytes once the store has finished removing the
// files its last writes made obsolete (engines delete them in the
// background): after writes, it waits until two looks 200 ms apart agree,
// for at most 10 s.
func settledDirBytes(dir string, afterWrites bool) (total, tables int64, err error) {
	total, tables, err = dirBytes(dir)
	if !afterWrites {
		return total, tables, err
	}
	for deadline := time.Now().Add(10 * time.Second); err == nil && time.Now().Before(deadline); {
		time.Sleep(200 * time.Millisecond)
		t2, tb2, err2 := dirBytes(dir)
		if err2 != nil {
			return 0, 0, err2
		}
		if t2 == total && tb2 == tables {
			break
		}
		total, tables = t2, tb2
	}
	return total, tables, err
}

// dirBytes sums the bytes on disk of the regular files under dir, and of
// the table files among them (.sst: bloomkv, Pebble, Badger; .ldb:
// goleveldb).
func dirBytes(dir string) (total, tables int64, err error) {
	err = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		// A background compaction may remove a file while the walk runs.
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			info, err := d.Info()
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			if err != nil {
				return err
			}
			size := fileBytes(info)
			total += size
			if ext := filepath.Ext(path); ext == ".sst" || ext == ".ldb" {
				tables += size
			}
		}
		return nil
	})
	return total, tables, err
}
