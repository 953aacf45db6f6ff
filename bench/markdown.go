package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/bloomkv/bloomkv/internal/humanize"
)

// The lines around the block -readme rewrites; they stay in the file.
const (
	headlineBegin = "<!-- bench:headline:begin -->"
	headlineEnd   = "<!-- bench:headline:end -->"
)

// headlineWorkloads are the workloads the README's headline shows, those
// that ran against Pebble, in this order: the reads the filters are for
// first, then the other reads, the writes and the YCSB mixes.
var headlineWorkloads = []string{"readmissing-compacted", "readmissing", "readrandom", "readhot", "seekrandom", "scan",
	"fillrandom", "ycsb-a", "ycsb-b", "ycsb-c"}

// writeMarkdown writes the Markdown report to path, linking the chart when
// -png wrote one.
func (r *report) writeMarkdown(path string) error {
	chart := ""
	if r.cfg.pngPath != "" {
		chart = relLink(path, r.cfg.pngPath)
	}
	if err := writeFileAtomic(path, []byte(r.markdown(chart))); err != nil {
		return fmt.Errorf("markdown: %w", err)
	}
	return nil
}

// markdown is the whole report as Markdown: how it was made, the machine,
// the settings, and every table the text report prints. chart, when not
// empty, is the chart's path relative to the Markdown file.
func (r *report) markdown(chart string) string {
	var b strings.Builder
	b.WriteString("# bloomkv benchmarks\n\n")
	b.WriteString("Written by the benchmark from the run below; nothing in it is edited by hand. To regenerate it, run from the repository's root:\n\n")
	fmt.Fprintf(&b, "```\n%s\n```\n\n", r.Command)
	b.WriteString("Ratios are bloomkv's figure over the other engine's, both from the same run; for throughput, above 1 means bloomkv is faster.")
	if r.Runs > 1 {
		fmt.Fprintf(&b, " The comparison ran %d times, the engine order reversed every other run: throughputs are medians, "+
			"ratios the median of each run's ratio with the min–max over the runs in brackets.", r.Runs)
	}
	b.WriteString("\n\n## Machine and run\n\n")
	mdHeader(&b, []string{"", "value"}, "left", "left")
	mdRow(&b, "date", r.Date)
	mdRow(&b, "commit", r.Commit)
	mdRow(&b, "CPU", r.Machine.CPU)
	mdRow(&b, "cores (logical CPUs)", strconv.Itoa(r.Machine.CPUs))
	mdRow(&b, "memory", memoryString(r.Machine.MemoryBytes))
	mdRow(&b, "OS", r.Machine.OS+"/"+r.Machine.Arch)
	mdRow(&b, "Go", r.Machine.GoVersion)
	mdRow(&b, "total time", fmt.Sprintf("%.0f s", r.Seconds))

	st := r.Settings
	b.WriteString("\n## Settings\n\nThe same for every engine, each in a fresh directory.\n\n")
	mdHeader(&b, []string{"setting", "value"}, "left", "left")
	mdRow(&b, "keys (-n)", commas(float64(st.Keys)))
	mdRow(&b, "key size", fmt.Sprintf("%d B", st.KeySize))
	mdRow(&b, "value size (-value-size)", fmt.Sprintf("%d B, compressible to about half", st.ValueSize))
	mdRow(&b, "block cache (-cache)", humanize.Bytes(uint64(st.CacheBytes)))
	mdRow(&b, "memtable (-memtable)", humanize.Bytes(uint64(st.MemtableBytes)))
	mdRow(&b, "Bloom filter bits per key, every level (-bits)", strconv.Itoa(st.BitsPerKey))
	mdRow(&b, "sync every write (-sync)", strconv.FormatBool(st.Sync))
	mdRow(&b, "each timed workload, per engine (-duration)", st.Duration)
	mdRow(&b, "runs (-runs)", strconv.Itoa(r.Runs))
	mdRow(&b, "seed (-seed)", strconv.FormatUint(st.Seed, 10))
	mdRow(&b, "engines (-engines)", strings.Join(r.cfg.engines, ", "))
	wls := slices.Clone(r.cfg.workloads)
	if r.cfg.semijoin {
		wls = append(wls, "semijoin")
	}
	mdRow(&b, "workloads (-workloads)", strings.Join(wls, ", "))
	if r.NodiffWorkloads != nil {
		mdRow(&b, "bloomkv-nodiff reports (-nodiff-workloads)", strings.Join(r.NodiffWorkloads, ", "))
	}
	mdRow(&b, "block size, compression", fmt.Sprintf("%d B, %s", st.BlockSize, st.Compression))

	b.WriteString("\n### Engines\n\n")
	for _, e := range r.cfg.engines {
		fmt.Fprintf(&b, "- %s\n", mdEscape(r.Engines[e]))
	}
	if r.NodiffWorkloads != nil {
		b.WriteString("\nbloomkv-nodiff reports only the workloads listed above; it also runs, unreported, the steps before them that change the store they read.\n")
	}
	if len(r.cfg.workloads) > 0 {
		b.WriteString("\n### Workloads\n\n")
		mdHeader(&b, []string{"workload", "what it does"}, "left", "left")
		for _, w := range r.cfg.workloads {
			mdRow(&b, w, r.Workloads[w])
		}
		r.markdownTables(&b, chart)
	}
	if r.Semijoin != nil {
		r.Semijoin.markdown(&b)
	}
	if r.Raft != nil {
		// The raft tables as the text report prints them: their columns
		// are per store and per stack, not per engine.
		fmt.Fprintf(&b, "\n## Raft\n\n```\n%s```\n", strings.TrimLeft(r.Raft.table(), "\n"))
	}
	return b.String()
}

