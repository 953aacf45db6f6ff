package bloomkv

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/bloomkv/bloomkv/internal/vfs"
)

// newTestLog opens a logFile on fs and returns it with a channel that
// receives what its onFail is given.
func newTestLog(t *testing.T, fs vfs.FS, name string) (*logFile, chan error) {
	t.Helper()
	f, err := fs.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	failed := make(chan error, 4)
	return newLogFile(f, name, 0, func(err error) { failed <- err }), failed
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
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, fs, "/000001.log"); !bytes.Equal(got, want) {
		t.Fatalf("the log holds %d bytes, want %d, or they differ", len(got), len(want))
	}
	select {
	case err := <-failed:
		t.Fatalf("onFail called: %v", err)
	default:
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
	for _, op := range []func() error{
		func() error { _, err := l.Write([]byte("x")); return err },
		l.Flush,
		l.Sync,
	} {
		if err := op(); !errors.Is(err, injected) {
			t.Fatalf("after the failure: %v", err)
		}
	}
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
