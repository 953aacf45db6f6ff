package vfs

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

func mappedFile(t *testing.T, data []byte) *MappedFile {
	t.Helper()
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Default.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	m, ok := MapForReading(f, int64(len(data))).(*MappedFile)
	if !ok {
		f.Close()
		if runtime.GOOS == "linux" {
			t.Fatal("MapForReading did not map a file on Linux")
		}
		t.Skip("this platform does not map files")
	}
	return m
}

// TestMapForReading checks the mapped bytes, that a use under way keeps them
// mapped past Close until it ends, that no use starts after Close, and that
// a second Close is an error.
func TestMapForReading(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789abcdef"), 1000)
	m := mappedFile(t, data)
	b, ok := m.MappedBytes()
	if !ok || !bytes.Equal(b, data) {
		t.Fatalf("MappedBytes = %d bytes, %v; want the file's %d", len(b), ok, len(data))
	}
	buf := make([]byte, 16)
	if _, err := m.ReadAt(buf, 16); err != nil || !bytes.Equal(buf, data[16:32]) {
		t.Fatalf("ReadAt = %q, %v", buf, err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if m.unmapped.Load() {
		t.Fatal("Close unmapped bytes a use still held")
	}
	if b[len(b)-1] != 'f' {
		t.Fatal("bytes held across Close changed")
	}
	if _, ok := m.MappedBytes(); ok {
		t.Fatal("MappedBytes after Close handed out the bytes")
	}
	m.ReleaseMapped()
	if !m.unmapped.Load() {
		t.Fatal("the last use ended after Close, but the bytes stay mapped")
	}
	if err := m.Close(); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("second Close: %v, want os.ErrClosed", err)
	}
	if _, err := m.ReadAt(buf, 0); err == nil {
		t.Fatal("ReadAt after Close succeeded")
	}
}

// TestMapForReadingUnmapsOnClose checks that Close with no use under way
// unmaps at once.
func TestMapForReadingUnmapsOnClose(t *testing.T) {
	m := mappedFile(t, []byte("some bytes"))
	if err := m.Close(); err != nil || !m.unmapped.Load() {
		t.Fatalf("Close = %v, unmapped %v", err, m.unmapped.Load())
	}
}

// TestMapForReadingLeavesOthers checks that files MapForReading cannot map
// come back as they are: another file system's, and empty ones.
func TestMapForReadingLeavesOthers(t *testing.T) {
	mem := NewMem()
	f, err := mem.Create("x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("abc")); err != nil {
		t.Fatal(err)
	}
	if g := MapForReading(f, 3); g != f {
		t.Fatalf("an in-memory file was wrapped: %T", g)
	}
	path := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	e, err := Default.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if g := MapForReading(e, 0); g != e {
		t.Fatalf("an empty file was wrapped: %T", g)
	}
}

// TestMapForReadingConcurrentClose races uses of the bytes against Close:
// every use that got the bytes reads them whole before the unmapping (the
// race detector and a fault would tell otherwise), and the bytes end
// unmapped.
func TestMapForReadingConcurrentClose(t *testing.T) {
	data := bytes.Repeat([]byte{7}, 1<<16)
	for range 20 {
		m := mappedFile(t, data)
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					b, ok := m.MappedBytes()
					if !ok {
						return
					}
					sum := 0
					for i := 0; i < len(b); i += 4096 {
						sum += int(b[i])
					}
					if m.unmapped.Load() || sum != 7*len(b)/4096 {
						t.Errorf("a use saw unmapped or wrong bytes (sum %d)", sum)
					}
					m.ReleaseMapped()
				}
			}()
		}
		runtime.Gosched()
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		if !m.unmapped.Load() {
			t.Fatal("bytes still mapped after Close and every use ended")
		}
	}
}
