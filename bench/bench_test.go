package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bloomkv/bloomkv/internal/benchutil"
)

// runTiny runs the benchmark at a tiny size with the given extra flags and
// returns the JSON report and the printed output.
func runTiny(t *testing.T, extra ...string) (*report, string) {
	t.Helper()
	dir := t.TempDir()
	jsonPath := filepath.Join(dir, "out.json")
	pngPath := filepath.Join(dir, "out.png")
	args := append([]string{"-n", "3000", "-memtable", "64KiB", "-duration", "30ms", "-dir", filepath.Join(dir, "stores"),
		"-json", jsonPath, "-png", pngPath}, extra...)
	cfg, err := parseFlags(args, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run(cfg, &out, io.Discard); err != nil {
		t.Fatalf("run %v: %v", args, err)
	}
	data, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var rep report
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatalf("%s: %v", jsonPath, err)
	}
	png, err := os.ReadFile(pngPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) || len(png) < 1000 {
		t.Fatalf("%s is not a PNG image (%d bytes)", pngPath, len(png))
	}
	// The stores are removed unless -keep.
	if entries, err := os.ReadDir(filepath.Join(dir, "stores")); err != nil || len(entries) != 0 {
		t.Errorf("stores left behind: %v %v", entries, err)
	}
	return &rep, out.String()
}

// TestEveryWorkloadAndEngine: the default run reports every workload on
// every default engine (bloomkv-nodiff: its default few), with figures
// that add up, in the JSON and the table; pebble-l6 and its goal stay out.
func TestEveryWorkloadAndEngine(t *testing.T) {
	rep, out := runTiny(t)
	if !slices.Equal(rep.NodiffWorkloads, nodiffDefault) || !strings.Contains(out, "bloomkv-nodiff reports only readrandom, ycsb-b, ") {
		t.Errorf("bloomkv-nodiff's workloads: %v, or not in the header:\n%s", rep.NodiffWorkloads, out)
	}
	for _, w := range workloads {
		if w.named {
			if slices.ContainsFunc(rep.Results, func(r result) bool { return r.Workload == w.name }) {
				t.Errorf("%s, which runs only when named, ran in the default run", w.name)
			}
			continue
		}
		for _, e := range defaultEngines {
			var res *result
			for i := range rep.Results {
				if rep.Results[i].Workload == w.name && rep.Results[i].Engine == e {
					if res != nil {
						t.Errorf("%s on %s reported twice", w.name, e)
					}
					res = &rep.Results[i]
				}
			}
			if !w.runsOn(e) {
				if res != nil {
					t.Errorf("%s reported on %s, which it does not run on", w.name, e)
				}
				continue
			}
			if e == "bloomkv-nodiff" && !slices.Contains(nodiffDefault, w.name) {
				if res != nil {
					t.Errorf("%s reported on bloomkv-nodiff, which runs only %v", w.name, nodiffDefault)
				}
				continue
			}
			if res == nil {
				t.Errorf("no result for %s on %s", w.name, e)
				continue
			}
			checkDiffFilter(t, w, e, res)
			if readbase := strings.HasPrefix(w.name, "readbase-"); readbase != (res.Tree != "") ||
				readbase && !strings.Contains(out, fmt.Sprintf("%s %s, before the reads: %s\n", e, w.name, res.Tree)) {
				t.Errorf("%s on %s: tree %q, printed:\n%s", w.name, e, res.Tree, out)
			}
			if res.Ops <= 0 || res.Seconds <= 0 || res.OpsPerSec <= 0 {
				t.Errorf("%s on %s: ops %d in %v s (%v/s)", w.name, e, res.Ops, res.Seconds, res.OpsPerSec)
			}
			if res.DiskBytes <= 0 || res.TableBytes < 0 || res.TableBytes > res.DiskBytes {
				t.Errorf("%s on %s: %d bytes on disk, %d in tables", w.name, e, res.DiskBytes, res.TableBytes)
			}
			timed := w.name != "scan" && w.name != "compact" && w.name != "ingest"
			if timed != (res.P50Micros != nil && res.P99Micros != nil) {
				t.Errorf("%s on %s: latencies %v %v", w.name, e, res.P50Micros, res.P99Micros)
			} else if timed && *res.P50Micros > *res.P99Micros {
				t.Errorf("%s on %s: p50 %v above p99 %v", w.name, e, *res.P50Micros, *res.P99Micros)
			}
			if w.writes != (res.WriteAmp != nil) {
				t.Errorf("%s on %s: write amplification %v", w.name, e, res.WriteAmp)
			}
			if res.BlockReadsPerOp == nil {
				t.Errorf("%s on %s: no block reads per op", w.name, e)
			}
		}
		if !strings.Contains(out, w.name) {
			t.Errorf("the table lacks %s", w.name)
		}
	}
	// bloomkv counts its false positives exactly; readmissing probes a
	// filter on nearly every Get of an absent key (not for the one past the
	// last loaded key).
	for _, name := range []string{"readmissing", "readmissing-compacted"} {
		for _, r := range rep.Results {
			if r.Workload == name && r.Engine == "bloomkv" && (r.FilterFPRate == nil || r.FilterProbesPerOp == nil || *r.FilterProbesPerOp < 0.95) {
				t.Errorf("%s on bloomkv: filter probes/op %v, FP rate %v", name, r.FilterProbesPerOp, r.FilterFPRate)
			}
		}
	}
	if len(rep.Ratios) != len(defaultWorkloads()) {
		t.Errorf("%d ratios for %d workloads", len(rep.Ratios), len(defaultWorkloads()))
	}
	for _, ra := range rep.Ratios {
		w, _ := workloadByName(ra.Workload)
		if !w.runsOn("bloomkv") || !w.runsOn("pebble") {
			if ra.VsPebble != nil || ra.VsGoleveldb != nil {
				t.Errorf("ratios of %s, which one of bloomkv and pebble skips: %v %v", ra.Workload, ra.VsPebble, ra.VsGoleveldb)
			}
			continue // a companion that goals compare with
		}
		if ra.VsPebble == nil || (ra.VsGoleveldb == nil) == w.runsOn("goleveldb") || *ra.VsPebble <= 0 || (ra.VsNodiff != nil) != slices.Contains(nodiffDefault, ra.Workload) {
			t.Errorf("ratios of %s: %v %v %v", ra.Workload, ra.VsNodiff, ra.VsPebble, ra.VsGoleveldb)
		}
	}
	if len(rep.Goals) != len(goals)-1 {
		t.Errorf("%d goals reported, want %d (all but the one against pebble-l6)", len(rep.Goals), len(goals)-1)
	}
	for _, g := range rep.Goals {
		w, _ := workloadByName(g.Workload)
		notRun := g.Versus == "badger" || g.Versus == "bbolt" || w.named
		if (g.Got == nil) != notRun || g.Versus == "pebble-l6" {
			t.Errorf("goal %s %s vs %s: got %v", g.Workload, g.Measure, g.Versus, g.Got)
		}
	}
	if !strings.Contains(out, "every workload ops/s vs badger") || !strings.Contains(out, "not run") {
		t.Errorf("the goals against badger do not show as not run:\n%s", out)
	}
	if strings.Contains(out, "pebble-l6") {
		t.Errorf("pebble-l6 in the output of the default run:\n%s", out)
	}
	for _, e := range defaultEngines {
		if !strings.Contains(out, rep.Engines[e]) || rep.Engines[e] == "" {
			t.Errorf("the header lacks the configuration of %s", e)
		}
	}
}

