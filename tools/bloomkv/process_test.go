package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

// TestProcess runs the built command as a process: exit statuses and
// stderr as a shell user sees them.
func TestProcess(t *testing.T) {
	bin := buildTool(t)
	f := newFixture(t)
	truncated := filepath.Join(f.dir, "truncated.sst")
	data, _ := os.ReadFile(f.table)
	os.WriteFile(truncated, data[:len(data)/2], 0o644)
	for _, c := range []struct {
		args   []string
		code   int
		stdout string // a substring
		stderr string // a substring; "" means empty
	}{
		{[]string{"--help"}, 0, "sstable", ""},
		{[]string{"sstable", "check", "--help"}, 0, "false negatives", ""},
		{[]string{"sstable", "check", f.table}, 0, ": ok:", ""},
		{[]string{"sstable", "check", truncated}, 1, "", truncated},
		{[]string{"sstable", "properties", filepath.Join(f.dir, "nope.sst")}, 1, "", "no such file"},
		{[]string{"db", "get", f.db, "absent-key"}, 1, "", "not found"},
		{[]string{"db", "diff", f.db}, 0, "differential-file filter", ""},
		{[]string{"db", "diff", filepath.Join(f.dir, "no-store")}, 1, "", "no such file"},
		{[]string{"sstable", "frobnicate"}, 2, "", "unknown command"},
		{[]string{"sstable", "scan", "--count", "x", f.table}, 2, "", "invalid argument"},
		{[]string{"wal", "dump"}, 2, "", "accepts 1 arg"},
	} {
		cmd := exec.Command(bin, c.args...)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != c.code || !strings.Contains(out.String(), c.stdout) || (c.stderr == "") != (errOut.Len() == 0) || !strings.Contains(errOut.String(), c.stderr) {
			t.Errorf("%v: exit %d, stdout %.200q, stderr %q", c.args, code, out.String(), errOut.String())
		}
		if strings.Count(errOut.String(), "\n") > 1 || strings.Contains(errOut.String(), "goroutine ") {
			t.Errorf("%v: stderr is more than one line: %q", c.args, errOut.String())
		}
	}
}

// buildTool builds the command into a temporary directory and returns its
// path.
func buildTool(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "bloomkv")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// TestPebbleStoreInUse: the db commands refuse a Pebble store that a
// process (here the test's) holds open, by Pebble's lock, as they refuse a
// bloomkv store in use; once it is closed they read it.
func TestPebbleStoreInUse(t *testing.T) {
	bin := buildTool(t)
	dir := t.TempDir()
	d, err := pebble.Open(dir, &pebble.Options{Logger: quietLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Set([]byte("k"), []byte("v"), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (int, string, string) {
		cmd := exec.Command(bin, args...)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), out.String(), errOut.String()
		} else if err != nil {
			t.Fatal(err)
		}
		return 0, out.String(), errOut.String()
	}
	for _, args := range [][]string{{"db", "scan", dir}, {"db", "lsm", dir}, {"db", "check", dir}} {
		if code, _, stderr := run(args...); code != 1 || !strings.Contains(stderr, "in use by another process") {
			t.Errorf("%v on a store Pebble holds open: exit %d, stderr %q", args, code, stderr)
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if code, out, stderr := run("db", "scan", dir); code != 0 || !strings.Contains(out, `"k"`) {
		t.Errorf("db scan once Pebble closed it: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
}
