package bloomkv

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/bloomkv/bloomkv/sstable"
	"github.com/bloomkv/bloomkv/vfs"
)

// TestSeekWithTheIteratorsOwnKeyOrValue: a seek may be given the
// iterator's own Key or Value (it.SeekLT(it.Key()), or a value naming the
// key to jump to). The merged seek moves the children one by one; the key
// must not change under the later ones as the earlier ones overwrite their
// key buffers or release their blocks to reuse (review finding).
func TestSeekWithTheIteratorsOwnKeyOrValue(t *testing.T) {
	o := memOpts(vfs.NewMem())
	o.L0CompactionThreshold, o.L0StopWritesThreshold = 20, 40 // keep the level-0 tables
	o.CacheSize, o.BlockSize, o.Compression = 1<<10, 256, sstable.NoCompression
	d := mustOpen(t, "/db", o)
	defer d.Close()
	k := func(i int) []byte { return fmt.Appendf(nil, "key%05d", i) }
	for i := range 1000 {
		if err := d.Set(k(i), []byte("old-value-old-value"), NoSync); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Compact(nil, nil); err != nil {
		t.Fatal(err)
	}
	for range 4 { // every 10th key, over level-0 tables; each value names another key
		for i := 0; i < 1000; i += 10 {
			if err := d.Set(k(i), k((i+405)%1000), NoSync); err != nil {
				t.Fatal(err)
			}
		}
		if err := d.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	it, err := d.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	for i := 10; i < 1000; i += 10 {
		if !it.SeekGE(k(i)) || !it.SeekLT(it.Key()) || string(it.Key()) != string(k(i-1)) {
			t.Fatalf("SeekGE(%s) then SeekLT(it.Key()): at %q, want %s", k(i), it.Key(), k(i-1))
		}
		if !it.SeekGE(k(i)) {
			t.Fatalf("SeekGE(%s) found nothing", k(i))
		}
		want := string(it.Value())
		if !it.SeekGE(it.Value()) || string(it.Key()) != want {
			t.Fatalf("SeekGE(it.Value() = %s): at %q", want, it.Key())
		}
	}
}

// TestIteratorReportsReadErrors: a table read failing mid-scan stops the
// iterator, and both Error and Close report it (a review found Close
// returning nil for a scan cut short).
func TestIteratorReportsReadErrors(t *testing.T) {
	efs := vfs.NewErrorFS(vfs.NewMem())
	d := mustOpen(t, "/db", &Options{FS: efs, Logger: quietLogger(), CacheSize: 1})
	defer d.Close()
	fillKeys(t, d, 3000, 100)
	if err := d.Compact(nil, nil); err != nil {
		t.Fatal(err)
	}
	it, err := d.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		if n++; n == 100 {
			efs.SetInjector(func(op vfs.Op, name string) error {
				if op == vfs.OpRead && strings.HasSuffix(name, ".sst") {
					return vfs.ErrInjected
				}
				return nil
			})
		}
	}
	efs.SetInjector(nil)
	if n >= 3000 {
		t.Fatalf("the scan read all %d keys despite the failing reads", n)
	}
	if err := it.Error(); !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("Error() = %v, want the injected read error", err)
	}
	if err := it.Close(); !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("Close() = %v, want the injected read error", err)
	}
}