// checkDiffFilter checks the differential filter's figures of a result:
// present for bloomkv's engines on the workloads that report them, and
// consistent. Nothing here depends on how well the filter works: an
// all-"maybe" filter passes too.
func checkDiffFilter(t *testing.T, w workload, engine string, res *result) {
	t.Helper()
	d := res.DiffFilter
	bloomkv := strings.HasPrefix(engine, "bloomkv")
	if (d != nil) != (w.diff && bloomkv) {
		t.Errorf("%s on %s: diff filter figures %+v", w.name, engine, d)
		return
	}
	if d == nil {
		return
	}
	switch {
	case d.Skips < 0 || d.Maybes < 0 || d.FalseMaybes < 0 || d.FalseMaybes > d.Maybes:
		t.Errorf("%s on %s: diff filter %+v", w.name, engine, d)
	case (d.SkipRate != nil) != (d.Skips+d.Maybes > 0):
		t.Errorf("%s on %s: diff filter skip rate %v of %+v", w.name, engine, d.SkipRate, d)
	case d.SkipRate != nil && (*d.SkipRate < 0 || *d.SkipRate > 1):
		t.Errorf("%s on %s: diff filter skip rate %v", w.name, engine, *d.SkipRate)
	case engine == "bloomkv-nodiff" && d.Skips != 0:
		t.Errorf("%s on bloomkv-nodiff: the disabled filter skipped %d gets", w.name, d.Skips)
	case !strings.Contains(noteOf(res), "diff filter "):
		t.Errorf("%s on %s: note %q lacks the diff filter", w.name, engine, noteOf(res))
	}
}

// TestReadBaseAlone: -workloads readbase-1pct runs and reports it and its
// compacted companion on every engine; the readbase store has versions
// above its base before the compaction and none after.
func TestReadBaseAlone(t *testing.T) {
	rep, out := runTiny(t, "-workloads", "readbase-1pct")
	var got []string
	for _, r := range rep.Results {
		got = append(got, r.Workload+"/"+r.Engine)
		if r.Engine == "bloomkv" {
			// Compacted, the store is one level and nothing above it;
			// otherwise it has a differential (the memtable at least, and
			// the level-0 table a flush may have left).
			levels := strings.Count(strings.Split(r.Tree, ";")[0], ", ") + 1
			var above int
			_, after, _ := strings.Cut(r.Tree, "diff filter on: base L6, ")
			fmt.Sscanf(after, "%d versions above it", &above)
			if compacted := r.Workload == "readbase-1pct-compacted"; compacted != (levels == 1 && above == 0) || !strings.HasPrefix(r.Tree, "tables per level: ") {
				t.Errorf("%s on bloomkv: tree %q", r.Workload, r.Tree)
			}
		}
	}
	var want []string
	for _, e := range defaultEngines {
		want = append(want, "readbase-1pct/"+e, "readbase-1pct-compacted/"+e)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("results %v, want %v", got, want)
	}
	i := slices.IndexFunc(rep.Goals, func(g goal) bool { return g.VersusWorkload != "" })
	if i < 0 {
		t.Fatalf("no readbase goal in %+v", rep.Goals)
	}
	g := rep.Goals[i]
	if g.Workload != "readbase-1pct" || g.VersusWorkload != "readbase-1pct-compacted" || g.Got == nil ||
		!strings.Contains(out, "readbase-1pct ops/s vs readbase-1pct-compacted (bloomkv)") {
		t.Errorf("readbase goal %+v\n%s", g, out)
	}
}

// TestRestrict: bloomkv-nodiff runs its workloads, what they need, and the
// earlier steps that change the store they read, and nothing else.
func TestRestrict(t *testing.T) {
	var got []string
	for _, st := range restrict(plan(defaultWorkloads()), nodiffDefault) {
		name := st.w.name
		if !st.report {
			name = "(" + name + ")"
		}
		got = append(got, name)
	}
	want := []string{"(fillrandom)", "(overwrite)", "readrandom", "(compact)", "(ycsb-a)", "ycsb-b", "ycsb-c",
		"readbase-1pct", "readbase-absent", "readbase-1pct-compacted", "readbase-10pct"}
	if !slices.Equal(got, want) {
		t.Errorf("bloomkv-nodiff's steps %v, want %v", got, want)
	}
	got = nil
	for _, st := range restrict(plan([]string{"readbase-absent"}), nodiffDefault) {
		got = append(got, fmt.Sprintf("%s %v", st.w.name, st.report))
	}
	if want := []string{"readbase-1pct false", "readbase-absent true"}; !slices.Equal(got, want) {
		t.Errorf("bloomkv-nodiff's steps for readbase-absent %v, want %v", got, want)
	}
}

// TestNodiffAll: -nodiff-workloads all runs any workload on bloomkv-nodiff.
func TestNodiffAll(t *testing.T) {
	rep, _ := runTiny(t, "-engines", "bloomkv-nodiff", "-workloads", "readhot", "-nodiff-workloads", "all")
	if len(rep.Results) != 1 || rep.Results[0].Workload != "readhot" || rep.NodiffWorkloads != nil {
		t.Errorf("results %+v, nodiff workloads %v", rep.Results, rep.NodiffWorkloads)
	}
}

// TestEnginesAndWorkloadsSubset: -engines and -workloads select what runs
// and is reported; workloads a selected one needs run unreported.
func TestEnginesAndWorkloadsSubset(t *testing.T) {
	rep, out := runTiny(t, "-engines", "goleveldb,bloomkv", "-workloads", "readrandom-deleted,readhot")
	var got []string
	for _, r := range rep.Results {
		got = append(got, r.Workload+"/"+r.Engine)
	}
	want := []string{"readhot/bloomkv", "readrandom-deleted/bloomkv", "readhot/goleveldb", "readrandom-deleted/goleveldb"}
	if !slices.Equal(got, want) {
		t.Fatalf("results %v, want %v", got, want)
	}
	for _, r := range rep.Results {
		// deleterandom ran first (unreported): half the loaded keys are gone.
		if r.Workload == "readrandom-deleted" && !strings.Contains(r.Note, " of ") {
			t.Errorf("readrandom-deleted on %s: note %q", r.Engine, r.Note)
		}
	}
	for _, ra := range rep.Ratios {
		if ra.VsPebble != nil || ra.VsGoleveldb == nil {
			t.Errorf("ratios of %s without Pebble: %v %v", ra.Workload, ra.VsPebble, ra.VsGoleveldb)
		}
	}
	if strings.Contains(out, "pebble ops/s") {
		t.Errorf("Pebble in the table of a run without it:\n%s", out)
	}
}