// markdownTables writes the throughput, details and goals tables, as the
// text report prints them, and the chart's link.
func (r *report) markdownTables(b *strings.Builder, chart string) {
	b.WriteString("\n## Throughput\n\n")
	if chart != "" {
		fmt.Fprintf(b, "![bloomkv's throughput over the other engines, per workload](%s)\n\n", chart)
	}
	head, align := []string{"workload"}, []string{"left"}
	for _, e := range r.cfg.engines {
		head, align = append(head, e+" ops/s"), append(align, "right")
	}
	cols := r.ratioColumns()
	for _, e := range cols {
		head, align = append(head, ratioHeader(e)), append(align, "right")
	}
	mdHeader(b, head, align...)
	for i, w := range r.cfg.workloads {
		row := []string{w}
		for _, e := range r.cfg.engines {
			row = append(row, fmtOps(r.medianOpsPerSec(w, e)))
		}
		for _, e := range cols {
			row = append(row, r.fmtVersus(r.Ratios[i], e))
		}
		mdRow(b, row...)
	}

	b.WriteString("\n## Details\n\n")
	if r.Runs > 1 {
		fmt.Fprintf(b, "Run 1's (engine order %s); the JSON report (-json) holds every run's.\n\n", strings.Join(r.Orders[0], ", "))
	}
	mdHeader(b, []string{"workload", "engine", "p50 µs", "p99 µs", "block reads/op", "filter probes/op", "filter FP", "on disk", "tables", "write amp", "note"},
		"left", "left", "right", "right", "right", "right", "right", "right", "right", "right", "left")
	for _, w := range r.cfg.workloads {
		for _, e := range r.cfg.engines {
			res := r.resultIn(0, w, e)
			if res == nil {
				continue
			}
			mdRow(b, w, e, fmtFloat(res.P50Micros, "%.1f"), fmtFloat(res.P99Micros, "%.1f"),
				fmtFloat(res.BlockReadsPerOp, "%.3f"), fmtFloat(res.FilterProbesPerOp, "%.2f"),
				fmtPercent(res.FilterFPRate), humanize.Bytes(uint64(res.DiskBytes)), humanize.Bytes(uint64(res.TableBytes)),
				fmtFloat(res.WriteAmp, "%.2f"), noteOf(res))
		}
	}

	b.WriteString("\n## Goals\n\nbloomkv over the other engine, in the same run")
	if r.Runs > 1 {
		fmt.Fprintf(b, "; median of %d runs, min–max in brackets", r.Runs)
	}
	b.WriteString(".\n\n")
	mdHeader(b, []string{"goal", "target", "measured", "result"}, "left", "right", "right", "left")
	for _, g := range r.Goals {
		mdRow(b, goalName(g), goalTarget(g.Target, g.AtMost), r.fmtRange(g.Got, g.GotMin, g.GotMax), goalState(g))
	}
}

