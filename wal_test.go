package bloomkv

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bloomkv/bloomkv/vfs"
)

// newTestLog opens a logFile on fs and returns it with a channel that
// receives what its onFail is given.
func newTestLog(t *testing.T, fs vfs.FS, name string) (*logFile, chan error) {
	t.Helper()
	return newTestLogDelay(t, fs, name, logWriteDelay)
}

// newTestLogDelay is newTestLog with the writer's delay given.
func newTestLogDelay(t *testing.T, fs vfs.FS, name string, delay time.Duration) (*logFile, chan error) {
	t.Helper()
	f, err := fs.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	failed := make(chan error, 4)
	return newLogFile(f, name, 0, delay, nil, func(err error) { failed <- err }, nil, nil, nil), failed
}

// TestLogFileKeepsOrder writes records of many sizes, some past
// logHelpBytes (which the caller writes itself) and some small (which the
// writer goroutine takes), with Flush and Sync between them, and checks
// the file holds them all in order.
func TestLogFileKeepsOrder(t *testing.T) {
	fs := vfs.NewMem()
	l, failed := newTestLog(t, fs, "/000001.log")
	rng := rand.New(rand.NewPCG(1, 1))
	var want []byte
	for i := range 2000 {
		n := rng.IntN(300)
		if i%100 == 99 {
			n = logHelpBytes + rng.IntN(logHelpBytes)
		}
		rec := make([]byte, n)
		for j := range rec {
			rec[j] = byte(i + j)
		}
		if _, err := l.Write(rec); err != nil {
			t.Fatal(err)
		}
		want = append(want, rec...)
		switch i % 97 {
		case 0:
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
		case 1:
			if err := l.Sync(); err != nil {
				t.Fatal(err)
			}
		}
	}
	closeAndCheckLog(t, l, fs, "/000001.log", want, failed)
}

// closeAndCheckLog closes l and checks that the file holds want and that
// onFail was not called.
func closeAndCheckLog(t *testing.T, l *logFile, fs vfs.FS, name string, want []byte, failed chan error) {
	t.Helper()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, fs, name); !bytes.Equal(got, want) {
		t.Fatalf("the log holds %d bytes, want %d, or they differ", len(got), len(want))
	}
	select {
	case err := <-failed:
		t.Fatalf("onFail called: %v", err)
	default:
	}
}

// waitForLog polls cond, under l.mu, until it holds; it fails the test with
// what after a minute (a bound on a hang, not a timing).
func waitForLog(t *testing.T, l *logFile, what func() string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		l.mu.Lock()
		ok := cond()
		l.mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(what())
		}
		time.Sleep(time.Millisecond)
	}
}