// TestReadRandomDeletedFindsHalf: after deleterandom, about half the reads
// find their key, on every engine.
func TestReadRandomDeletedFindsHalf(t *testing.T) {
	cfg, err := parseFlags([]string{"-n", "4000", "-duration", "300ms", "-dir", t.TempDir(), "-workloads", "readrandom-deleted"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range engineNames {
		r := &runner{cfg: cfg, engine: e, dir: filepath.Join(cfg.dir, e), s: settings{cacheBytes: 1 << 20, memtableBytes: 256 << 10, bitsPerKey: 10, blockSize: 4096},
			vals: newValues(cfg.valueSize, 1), prog: lineProgress{w: io.Discard}}
		results, err := r.runAll(plan(cfg.workloads))
		if err != nil {
			t.Fatal(err)
		}
		var found, total int64
		if _, err := fmt.Sscanf(results[0].Note, "%d of %d found", &found, &total); err != nil {
			t.Fatalf("%s: note %q: %v", e, results[0].Note, err)
		}
		if total == 0 || found < total*4/10 || found > total*6/10 {
			t.Errorf("%s: %d of %d reads found their key after deleting half", e, found, total)
		}
	}
}

// TestPebbleL6Get: pebble-l6's get finds exactly the keys present, in the
// memtable, in a level-0 table and in the last level; once the store is
// compacted to the last level, each get of an absent key inside its range
// probes a filter there, which the pebble engine's Get never does.
func TestPebbleL6Get(t *testing.T) {
	s := settings{cacheBytes: 1 << 20, memtableBytes: 256 << 10, bitsPerKey: 10, blockSize: 4096}
	keys := func(ks ...string) [][]byte {
		var out [][]byte
		for _, k := range ks {
			out = append(out, []byte(k))
		}
		return out
	}
	// Absent: "d" is deleted; the others are not written, some a prefix or
	// an extension of a present key. All sort inside the present keys.
	present, absent := keys("b", "bb", "bd", "f", "h"), keys("ba", "bbb", "c", "d", "e", "g")
	for _, name := range []string{"pebble", "pebble-l6"} {
		e, err := openEngine(name, filepath.Join(t.TempDir(), name), s)
		if err != nil {
			t.Fatal(err)
		}
		check := func(where string) {
			t.Helper()
			for _, c := range []struct {
				keys [][]byte
				want bool
			}{{present, true}, {absent, false}} {
				for _, k := range c.keys {
					if found, err := e.get(k); err != nil || found != c.want {
						t.Errorf("%s, %s: get(%q) = %v, %v", name, where, k, found, err)
					}
				}
			}
		}
		for _, k := range append(slices.Clone(present), []byte("d")) {
			if err := e.set(k, k); err != nil {
				t.Fatal(err)
			}
		}
		if err := e.del([]byte("d")); err != nil {
			t.Fatal(err)
		}
		check("in the memtable")
		if err := e.flush(); err != nil {
			t.Fatal(err)
		}
		check("flushed")
		if err := e.compact(); err != nil {
			t.Fatal(err)
		}
		if shape := e.shape(); !strings.HasPrefix(shape, "tables per level: L6 1;") {
			t.Fatalf("%s after compact: %s", name, shape)
		}
		before := e.counters().filterProbes
		check("compacted")
		probes := e.counters().filterProbes - before
		// pebble-l6 probes the table's filter on every get; pebble on none.
		if want := int64(len(present) + len(absent)); name == "pebble" && probes != 0 || name == "pebble-l6" && probes != want {
			t.Errorf("%s: %d filter probes by %d gets of the last level", name, probes, want)
		}
		if err := e.close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPebbleL6Run: -engines bloomkv,pebble,pebble-l6 reports pebble-l6
// beside Pebble, with its configuration, its ratio column and its goal; on
// readmissing-compacted its gets probe the last level's filters, about one
// probe a get, where Pebble's probe none.
func TestPebbleL6Run(t *testing.T) {
	rep, out := runTiny(t, "-engines", "bloomkv,pebble,pebble-l6", "-workloads", "readrandom,readmissing-compacted")
	var got []string
	for _, r := range rep.Results {
		got = append(got, r.Workload+"/"+r.Engine)
	}
	var want []string
	for _, e := range []string{"bloomkv", "pebble", "pebble-l6"} {
		want = append(want, "readrandom/"+e, "readmissing-compacted/"+e)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("results %v, want %v", got, want)
	}
	var found, total int64
	if rr := findResult(rep, 0, "readrandom", "pebble-l6"); rr == nil {
		t.Fatal("no readrandom on pebble-l6")
	} else if _, err := fmt.Sscanf(rr.Note, "%d of %d found", &found, &total); err != nil || found != total || total == 0 {
		t.Errorf("readrandom on pebble-l6: note %q, %v", rr.Note, err)
	}
	// readmissing-compacted itself fails if a get finds an absent key.
	l6, p := findResult(rep, 0, "readmissing-compacted", "pebble-l6"), findResult(rep, 0, "readmissing-compacted", "pebble")
	if l6.FilterProbesPerOp == nil || *l6.FilterProbesPerOp < 0.95 || l6.FilterFPRate == nil || *l6.FilterFPRate > 0.05 {
		t.Errorf("readmissing-compacted on pebble-l6: filter probes/op %v, FP rate %v", l6.FilterProbesPerOp, l6.FilterFPRate)
	}
	if p.FilterProbesPerOp != nil {
		t.Errorf("readmissing-compacted on pebble: %v filter probes/op, want none (Get skips L6 filters)", *p.FilterProbesPerOp)
	}
	for _, ra := range rep.Ratios {
		b, l := findResult(rep, 0, ra.Workload, "bloomkv"), findResult(rep, 0, ra.Workload, "pebble-l6")
		if ra.VsPebbleL6 == nil || *ra.VsPebbleL6 != b.OpsPerSec/l.OpsPerSec || ra.VsPebble == nil {
			t.Errorf("%s: bloomkv/pebble-l6 %v, bloomkv/pebble %v", ra.Workload, ra.VsPebbleL6, ra.VsPebble)
		}
	}
	i := slices.IndexFunc(rep.Goals, func(g goal) bool { return g.Versus == "pebble-l6" })
	if i < 0 || rep.Goals[i].Workload != "readmissing-compacted" || rep.Goals[i].Target != 2 || rep.Goals[i].Got == nil {
		t.Errorf("goals %+v", rep.Goals)
	}
	for _, s := range []string{"bloomkv/pebble-l6", "readmissing-compacted ops/s vs pebble-l6", "UseL6Filters: true"} {
		if !strings.Contains(out, s) {
			t.Errorf("the output lacks %q:\n%s", s, out)
		}
	}
}

func TestFlagErrors(t *testing.T) {
	for _, args := range [][]string{
		{"-engines", "rocksdb"},
		{"-engines", "pebble-l7"},
		{"-workloads", "fillseq,nosuch"},
		{"-cache", "8 parsecs"},
		{"-cache", "-1"},
		{"-n", "1"},
		{"-duration", "0s"},
		{"-bits", "0"},
		{"-value-size", "0"},
		{"stray"},
		{"-nodiff-workloads", "nosuch"},
		{"-runs", "0"},
		{"-runs", "-2"},
	} {
		if _, err := parseFlags(args, io.Discard); err == nil {
			t.Errorf("parseFlags(%q) accepted bad flags", args)
		}
	}
	cfg, err := parseFlags([]string{"-cache", "64MiB", "-memtable", "512KiB", "-duration", "1s"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.cache != 64<<20 || cfg.memtable != 512<<10 || cfg.duration != time.Second || cfg.n != 500_000 || cfg.runs != 1 || len(cfg.engines) != 4 || !slices.Equal(cfg.workloads, defaultWorkloads()) ||
		!slices.Equal(cfg.nodiffOnly, nodiffDefault) {
		t.Errorf("parsed %+v", cfg)
	}
	// readbase-1pct brings the workload its goal compares it with.
	cfg, err = parseFlags([]string{"-workloads", "readbase-1pct,readrandom", "-nodiff-workloads", "readbase-1pct"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"readrandom", "readbase-1pct", "readbase-1pct-compacted"}; !slices.Equal(cfg.workloads, want) ||
		!slices.Equal(cfg.nodiffOnly, want[1:]) {
		t.Errorf("workloads %v and %v, want %v", cfg.workloads, cfg.nodiffOnly, want)
	}
}

// TestKeysAndDistributions checks the key stream's properties the
// workloads rely on (benchutil tests its Zipf).
func TestKeysAndDistributions(t *testing.T) {
	a, b := make([]byte, benchutil.KeyLen), make([]byte, benchutil.KeyLen)
	for i := uint64(0); i < 1000; i++ {
		if bytes.Compare(benchutil.MakeKey(a, presentID(i)), benchutil.MakeKey(b, absentID(i))) >= 0 ||
			bytes.Compare(benchutil.MakeKey(a, absentID(i)), benchutil.MakeKey(b, presentID(i+1))) >= 0 {
			t.Fatalf("absent key %d does not sort between loaded keys %d and %d", i, i, i+1)
		}
	}
	r := (&runner{cfg: &config{seed: 7}}).rng("x")
	for _, n := range []uint64{2, 3, 10, 1000, 65536} {
		p := newPermutation(n, r)
		seen := make([]bool, n)
		for i := range n {
			j := p.at(i)
			if j >= n || seen[j] {
				t.Fatalf("permutation of %d: %d -> %d repeats or is out of range", n, i, j)
			}
			seen[j] = true
		}
	}
}

// TestRuns: -runs 2 runs the comparison twice, the engines in the -engines
// order and then reversed, keeps every run's results and ratios in the JSON,
// and reports the median and range of each ratio.
func TestRuns(t *testing.T) {
	rep, out := runTiny(t, "-runs", "2", "-engines", "bloomkv,pebble", "-workloads", "fillrandom,readrandom")
	wantOrders := [][]string{{"bloomkv", "pebble"}, {"pebble", "bloomkv"}}
	if rep.Runs != 2 || !slices.EqualFunc(rep.Orders, wantOrders, slices.Equal) {
		t.Fatalf("runs %d, orders %v, want %v", rep.Runs, rep.Orders, wantOrders)
	}
	// The results come in the order they ran.
	var got []string
	for _, r := range rep.Results {
		got = append(got, fmt.Sprintf("%d/%s/%s", r.Run, r.Engine, r.Workload))
	}
	want := []string{"0/bloomkv/fillrandom", "0/bloomkv/readrandom", "0/pebble/fillrandom", "0/pebble/readrandom",
		"1/pebble/fillrandom", "1/pebble/readrandom", "1/bloomkv/fillrandom", "1/bloomkv/readrandom"}
	if !slices.Equal(got, want) {
		t.Fatalf("results %v, want %v", got, want)
	}
	if len(rep.Ratios) != 2 {
		t.Fatalf("ratios %+v", rep.Ratios)
	}
	for _, ra := range rep.Ratios {
		if len(ra.Runs) != 2 {
			t.Fatalf("%s: %d runs' ratios", ra.Workload, len(ra.Runs))
		}
		for i, m := range ra.measures() {
			med, lo, hi := *m[0], *m[1], *m[2]
			// bloomkv-nodiff, goleveldb, pebble-l6, badger, bbolt: not
			// run; the paired measurement only on readrandom, a diff
			// workload.
			if i == 0 || i == 2 || i >= 5 && i < 8 || i == 8 && ra.Workload != "readrandom" {
				if med != nil || lo != nil || hi != nil {
					t.Errorf("%s: ratio %d of an engine that did not run: %v %v %v", ra.Workload, i, med, lo, hi)
				}
				continue
			}
			a, b := *ra.Runs[0].measures()[i][0], *ra.Runs[1].measures()[i][0]
			if med == nil || lo == nil || hi == nil || a == nil || b == nil {
				t.Errorf("%s: ratio %d missing: %v %v %v, runs %v %v", ra.Workload, i, med, lo, hi, a, b)
				continue
			}
			if !(*lo <= *med && *med <= *hi) || *med != (*a+*b)/2 || *lo != min(*a, *b) || *hi != max(*a, *b) {
				t.Errorf("%s: ratio %d median %v in %v–%v, runs %v and %v", ra.Workload, i, *med, *lo, *hi, *a, *b)
			}
		}
		for run, rr := range ra.Runs {
			b, p := findResult(rep, run, ra.Workload, "bloomkv"), findResult(rep, run, ra.Workload, "pebble")
			if b == nil || p == nil || rr.VsPebble == nil || *rr.VsPebble != b.OpsPerSec/p.OpsPerSec {
				t.Errorf("%s run %d: bloomkv/pebble %v from %+v and %+v", ra.Workload, run, rr.VsPebble, b, p)
			}
		}
	}
	for _, g := range rep.Goals {
		if (g.Workload == "fillrandom" || g.Workload == "readrandom") && g.Versus == "pebble" {
			if g.Got == nil || g.GotMin == nil || g.GotMax == nil || *g.GotMin > *g.Got || *g.Got > *g.GotMax {
				t.Errorf("goal %s vs pebble: %v in %v–%v", g.Workload, g.Got, g.GotMin, g.GotMax)
			}
		}
	}
	for _, s := range []string{"2 runs, engine order alternating (run 1: bloomkv,pebble; run 2: pebble,bloomkv)\n",
		"run 2 of 2: pebble, bloomkv\n", "details of run 1 ", "median of 2 runs"} {
		if !strings.Contains(out, s) {
			t.Errorf("the output lacks %q:\n%s", s, out)
		}
	}
	if !regexp.MustCompile(`(?m)^ *readrandom .* \d+\.\d\d \(\d+\.\d\d–\d+\.\d\d\)  `).MatchString(out) ||
		!regexp.MustCompile(`(?m)^  readrandom ops/s vs pebble +>= 1\.20 +\d+\.\d\d \(\d+\.\d\d–\d+\.\d\d\) `).MatchString(out) {
		t.Errorf("no ratio with its range in the output:\n%s", out)
	}
}

func findResult(rep *report, run int, workload, engine string) *result {
	for i := range rep.Results {
		if r := &rep.Results[i]; r.Run == run && r.Workload == workload && r.Engine == engine {
			return r
		}
	}
	return nil
}

func TestMedianRange(t *testing.T) {
	p := func(vs ...float64) []*float64 {
		var out []*float64
		for _, v := range vs {
			out = append(out, ptr(v))
		}
		return out
	}
	for _, tc := range []struct {
		vals        []*float64
		med, lo, hi float64
	}{
		{p(3, 1, 2), 2, 1, 3},
		{p(4, 1, 3, 2), 2.5, 1, 4},
		{p(0.9), 0.9, 0.9, 0.9},
		{append(p(5, 1), nil, ptr(3), nil), 3, 1, 5},
		{append([]*float64{nil}, p(2, 1)...), 1.5, 1, 2},
	} {
		med, lo, hi := medianRange(tc.vals)
		if med == nil || lo == nil || hi == nil || *med != tc.med || *lo != tc.lo || *hi != tc.hi {
			t.Errorf("medianRange(%v) = %v %v %v, want %v %v %v", tc.vals, med, lo, hi, tc.med, tc.lo, tc.hi)
		}
	}
	for _, vals := range [][]*float64{nil, {nil, nil}} {
		if med, lo, hi := medianRange(vals); med != nil || lo != nil || hi != nil {
			t.Errorf("medianRange(%v) = %v %v %v, want nils", vals, med, lo, hi)
		}
	}
}

// TestSemijoinWorkload: -workloads semijoin joins every overlap with every
// strategy (the right number of matches, each checked by the run itself),
// estimates, diffs, and prints and records its goals.
func TestSemijoinWorkload(t *testing.T) {
	dir := t.TempDir()
	cfg, rep, text := runWorkloadJSON(t, dir, "-n", "5000", "-workloads", "semijoin")
	if !cfg.semijoin || len(cfg.workloads) != 0 {
		t.Fatalf("semijoin %v, workloads %v", cfg.semijoin, cfg.workloads)
	}
	sj := rep.Semijoin
	if sj == nil || sj.KeysA != 1000 || sj.KeysB != 10000 {
		t.Fatalf("semijoin report %+v", sj)
	}
	if len(sj.Joins) != len(semijoinTransports)*len(semijoinOverlaps)*len(semijoinStrategies) {
		t.Fatalf("%d joins, want %d", len(sj.Joins), len(semijoinTransports)*len(semijoinOverlaps)*len(semijoinStrategies))
	}
	for _, j := range sj.Joins {
		if want := int64(j.Overlap * float64(sj.KeysA)); j.Matches != want || j.BytesAToB <= 0 {
			t.Errorf("%+v: want %d matches", j, want)
		}
	}
	if len(sj.Estimates) != len(semijoinOverlaps) || sj.Diff == nil || sj.Diff.Differences != 1000 || len(sj.Goals) < 10 {
		t.Errorf("estimates %+v, diff %+v, %d goals", sj.Estimates, sj.Diff, len(sj.Goals))
	}
	if !slices.ContainsFunc(sj.Goals, func(g semijoinGoal) bool {
		return strings.HasPrefix(g.Name, "join time over HTTPS with a token / over HTTP") && g.Target == 1.30 && g.AtMost && g.Got > 0
	}) {
		t.Errorf("no goal of TLS's cost among %+v", sj.Goals)
	}
	for _, s := range []string{"semijoin: A 1,000 keys, B 10,000 keys", "auto: ", "semijoin goals:", "diff of 10,000 keys", "join time over HTTPS with a token"} {
		if !strings.Contains(text, s) {
			t.Errorf("output lacks %q:\n%s", s, text)
		}
	}
	if strings.Contains(text, "bloomkv/pebble") {
		t.Errorf("the engines' table printed with no engine workload:\n%s", text)
	}
	if entries, err := os.ReadDir(filepath.Join(dir, "stores")); err != nil || len(entries) != 0 {
		t.Errorf("stores left behind: %v %v", entries, err)
	}
}

// fixedReport is a report of two runs on bloomkv, Pebble and goleveldb
// with made-up results: ratios above and below 1, a Pebble throughput of 0
// (no ratio), a note with a table's separator in it, latencies and write
// amplifications that are not numbers, and finished as a run
// finishes, so its ratios and goals are computed.
func fixedReport(t *testing.T) *report {
	t.Helper()
	cfg := &config{n: 1000, valueSize: 100, engines: []string{"bloomkv", "pebble", "goleveldb"},
		workloads: []string{"fillrandom", "readrandom", "readmissing", "scan"}, cache: 8 << 20, memtable: 4 << 20, bits: 10,
		duration: 100 * time.Millisecond, seed: 1, runs: 2}
	rep := newReport(cfg, settings{cacheBytes: cfg.cache, memtableBytes: cfg.memtable, bitsPerKey: cfg.bits, blockSize: 4096})
	rep.Command = "go run ./bench -n 1000 -runs 2"
	rep.Date = "2024-05-06T07:08:09Z"
	rep.Commit = "0123456789ab-dirty"
	rep.Machine = machine{CPU: "Test CPU", CPUs: 2, MemoryBytes: 8 << 30, OS: "linux", Arch: "amd64", GoVersion: "go1.99"}
	ops := map[string][2]float64{ // workload/engine: ops/s in runs 0 and 1
		"fillrandom/bloomkv": {200, 300}, "fillrandom/pebble": {100, 100}, "fillrandom/goleveldb": {50, 100},
		"readrandom/bloomkv": {40, 60}, "readrandom/pebble": {100, 100}, "readrandom/goleveldb": {80, 80},
		"readmissing/bloomkv": {3000, 2800}, "readmissing/pebble": {100, 100}, "readmissing/goleveldb": {1000, 1000},
		"scan/bloomkv": {10, 10}, "scan/pebble": {0, 0}, "scan/goleveldb": {10, 20},
	}
	for run := range 2 {
		for _, w := range cfg.workloads {
			for _, e := range cfg.engines {
				res := result{Run: run, Workload: w, Engine: e, Ops: 1000, Seconds: 1, OpsPerSec: ops[w+"/"+e][run],
					P50Micros: ptr(1.5), P99Micros: ptr(9.25), BlockReadsPerOp: ptr(0.125), DiskBytes: 3 << 20, TableBytes: 2 << 20}
				if w == "fillrandom" {
					res.WriteAmp = ptr(1.75)
				}
				if w == "readmissing" && e == "bloomkv" {
					res.Note = "a | b"
				}
				if w == "readrandom" && e == "bloomkv" {
					res.Paired = &pairedResult{Ratio: []float64{0.98, 1.02}[run]}
				}
				if w == "scan" {
					res.P99Micros, res.WriteAmp = ptr(math.NaN()), ptr(math.Inf(1))
				}
				rep.Results = append(rep.Results, res)
			}
		}
	}
	rep.finish(3 * time.Second)
	return rep
}

// TestMarkdownReport: the Markdown report of a fixed run holds the run's
// provenance, settings, every table with rows as wide as their headers,
// the goals and the chart's link, and no text of a number that is not one.
func TestMarkdownReport(t *testing.T) {
	rep := fixedReport(t)
	md := rep.markdown("img/chart.png")
	if md != rep.markdown("img/chart.png") {
		t.Fatal("two renderings of one report differ")
	}
	for _, s := range []string{
		"# bloomkv benchmarks\n",
		"```\ngo run ./bench -n 1000 -runs 2\n```\n",
		"| date | 2024-05-06T07:08:09Z |\n", "| commit | 0123456789ab-dirty |\n", "| CPU | Test CPU |\n",
		"| cores (logical CPUs) | 2 |\n", "| memory | 8.0 GiB |\n", "| OS | linux/amd64 |\n", "| Go | go1.99 |\n",
		"| keys (-n) | 1,000 |\n", "| value size (-value-size) | 100 B, compressible to about half |\n", "| block cache (-cache) | 8.0 MiB |\n",
		"| memtable (-memtable) | 4.0 MiB |\n", "| Bloom filter bits per key, every level (-bits) | 10 |\n", "| sync every write (-sync) | false |\n",
		"| each timed workload, per engine (-duration) | 100ms |\n", "| runs (-runs) | 2 |\n",
		"| engines (-engines) | bloomkv, pebble, goleveldb |\n", "| workloads (-workloads) | fillrandom, readrandom, readmissing, scan |\n",
		"![bloomkv's throughput over the other engines, per workload](img/chart.png)\n",
		"| workload | bloomkv ops/s | pebble ops/s | goleveldb ops/s | bloomkv/nodiff | diff on/off paired | bloomkv/pebble | bloomkv/goleveldb |\n|---|--:|--:|--:|--:|--:|--:|--:|\n",
		"| fillrandom | 250 | 100 | 75 | - | - | 2.50 (2.00–3.00) | 3.50 (3.00–4.00) |\n",
		"| readrandom | 50 | 100 | 80 | - | 1.00 (0.98–1.02) | 0.50 (0.40–0.60) | 0.62 (0.50–0.75) |\n",
		"| scan | 10 | 0 | 15 | - | - | - | 0.75 (0.50–1.00) |\n",
		"| scan | pebble | 1.5 | - | 0.125 | - | - | 3.0 MiB | 2.0 MiB | - |  |\n",
		"| fillrandom | bloomkv | 1.5 | 9.2 | 0.125 | - | - | 3.0 MiB | 2.0 MiB | 1.75 |  |\n",
		`| readmissing | bloomkv | 1.5 | 9.2 | 0.125 | - | - | 3.0 MiB | 2.0 MiB | - | a \| b |` + "\n",
		"| goal | target | measured | result |\n",
		"| readmissing ops/s vs pebble | ≥ 2.00 | 29.00 (28.00–30.00) | met |\n",
		"| readrandom ops/s vs pebble | ≥ 1.20 | 0.50 (0.40–0.60) | not met |\n",
		"| scan ops/s vs pebble | ≥ 1.00 | - | not run |\n",
		"| compact disk vs pebble | ≤ 1.05 | - | not run |\n",
	} {
		if !strings.Contains(md, s) {
			t.Errorf("the report lacks %q:\n%s", s, md)
		}
	}
	if m := regexp.MustCompile(`(?i)nan|[+-]?inf\b`).FindString(md); m != "" {
		t.Errorf("the report holds %q:\n%s", m, md)
	}
	// Every row of a table has as many cells as its header.
	cells := func(line string) int { return strings.Count(strings.ReplaceAll(line, `\|`, ""), "|") - 1 }
	width := 0
	for _, line := range strings.Split(md, "\n") {
		switch {
		case !strings.HasPrefix(line, "|"):
			width = 0
		case width == 0:
			width = cells(line)
		case cells(line) != width:
			t.Errorf("row of %d cells in a table of %d: %q", cells(line), width, line)
		}
	}

	// The file: the chart's link is relative to the report's directory.
	dir := t.TempDir()
	for _, d := range []string{"docs", "img"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	rep.cfg.pngPath = filepath.Join(dir, "img", "chart.png")
	mdPath := filepath.Join(dir, "docs", "bench.md")
	if err := rep.writeMarkdown(mdPath); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(mdPath)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), "](../img/chart.png)\n") {
		t.Errorf("%s: no link to ../img/chart.png:\n%s", mdPath, data)
	}
	if entries, _ := os.ReadDir(filepath.Join(dir, "docs")); len(entries) != 1 {
		t.Errorf("left in docs: %v", entries)
	}
	// Without -png, no image.
	if md := rep.markdown(""); strings.Contains(md, "![") {
		t.Errorf("an image without a chart:\n%s", md)
	}
}

// TestReadmeHeadline: -readme replaces the lines between the markers, and
// nothing else, as often as it runs; a file without both markers, in
// order, once each, is refused and left as it was.
func TestReadmeHeadline(t *testing.T) {
	rep := fixedReport(t)
	dir := t.TempDir()
	rep.cfg.markdownPath = filepath.Join(dir, "docs", "benchmarks.md")
	readme := filepath.Join(dir, "README.md")
	before := "# title\n\nText before.\n" + headlineBegin + "\n"
	after := headlineEnd + "\n\nText after, <!-- bench:headline:begin --> inline is no marker.\n"
	if err := os.WriteFile(readme, []byte(before+"old headline\n| old | table |\n"+after), 0o600); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := rep.rewriteReadme(readme); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(readme)
		if err != nil {
			t.Fatal(err)
		}
		got := string(data)
		if !strings.HasPrefix(got, before) || !strings.HasSuffix(got, after) {
			t.Fatalf("outside the block changed:\n%s", got)
		}
		block := strings.TrimSuffix(strings.TrimPrefix(got, before), after)
		for _, s := range []string{
			"| workload | bloomkv / Pebble, ops/s | min–max over 2 runs | goal |\n",
			"| readmissing | 29.00 | 28.00–30.00 | ≥ 2.00, met |\n",
			"| readrandom | 0.50 | 0.40–0.60 | ≥ 1.20, not met |\n",
			"| fillrandom | 2.50 | 2.00–3.00 | ≥ 1.00, met |\n",
			"1,000 keys, medians of 2 runs; 2024-05-06 on Test CPU (2 cores, 8.0 GiB, linux/amd64, go1.99), commit `0123456789ab-dirty`.",
			"[benchmarks.md](docs/benchmarks.md)",
		} {
			if !strings.Contains(block, s) {
				t.Errorf("the block lacks %q:\n%s", s, block)
			}
		}
		if strings.Contains(block, "old") || strings.Contains(block, "| scan |") || strings.Contains(strings.ToLower(block), "nan") {
			t.Errorf("the block:\n%s", block)
		}
		if info, err := os.Stat(readme); err != nil || info.Mode().Perm() != 0o600 {
			t.Errorf("the file's mode: %v %v", info, err)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("left beside the README: %v", entries)
	}

	// Line endings: a CRLF file stays CRLF.
	crlf := []byte("a\r\n" + headlineBegin + "\r\nold\r\n" + headlineEnd + "\r\nz\r\n")
	out, err := replaceHeadline(crlf, "x\ny\n")
	if err != nil || string(out) != "a\r\n"+headlineBegin+"\r\nx\r\ny\r\n"+headlineEnd+"\r\nz\r\n" {
		t.Errorf("CRLF: %q %v", out, err)
	}

	for _, bad := range []string{
		"no markers\n",
		headlineBegin + "\nno end\n",
		"no begin\n" + headlineEnd + "\n",
		headlineEnd + "\n" + headlineBegin + "\n",
		headlineBegin + "\n" + headlineBegin + "\n" + headlineEnd + "\n",
		headlineBegin + "\n" + headlineEnd + "\n" + headlineEnd + "\n",
		"inline " + headlineBegin + " and " + headlineEnd + "\n",
	} {
		path := filepath.Join(dir, "bad.md")
		if err := os.WriteFile(path, []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		err := rep.rewriteReadme(path)
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "bench:headline:") {
			t.Errorf("%q: error %v", bad, err)
		}
		if data, _ := os.ReadFile(path); string(data) != bad {
			t.Errorf("%q rewritten to %q", bad, data)
		}
	}
}

// TestOutputFlags: -readme and -markdown are checked before the run: the
// README must hold the markers, the report's directory must exist.
func TestOutputFlags(t *testing.T) {
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "good.md"), filepath.Join(dir, "bad.md")
	if err := os.WriteFile(good, []byte("x\n"+headlineBegin+"\n"+headlineEnd+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string // in the error; "" for none
	}{
		{[]string{"-readme", good, "-markdown", filepath.Join(dir, "out.md")}, ""},
		{[]string{"-readme", bad}, bad + ": no line " + headlineBegin},
		{[]string{"-readme", filepath.Join(dir, "missing.md")}, "missing.md"},
		{[]string{"-markdown", filepath.Join(dir, "nodir", "out.md")}, "nodir"},
		{[]string{"-markdown", filepath.Join(good, "out.md")}, "not a directory"},
	} {
		cfg, err := parseFlags(tc.args, io.Discard)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("parseFlags(%q): %v", tc.args, err)
		case tc.want == "" && (cfg.readmePath != good || cfg.markdownPath != filepath.Join(dir, "out.md")):
			t.Errorf("parseFlags(%q): %+v", tc.args, cfg)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("parseFlags(%q): error %v, want one with %q", tc.args, err, tc.want)
		}
	}
}

// TestChartLogScale: the chart of ratios above and below 1, with ranges
// and an absent one, draws; the log axis's ticks are labelled at 1, 2 and
// 5 times the powers of ten, inside the axis.
func TestChartLogScale(t *testing.T) {
	rep := fixedReport(t)
	path := filepath.Join(t.TempDir(), "chart.png")
	if err := rep.writePNG(path); err != nil {
		t.Fatal(err)
	}
	if png, err := os.ReadFile(path); err != nil || !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) || len(png) < 1000 {
		t.Fatalf("%s: not a PNG (%d bytes, %v)", path, len(png), err)
	}
	var labels []string
	for _, tk := range (logTicks{}).Ticks(0.3, 40) {
		if tk.Value < 0.3 || tk.Value > 40 {
			t.Errorf("tick %v outside 0.3–40", tk.Value)
		}
		if tk.Label != "" {
			labels = append(labels, tk.Label)
		}
	}
	if want := []string{"0.5", "1", "2", "5", "10", "20"}; !slices.Equal(labels, want) {
		t.Errorf("labels %v, want %v", labels, want)
	}
}

// TestMarkdownAndReadmeRun: a run with -markdown and -readme writes both.
func TestMarkdownAndReadmeRun(t *testing.T) {
	dir := t.TempDir()
	md, readme := filepath.Join(dir, "bench.md"), filepath.Join(dir, "README.md")
	if err := os.WriteFile(readme, []byte(headlineBegin+"\n"+headlineEnd+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, out := runTiny(t, "-engines", "bloomkv,pebble", "-workloads", "readmissing", "-markdown", md, "-readme", readme)
	data, err := os.ReadFile(md)
	if err != nil || !strings.Contains(string(data), "| readmissing ops/s vs pebble | ≥ 2.00 | ") || !strings.Contains(out, "wrote "+md) {
		t.Errorf("%s: %v\n%s", md, err, data)
	}
	data, err = os.ReadFile(readme)
	if err != nil || !strings.Contains(string(data), "| readmissing | ") || !strings.Contains(string(data), "[bench.md](bench.md)") {
		t.Errorf("%s: %v\n%s", readme, err, data)
	}
}

// TestHeadlineTLSCost: the README's headline states the cost of TLS and a
// token to a semi-join when the semijoin workload ran, with its goal.
func TestHeadlineTLSCost(t *testing.T) {
	rep := fixedReport(t)
	if strings.Contains(rep.headline(""), "HTTPS") {
		t.Fatal("a headline without the semijoin workload mentions HTTPS")
	}
	rep.Semijoin = &semijoinReport{Goals: []semijoinGoal{{Name: tlsGoalName, Got: 1.07, Target: 1.30, AtMost: true, Met: true}}}
	want := "A semi-join over HTTPS with a bearer token took 1.07 × its time over plain HTTP (goal ≤ 1.30, met)."
	if got := rep.headline(""); !strings.Contains(got, want) {
		t.Fatalf("headline lacks %q:\n%s", want, got)
	}
}

// newWorkloads are the workloads that run only when named.
var newWorkloads = []string{"fillbatch-100", "fillbatch-1000", "overwritebatch-100", "overwritebatch-1000", "seekrandom-next10"}

// TestBadgerBboltRun: a tiny run with badger and bbolt and the batch and
// seek workloads completes; each engine finds every loaded key and no
// absent one, reports disk bytes (Badger's sparse files counted by their
// blocks), skips what it cannot run, and the ratios and goals against
// them are filled in.
func TestBadgerBboltRun(t *testing.T) {
	engines := []string{"bloomkv", "pebble", "goleveldb", "badger", "bbolt"}
	// Badger caps a transaction at 15% of the memtable: a batch of 1000
	// keys needs about 1 MiB.
	rep, out := runTiny(t, "-memtable", "1MiB", "-engines", strings.Join(engines, ","),
		"-workloads", strings.Join(newWorkloads, ",")+",readrandom,readmissing,scan,compact,readbase-1pct")
	var ran []string
	for _, ra := range rep.Ratios {
		ran = append(ran, ra.Workload)
	}
	for _, name := range ran {
		w, _ := workloadByName(name)
		for _, e := range engines {
			res := findResult(rep, 0, name, e)
			if !w.runsOn(e) {
				if res != nil {
					t.Errorf("%s ran on %s", name, e)
				}
				continue
			}
			if res == nil {
				t.Errorf("no result for %s on %s", name, e)
				continue
			}
			if res.Ops <= 0 || res.OpsPerSec <= 0 {
				t.Errorf("%s on %s: %d ops, %v/s", name, e, res.Ops, res.OpsPerSec)
			}
			if res.DiskBytes <= 0 || res.DiskBytes > 64<<20 {
				t.Errorf("%s on %s: %d bytes on disk", name, e, res.DiskBytes)
			}
			if strings.HasPrefix(name, "fillbatch") || strings.HasPrefix(name, "overwritebatch") {
				if res.Ops != int64(rep.Settings.Keys) || !strings.HasPrefix(res.Note, "batches of ") {
					t.Errorf("%s on %s: %d ops, note %q", name, e, res.Ops, res.Note)
				}
			}
			if name == "readrandom" {
				var found, total int64
				if _, err := fmt.Sscanf(res.Note, "%d of %d found", &found, &total); err != nil || found != total || total == 0 {
					t.Errorf("readrandom on %s: note %q", e, res.Note)
				}
			}
			if (e == "badger" || e == "bbolt") && w.writes && res.WriteAmp != nil {
				t.Errorf("%s on %s: write amp %v from an engine that does not count table bytes", name, e, *res.WriteAmp)
			}
		}
	}
	for _, w := range []string{"compact", "readbase-1pct", "readbase-1pct-compacted"} {
		if findResult(rep, 0, w, "bbolt") != nil || findResult(rep, 0, w, "badger") == nil {
			t.Errorf("%s: bbolt ran it or badger did not", w)
		}
	}
	for _, ra := range rep.Ratios {
		w, _ := workloadByName(ra.Workload)
		if ra.VsBadger == nil || (ra.VsBbolt == nil) == w.runsOn("bbolt") {
			t.Errorf("ratios of %s: badger %v, bbolt %v", ra.Workload, ra.VsBadger, ra.VsBbolt)
		}
	}
	for _, g := range rep.Goals {
		if slices.Contains(ran, g.Workload) && (g.Versus == "badger" || g.Versus == "bbolt") && g.Got == nil {
			t.Errorf("goal %s vs %s not measured", g.Workload, g.Versus)
		}
		if g.Workload == everyWorkload && g.Got == nil {
			t.Errorf("goal every workload vs %s not measured", g.Versus)
		}
	}
	for _, s := range []string{"bloomkv/badger", "bloomkv/bbolt", "badger v4.", "bbolt v1.", "-cache does not apply", "SyncWrites=false", "NoSync=true",
		"FreelistType=hashmap", "BloomFalsePositive=0.000977 (10 bits/key)", "every workload ops/s vs badger", "with a -cache that holds the data"} {
		if !strings.Contains(out, s) {
			t.Errorf("the output lacks %q:\n%s", s, out)
		}
	}
}

// TestEnginesAgree: every engine, given the same batches, sets and
// deletes, answers gets, seeks and scans alike: the same keys found, the
// same values in the same order.
func TestEnginesAgree(t *testing.T) {
	s := settings{cacheBytes: 1 << 20, memtableBytes: 1 << 20, bitsPerKey: 10, blockSize: 4096}
	key := func(id uint64) []byte { return benchutil.MakeKey(make([]byte, benchutil.KeyLen), id) }
	val := func(id, version uint64) []byte { return fmt.Appendf(nil, "value-%d-%d", id, version) }
	const n = 3000
	type answers struct {
		found []bool
		seeks [][]string
		scan  []string
	}
	var want *answers
	var wantEngine string
	for _, name := range engineNames {
		e, err := openEngine(name, filepath.Join(t.TempDir(), name), s)
		if err != nil {
			t.Fatal(err)
		}
		// Even ids, in batches of 100 and 1000; then a third of them
		// overwritten one by one, and a fifth deleted, with a flush and a
		// compaction between.
		for start, i := uint64(0), 0; start < n; i++ {
			size := []uint64{100, 1000}[i%2]
			var keys, vals [][]byte
			for id := start; id < start+size && id < n; id++ {
				keys, vals = append(keys, key(2*id)), append(vals, val(2*id, 0))
			}
			if err := e.apply(keys, vals); err != nil {
				t.Fatalf("%s: apply: %v", name, err)
			}
			start += size
		}
		if err := e.flush(); err != nil {
			t.Fatalf("%s: flush: %v", name, err)
		}
		for id := uint64(0); id < n; id += 3 {
			if err := e.set(key(2*id), val(2*id, 1)); err != nil {
				t.Fatalf("%s: set: %v", name, err)
			}
		}
		if err := e.compact(); err != nil {
			t.Fatalf("%s: compact: %v", name, err)
		}
		for id := uint64(0); id < n; id += 5 {
			if err := e.del(key(2 * id)); err != nil {
				t.Fatalf("%s: del: %v", name, err)
			}
		}
		got := &answers{}
		for id := uint64(0); id < 2*n+2; id++ {
			found, err := e.get(key(id))
			if err != nil {
				t.Fatalf("%s: get: %v", name, err)
			}
			got.found = append(got.found, found)
		}
		it, err := e.newIter()
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range []uint64{0, 1, 7, 1001, 2*n - 5, 2 * n} {
			var vals []string
			for ok, j := it.seekGE(key(id)), 0; ok && j <= 10; ok, j = it.next(), j+1 {
				vals = append(vals, string(it.value()))
			}
			got.seeks = append(got.seeks, vals)
		}
		for ok := it.first(); ok; ok = it.next() {
			got.scan = append(got.scan, string(it.value()))
		}
		if err := it.close(); err != nil {
			t.Fatal(err)
		}
		if err := e.close(); err != nil {
			t.Fatal(err)
		}
		live := n - (n+4)/5
		if len(got.scan) != live || len(slices.DeleteFunc(slices.Clone(got.found), func(f bool) bool { return !f })) != live {
			t.Errorf("%s: scan found %d keys, gets %d, want %d", name, len(got.scan), len(slices.DeleteFunc(slices.Clone(got.found), func(f bool) bool { return !f })), live)
		}
		if want == nil {
			want, wantEngine = got, name
			continue
		}
		if !slices.Equal(got.found, want.found) || !slices.Equal(got.scan, want.scan) ||
			!slices.EqualFunc(got.seeks, want.seeks, func(a, b []string) bool { return slices.Equal(a, b) }) {
			t.Errorf("%s answers unlike %s: seeks %v, want %v", name, wantEngine, got.seeks, want.seeks)
		}
	}
}

// TestNewEngineAndWorkloadFlags: badger, bbolt and the named workloads
// parse, stay out of the defaults, and the help says so.
func TestNewEngineAndWorkloadFlags(t *testing.T) {
	cfg, err := parseFlags([]string{"-engines", "bbolt,badger,bloomkv", "-workloads", "seekrandom-next10,fillbatch-1000,overwritebatch-100"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"bloomkv", "badger", "bbolt"}; !slices.Equal(cfg.engines, want) {
		t.Errorf("engines %v, want %v", cfg.engines, want)
	}
	if want := []string{"fillbatch-1000", "overwritebatch-100", "seekrandom-next10"}; !slices.Equal(cfg.workloads, want) {
		t.Errorf("workloads %v, want %v", cfg.workloads, want)
	}
	multi16 := func(w string) bool { return strings.HasPrefix(w, "multiget-") && strings.Contains(w, "-16") }
	if named := slices.DeleteFunc(namedWorkloads(), multi16); !slices.Equal(named, newWorkloads) {
		t.Errorf("named workloads but the multiget batches of 16 %v, want %v", named, newWorkloads)
	}
	if n := len(slices.DeleteFunc(namedWorkloads(), func(w string) bool { return !multi16(w) })); n != 9 {
		t.Errorf("%d multiget workloads of batches of 16 named, want 9", n)
	}
	cfg, err = parseFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range newWorkloads {
		if slices.Contains(cfg.workloads, w) {
			t.Errorf("%s in the default workloads", w)
		}
	}
	if slices.Contains(cfg.engines, "badger") || slices.Contains(cfg.engines, "bbolt") {
		t.Errorf("default engines %v", cfg.engines)
	}
	var help bytes.Buffer
	if _, err := parseFlags([]string{"-h"}, &help); err == nil {
		t.Fatal("-h parsed without flag.ErrHelp")
	}
	for _, s := range []string{"badger and bbolt run only when named", "fillbatch-100, fillbatch-1000, overwritebatch-100, overwritebatch-1000, multiget-present-16,", "seekrandom-next10 run only when named"} {
		if !strings.Contains(help.String(), s) {
			t.Errorf("the help lacks %q:\n%s", s, help.String())
		}
	}
}

// TestGoalsForCache checks that the goals against bbolt follow the cache:
// with a -cache that holds the data, point reads aim at 1.0 and seeks and
// scans at 0.8; with a smaller one, point reads aim at 0.8 and seeks and
// scans have none. The other goals are the same in both.
func TestGoalsForCache(t *testing.T) {
	holds := &config{n: 500_000, valueSize: 100, cache: 128 << 20}
	below := &config{n: 500_000, valueSize: 100, cache: 8 << 20}
	if !holds.cacheHoldsData() || below.cacheHoldsData() {
		t.Fatalf("cacheHoldsData: %v with 128 MiB, %v with 8 MiB, for 500k keys", holds.cacheHoldsData(), below.cacheHoldsData())
	}
	if got := goalsFor(holds); !slices.Equal(got, goals) {
		t.Errorf("with the cache holding the data: %+v, want every goal", got)
	}
	var others int
	for _, g := range goals {
		if g.Versus != "bbolt" {
			others++
		}
	}
	var bbolt []string
	for _, g := range goalsFor(below) {
		if g.Versus != "bbolt" {
			others--
			continue
		}
		if g.Target != 0.8 || g.Condition != cacheBelowData {
			t.Errorf("with a small cache: %+v", g)
		}
		bbolt = append(bbolt, g.Workload)
	}
	if want := []string{"readrandom", "readmissing", "readhot"}; !slices.Equal(bbolt, want) || others != 0 {
		t.Errorf("with a small cache: goals against bbolt on %v, want %v; %d other goals missing", bbolt, want, others)
	}
}

// TestPairedDiffColumn: bloomkv's diff workloads carry the paired
// measurement of its differential filter (the reads on and off on the same
// store): both sides ran, bloomkv's figure is the "on" side's, and the
// ratio shows in the JSON, in the table and the Markdown beside
// bloomkv/nodiff, and in its goal; other workloads and engines have none.
func TestPairedDiffColumn(t *testing.T) {
	rep, out := runTiny(t, "-engines", "bloomkv,bloomkv-nodiff", "-workloads", "readrandom,readmissing", "-nodiff-workloads", "all")
	for _, res := range rep.Results {
		paired := res.Workload == "readrandom" && res.Engine == "bloomkv"
		if (res.Paired != nil) != paired {
			t.Errorf("%s on %s: paired %+v", res.Workload, res.Engine, res.Paired)
		}
		if !paired {
			continue
		}
		p := res.Paired
		if p.OnOpsPerSec <= 0 || p.OffOpsPerSec <= 0 || math.Abs(p.Ratio-p.OnOpsPerSec/p.OffOpsPerSec) > 1e-9 ||
			math.Abs(res.OpsPerSec-p.OnOpsPerSec) > 1e-6*p.OnOpsPerSec || !strings.Contains(noteOf(&res), "paired") {
			t.Errorf("readrandom on bloomkv: ops/s %v, paired %+v, note %q", res.OpsPerSec, p, noteOf(&res))
		}
		if res.DiffFilter == nil || res.DiffFilter.Skips+res.DiffFilter.Maybes == 0 {
			t.Errorf("readrandom on bloomkv: the \"on\" side asked the filter nothing: %+v", res.DiffFilter)
		}
	}
	for _, ra := range rep.Ratios {
		if (ra.Paired != nil) != (ra.Workload == "readrandom") {
			t.Errorf("ratios of %s: paired %v", ra.Workload, ra.Paired)
		}
	}
	i := slices.IndexFunc(rep.Goals, func(g goal) bool { return g.Versus == pairedColumn })
	if i < 0 || rep.Goals[i].Got == nil || *rep.Goals[i].Got != *rep.Ratios[0].Paired || rep.Goals[i].Target != 0.97 {
		t.Errorf("paired goal in %+v (ratios %+v)", rep.Goals, rep.Ratios)
	}
	header := func(s string) string {
		for _, line := range strings.Split(s, "\n") {
			if strings.Contains(line, "bloomkv/nodiff") {
				return line
			}
		}
		return ""
	}
	text, md := header(out), header(rep.markdownWith(t))
	for _, h := range []string{text, md} {
		nodiff, paired := strings.Index(h, "bloomkv/nodiff"), strings.Index(h, "diff on/off paired")
		if paired < 0 || paired < nodiff || strings.Contains(h[nodiff+len("bloomkv/nodiff"):paired], "bloomkv/") {
			t.Errorf("the paired column is not beside bloomkv/nodiff: %q", h)
		}
	}
}

// markdownWith is the Markdown report of a report read back from JSON,
// with the run's settings restored.
func (r *report) markdownWith(t *testing.T) string {
	t.Helper()
	cfg, err := parseFlags([]string{"-engines", "bloomkv,bloomkv-nodiff", "-workloads", "readrandom,readmissing"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	r.cfg = cfg
	return r.markdown("")
}

// TestPairSides: the phases of the paired measurement go in pairs, the
// side to go first swapping every pair, so each side runs as often first
// as second.
func TestPairSides(t *testing.T) {
	var got []int
	for p := range int64(8) {
		got = append(got, sideOf(p))
	}
	if want := []int{0, 1, 1, 0, 0, 1, 1, 0}; !slices.Equal(got, want) {
		t.Errorf("sides %v, want %v", got, want)
	}
	if ph, side := pairPhaseOf(9*pairPhase+time.Microsecond, pairPhase); ph != 9 || side != sideOf(9) {
		t.Errorf("pairPhaseOf: phase %d side %d", ph, side)
	}
}

// TestTimeLoopPairedStall: a paired run whose first op outlasts the whole
// run (a machine too busy to schedule it) still runs an op on each side, so
// that the paired ratio has both.
func TestTimeLoopPairedStall(t *testing.T) {
	st := &store{e: switchOnly{}}
	p := newPairing(func() *store { return st })
	stalled := false
	op := func(*rand.Rand, []byte) error {
		if !stalled {
			stalled = true
			time.Sleep(50 * time.Millisecond)
		}
		return nil
	}
	m, err := timeLoop(time.Now(), 10*time.Millisecond, rand.New(rand.NewPCG(1, 2)), op, nil, p)
	if err != nil {
		t.Fatal(err)
	}
	if m.paired == nil || m.paired.ops[0] == 0 || m.paired.ops[1] == 0 || m.paired.result() == nil {
		t.Fatalf("paired count after a stall: %+v", m.paired)
	}
}

// switchOnly is an engine with a differential filter to switch and
// counters to read, and nothing else.
type switchOnly struct{ engine }

func (switchOnly) counters() counters   { return counters{} }
func (switchOnly) setDiffReads(on bool) {}