// goalName names a goal as the text report does: workload, measure, the
// engine (and workload) it is compared with, and its condition.
func goalName(g goal) string {
	versus := g.Versus
	if g.VersusWorkload != "" {
		versus = g.VersusWorkload + " (" + g.Versus + ")"
	}
	name := fmt.Sprintf("%s %s vs %s", g.Workload, g.Measure, versus)
	if g.Condition != "" {
		name += ", " + g.Condition
	}
	return name
}

func goalTarget(target float64, atMost bool) string {
	if atMost {
		return fmt.Sprintf("≤ %.2f", target)
	}
	return fmt.Sprintf("≥ %.2f", target)
}

func goalState(g goal) string {
	switch {
	case !finite(g.Got):
		return "not run"
	case g.Met:
		return "met"
	default:
		return "not met"
	}
}

// markdown writes the semi-join tables, as the text report prints them.
func (s *semijoinReport) markdown(b *strings.Builder) {
	fmt.Fprintf(b, "\n## Semi-join\n\nA %s keys, B %s keys; in one process (bytes as they would cross), and with B served over loopback HTTP and over loopback HTTPS with a token (bytes on the connection).\n\n",
		commas(float64(s.KeysA)), commas(float64(s.KeysB)))
	mdHeader(b, []string{"overlap", "transport", "strategy", "A→B", "B→A", "filter", "filter FP", "false positives", "matches", "keys joined/s (A+B)"},
		"right", "left", "left", "right", "right", "right", "right", "right", "right", "right")
	for _, j := range s.Joins {
		st := j.Strategy
		if st == "auto" {
			st = "auto: " + j.Chosen
		}
		mdRow(b, fmt.Sprintf("%.0f%%", j.Overlap*100), j.Transport, st, humanize.Bytes(uint64(j.BytesAToB)), humanize.Bytes(uint64(j.BytesBToA)),
			humanize.Bytes(uint64(j.FilterBytes)), fmtFloat(&j.FilterFPRate, "%.5f"), strconv.FormatInt(j.FalsePositives, 10),
			strconv.FormatInt(j.Matches, 10), fmtOps(&j.KeysPerSec))
	}
	b.WriteString("\n")
	for _, e := range s.Estimates {
		fmt.Fprintf(b, "- estimate at %.0f%%: %s ± %s (true %d, %s%%), %s sent\n", e.Overlap*100, fmtFloat(&e.Estimate, "%.0f"),
			fmtFloat(&e.ErrorBound, "%.0f"), e.True, fmtFloat(ptr(e.RelError*100), "%+.2f"), humanize.Bytes(uint64(e.Bytes)))
	}
	fmt.Fprintf(b, "- B's scan %s keys/s; B probing A's filter %s keys/s\n", fmtOps(&s.ScanKeysPerS), fmtOps(&s.ProbeKeysPer))
	if d := s.Diff; d != nil {
		fmt.Fprintf(b, "- diff of %s keys: %d differences in %d symbols (%s), %s in all, %s s\n", commas(float64(d.Keys)), d.Differences, d.Symbols,
			humanize.Bytes(uint64(d.SymbolBytes)), humanize.Bytes(uint64(d.TotalBytes)), fmtFloat(&d.Seconds, "%.2f"))
	}
	b.WriteString("\n### Semi-join goals\n\n")
	mdHeader(b, []string{"goal", "target", "measured", "result"}, "left", "right", "right", "left")
	for _, g := range s.Goals {
		state := "not met"
		if g.Met {
			state = "met"
		}
		mdRow(b, g.Name, goalTarget(g.Target, g.AtMost), fmtFloat(&g.Got, "%.3f"), state)
	}
}

