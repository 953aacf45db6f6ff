package sstable

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/cache"
	"github.com/bloomkv/bloomkv/vfs"
)

// fakeMapped is a table in memory offered both ways: as a ReaderAt, whose
// reads it counts once counting is on, and as mapped bytes, whose uses it
// counts.
type fakeMapped struct {
	data     []byte
	counting atomic.Bool
	reads    atomic.Int64
	uses     atomic.Int64 // under way
	closed   atomic.Bool
}

func (f *fakeMapped) ReadAt(p []byte, off int64) (int, error) {
	if f.counting.Load() {
		f.reads.Add(1)
	}
	return bytes.NewReader(f.data).ReadAt(p, off)
}

func (f *fakeMapped) MappedBytes() ([]byte, bool) {
	if f.closed.Load() {
		return nil, false
	}
	f.uses.Add(1)
	return f.data, true
}

func (f *fakeMapped) ReleaseMapped() { f.uses.Add(-1) }

// TestMappedBlocksReadInPlace checks that a reader of a mapped table decodes
// every block the cache lacks from the mapping, without a read, and that no
// block it returns (one stored uncompressed included) aliases the mapping:
// blocks still read right after the mapped bytes are overwritten.
func TestMappedBlocksReadInPlace(t *testing.T) {
	for _, uncompressed := range []bool{false, true} {
		t.Run(fmt.Sprintf("uncompressed=%v", uncompressed), func(t *testing.T) {
			var spec tableSpec
			for i := range 5000 {
				spec.entries = append(spec.entries, entry{base.MakeInternalKey([]byte(fmt.Sprintf("key%06d", i)), 1, base.KindSet), []byte(fmt.Sprintf("value%d", i))})
			}
			data := writeSpec(t, spec, WriterOptions{Compression: compressionIf(uncompressed)})
			fm := &fakeMapped{data: bytes.Clone(data)}
			c := cache.New(64<<20, cache.Options{})
			rd, err := NewReader(fm, int64(len(data)), ReaderOptions{Cache: c, FileNum: 1, FileName: "mapped.sst"})
			if err != nil {
				t.Fatal(err)
			}
			fm.counting.Store(true)
			check := func(when string) {
				t.Helper()
				for i := 0; i < 5000; i += 7 {
					k := fmt.Sprintf("key%06d", i)
					v, _, found, err := lookup(rd, []byte(k), base.SeqNumMax)
					if err != nil || !found || string(v) != fmt.Sprintf("value%d", i) {
						t.Fatalf("%s: lookup(%s) = %q, %v, %v", when, k, v, found, err)
					}
				}
				it := rd.NewIter()
				n := 0
				for ok := it.First(); ok; ok = it.Next() {
					if want := fmt.Sprintf("key%06d", n); string(it.Key().UserKey) != want {
						t.Fatalf("%s: iterator at %q, want %s", when, it.Key().UserKey, want)
					}
					n++
				}
				if err := it.Close(); err != nil || n != 5000 {
					t.Fatalf("%s: iterated %d keys, err %v", when, n, err)
				}
			}
			check("first reads")
			if n := fm.reads.Load(); n != 0 {
				t.Fatalf("%d reads of a mapped table's file after open, want 0", n)
			}
			if n := fm.uses.Load(); n != 0 {
				t.Fatalf("%d uses of the mapping left under way", n)
			}
			// The cache now holds every block: the mapping's bytes are
			// no longer the reader's to use.
			for i := range fm.data {
				fm.data[i] = 0xAA
			}
			check("mapping overwritten")
			// A closed mapping sends reads back to ReadAt.
			fm.data, fm.reads = data, atomic.Int64{}
			fm.closed.Store(true)
			c.EvictFile(1)
			check("mapping closed")
			if fm.reads.Load() == 0 {
				t.Fatal("no read of the file once its mapping was closed")
			}
		})
	}
}

// TestMappedTableCutShort checks that a table whose file is cut short while
// mapped (which makes the kernel fault a read past the new end) gives errors
// wrapping ErrCorruption, not a crash, for the blocks past the cut, and
// right values before it; and that a byte flipped in the file under the
// mapping is caught by the block's checksum.
func TestMappedTableCutShort(t *testing.T) {
	var spec tableSpec
	for i := range 40000 {
		spec.entries = append(spec.entries, entry{base.MakeInternalKey([]byte(fmt.Sprintf("key%06d", i)), 1, base.KindSet), bytes.Repeat([]byte{byte(i)}, 50)})
	}
	data := writeSpec(t, spec, WriterOptions{})
	path := filepath.Join(t.TempDir(), "cut.sst")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := vfs.Default.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	mf, ok := vfs.MapForReading(f, int64(len(data))).(*vfs.MappedFile)
	if !ok {
		if runtime.GOOS == "linux" {
			t.Fatal("MapForReading did not map a table on Linux")
		}
		t.Skip("this platform does not map files") // the fault path exists only where files are mapped
	}
	defer mf.Close()
	rd, err := NewReader(mf, int64(len(data)), ReaderOptions{FileName: path})
	if err != nil {
		t.Fatal(err)
	}
	// Flip a byte in the first data block, through the file.
	if err := writeAt(path, []byte{data[100] ^ 0x40}, 100); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := lookup(rd, []byte("key000000"), base.SeqNumMax); !errors.Is(err, base.ErrCorruption) {
		t.Fatalf("lookup in a block flipped under the mapping: %v, want ErrCorruption", err)
	}
	if err := writeAt(path, data[100:101], 100); err != nil {
		t.Fatal(err)
	}
	cut := len(data) / 2
	if err := os.Truncate(path, int64(cut)); err != nil {
		t.Fatal(err)
	}
	var good, faulted int
	for i := 0; i < 40000; i += 97 {
		k := fmt.Sprintf("key%06d", i)
		v, _, found, err := lookup(rd, []byte(k), base.SeqNumMax)
		switch {
		case err != nil:
			if !errors.Is(err, base.ErrCorruption) {
				t.Fatalf("lookup(%s) past the cut: %v, want ErrCorruption", k, err)
			}
			faulted++
		case !found || !bytes.Equal(v, bytes.Repeat([]byte{byte(i)}, 50)):
			t.Fatalf("lookup(%s) = %q, %v", k, v, found)
		default:
			good++
		}
	}
	if good == 0 || faulted == 0 {
		t.Fatalf("%d lookups right and %d refused, want some of each", good, faulted)
	}
}

func writeAt(path string, b []byte, off int64) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(b, off); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
