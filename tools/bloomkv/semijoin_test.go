package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bloomkv/bloomkv"
	"github.com/bloomkv/bloomkv/semijoin"
)

// writeKV writes a store holding m in a new directory and returns it.
func writeKV(t testing.TB, m map[string]string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "db")
	d, err := bloomkv.Open(dir, &bloomkv.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	b := d.NewBatch()
	for k, v := range m {
		b.Set([]byte(k), []byte(v))
	}
	if err := d.Apply(b, bloomkv.Sync); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// serveDir serves a copy of the store in dir (the store itself is locked
// while open) with an httptest server and returns its URL.
func serveDir(t *testing.T, dir string) string {
	t.Helper()
	cp := filepath.Join(t.TempDir(), "served")
	copyDir(t, dir, cp)
	d, err := openDB(cp)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(semijoin.LocalHandler(d, nil))
	t.Cleanup(func() {
		srv.Close()
		d.Close()
	})
	return srv.URL
}

// twoStores are stores A and B: A holds user000..user099 with values a0..,
// B every third user from user000 to user297 with values b0.., and a key
// that needs escaping.
func twoStores(t testing.TB) (a, b string, ma, mb map[string]string) {
	ma, mb = map[string]string{"tab\tkey": "a\x00"}, map[string]string{"tab\tkey": "b\n"}
	for i := range 100 {
		ma[fmt.Sprintf("user%03d", i)] = fmt.Sprintf("a%d", i)
	}
	for i := 0; i < 300; i += 3 {
		mb[fmt.Sprintf("user%03d", i)] = fmt.Sprintf("b%d", i)
	}
	return writeKV(t, ma), writeKV(t, mb), ma, mb
}

// joinLines are the lines join prints for the matches of ma and mb in
// [start, end).
func joinLines(ma, mb map[string]string, start, end string, semi bool) []string {
	var out []string
	for _, k := range slices.Sorted(mapKeys(ma)) {
		vb, ok := mb[k]
		if !ok || k < start || (end != "" && k >= end) {
			continue
		}
		line := fmt.Sprintf("%q %q", k, ma[k])
		if !semi {
			line += fmt.Sprintf(" %q", vb)
		}
		out = append(out, line)
	}
	return out
}

func mapKeys(m map[string]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// recordLines splits join's or diff's stdout, the records alone, into
// lines (none for no output).
func recordLines(out string) []string {
	if out == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(out, "\n"), "\n")
}

// TestJoinCommand runs join with each strategy, as a join and a semi-join, over a
// range, with a limit, in text and JSON, with B local and served over HTTP:
// the matches are the model's, in key order, escaped, and the report
// follows.
func TestJoinCommand(t *testing.T) {
	a, b, ma, mb := twoStores(t)
	url := serveDir(t, b)
	want := joinLines(ma, mb, "", "", false)
	for _, bArg := range []string{b, url} {
		for _, s := range []string{"auto", "keys", "filter", "compressed", "two-way"} {
			out, report, code := runTool("join", "--strategy", s, a, bArg)
			if code != 0 || !strings.HasPrefix(report, "join of ") {
				t.Fatalf("%s %s: exit %d, stderr %q", s, bArg, code, report)
			}
			lines := recordLines(out)
			if !slices.Equal(lines, want) {
				t.Fatalf("%s %s: matches\n%s\nwant\n%s", s, bArg, strings.Join(lines, "\n"), strings.Join(want, "\n"))
			}
			for _, w := range []string{
				fmt.Sprintf("join of %s and %s: %d matches, strategy ", a, bArg, len(want)),
				"\n  A             101 keys, ", "\n  B             101 keys, ",
				"\n  moved         ", " bytes A to B, ", " bytes B to A\n",
				"\n  candidates    ", fmt.Sprintf(": %d matches, ", len(want)),
				"\n  expected      keys ",
			} {
				if !strings.Contains(report, w) {
					t.Errorf("%s %s: report lacks %q:\n%s", s, bArg, w, report)
				}
			}
			if s != "auto" && !strings.Contains(report, "strategy "+s+" (asked for)") {
				t.Errorf("%s: report:\n%s", s, report)
			}
		}
	}
	// A semi-join of a range.
	out, report, code := runTool("join", "--semi", "--start", "user010", "--end", "user040", a, url)
	lines := recordLines(out)
	if code != 0 || !slices.Equal(lines, joinLines(ma, mb, "user010", "user040", true)) || !strings.Contains(report, ": 10 matches") {
		t.Errorf("semi-join of a range: exit %d:\n%s", code, out)
	}
	// A limit: the report counts the matches printed.
	out, report, code = runTool("join", "--limit", "3", a, url)
	lines = recordLines(out)
	if code != 0 || !slices.Equal(lines, want[:3]) || !strings.Contains(report, "stopped       at --limit 3") ||
		!strings.Contains(report, ": 3 matches, strategy") {
		t.Errorf("--limit 3: exit %d:\n%s\nreport:\n%s", code, out, report)
	}
	out, report, code = runTool("--json", "join", "--limit", "2", a, url)
	var limited joinOut
	if err := json.Unmarshal([]byte(report), &limited); err != nil || code != 0 || len(recordLines(out)) != 2 || limited.Matches != 2 || !limited.Stopped {
		t.Errorf("--json --limit 2: exit %d, %d records, report %s (%v)", code, len(recordLines(out)), report, err)
	}
	// JSON: one object a match on stdout, the report on stderr.
	out, errOut, code := runTool("--json", "join", "--strategy", "filter", a, url)
	if code != 0 {
		t.Fatalf("--json: exit %d, %q", code, errOut)
	}
	jl := recordLines(out)
	if len(jl) != len(want) {
		t.Fatalf("--json: %d lines, want %d", len(jl), len(want))
	}
	var m matchOut
	if err := json.Unmarshal([]byte(jl[0]), &m); err != nil || m.Key != `tab\tkey` || m.A != `a\x00` || m.B == nil || *m.B != `b\n` {
		t.Errorf("first match %s: %+v %v", jl[0], m, err)
	}
	var rep joinOut
	if err := json.Unmarshal([]byte(errOut), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Strategy != "filter" || rep.Matches != int64(len(want)) || rep.Candidates != rep.Matches+rep.FalsePositives ||
		rep.A.Keys != 101 || rep.B.Keys != 101 || rep.BytesAToB == 0 || rep.FilterBytes == 0 || len(rep.Expected) != 4 {
		t.Errorf("report %s", errOut)
	}
}

// TestEstimateCommand: estimate's figures against the truth, local and remote,
// in text and JSON.
func TestEstimateCommand(t *testing.T) {
	ma, mb := map[string]string{}, map[string]string{}
	for i := range 4000 {
		ma[fmt.Sprintf("k%06d", i)] = ""
		mb[fmt.Sprintf("k%06d", i+3000)] = ""
	}
	a, b := writeKV(t, ma), writeKV(t, mb)
	url := serveDir(t, b)
	var outs []estimateOut
	for _, bArg := range []string{b, url} {
		out, errOut, code := runTool("--json", "estimate", "--bits-per-key", "12", a, bArg)
		if code != 0 || errOut != "" {
			t.Fatalf("exit %d, %q", code, errOut)
		}
		var e estimateOut
		if err := json.Unmarshal([]byte(out), &e); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		if e.A != 4000 || e.B != 4000 || e.Intersection < 1000-e.ErrorBound || e.Intersection > 1000+e.ErrorBound || e.ErrorBound > 100 ||
			e.BitsPerKey != 12 || e.FilterBytes == 0 || e.Passed < 1000 {
			t.Errorf("%s: %+v; the truth is 1000", bArg, e)
		}
		outs = append(outs, e)
	}
	if outs[0] != outs[1] {
		t.Errorf("local %+v, remote %+v", outs[0], outs[1])
	}
	text, _, code := runTool("estimate", a, url)
	for _, w := range []string{"estimate of the keys both " + a + " and " + url + " hold: ", " (three standard errors)\n",
		"\n  A             4000 keys\n", "\n  B             4000 keys, ", " passed A's filter\n", "\n  filter        ", " (16 bits a key), false-positive rate "} {
		if code != 0 || !strings.Contains(text, w) {
			t.Errorf("text lacks %q:\n%s", w, text)
		}
	}
	if _, errOut, code := runTool("estimate", "--bits-per-key", "0.5", a, b); code != 2 || !strings.Contains(errOut, "want 1 to 64") {
		t.Errorf("--bits-per-key 0.5: exit %d, %q", code, errOut)
	}
}

// TestDiffCommand: diff prints the differences in key order, escaped, and a
// report, local and remote, in text and JSON.
func TestDiffCommand(t *testing.T) {
	ma, mb := map[string]string{}, map[string]string{}
	for i := range 3000 {
		k, v := fmt.Sprintf("key%05d", i), fmt.Sprintf("value-%d", i)
		ma[k], mb[k] = v, v
	}
	delete(mb, "key00010")
	mb["key00020"] = "new\tvalue"
	mb["key99999"] = "only b"
	ma["key\x00a"] = "only a"
	a, b := writeKV(t, ma), writeKV(t, mb)
	url := serveDir(t, b)
	want := []string{ // in key order: "key\x00a" sorts first
		`only-a "key\x00a" "only a"`,
		`only-a "key00010" "value-10"`,
		`changed "key00020" "value-20" "new\tvalue"`,
		`only-b "key99999" "only b"`,
	}
	for _, bArg := range []string{b, url} {
		out, report, code := runTool("diff", "--seed", "7", a, bArg)
		if code != 0 || !strings.HasPrefix(report, "diff of ") {
			t.Fatalf("exit %d, %q", code, report)
		}
		lines := recordLines(out)
		if !slices.Equal(lines, want) {
			t.Errorf("%s: differences\n%s\nwant\n%s", bArg, strings.Join(lines, "\n"), strings.Join(want, "\n"))
		}
		for _, w := range []string{fmt.Sprintf("diff of %s and %s: 4 differences: 2 only in A, 1 only in B, 1 changed\n", a, bArg),
			"\n  A             3001 records sketched\n", "\n  symbols       ", "\n  moved         "} {
			if !strings.Contains(report, w) {
				t.Errorf("%s: report lacks %q:\n%s", bArg, w, report)
			}
		}
	}
	out, report, code := runTool("--json", "diff", a, url)
	jl := recordLines(out)
	if code != 0 || len(jl) != 4 {
		t.Fatalf("--json: exit %d:\n%s", code, out)
	}
	var d differenceOut
	if err := json.Unmarshal([]byte(jl[2]), &d); err != nil || d.Kind != "changed" || d.A == nil || d.B == nil || *d.B != `new\tvalue` {
		t.Errorf("third difference %s: %v", jl[2], err)
	}
	var rep diffOut
	if err := json.Unmarshal([]byte(report), &rep); err != nil || rep.Differences != 4 || rep.OnlyA != 2 || rep.Symbols == 0 || rep.Items != 3001 {
		t.Errorf("report %s: %v", report, err)
	}
	// The same store on both sides: no differences.
	out, report, code = runTool("diff", a, a)
	if code != 0 || out != "" || !strings.HasPrefix(report, "diff of "+a+" and "+a+": 0 differences") {
		t.Errorf("a store with itself: exit %d:\n%s%s", code, out, report)
	}
}

// TestSemiJoinBadInput: missing stores, unreachable servers, bad flags: a
// usage mistake exits 2, a store that can't be read 1, each with one line.
func TestSemiJoinBadInput(t *testing.T) {
	a, _, _, _ := twoStores(t)
	missing := filepath.Join(t.TempDir(), "nope")
	gone := httptest.NewServer(nil)
	gone.Close()
	// A server whose answers stop short: a frame header cut after 5 bytes.
	short := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-bloomkv-semijoin")
		w.Write([]byte{1, 2, 3, 4, 5})
	}))
	defer short.Close()
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"join", a, missing}, 1, missing},
		{[]string{"estimate", missing, a}, 1, missing},
		{[]string{"diff", a, gone.URL}, 1, "connection refused"},
		{[]string{"join", a, gone.URL + "/x"}, 1, "remote"},
		{[]string{"join", a, short.URL}, 1, "connection lost mid-stream"},
		{[]string{"diff", short.URL, a}, 1, "connection lost mid-stream"},
		{[]string{"join", a, "ftp://host/"}, 1, missing[:0]},
		{[]string{"join", "--strategy", "best", a, a}, 2, `unknown strategy "best"`},
		{[]string{"join", "--start", "b", "--end", "a", a, a}, 2, "is not before --end"},
		{[]string{"join", "--limit", "-1", a, a}, 2, "--limit -1 is negative"},
		{[]string{"diff", "--start", "hex:zz", a, a}, 2, "bad hex"},
		{[]string{"join", a}, 2, "accepts 2 arg"},
		{[]string{"serve", missing}, 1, missing},
		{[]string{"serve", "--writable", t.TempDir()}, 1, "holds no store"},
		{[]string{"serve", "--addr", "256.0.0.1:1", "--insecure", a}, 1, "256.0.0.1"},
	} {
		out, errOut, code := runTool(c.args...)
		if code != c.code || out != "" || strings.Count(errOut, "\n") != 1 || !strings.HasPrefix(errOut, "bloomkv: ") || !strings.Contains(errOut, c.msg) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit %d and one line naming %q", c.args, code, out, errOut, c.code, c.msg)
		}
	}
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var servingLine = regexp.MustCompile(`serving .* \(read-only\) at (http://\S+); stop with Ctrl-C\n`)

