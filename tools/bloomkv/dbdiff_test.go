package main

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bloomkv/bloomkv"
)

// writeDiffStore writes a store of keys live keys compacted to the last
// level, then changes some of them above it: flushed overwrites (level 0)
// and overwrites left in the write-ahead log (the memtable when opened). It
// returns the directory and the keys changed.
func writeDiffStore(t *testing.T, keys int) (string, []string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "db")
	d, err := bloomkv.Open(dir, &bloomkv.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	key := func(i int) []byte { return fmt.Appendf(nil, "key%05d", i) }
	for i := range keys {
		if err := d.Set(key(i), fmt.Appendf(nil, "value-%d", i), bloomkv.NoSync); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Compact(nil, nil); err != nil {
		t.Fatal(err)
	}
	var changed []string
	for i := 0; i < keys; i += 17 {
		if err := d.Set(key(i), []byte("flushed overwrite"), bloomkv.NoSync); err != nil {
			t.Fatal(err)
		}
		changed = append(changed, string(key(i)))
	}
	if err := d.Flush(); err != nil {
		t.Fatal(err)
	}
	for i := 5; i < keys; i += 29 {
		if err := d.Set(key(i), []byte("overwrite in the log"), bloomkv.Sync); err != nil {
			t.Fatal(err)
		}
		changed = append(changed, string(key(i)))
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, changed
}

// TestDBDiff runs db diff on a store with versions above its base: every key
// of the base is probed, the changed ones are told from the unchanged
// exactly, none is missed, and the false-positive rate is the filter's.
func TestDBDiff(t *testing.T) {
	const keys = 600
	dir, changed := writeDiffStore(t, keys)

	out, errOut, code := runTool("--json", "db", "diff", dir)
	if code != 0 || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	if strings.Count(out, "\n") != 1 {
		t.Fatalf("want one JSON line, got %q", out)
	}
	var got dbDiffOut
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	distinct := map[string]bool{}
	for _, k := range changed {
		distinct[k] = true
	}
	switch {
	case got.Dir != dir:
		t.Errorf("dir %q, want %q", got.Dir, dir)
	case !got.On || got.BaseLevel != 6:
		t.Errorf("filter on %v, base level %d; want on, L6", got.On, got.BaseLevel)
	case got.BaseKeys != keys || got.Sampled:
		t.Errorf("probed %d keys of the base (sampled %v), want all %d", got.BaseKeys, got.Sampled, keys)
	case got.Changed != int64(len(distinct)) || got.Missed != 0:
		t.Errorf("%d changed keys, %d missed; want %d changed, none missed", got.Changed, got.Missed, len(distinct))
	case got.Unchanged != keys-int64(len(distinct)) || got.FalseMaybes > got.Unchanged:
		t.Errorf("%d unchanged keys, %d false maybes; want %d unchanged", got.Unchanged, got.FalseMaybes, keys-len(distinct))
	case got.FPRate > 0.05:
		t.Errorf("false-positive rate %.4f on keys of the base, over 5%% (the design rate at capacity is %.4f)", got.FPRate, got.DesignFPRate)
	case got.Versions < int64(len(distinct)) || got.Capacity <= 0 || got.FilterBytes <= 0 || got.MemTableBytes+int64(got.ImmutableMemTables) == 0:
		// The log's overwrites are in a memtable.
		t.Errorf("versions %d, capacity %d, filter bytes %d, memtables %d bytes + %d frozen", got.Versions, got.Capacity, got.FilterBytes,
			got.MemTableBytes, got.ImmutableMemTables)
	case got.Levels == nil:
		t.Errorf("levels absent: %s", out)
	}
	for _, l := range got.Levels {
		if l.Level >= got.BaseLevel || l.Tables <= 0 || l.Bytes == 0 {
			t.Errorf("level %+v listed above base level %d", l, got.BaseLevel)
		}
	}
	if !strings.Contains(out, `"fp_rate":`) || !strings.Contains(out, `"base_level":`) {
		t.Errorf("JSON lacks fields: %s", out)
	}

	text, errOut, code := runTool("db", "diff", dir)
	if code != 0 || errOut != "" {
		t.Fatalf("text: exit %d, stderr %q", code, errOut)
	}
	for _, want := range []string{
		dir + ": differential-file filter ",
		"\n  differential  ", " above the base (counted by the filter)\n",
		"\n    memtables   ",
		"\n  filter        capacity ", " at capacity, ", " expected at ",
		fmt.Sprintf("\n  measured      all %d keys of the base: %d changed since (a version above the base), 0 missed; %d unchanged, %d answered maybe: false-positive rate ",
			keys, got.Changed, got.Unchanged, got.FalseMaybes),
	} {
		if !strings.Contains(text, want) {
			t.Errorf("text output lacks %q:\n%s", want, text)
		}
	}

	out, errOut, code = runTool("--json", "db", "diff", "--sample", "25", dir)
	if code != 0 || errOut != "" {
		t.Fatalf("--sample: exit %d, stderr %q", code, errOut)
	}
	var sampled dbDiffOut
	if err := json.Unmarshal([]byte(out), &sampled); err != nil {
		t.Fatal(err)
	}
	if sampled.BaseKeys != 25 || !sampled.Sampled || sampled.Changed+sampled.Unchanged != 25 || sampled.Missed != 0 {
		t.Errorf("--sample 25: probed %d (sampled %v), %d changed, %d unchanged, %d missed", sampled.BaseKeys, sampled.Sampled,
			sampled.Changed, sampled.Unchanged, sampled.Missed)
	}
	// key00000 and key00017 are among the first 25 and were overwritten.
	if sampled.Changed < 2 {
		t.Errorf("--sample 25: %d changed, but key00000 and key00017 changed", sampled.Changed)
	}
	text, _, _ = runTool("db", "diff", "--sample", "25", dir)
	if !strings.Contains(text, "  measured      the first 25 keys of the base: ") {
		t.Errorf("--sample 25 text:\n%s", text)
	}
	// A sample larger than the store probes every key, and says so.
	out, _, _ = runTool("--json", "db", "diff", "--sample", "100000", dir)
	if err := json.Unmarshal([]byte(out), &sampled); err != nil || sampled.BaseKeys != keys || sampled.Sampled {
		t.Errorf("--sample 100000: %s %v", out, err)
	}

	// The store is only read.
	before := dirListing(t, dir)
	runTool("db", "diff", dir)
	if after := dirListing(t, dir); after != before {
		t.Errorf("db diff changed the store's files:\n%s\nthen\n%s", before, after)
	}
}

func dirListing(t *testing.T, dir string) string {
	t.Helper()
	names, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, n := range names {
		info, err := n.Info()
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s %d\n", n.Name(), info.Size())
	}
	return b.String()
}

// TestDBDiffBadInput: a missing store, a directory holding none, and a
// negative sample.
func TestDBDiffBadInput(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope")
	for _, js := range []bool{false, true} {
		args := []string{"db", "diff", missing}
		if js {
			args = append([]string{"--json"}, args...)
		}
		out, errOut, code := runTool(args...)
		if code != 1 || out != "" {
			t.Errorf("%v: exit %d, stdout %q", args, code, out)
		}
		expectOneLine(t, args, missing, errOut, code)
	}
	_, errOut, code := runTool("db", "diff", "--sample", "-1", t.TempDir())
	if code != 2 || !strings.Contains(errOut, "--sample -1 is negative") {
		t.Errorf("--sample -1: exit %d, stderr %q", code, errOut)
	}
}
