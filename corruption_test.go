package bloomkv

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/bloomkv/bloomkv/sstable"
	"github.com/bloomkv/bloomkv/vfs"
)

// corruptionBase builds the store every corruption trial damages a copy of:
// tables on several levels, a WAL holding the writes since the last flush,
// and a manifest of many edits. It returns the closed store's files and the
// ops it applied.
func corruptionBase(t *testing.T) (*vfs.MemFS, []op, int) {
	const nKeys = 200
	fs := vfs.NewMem()
	d := mustOpen(t, "/db", corruptionOpts(fs))
	ops := mixedWorkload(42, "key", nKeys, 600)
	for i := range ops {
		if ops[i].then == "compact" {
			ops[i].then = "" // keep tables on several levels
		}
	}
	for i, o := range ops {
		if err := o.apply(d); err != nil {
			t.Fatalf("op %d: %v", i, err)
		}
	}
	waitForCompactions(t, d)
	var levels []int
	for _, l := range d.Metrics().Levels {
		levels = append(levels, l.Files)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	// Only live files remain, now and after a crash (Close syncs its
	// deletions): a table left in no version would make a trial that
	// damages it pass unseen, deleted by the next Open.
	assertNoLeftovers(t, fs, "/db")
	assertNoLeftovers(t, fs.CrashClone(), "/db")
	t.Logf("base store: tables per level %v", levels)
	return fs, ops, nKeys
}

// corruptionOpts makes small tables and levels, so that a small store has
// many tables on several levels.
func corruptionOpts(fs vfs.FS) *Options {
	o := memOpts(fs)
	o.TargetFileSize = 32 << 10
	o.LBaseMaxBytes = 128 << 10
	o.Compression = sstable.NoCompression // the values are runs of x: compressed, the tables would be few
	return o
}

// damage is one corruption trial's change to a file.
type damage struct {
	file string // base name
	kind string // "flip" or "truncate"
	at   int64  // the byte flipped, or the new length
	bit  uint
}

func (dm damage) String() string {
	if dm.kind == "flip" {
		return fmt.Sprintf("bit %d of byte %d of %s flipped", dm.bit, dm.at, dm.file)
	}
	return fmt.Sprintf("%s truncated to %d bytes", dm.file, dm.at)
}

// TestCorruptionNeverSilent flips random bits in, or truncates at random,
// the sstables, WAL, MANIFEST and CURRENT of a store, one damage per trial,
// and opens, reads (every key by Get and by scan) and checks it. Each damage
// must be detected (an error wrapping ErrCorruption that names the file
// and, but for CURRENT, an offset),
// or read as a torn write at the end of a log (dropped with a log line
// naming the file and offset, the store then holding a prefix of the
// operation log), or be harmless (every read right and Check clean). A wrong
// value is never returned and nothing panics. Damage to a table is always
// detected: every byte of one is covered by a checksum or checked.
func TestCorruptionNeverSilent(t *testing.T) {
	n := trials(100, 400, 10000)
	base, ops, nKeys := corruptionBase(t)
	want := model(ops)
	names, err := base.List("/db")
	if err != nil {
		t.Fatal(err)
	}
	byKind := map[string][]string{}
	for _, name := range names {
		if k := fileLabel(name); k == "sstable" || k == "WAL" || k == "MANIFEST" || k == "CURRENT" {
			byKind[k] = append(byKind[k], name)
		}
	}
	kinds := slices.Sorted(maps.Keys(byKind))
	if len(kinds) != 4 {
		t.Fatalf("the base store lacks some kind of file: %v", byKind)
	}
	outcomes := map[string]int{}
	named, withOffset, failures := 0, 0, 0
	r := rand.New(rand.NewPCG(1, 2))
	for trial := range n {
		kind := kinds[trial%len(kinds)]
		name := byKind[kind][r.IntN(len(byKind[kind]))]
		fs := base.CrashClone()
		data := readFile(t, fs, "/db/"+name)
		dm := damage{file: name}
		if r.IntN(2) == 0 && len(data) > 0 {
			dm.kind, dm.at, dm.bit = "flip", r.Int64N(int64(len(data))), uint(r.IntN(8))
			data[dm.at] ^= 1 << dm.bit
		} else {
			dm.kind, dm.at = "truncate", r.Int64N(int64(max(len(data), 1)))
			data = data[:dm.at]
		}
		rewrite(t, fs, "/db/"+name, data)
		outcome, problem, err := corruptionTrial(fs, dm, ops, want, nKeys)
		if problem != "" {
			failures++
			t.Errorf("trial %d, %v: %s", trial, dm, problem)
		}
		if err != nil {
			if strings.Contains(err.Error(), name) {
				named++
			}
			if strings.Contains(err.Error(), "offset") {
				withOffset++
			}
		}
		outcomes[kind+" "+outcome]++
	}
	report(t, "corruption", "%d damaged stores (bit flips and truncations; outcomes by file: %v); of the errors, %d name the file and %d an offset; %d silent corruptions or other failures",
		n, outcomes, named, withOffset, failures)
}

// corruptionTrial opens, reads and checks a damaged store. It returns how
// the damage showed, what is wrong if the store misbehaved, and the error
// that reported the damage if one did.
func corruptionTrial(fs *vfs.MemFS, dm damage, ops []op, want map[string]string, nKeys int) (outcome, problem string, reported error) {
	defer func() {
		if p := recover(); p != nil {
			outcome, problem = "panic", fmt.Sprintf("panic: %v", p)
		}
	}()
	detected := func(stage string, err error) (string, string, error) {
		switch {
		case !errors.Is(err, ErrCorruption):
			return stage + " error", fmt.Sprintf("%s: an error not marked as corruption: %v", stage, err), err
		case !strings.Contains(err.Error(), dm.file):
			return stage + " error", fmt.Sprintf("%s: the error does not name %s: %v", stage, dm.file, err), err
		case dm.file != currentName && !strings.Contains(err.Error(), "offset"):
			// CURRENT is one line, which the error quotes.
			return stage + " error", fmt.Sprintf("%s: the error does not give an offset: %v", stage, err), err
		}
		return "detected by " + stage, "", err
	}
	var logs bytes.Buffer
	o := corruptionOpts(fs)
	o.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	d, err := Open("/db", o)
	if err != nil {
		return detected("Open", err)
	}
	defer d.Close()
	got, err := readKeys(d, "key", nKeys)
	switch {
	case errors.Is(err, errMismatch):
		return "mismatch", err.Error(), nil
	case err != nil:
		return detected("a read", err)
	}
	if _, err := d.Check(); err != nil {
		out, p, err := detected("Check", err)
		if p == "" && !maps.Equal(got, want) {
			p = "reads returned wrong values before Check found the damage: " + diffSummary(got, want)
		}
		return out, p, err
	}
	torn := strings.Contains(logs.String(), "torn") && strings.Contains(logs.String(), filepath.Join("/db", dm.file)) &&
		strings.Contains(logs.String(), "offset")
	switch {
	case maps.Equal(got, want) && fileLabel(dm.file) == "sstable" && !d.holdsTable(dm.file):
		// The reads set off a compaction that rewrote the table before
		// Check came to it: the compaction read every entry through
		// checksums, so the damage lay in bytes no read needs (footer
		// padding), and the store no longer holds them.
		return "compacted away, every read right", "", nil
	case maps.Equal(got, want) && fileLabel(dm.file) == "sstable":
		return "undetected", "a damaged table passed every read and Check", nil
	case maps.Equal(got, want):
		return "harmless", "", nil
	case torn && matchPrefix(got, ops, 0, len(ops)) >= 0:
		return "dropped as a torn tail", "", nil
	}
	return "silent", "reads returned wrong values and nothing reported the damage: " + diffSummary(got, want), nil
}