// TestServe runs serve in-process on a free port, joins and diffs against
// it, and stops it by cancelling its context: it exits 0 and says so, and
// leaves the store as it was.
func TestServe(t *testing.T) {
	a, b, ma, mb := twoStores(t)
	before := dirListing(t, b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut syncBuffer
	exit := make(chan int, 1)
	go func() { exit <- runContext(ctx, []string{"serve", "--addr", "127.0.0.1:0", b}, &out, &errOut) }()
	var url string
	for deadline := time.Now().Add(10 * time.Second); url == "" && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if m := servingLine.FindStringSubmatch(out.String()); m != nil {
			url = m[1]
		}
	}
	if url == "" {
		t.Fatalf("no serving line: stdout %q, stderr %q", out.String(), errOut.String())
	}
	got, _, code := runTool("join", "--strategy", "compressed", a, url)
	if lines := recordLines(got); code != 0 || !slices.Equal(lines, joinLines(ma, mb, "", "", false)) {
		t.Errorf("join against serve: exit %d:\n%s", code, got)
	}
	cp := filepath.Join(t.TempDir(), "copy")
	copyDir(t, b, cp)
	if got, rep, code := runTool("--json", "diff", cp, url); code != 0 || got != "" || !strings.Contains(rep, `"differences":0`) {
		t.Errorf("diff of the served store with itself: exit %d:\n%s", code, got)
	}
	cancel()
	select {
	case code := <-exit:
		if code != 0 || errOut.String() != "" || !strings.HasSuffix(out.String(), "stopped serving "+b+"\n") {
			t.Errorf("serve: exit %d, stdout %q, stderr %q", code, out.String(), errOut.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("serve did not stop")
	}
	if after := dirListing(t, b); after != before {
		t.Errorf("serve changed the store's files:\n%s\nthen\n%s", before, after)
	}
}

// TestProgressLine: the progress line appears after its delay, is redrawn,
// and is erased at the end.
func TestProgressLine(t *testing.T) {
	var buf syncBuffer
	n := 0
	stop := progressLine(&buf, func() string { n++; return fmt.Sprintf("join [###] %d", n) }, 0, 5*time.Millisecond)
	time.Sleep(30 * time.Millisecond)
	stop()
	s := buf.String()
	if !strings.HasPrefix(s, "\rjoin [###] 1  ") || !strings.Contains(s, "\rjoin [###] 2  ") || !strings.HasSuffix(s, "\r\x1b[K") {
		t.Errorf("progress output %q", s)
	}
	buf = syncBuffer{}
	stop = progressLine(&buf, func() string { return "x" }, time.Hour, time.Millisecond)
	stop()
	if buf.String() != "" {
		t.Errorf("work shorter than the delay drew %q", buf.String())
	}
	if got := bar(0.5); got != "[##########..........]  50%" {
		t.Errorf("bar(0.5) = %q", got)
	}
	// Not a terminal: nothing.
	e := &env{errOut: &buf}
	e.startProgress(func() string { return "x" })()
	if isTerminal(&buf) || buf.String() != "" {
		t.Errorf("progress on a buffer: %q", buf.String())
	}
}

// TestProcessServe runs serve as a process, as a shell user would: it
// prints its URL, answers a join from another process, and on SIGINT stops,
// says so and exits 0.
func TestProcessServe(t *testing.T) {
	bin := buildTool(t)
	a, b, ma, mb := twoStores(t)
	cmd := exec.Command(bin, "serve", "--addr", "127.0.0.1:0", b)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text() + "\n"
		}
	}()
	next := func() string {
		select {
		case l := <-lines:
			return l
		case <-time.After(20 * time.Second):
			t.Fatalf("serve printed nothing in 20 s; stderr %q", errOut.String())
		}
		return ""
	}
	m := servingLine.FindStringSubmatch(next())
	if m == nil {
		t.Fatalf("no serving line; stderr %q", errOut.String())
	}
	out, err := exec.Command(bin, "join", a, m[1]).Output()
	if got := recordLines(string(out)); err != nil || !slices.Equal(got, joinLines(ma, mb, "", "", false)) {
		t.Errorf("join against the served store: %v:\n%s", err, out)
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if l := next(); l != "stopped serving "+b+"\n" {
		t.Errorf("after SIGINT: %q", l)
	}
	if err := cmd.Wait(); err != nil || errOut.Len() != 0 {
		t.Errorf("serve: %v, stderr %q", err, errOut.String())
	}
}

// A store served --keys-only is side B only: join and diff given it as A
// fail, saying so, rather than print its values as empty and every shared
// key as changed.
func TestKeysOnlyStoreAsARefused(t *testing.T) {
	ma, mb := map[string]string{}, map[string]string{}
	for i := range 100 {
		ma[fmt.Sprintf("user%03d", i)] = fmt.Sprintf("v%d", i)
		mb[fmt.Sprintf("user%03d", i+50)] = fmt.Sprintf("v%d", i+50)
	}
	a, b := writeKV(t, ma), writeKV(t, mb)
	url, _ := startServe(t, "--addr", "127.0.0.1:0", "--keys-only", a)
	for _, cmd := range [][]string{{"diff", url, b}, {"join", url, b}, {"join", "--semi", url, b}} {
		out, stderr, code := runTool(cmd...)
		if code == 0 || !strings.Contains(stderr, "keys without values") {
			t.Errorf("%v: exit %d, stderr %q, out %.200q", cmd, code, stderr, out)
		}
	}
	if out, _, code := runTool("diff", b, url); code != 0 && code != 1 || !strings.Contains(out, "only-a") {
		t.Errorf("diff with the keys-only store as B: exit %d\n%.300s", code, out)
	}
}