// headline is the README's block: bloomkv over Pebble on the most telling
// workloads that ran, and where and when they ran. report, when not empty,
// is the Markdown report's path relative to the README.
func (r *report) headline(report string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "<!-- written by %s; edits here are lost -->\n\n", strings.ReplaceAll(r.Command, "--", "- -"))
	head, align := []string{"workload", "bloomkv / Pebble, ops/s"}, []string{"left", "right"}
	if r.Runs > 1 {
		head, align = append(head, fmt.Sprintf("min–max over %d runs", r.Runs)), append(align, "right")
	}
	head, align = append(head, "goal"), append(align, "left")
	var rows [][]string
	for _, w := range headlineWorkloads {
		i := slices.Index(r.cfg.workloads, w)
		if i < 0 || i >= len(r.Ratios) || !finite(r.Ratios[i].VsPebble) {
			continue
		}
		ra := r.Ratios[i]
		row := []string{w, fmtRatio(ra.VsPebble)}
		if r.Runs > 1 {
			row = append(row, fmtRatio(ra.VsPebbleMin)+"–"+fmtRatio(ra.VsPebbleMax))
		}
		goalCell := ""
		for _, g := range r.Goals {
			if g.Workload == w && g.Versus == "pebble" && g.Measure == "ops/s" && g.VersusWorkload == "" {
				goalCell = goalTarget(g.Target, g.AtMost) + ", " + goalState(g)
			}
		}
		rows = append(rows, append(row, goalCell))
	}
	if len(rows) == 0 {
		b.WriteString("No workload ran on both bloomkv and Pebble in this run.\n")
	} else {
		mdHeader(&b, head, align...)
		for _, row := range rows {
			mdRow(&b, row...)
		}
	}
	if r.Semijoin != nil {
		for _, g := range r.Semijoin.Goals {
			if g.Name == tlsGoalName && !math.IsNaN(g.Got) && !math.IsInf(g.Got, 0) {
				state := "met"
				if !g.Met {
					state = "not met"
				}
				fmt.Fprintf(&b, "\nA semi-join over HTTPS with a bearer token took %.2f × its time over plain HTTP (goal %s, %s).\n", g.Got, goalTarget(g.Target, g.AtMost), state)
			}
		}
	}
	date, _, _ := strings.Cut(r.Date, "T")
	fmt.Fprintf(&b, "\n%s keys, %s; %s on %s (%d cores, %s, %s/%s, %s), commit `%s`.",
		commas(float64(r.Settings.Keys)), runsString(r.Runs), date, mdEscape(r.Machine.CPU), r.Machine.CPUs,
		memoryString(r.Machine.MemoryBytes), r.Machine.OS, r.Machine.Arch, r.Machine.GoVersion, r.Commit)
	if report != "" {
		fmt.Fprintf(&b, " Every workload, engine and goal: [%s](%s).", mdEscape(filepath.Base(report)), report)
	}
	b.WriteString("\n")
	return b.String()
}

func runsString(runs int) string {
	if runs == 1 {
		return "1 run"
	}
	return fmt.Sprintf("medians of %d runs", runs)
}

// rewriteReadme replaces the lines between the headline markers of the
// file at path with the headline, keeping the markers and everything
// outside them.
func (r *report) rewriteReadme(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("readme: %w", err)
	}
	mdLink := ""
	if r.cfg.markdownPath != "" {
		mdLink = relLink(path, r.cfg.markdownPath)
	}
	out, err := replaceHeadline(data, r.headline(mdLink))
	if err != nil {
		return fmt.Errorf("readme %s: %w", path, err)
	}
	if err := writeFileAtomic(path, out); err != nil {
		return fmt.Errorf("readme: %w", err)
	}
	return nil
}

// replaceHeadline returns data with the lines between its headline markers
// replaced by block, written with the file's line endings.
func replaceHeadline(data []byte, block string) ([]byte, error) {
	start, end, err := headlineBlock(data)
	if err != nil {
		return nil, err
	}
	if start >= 2 && data[start-2] == '\r' {
		block = strings.ReplaceAll(block, "\n", "\r\n")
	}
	out := make([]byte, 0, len(data)+len(block))
	out = append(out, data[:start]...)
	out = append(out, block...)
	return append(out, data[end:]...), nil
}

// headlineBlock finds the lines between the headline markers, each alone
// on its line: start is the offset just past the begin marker's line, end
// that of the end marker's line.
func headlineBlock(data []byte) (start, end int, err error) {
	start, end = -1, -1
	for off := 0; off < len(data); {
		line, next := data[off:], len(data)
		if i := bytes.IndexByte(line, '\n'); i >= 0 {
			line, next = line[:i], off+i+1
		}
		switch string(bytes.TrimSpace(line)) {
		case headlineBegin:
			if start >= 0 {
				return 0, 0, fmt.Errorf("%s appears twice", headlineBegin)
			}
			start = next
		case headlineEnd:
			switch {
			case end >= 0:
				return 0, 0, fmt.Errorf("%s appears twice", headlineEnd)
			case start < 0:
				return 0, 0, fmt.Errorf("%s comes before %s", headlineEnd, headlineBegin)
			}
			end = off
		}
		off = next
	}
	switch {
	case start < 0:
		return 0, 0, fmt.Errorf("no line %s (the headline block is marked by a line %s and a line %s)", headlineBegin, headlineBegin, headlineEnd)
	case end < 0:
		return 0, 0, fmt.Errorf("no line %s after %s", headlineEnd, headlineBegin)
	}
	return start, end, nil
}

