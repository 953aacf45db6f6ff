package bloomkv

import (
	"testing"

	"github.com/bloomkv/bloomkv/vfs"
)

// assertNoLeftovers fails the test at once if dir, a closed store's
// directory, holds a file the store does not need: a table the version of
// the manifest CURRENT names does not hold, a WAL below its log number,
// another manifest, a temporary CURRENT, or a name the store does not make.
// Such a file is what the next Open would find and delete, or worse, trust.
func assertNoLeftovers(t testing.TB, fs vfs.FS, dir string) {
	t.Helper()
	num, err := readCurrent(fs, dir)
	if err != nil {
		t.Fatalf("reading %s: %v", vfs.Join(dir, currentName), err)
	}
	// The manifest's replay, as Open makes it, on a DB that is never opened.
	d := &DB{dir: dir, fs: fs, opts: &Options{Logger: quietLogger()}}
	if err := d.loadManifest(num); err != nil {
		t.Fatalf("replaying the manifest: %v", err)
	}
	live := d.liveTables()
	names, err := fs.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, n := range names {
		kind, num := parseName(n)
		var needed bool
		switch {
		case n == currentName || n == lockName:
			needed = true
		case kind == kindTable:
			needed = live[num]
		case kind == kindLog:
			needed = num >= d.mu.logNumber
		case kind == kindManifest:
			needed = num == d.mu.manifestNum
		}
		if !needed {
			left = append(left, n)
		}
	}
	if len(left) > 0 {
		t.Fatalf("%s holds files no live state needs, left by Close: %v", dir, left)
	}
}
