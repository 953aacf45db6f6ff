package bloomkv

import (
	"bufio"
	"flag"
	"fmt"
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
// BLOOMKV_KILL_CHILD set, writes Sync keys into the store until killed,
// printing each acknowledged one.
const killChildEnv = "BLOOMKV_KILL_CHILD"

func TestMain(m *testing.M) {
	if dir := os.Getenv(killChildEnv); dir != "" {
		killChild(dir, os.Getenv("BLOOMKV_KILL_ROUND"))
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func killChild(dir, round string) {
	d, err := Open(dir, &Options{MemTableSize: 64 << 10, Logger: quietLogger()})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child open:", err)
		os.Exit(2)
	}
	for i := 0; ; i++ {
		k := fmt.Sprintf("r%s-%06d", round, i)
		b := d.NewBatch()
		b.Set([]byte(k), []byte(strings.Repeat(k, 20)))
		b.Set([]byte(k+"-pair"), []byte(k)) // a batch: both or neither
		if err := d.Apply(b, Sync); err != nil {
			fmt.Fprintln(os.Stderr, "child write:", err)
			os.Exit(3)
		}
		os.Stdout.WriteString("ack " + strconv.Itoa(i) + "\n")
	}
}

var killRounds = flag.Int("kill.rounds", 20, "SIGKILLs of the child in TestProcessKill")

// TestProcessKill SIGKILLs a child process writing with Sync, at random
// times, and checks after each restart that every write it acknowledged is
// in the store, and that its batches are whole.
func TestProcessKill(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	acked := map[int]int{} // round -> last acknowledged index
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	for round := range *killRounds {
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
		last := -1
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
		deadline := time.After(time.Duration(20+r.IntN(200)) * time.Millisecond)
	wait:
		for {
			select {
			case n, ok := <-lines:
				if !ok {
					break wait
				}
				last = n
			case <-deadline:
				cmd.Process.Signal(syscall.SIGKILL)
				deadline = nil
			}
		}
		cmd.Wait()
		if strings.TrimSpace(stderr.String()) != "" {
			t.Fatalf("round %d: child failed: %s", round, stderr.String())
		}
		acked[round] = last

		d, err := Open(dir, &Options{Logger: quietLogger()})
		if err != nil {
			t.Fatalf("round %d: reopen after SIGKILL: %v", round, err)
		}
		for rr := 0; rr <= round; rr++ {
			for i := 0; i <= acked[rr]; i++ {
				k := fmt.Sprintf("r%d-%06d", rr, i)
				v, err := d.Get([]byte(k))
				if err != nil || string(v) != strings.Repeat(k, 20) {
					t.Fatalf("round %d: acknowledged %s lost after SIGKILL: %v", round, k, err)
				}
			}
			// The write after the last acknowledged one may or may not be
			// there, but its batch is whole.
			k := fmt.Sprintf("r%d-%06d", rr, acked[rr]+1)
			_, err1 := d.Get([]byte(k))
			_, err2 := d.Get([]byte(k + "-pair"))
			if (err1 == nil) != (err2 == nil) {
				t.Fatalf("round %d: batch %s half applied", round, k)
			}
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
	}
	total := 0
	for _, n := range acked {
		total += n + 1
	}
	t.Logf("%d kills, %d acknowledged Sync writes checked", *killRounds, total)
}
