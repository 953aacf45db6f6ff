package bloomkv

import (
	"bufio"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The child of TestProcessKill: this test binary, started with
// BLOOMKV_KILL_CHILD set to a store's directory, runs the mixed workload of
// its round until killed, printing "ack N" once its first N ops have
// returned.
const killChildEnv = "BLOOMKV_KILL_CHILD"

func TestMain(m *testing.M) {
	if dir := os.Getenv(killChildEnv); dir != "" {
		round, _ := strconv.Atoi(os.Getenv("BLOOMKV_KILL_ROUND"))
		killChild(dir, round)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

const killKeys = 60

func killPrefix(round int) string { return fmt.Sprintf("r%03d-", round) }

func killChild(dir string, round int) {
	d, err := Open(dir, &Options{MemTableSize: 64 << 10, Logger: quietLogger()})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child open:", err)
		os.Exit(2)
	}
	wl := newWorkload(uint64(round), killPrefix(round), killKeys)
	out := bufio.NewWriterSize(os.Stdout, 64)
	for i := 1; ; i++ {
		if err := wl.next().apply(d); err != nil {
			fmt.Fprintln(os.Stderr, "child write:", err)
			os.Exit(3)
		}
		fmt.Fprintf(out, "ack %d\n", i)
		out.Flush()
	}
}

// TestProcessKill SIGKILLs a child process running a mixed workload (Sync
// and NoSync batches of sets, deletes and range deletions; flushes and
// compactions) at random times, each round on its own keys of one store.
// After each kill the store must open, hold for the round's keys the
// operation log applied up to some point at or after the last
// Sync-acknowledged op, still hold what earlier rounds left, and pass Check.
func TestProcessKill(t *testing.T) {
	rounds := trials(8, 20, 200)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	left := map[int]map[string]string{} // round -> what it left
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	failures, acksTotal, idle := 0, 0, 0
	for round := range rounds {
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), killChildEnv+"="+dir, "BLOOMKV_KILL_ROUND="+strconv.Itoa(round))
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		acked := 0
		lines := make(chan int)
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				if n, err := strconv.Atoi(strings.TrimPrefix(sc.Text(), "ack ")); err == nil {
					lines <- n
				}
			}
			close(lines)
		}()
		deadline := time.After(time.Duration(20+r.IntN(300)) * time.Millisecond)
	wait:
		for {
			select {
			case n, ok := <-lines:
				if !ok {
					break wait
				}
				acked = n
			case <-deadline:
				cmd.Process.Signal(syscall.SIGKILL)
				deadline = nil
			}
		}
		cmd.Wait()
		if s := strings.TrimSpace(stderr.String()); s != "" {
			t.Fatalf("round %d: child failed: %s", round, s)
		}
		acksTotal += acked
		if acked == 0 {
			idle++
		}
		ops := mixedWorkload(uint64(round), killPrefix(round), killKeys, acked+1)
		lastSync := 0
		for i, o := range ops[:acked] {
			if o.sync {
				lastSync = i + 1
			}
		}

		fail := func(format string, args ...any) {
			t.Helper()
			failures++
			t.Errorf("round %d (%d ops acknowledged, last Sync op %d): "+format, append([]any{round, acked, lastSync}, args...)...)
		}
		d, err := Open(dir, &Options{Logger: quietLogger()})
		if err != nil {
			t.Fatalf("round %d: reopen after SIGKILL: %v", round, err)
		}
		for rr := 0; rr <= round; rr++ {
			got, err := readKeys(d, killPrefix(rr), killKeys)
			switch {
			case err != nil:
				fail("reading round %d's keys: %v", rr, err)
			case rr < round && !maps.Equal(got, left[rr]):
				fail("round %d's keys changed: %s", rr, diffSummary(got, left[rr]))
			case rr == round:
				if matchPrefix(got, ops, lastSync, acked+1) < 0 {
					fail("the store matches no prefix of the log from op %d to %d: against the acknowledged ops, %s",
						lastSync, acked+1, diffSummary(got, model(ops[:acked])))
				}
				left[rr] = got
			}
		}
		if _, err := d.Check(); err != nil {
			fail("Check: %v", err)
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
	}
	report(t, "kill", "%d SIGKILLs of a child process (%d ops acknowledged in all; %d kills before the first ack); %d failures",
		rounds, acksTotal, idle, failures)
}
