package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRaftWorkload: -workloads raft at a tiny size runs alone, and its
// report, printed and in the JSON, has every row: each operation of each
// log store, the disk figures, both cluster stacks, Compare finding the
// differences, and every goal.
func TestRaftWorkload(t *testing.T) {
	dir := t.TempDir()
	cfg, rep, text := runWorkloadJSON(t, dir, "-n", "1000", "-duration", "100ms", "-workloads", "raft")
	if !cfg.raft || cfg.semijoin || len(cfg.workloads) != 0 {
		t.Fatalf("raft %v, semijoin %v, workloads %v", cfg.raft, cfg.semijoin, cfg.workloads)
	}
	r := rep.Raft
	if r == nil || r.Entries != 2000 || r.Keep != 200 || r.CompareKeys != 4000 {
		t.Fatalf("raft report %+v", r)
	}
	has := func(section, subject, measure string) {
		t.Helper()
		w := r.row(section, subject, measure)
		if w == nil || len(w.Values) != 1 || !(w.Values[0] > 0) {
			t.Errorf("row %s/%s/%s: %+v", section, subject, measure, w)
		}
	}
	for _, s := range raftStores {
		for _, op := range raftOps {
			if op == opReclaim {
				if r.row("log", s, op+" s") == nil {
					t.Errorf("no reclaim row for %s", s)
				}
				continue
			}
			has("log", s, op+" /s")
			has("log", s, op+" p99 µs")
		}
		has("disk", s, "after 2,000 entries")
		has("disk", s, "after truncation to 200")
		has("disk", s, "after truncation / live bytes")
	}
	for _, s := range raftStacks {
		for _, m := range []string{"writes/s", "write p99 ms", "linearizable reads/s", "read p99 ms"} {
			has("cluster", s, m)
		}
	}
	for _, m := range []string{"bytes shipped", "bytes of the keys", "shipped / keys", "seconds"} {
		has("compare", "bloomkv", m)
	}
	if w := r.row("compare", "bloomkv", "differences found"); w == nil || w.Values[0] != raftDiffs {
		t.Errorf("differences found: %+v", w)
	}
	for _, m := range []string{"snapshot and join s", "checkpoint and copy s"} {
		if w := r.row("catchup", "bloomkv", m); w == nil || len(w.Values) != 1 || w.Values[0] <= 0 {
			t.Errorf("catchup %s: %+v", m, w)
		}
	}
	if len(r.Goals) != 7 {
		t.Errorf("%d goals, want 7: %+v", len(r.Goals), r.Goals)
	}
	for _, op := range raftOps {
		if !strings.Contains(text, "\n"+op+" ") {
			t.Errorf("output lacks the %s rows", op)
		}
	}
	for _, s := range append([]string{"raft log stores: 2,000 entries", "raft cluster: 3 nodes", "consul-style ", "raft compare:", "raft catch-up:", "raft goals:",
		"disk           after truncation to 200"}, raftStores...) {
		if !strings.Contains(text, s) {
			t.Errorf("output lacks %q", s)
		}
	}
	for _, g := range r.Goals {
		if !strings.Contains(text, g.Name) {
			t.Errorf("output lacks the goal %q", g.Name)
		}
	}
	if strings.Count(text, " met\n")+strings.Count(text, " MISSED\n") != len(r.Goals) {
		t.Errorf("goals not each met or MISSED:\n%s", text)
	}
	if entries, err := os.ReadDir(filepath.Join(dir, "stores")); err != nil || len(entries) != 0 {
		t.Errorf("stores left behind: %v %v", entries, err)
	}
	if t.Failed() {
		t.Log(text)
	}
}

// TestRaftNamedOnly: the default run and -workloads all leave the raft
// workload out.
func TestRaftNamedOnly(t *testing.T) {
	for _, args := range [][]string{nil, {"-workloads", "all"}, {"-workloads", "semijoin,readrandom"}} {
		cfg, err := parseFlags(args, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.raft {
			t.Errorf("%v runs the raft workload", args)
		}
	}
}

// runWorkloadJSON runs the benchmark with args, its stores under dir and a
// JSON report, and returns the configuration, the report read back from
// the JSON, and the printed output.
func runWorkloadJSON(t *testing.T, dir string, args ...string) (*config, *report, string) {
	t.Helper()
	jsonPath := filepath.Join(dir, "out.json")
	cfg, err := parseFlags(append(args, "-dir", filepath.Join(dir, "stores"), "-json", jsonPath), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run(cfg, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var rep report
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	return cfg, &rep, out.String()
}