// TestLogFileWriteErrorByCaller: a write the caller makes itself (a queue
// past logHelpBytes) that fails returns the error, naming the file and
// offset; onFail is not called, since the caller reports it; every later
// Write, Flush and Sync returns it too.
func TestLogFileWriteErrorByCaller(t *testing.T) {
	efs := vfs.NewErrorFS(vfs.NewMem())
	l, failed := newTestLog(t, efs, "/000002.log")
	defer l.Close()
	if _, err := l.Write(make([]byte, 100)); err != nil {
		t.Fatal(err)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	injected := errors.New("EIO")
	efs.SetInjector(func(op vfs.Op, name string) error {
		if op == vfs.OpWrite {
			return injected
		}
		return nil
	})
	_, err := l.Write(make([]byte, logHelpBytes))
	if !errors.Is(err, injected) || !strings.Contains(err.Error(), "/000002.log") || !strings.Contains(err.Error(), "offset 100") {
		t.Fatalf("Write past logHelpBytes to a failing file: %v", err)
	}
	checkLogFailed(t, l, injected)
	select {
	case err := <-failed:
		t.Fatalf("onFail called for the caller's own write: %v", err)
	default:
	}
}

// TestLogFileWriteErrorByWriter: a failed write by the writer goroutine
// goes to onFail, and later calls return it.
func TestLogFileWriteErrorByWriter(t *testing.T) {
	injected := errors.New("EIO")
	efs := vfs.NewErrorFS(vfs.NewMem())
	efs.SetInjector(func(op vfs.Op, name string) error {
		if op == vfs.OpWrite {
			return injected
		}
		return nil
	})
	l, failed := newTestLog(t, efs, "/000003.log")
	defer l.Close()
	if _, err := l.Write([]byte("small")); err != nil {
		t.Fatalf("a small Write returns before the write: %v", err)
	}
	select {
	case err := <-failed:
		if !errors.Is(err, injected) || !strings.Contains(err.Error(), "/000003.log") {
			t.Fatalf("onFail got %v", err)
		}
	case <-time.After(time.Minute): // a bound on a hang, not a timing
		t.Fatal("the writer goroutine never reported its failed write")
	}
	if err := l.Flush(); !errors.Is(err, injected) {
		t.Fatalf("Flush after the writer failed: %v", err)
	}
}

// TestLogFileGathersRecords: records queued below logKickBytes wait for
// the writer's delay instead of waking it, a queue that reaches
// logKickBytes is written without waiting for the delay, and Close writes
// the rest, all in order.
func TestLogFileGathersRecords(t *testing.T) {
	var writes atomic.Int64
	efs := vfs.NewErrorFS(vfs.NewMem())
	efs.SetInjector(func(op vfs.Op, name string) error {
		if op == vfs.OpWrite {
			writes.Add(1)
		}
		return nil
	})
	l, failed := newTestLogDelay(t, efs, "/000004.log", time.Hour)
	// Until the writer waits: a Write before it runs could wake nothing.
	waitForLog(t, l, func() string { return "the writer never waits" }, func() bool { return l.waiting })
	var want []byte
	add := func(n int) {
		rec := bytes.Repeat([]byte{byte(len(want))}, n)
		if _, err := l.Write(rec); err != nil {
			t.Fatal(err)
		}
		want = append(want, rec...)
	}
	for range 100 {
		add(100)
	}
	l.mu.Lock()
	wakes := l.wakes
	l.mu.Unlock()
	if wakes != 0 {
		t.Fatalf("100 records of 100 bytes woke the writer %d times", wakes)
	}
	time.Sleep(50 * time.Millisecond) // time for a writer woken by a record to write
	if n := writes.Load(); n != 0 {
		t.Fatalf("%d writes of 100 records of 100 bytes: the writer wrote before its delay", n)
	}
	for len(want) < logKickBytes {
		add(1000)
	}
	waitForLog(t, l, func() string {
		return fmt.Sprintf("%d bytes queued, %d written: a queue of logKickBytes was not written", len(want), l.written)
	}, func() bool { return l.written >= logKickBytes })
	add(10)
	closeAndCheckLog(t, l, efs, "/000004.log", want, failed)
}

// TestLogFileWritesAfterDelay: a record is written by the writer goroutine
// with no later call, after its delay, both when the writer is parked (its
// last delay gathered nothing) and when a delay is running.
func TestLogFileWritesAfterDelay(t *testing.T) {
	fs := vfs.NewMem()
	l, failed := newTestLogDelay(t, fs, "/000005.log", 50*time.Millisecond)
	for i := range 3 {
		if i == 1 {
			// Parked: wait until a delay has gathered nothing.
			waitForLog(t, l, func() string { return "the writer never parks" }, func() bool { return l.parked })
		}
		if _, err := l.Write([]byte("record")); err != nil {
			t.Fatal(err)
		}
		waitForLog(t, l, func() string {
			return fmt.Sprintf("record %d: %d bytes written, want %d: the writer never wrote it", i, l.written, 6*(i+1))
		}, func() bool { return l.written == int64(6*(i+1)) })
	}
	closeAndCheckLog(t, l, fs, "/000005.log", []byte("recordrecordrecord"), failed)
}

// TestLogFileWakesAfterOthersWrite: a record queued, while the writer is
// parked, during a write the caller makes itself (a queue of logHelpBytes)
// wakes no one then; it is written once that write ends, with no later call.
func TestLogFileWakesAfterOthersWrite(t *testing.T) {
	writing, release := make(chan struct{}), make(chan struct{})
	var blocked atomic.Bool
	efs := vfs.NewErrorFS(vfs.NewMem())
	efs.SetInjector(func(op vfs.Op, name string) error {
		if op == vfs.OpWrite && blocked.CompareAndSwap(false, true) {
			close(writing)
			<-release
		}
		return nil
	})
	l, failed := newTestLogDelay(t, efs, "/000006.log", time.Millisecond)
	waitForLog(t, l, func() string { return "the writer never parks" }, func() bool { return l.parked })
	big := bytes.Repeat([]byte{1}, logHelpBytes)
	done := make(chan error)
	go func() {
		_, err := l.Write(big) // written by the caller, which the injector holds
		done <- err
	}()
	<-writing
	if _, err := l.Write([]byte("record")); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	waitForLog(t, l, func() string {
		return fmt.Sprintf("%d bytes written, want %d: the record queued during the write was never written", l.written, len(big)+6)
	}, func() bool { return l.written == int64(len(big)+6) })
	closeAndCheckLog(t, l, efs, "/000006.log", append(big, "record"...), failed)
}

// holdSync makes every sync of name on efs wait until the returned
// channel is closed, then fail with err (nil: succeed).
func holdSync(efs *vfs.ErrorFS, name string, err error) chan struct{} {
	release := make(chan struct{})
	efs.SetInjector(func(op vfs.Op, n string) error {
		if op == vfs.OpSync && n == name {
			<-release
			return err
		}
		return nil
	})
	return release
}

// newFollowingLog starts the log name following pred, with a directory
// sync that records its call in dirSynced.
func newFollowingLog(t *testing.T, fs vfs.FS, name string, pred *logFile, dirSynced *atomic.Bool) (*logFile, chan error) {
	t.Helper()
	f, err := fs.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	failed := make(chan error, 4)
	l := newLogFile(f, name, 0, logWriteDelay, nil, func(err error) { failed <- err }, pred, func() error {
		dirSynced.Store(true)
		return nil
	}, nil)
	return l, failed
}

// TestLogFileFollowsPred: a log that follows another takes records, past
// logHelpBytes too, without waiting while the other's sync is under way,
// and writes none of them to its file until that sync, the other's close
// and the directory's sync are done; then it writes them all, in order.
func TestLogFileFollowsPred(t *testing.T) {
	efs := vfs.NewErrorFS(vfs.NewMem())
	pred, predFailed := newTestLog(t, efs, "/000002.log")
	predWant := bytes.Repeat([]byte{2}, 100)
	if _, err := pred.Write(predWant); err != nil {
		t.Fatal(err)
	}
	if err := pred.Flush(); err != nil {
		t.Fatal(err)
	}
	release := holdSync(efs, "/000002.log", nil)
	var dirSynced atomic.Bool
	l, failed := newFollowingLog(t, efs, "/000003.log", pred, &dirSynced)
	var want []byte
	wrote := make(chan error, 1)
	go func() {
		for i := range 4 * logHelpBytes / 1000 {
			rec := bytes.Repeat([]byte{byte(i)}, 1000)
			want = append(want, rec...)
			if _, err := l.Write(rec); err != nil {
				wrote <- err
				return
			}
		}
		wrote <- nil
	}()
	select {
	case err := <-wrote:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Write waited for the sync of the log it follows")
	}
	l.mu.Lock()
	written := l.written
	l.mu.Unlock()
	if got := readFile(t, efs, "/000003.log"); len(got) != 0 || written != 0 || dirSynced.Load() {
		t.Fatalf("%d bytes reached the file (%d counted written), directory synced %v, before the log it follows was synced",
			len(got), written, dirSynced.Load())
	}
	close(release)
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if !dirSynced.Load() {
		t.Fatal("the log synced without the directory's sync")
	}
	select {
	case <-pred.done:
	default:
		t.Fatal("the log it follows is not closed")
	}
	if got := readFile(t, efs, "/000002.log"); !bytes.Equal(got, predWant) {
		t.Fatalf("the log followed holds %d bytes, want %d", len(got), len(predWant))
	}
	select {
	case err := <-predFailed:
		t.Fatalf("onFail of the log followed: %v", err)
	default:
	}
	closeAndCheckLog(t, l, efs, "/000003.log", want, failed)
}

// TestLogFileFollowsFailedPred: when the log followed fails its sync, the
// log that follows it writes nothing to its file, reports the error to
// onFail once, and returns it from every later Write, Flush and Sync.
func TestLogFileFollowsFailedPred(t *testing.T) {
	efs := vfs.NewErrorFS(vfs.NewMem())
	pred, _ := newTestLog(t, efs, "/000002.log")
	if _, err := pred.Write(make([]byte, 100)); err != nil {
		t.Fatal(err)
	}
	injected := errors.New("EIO")
	release := holdSync(efs, "/000002.log", injected)
	var dirSynced atomic.Bool
	l, failed := newFollowingLog(t, efs, "/000003.log", pred, &dirSynced)
	defer l.Close()
	if _, err := l.Write(make([]byte, 2*logHelpBytes)); err != nil {
		t.Fatal(err)
	}
	close(release)
	select {
	case err := <-failed:
		if !errors.Is(err, injected) {
			t.Fatalf("onFail got %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("onFail was not called")
	}
	checkLogFailed(t, l, injected)
	if got := readFile(t, efs, "/000003.log"); len(got) != 0 || dirSynced.Load() {
		t.Fatalf("%d bytes reached the file, directory synced %v, after the log followed failed", len(got), dirSynced.Load())
	}
	select {
	case err := <-failed:
		t.Fatalf("onFail called twice: %v", err)
	default:
	}
}

// checkLogFailed checks that Write, Flush and Sync of l return want, the
// error l failed with.
func checkLogFailed(t *testing.T, l *logFile, want error) {
	t.Helper()
	for _, op := range []func() error{
		func() error { _, err := l.Write([]byte("x")); return err },
		l.Flush,
		l.Sync,
	} {
		if err := op(); !errors.Is(err, want) {
			t.Fatalf("after the failure: %v", err)
		}
	}
}

// TestSealedLogTakesItsMarkWithoutRoom: a log that waits for the one it
// follows, its queue full, still takes the end mark once sealed (a later
// log replaced it): the rotation that writes the mark holds what the wait
// would need.
func TestSealedLogTakesItsMarkWithoutRoom(t *testing.T) {
	efs := vfs.NewErrorFS(vfs.NewMem())
	pred, _ := newTestLog(t, efs, "/000002.log")
	release := holdSync(efs, "/000002.log", nil)
	var dirSynced atomic.Bool
	l, failed := newFollowingLog(t, efs, "/000003.log", pred, &dirSynced)
	want := bytes.Repeat([]byte{7}, maxLogPending)
	if _, err := l.Write(want); err != nil { // the queue is full
		t.Fatal(err)
	}
	l.seal()
	wrote := make(chan error, 1)
	go func() {
		_, err := l.Write([]byte("mark"))
		wrote <- err
	}()
	select {
	case err := <-wrote:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		close(release)
		t.Fatal("a sealed log waited for room for its mark")
	}
	close(release)
	closeAndCheckLog(t, l, efs, "/000003.log", append(want, "mark"...), failed)
}

// TestLogBuffersPassToTheNextLog: a closed log gives its queue buffers to
// the logs opened after it, which then hold their records in the first
// log's memory, grown once; each log's file holds its records whole.
// logBuffers keeps no more than maxLogBuffers, and no buffer larger than a
// queue grows.
func TestLogBuffersPassToTheNextLog(t *testing.T) {
	fs := vfs.NewMem()
	var bufs logBuffers
	rec := bytes.Repeat([]byte("r"), 3*logHelpBytes)
	var caps []int
	for i := range 3 {
		name := fmt.Sprintf("/%06d.log", i+1)
		f, err := fs.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		failed := make(chan error, 4)
		l := newLogFile(f, name, 0, logWriteDelay, nil, func(err error) { failed <- err }, nil, nil, &bufs)
		l.mu.Lock()
		caps = append(caps, cap(l.pending))
		l.mu.Unlock()
		var want []byte
		for j := range 8 {
			r := rec[:len(rec)-j]
			if _, err := l.Write(r); err != nil {
				t.Fatal(err)
			}
			want = append(want, r...)
		}
		closeAndCheckLog(t, l, fs, name, want, failed)
	}
	if caps[0] != 0 || caps[1] < len(rec)/2 || caps[2] < len(rec)/2 {
		t.Errorf("queue capacities at open %v: want 0, then at least half a record (%d)", caps, len(rec)/2)
	}
	if n := len(bufs.free); n == 0 || n > maxLogBuffers {
		t.Errorf("%d buffers kept after three logs closed", n)
	}
	for range 2 * maxLogBuffers {
		bufs.put(make([]byte, 10))
	}
	bufs.put(make([]byte, maxLogBuffer+1))
	if n := len(bufs.free); n != maxLogBuffers {
		t.Errorf("%d buffers kept, want at most %d", n, maxLogBuffers)
	}
	for _, b := range bufs.free {
		if cap(b) > maxLogBuffer {
			t.Errorf("kept a buffer of %d bytes", cap(b))
		}
	}
}

// TestRotatedLogsReuseQueueBuffers: a store's logs, replaced as memtables
// fill, hand their queue buffers on (DB.logBufs) to the logs opened later.
func TestRotatedLogsReuseQueueBuffers(t *testing.T) {
	d, err := Open(t.TempDir(), &Options{Logger: quietLogger(), MemTableSize: 256 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	val := bytes.Repeat([]byte("v"), 1000)
	for i := range 2000 {
		if err := d.Set([]byte(fmt.Sprintf("key%06d", i)), val, NoSync); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Flush(); err != nil {
		t.Fatal(err)
	}
	d.logBufs.mu.Lock()
	reused := d.logBufs.reused
	d.logBufs.mu.Unlock()
	if reused == 0 {
		t.Error("after several logs replaced, no new log took a closed one's queue buffer")
	}
}
