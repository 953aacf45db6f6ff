package bloomkv

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bloomkv/bloomkv/sstable"
	"github.com/bloomkv/bloomkv/vfs"
)

// lockedBuffer is a bytes.Buffer safe for a logger's goroutines and the
// test's reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestIngestLoadsFiltersLater: Ingest returns before it reads the filters
// of the tables it keeps. Gets are right meanwhile; once a filter is read
// it rules out absent keys. A table whose filter block is damaged goes in,
// is read without a filter, and the damage is logged.
func TestIngestLoadsFiltersLater(t *testing.T) {
	for _, damaged := range []bool{false, true} {
		t.Run(fmt.Sprintf("damaged=%v", damaged), func(t *testing.T) {
			mem := vfs.NewMem()
			o := memOpts(mem)
			var logs lockedBuffer
			o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			d := mustOpen(t, "/db", o)
			defer d.Close()
			// The even keys of 0 to 4,000; the odd ones are absent.
			var entries []ingestEntry
			want := map[string]string{}
			for i := 0; i < 4000; i += 2 {
				k, v := string(diffKey(i)), fmt.Sprint("ing-", i)
				entries = append(entries, ingestEntry{key: k, value: v})
				want[k] = v
			}
			writeIngestTable(t, mem, "/in/t.sst", entries)
			if damaged {
				damageFilterBlock(t, mem, "/in/t.sst")
			}
			if err := d.Ingest([]string{"/in/t.sst"}); err != nil {
				t.Fatalf("Ingest: %v", err)
			}
			check := func(when string) {
				t.Helper()
				for i := range 4000 {
					v, err := d.Get(diffKey(i))
					switch {
					case i%2 == 0 && (err != nil || string(v) != want[string(diffKey(i))]):
						t.Fatalf("%s: Get(%s) = %q, %v", when, diffKey(i), v, err)
					case i%2 == 1 && !errors.Is(err, ErrNotFound):
						t.Fatalf("%s: Get(%s) of an absent key = %q, %v", when, diffKey(i), v, err)
					}
				}
			}
			check("right after Ingest")
			r := onlyTable(t, d)
			deadline := time.Now().Add(20 * time.Second)
			for ; time.Now().Before(deadline); time.Sleep(time.Millisecond) {
				if damaged && strings.Contains(logs.String(), "filter") || !damaged && r.HasFilter() {
					break
				}
			}
			if damaged {
				if !strings.Contains(logs.String(), "read without it") || !strings.Contains(logs.String(), "corruption") {
					t.Fatalf("no warning of the damaged filter in the log:\n%s", logs.String())
				}
				if r.HasFilter() {
					t.Fatal("the table has a filter whose block is damaged")
				}
			} else if !r.HasFilter() {
				t.Fatal("the ingested table's filter was not read in 20 s")
			}
			before := d.Metrics()
			check("once the filter was read")
			after := d.Metrics()
			negatives := after.FilterNegatives - before.FilterNegatives
			if damaged && (negatives != 0 || after.FilterProbes != before.FilterProbes) {
				t.Fatalf("%d filter probes, %d negatives from a table without a usable filter", after.FilterProbes-before.FilterProbes, negatives)
			}
			if !damaged && negatives < 1900 {
				t.Fatalf("the filter ruled out %d of 2,000 absent keys", negatives)
			}
			if !damaged && after.TableMemory < r.PinnedBytes() {
				t.Fatalf("TableMemory %d is below the table's %d pinned bytes", after.TableMemory, r.PinnedBytes())
			}
		})
	}
}

// TestIngestCloseWhileFiltersLoad closes the store right after Ingests,
// while their filters may still be loading; the store reopens whole.
func TestIngestCloseWhileFiltersLoad(t *testing.T) {
	mem := vfs.NewMem()
	o := memOpts(mem)
	want := map[string]string{}
	for round := range 5 {
		d := mustOpen(t, "/db", o)
		var paths []string
		for i := range 4 {
			p := fmt.Sprintf("/in/%d-%d.sst", round, i)
			lo := 10_000*round + 2_000*i
			setsTable(t, mem, p, lo, lo+1_500, "ing", want)
			paths = append(paths, p)
		}
		if err := d.Ingest(paths); err != nil {
			t.Fatalf("round %d: Ingest: %v", round, err)
		}
		if err := d.Close(); err != nil {
			t.Fatalf("round %d: Close: %v", round, err)
		}
	}
	d := mustOpen(t, "/db", o)
	defer d.Close()
	for k, v := range want {
		if got, err := d.Get([]byte(k)); err != nil || string(got) != v {
			t.Fatalf("Get(%s) = %q, %v; want %q", k, got, err, v)
		}
	}
}

// onlyTable returns the reader of the store's one table.
func onlyTable(t *testing.T, d *DB) *sstable.Reader {
	t.Helper()
	d.mu.Lock()
	v := d.mu.version
	d.mu.Unlock()
	var r *sstable.Reader
	for _, f := range v.All() {
		if r != nil {
			t.Fatal("the store holds more than one table")
		}
		var err error
		if r, err = d.tables.get(f); err != nil {
			t.Fatal(err)
		}
	}
	if r == nil {
		t.Fatal("the store holds no table")
	}
	return r
}

// damageFilterBlock flips a byte in the middle of the filter block of the
// table at name.
func damageFilterBlock(t *testing.T, fs vfs.FS, name string) {
	t.Helper()
	data := readFile(t, fs, name)
	r, err := sstable.NewReader(bytes.NewReader(data), int64(len(data)), sstable.ReaderOptions{FileName: name})
	if err != nil {
		t.Fatal(err)
	}
	damaged := false
	for _, b := range r.Layout().Blocks {
		if b.Kind == sstable.BlockFilter {
			data[b.Handle.Offset+b.Handle.Length/2] ^= 0x5a
			damaged = true
		}
	}
	if !damaged {
		t.Fatalf("%s has no filter block", name)
	}
	rewrite(t, fs, name, data)
	if _, err := sstable.NewReader(bytes.NewReader(data), int64(len(data)), sstable.ReaderOptions{FileName: name}); err == nil {
		t.Fatal("the damaged filter block still reads")
	}
}
