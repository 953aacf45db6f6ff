package bloomkv

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/bloomkv/bloomkv/vfs"
)

// TestTableCutShortUnderTheStore cuts a table's file in half under an open
// store, with tables mapped into memory (the default) and without: every
// Get then returns its value or an error wrapping ErrCorruption, never a
// crash or a wrong value, and some Gets meet the cut.
func TestTableCutShortUnderTheStore(t *testing.T) {
	for _, disable := range []bool{false, true} {
		t.Run(fmt.Sprintf("DisableMmapReads=%v", disable), func(t *testing.T) {
			dir := t.TempDir()
			d := mustOpen(t, dir, &Options{CacheSize: 1, DisableMmapReads: disable, DisableDiffFilter: true, Logger: quietLogger()})
			defer d.Close()
			value := func(i int) []byte { return bytes.Repeat([]byte{byte(i)}, 60) }
			const n = 20000
			for i := range n {
				if err := d.Set([]byte(fmt.Sprintf("key%06d", i)), value(i), nil); err != nil {
					t.Fatal(err)
				}
			}
			if err := d.Flush(); err != nil {
				t.Fatal(err)
			}
			expect(t, d, "key000001", string(value(1))) // opens the tables
			names, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			var biggest string
			var size int64
			for _, e := range names {
				info, err := e.Info()
				if err != nil {
					t.Fatal(err)
				}
				if strings.HasSuffix(e.Name(), ".sst") && info.Size() > size {
					biggest, size = e.Name(), info.Size()
				}
			}
			if biggest == "" {
				t.Fatal("no table after the flush")
			}
			var mapped int
			d.tables.mu.Lock()
			for _, ot := range d.tables.tables {
				if _, ok := ot.f.(*vfs.MappedFile); ok {
					mapped++
				}
			}
			d.tables.mu.Unlock()
			switch {
			case disable && mapped > 0:
				t.Fatalf("%d tables mapped with DisableMmapReads", mapped)
			case !disable && mapped == 0 && runtime.GOOS == "linux":
				t.Fatal("no table mapped on Linux")
			}
			if err := os.Truncate(vfs.Join(dir, biggest), size/2); err != nil {
				t.Fatal(err)
			}
			var good, refused int
			for i := 0; i < n; i += 37 {
				got, err := d.Get([]byte(fmt.Sprintf("key%06d", i)))
				switch {
				case err != nil:
					if !errors.Is(err, ErrCorruption) {
						t.Fatalf("Get past the cut: %v, want ErrCorruption", err)
					}
					refused++
				case !bytes.Equal(got, value(i)):
					t.Fatalf("Get(key%06d) = %x", i, got)
				default:
					good++
				}
			}
			if refused == 0 {
				t.Fatalf("no Get met the cut (%d read right)", good)
			}
		})
	}
}