// writeFileAtomic replaces the file at path with data, through a
// temporary file in the same directory renamed over it, so that a reader
// sees the old file or the new one, never a part. An existing file keeps
// its permissions.
func writeFileAtomic(path string, data []byte) (err error) {
	mode := fs.FileMode(0o644)
	if info, err := os.Stat(path); err == nil {
		mode = info.Mode().Perm()
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(f.Name())
		}
	}()
	if _, err = f.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = f.Chmod(mode); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// checkDir checks that the directory a file is to be written in exists.
func checkDir(path string) error {
	dir := filepath.Dir(path)
	info, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("directory of %s: %w", path, err)
	}
	if !info.IsDir() {
		return fmt.Errorf("directory of %s: %s is not a directory", path, dir)
	}
	return nil
}

// relLink is the path of target relative to the directory of the file
// from, with forward slashes, as a Markdown link in from reaches it.
func relLink(from, target string) string {
	link := filepath.ToSlash(target)
	if dir, err := filepath.Abs(filepath.Dir(from)); err == nil {
		if abs, err := filepath.Abs(target); err == nil {
			if rel, err := filepath.Rel(dir, abs); err == nil {
				link = filepath.ToSlash(rel)
			}
		}
	}
	if strings.ContainsAny(link, " ()<>") {
		link = "<" + link + ">"
	}
	return link
}

// sourceCommit names the source revision: the one the binary was built
// from, when the build recorded it, else the working directory's Git HEAD,
// else "unknown". "-dirty" marks a tree whose tracked files had changes.
func sourceCommit() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		rev, modified := "", false
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
		if rev != "" {
			rev = rev[:min(len(rev), 12)]
			if modified {
				rev += "-dirty"
			}
			return rev
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "git", "rev-parse", "--short=12", "HEAD").Output()
	rev := strings.TrimSpace(string(out))
	if err != nil || rev == "" {
		return "unknown"
	}
	if status, err := exec.CommandContext(ctx, "git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(bytes.TrimSpace(status)) > 0 {
		rev += "-dirty"
	}
	return rev
}

// memTotal is the machine's memory in bytes, where the system says; 0
// when it does not.
func memTotal() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || k != "MemTotal" {
			continue
		}
		fields := strings.Fields(v)
		if len(fields) != 2 || fields[1] != "kB" {
			return 0
		}
		kb, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil || kb <= 0 {
			return 0
		}
		return kb << 10
	}
	return 0
}

func memoryString(bytes int64) string {
	if bytes <= 0 {
		return "unknown memory"
	}
	return humanize.Bytes(uint64(bytes))
}

// fmtOps formats a throughput with thousands separators; "-" when absent
// or not finite.
func fmtOps(f *float64) string {
	if !finite(f) {
		return "-"
	}
	return commas(*f)
}

// mdHeader writes a table's header row and its alignment row ("left" or
// "right" per column).
func mdHeader(b *strings.Builder, cells []string, align ...string) {
	mdRow(b, cells...)
	b.WriteString("|")
	for i := range cells {
		if i < len(align) && align[i] == "right" {
			b.WriteString("--:|")
		} else {
			b.WriteString("---|")
		}
	}
	b.WriteString("\n")
}

// mdRow writes a table row, each cell escaped.
func mdRow(b *strings.Builder, cells ...string) {
	b.WriteString("|")
	for _, c := range cells {
		b.WriteString(" " + mdEscape(c) + " |")
	}
	b.WriteString("\n")
}

// mdEscaper keeps text from breaking a table row or reading as HTML.
var mdEscaper = strings.NewReplacer("|", `\|`, "\r", "", "\n", " ", "<", "&lt;", ">", "&gt;")

func mdEscape(s string) string { return mdEscaper.Replace(s) }
