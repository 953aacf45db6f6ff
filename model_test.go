package bloomkv

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/objstorage/objstorageprovider"
	pebblesstable "github.com/cockroachdb/pebble/v2/sstable"
	pebblevfs "github.com/cockroachdb/pebble/v2/vfs"

	"github.com/bloomkv/bloomkv/vfs"
)

var (
	modelSeeds = flag.Int("model.seeds", 4, "seeds of the randomized model test (the long mode: 50)")
	modelOps   = flag.Int("model.ops", 10000, "operations per seed of the randomized model test")
)

// TestModel runs random operations (sets, deletes, range deletions, batches,
// ingestions of tables, gets, bounded iteration both ways, snapshots,
// flushes, compactions, close-and-reopen) on bloomkv, on an in-memory model
// and on Pebble, and
// compares every answer. Long mode: go test -run TestModel -model.seeds 50
// -model.ops 20000 .
func TestModel(t *testing.T) {
	seeds := *modelSeeds
	if testing.Short() {
		seeds = min(seeds, 2)
	}
	var deep atomic.Int64 // automatic merges below level 0, over all seeds
	t.Run("seeds", func(t *testing.T) {
		for seed := range seeds {
			t.Run(fmt.Sprint(seed), func(t *testing.T) {
				t.Parallel()
				deep.Add(runModel(t, uint64(seed), *modelOps))
			})
		}
	})
	if deep.Load() == 0 && *modelOps >= 10000 {
		t.Errorf("no automatic compaction below level 0 ran in any seed: the test did not exercise them")
	}
}

// view is the model's contents: a map, copied for snapshots.
type view map[string]string

func (v view) apply(op modelWrite) {
	switch op.kind {
	case "set":
		v[op.key] = op.value
	case "delete":
		delete(v, op.key)
	case "deleterange":
		for k := range v {
			if k >= op.key && k < op.end {
				delete(v, k)
			}
		}
	}
}

func (v view) sortedIn(lower, upper []byte) []string {
	var out []string
	for k := range v {
		if (lower == nil || k >= string(lower)) && (upper == nil || k < string(upper)) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

type modelWrite struct{ kind, key, end, value string }

// modelRun holds the three stores and their snapshots.
type modelRun struct {
	t     *testing.T
	r     *rand.Rand
	fs    *vfs.MemFS
	opts  *Options
	d     *DB
	p     *pebble.DB
	pfs   pebblevfs.FS // Pebble's file system, for the tables it ingests
	model view
	// ingests counts the ingestions, for the files' names.
	ingests int
	snaps   []modelSnap
	log     []string // the last operations, for failure messages
}

type modelSnap struct {
	d *Snapshot
	p *pebble.Snapshot // nil without Pebble
	m view
}

func (s modelSnap) close() {
	s.d.Close()
	if s.p != nil {
		s.p.Close()
	}
}

func (mr *modelRun) note(format string, args ...any) {
	mr.log = append(mr.log, fmt.Sprintf(format, args...))
	if len(mr.log) > 30 {
		mr.log = mr.log[1:]
	}
}

func (mr *modelRun) fatalf(format string, args ...any) {
	mr.t.Helper()
	mr.t.Fatalf("%s\nlast operations:\n  %s\nlevels:\n%s", fmt.Sprintf(format, args...), strings.Join(mr.log, "\n  "), mr.d.Metrics())
}

func (mr *modelRun) key() string {
	if mr.r.IntN(50) == 0 {
		return ""
	}
	return fmt.Sprintf("k%03d", mr.r.IntN(400))
}

// seekKey returns a key to seek to: a stored key or one between two. Never
// the empty key: Pebble's race-mode invariant checks index a seek key's first
// byte.
func (mr *modelRun) seekKey() []byte {
	k := fmt.Sprintf("k%03d", mr.r.IntN(401))
	if mr.r.IntN(3) == 0 {
		k += "~"
	}
	return []byte(k)
}

func (mr *modelRun) write() modelWrite {
	switch n := mr.r.IntN(20); {
	case n < 13:
		// Random letters: values that do not compress, so tables grow.
		v := make([]byte, mr.r.IntN(200))
		for i := range v {
			v[i] = 'a' + byte(mr.r.IntN(26))
		}
		return modelWrite{kind: "set", key: mr.key(), value: string(v)}
	case n < 18:
		return modelWrite{kind: "delete", key: mr.key()}
	default:
		a, b := mr.key(), mr.key()
		if a > b {
			a, b = b, a
		}
		if a == b {
			b = a + "\x00"
		}
		return modelWrite{kind: "deleterange", key: a, end: b}
	}
}

// runModel runs one seed and returns the number of automatic compactions
// below level 0 it saw.
func runModel(t *testing.T, seed uint64, ops int) int64 {
	mr := &modelRun{t: t, r: rand.New(rand.NewPCG(seed, 0x5eed)), fs: vfs.NewMem(), model: view{}}
	mr.opts = &Options{FS: mr.fs, MemTableSize: 64 << 10, L0CompactionThreshold: 2, L0StopWritesThreshold: 8,
		LBaseMaxBytes: 8 << 10, LevelMultiplier: 2, TargetFileSize: 4 << 10, BlockSize: 512,
		MaxConcurrentCompactions: 1 + int(seed%2), Logger: quietLogger()}
	var merges, moves, deep atomic.Int64 // deep: automatic merges below level 0
	mr.opts.EventListener.CompactionEnd = func(info CompactionInfo) {
		switch {
		case info.Err != nil:
		case info.Move:
			moves.Add(1)
		default:
			merges.Add(1)
			if !info.Manual && info.FromLevel > 0 {
				deep.Add(1)
			}
		}
	}
	var err error
	if mr.d, err = Open("/db", mr.opts); err != nil {
		t.Fatal(err)
	}
	// Every read state published must carry a differential-file filter
	// that passes every version above its base.
	diffProblem := checkDiffAtEveryPublish(mr.d)
	if !raceBuild { // see raceBuild
		mr.pfs = pebblevfs.NewMem()
		if mr.p, err = pebble.Open("/p", &pebble.Options{FS: mr.pfs, Logger: quietPebbleLogger{}}); err != nil {
			t.Fatal(err)
		}
	}
	defer func() {
		for _, s := range mr.snaps {
			s.close()
		}
		mr.d.Close()
		if mr.p != nil {
			mr.p.Close()
		}
	}()
	for i := 0; i < ops; i++ {
		switch n := mr.r.IntN(1000); {
		case n < 450:
			w := mr.write()
			mr.note("%d: %s %q %q", i, w.kind, w.key, w.end)
			mr.applyOne(w)
		case n < 520:
			mr.batch(i)
		case n < 720:
			mr.get(i)
		case n < 820:
			mr.iterate(i)
		case n < 860:
			if len(mr.snaps) < 4 {
				mr.note("%d: snapshot", i)
				ds, err := mr.d.NewSnapshot()
				if err != nil {
					mr.fatalf("NewSnapshot: %v", err)
				}
				s := modelSnap{d: ds, m: maps.Clone(mr.model)}
				if mr.p != nil {
					s.p = mr.p.NewSnapshot()
				}
				mr.snaps = append(mr.snaps, s)
			}
		case n < 890:
			if len(mr.snaps) > 0 {
				j := mr.r.IntN(len(mr.snaps))
				mr.note("%d: close snapshot %d", i, j)
				if err := mr.snaps[j].d.Close(); err != nil {
					mr.fatalf("Snapshot.Close: %v", err)
				}
				if mr.snaps[j].p != nil {
					mr.snaps[j].p.Close()
				}
				mr.snaps = slices.Delete(mr.snaps, j, j+1)
			}
		case n < 930:
			mr.note("%d: flush", i)
			if err := mr.d.Flush(); err != nil {
				mr.fatalf("Flush: %v", err)
			}
		case n < 936: // rare, to let automatic compactions fill the levels
			a, b := mr.key(), mr.key()
			if a > b {
				a, b = b, a
			}
			if mr.r.IntN(4) == 0 {
				mr.note("%d: compact all", i)
				if err := mr.d.Compact(nil, nil); err != nil {
					mr.fatalf("Compact: %v", err)
				}
				a, b = "", "\xff"
			} else {
				mr.note("%d: compact [%q, %q]", i, a, b)
				if err := mr.d.Compact([]byte(a), []byte(b)); err != nil {
					mr.fatalf("Compact: %v", err)
				}
			}
			if a < b && mr.p != nil {
				if err := mr.p.Compact(context.Background(), []byte(a), []byte(b), false); err != nil {
					mr.fatalf("pebble Compact: %v", err)
				}
			}
		case n < 940:
			mr.note("%d: reopen", i)
			for _, s := range mr.snaps {
				s.close()
			}
			mr.snaps = nil
			if err := mr.d.Close(); err != nil {
				mr.fatalf("Close: %v", err)
			}
			if p := diffProblem(); p != "" {
				mr.fatalf("%s", p)
			}
			if mr.d, err = Open("/db", mr.opts); err != nil {
				mr.fatalf("reopen: %v", err)
			}
			diffProblem = checkDiffAtEveryPublish(mr.d)
		case n < 960:
			mr.ingest(i)
		default:
			mr.scanAll(i)
		}
		if i%50 == 0 {
			if p := diffProblem(); p != "" {
				mr.fatalf("%s", p)
			}
			checkDiffFilter(t, mr.d)
			// The level invariants (DB.Check's): each key's versions lie
			// deeper as they get older, which Get relies on.
			st := mr.d.acquire()
			errs := mr.d.checkLevels(st.version)
			mr.d.release(st)
			if len(errs) > 0 {
				mr.fatalf("%d: level invariants: %v", i, errs)
			}
		}
	}
	mr.scanAll(ops)
	if p := diffProblem(); p != "" {
		mr.fatalf("%s", p)
	}
	m := mr.d.Metrics()
	t.Logf("seed %d: %d ops; %d compactions (%d automatic below L0), %d moves; %d ingests; tables per level at the end: %v; differential filter: %d rebuilds, %d Gets skipped the differential, %d maybes (%d false)",
		seed, ops, merges.Load(), deep.Load(), moves.Load(), mr.ingests, levelFiles(m), m.DiffFilter.Rebuilds, m.DiffFilter.Skips, m.DiffFilter.Maybes, m.DiffFilter.FalseMaybes)
	if ops >= 10000 && (merges.Load() == 0 || moves.Load() == 0) {
		t.Errorf("%d compactions and %d moves: the test did not exercise both", merges.Load(), moves.Load())
	}
	return deep.Load()
}

func (mr *modelRun) applyOne(w modelWrite) {
	var err, perr error
	switch w.kind {
	case "set":
		err = mr.d.Set([]byte(w.key), []byte(w.value), NoSync)
	case "delete":
		err = mr.d.Delete([]byte(w.key), NoSync)
	case "deleterange":
		err = mr.d.DeleteRange([]byte(w.key), []byte(w.end), NoSync)
	}
	if mr.p != nil {
		b := mr.p.NewBatch()
		addToPebble(b, w)
		perr = mr.p.Apply(b, pebble.NoSync)
	}
	if err != nil || perr != nil {
		mr.fatalf("%s: bloomkv %v, pebble %v", w.kind, err, perr)
	}
	mr.model.apply(w)
}

func (mr *modelRun) batch(i int) {
	b, pb := mr.d.NewBatch(), (*pebble.Batch)(nil)
	if mr.p != nil {
		pb = mr.p.NewBatch()
	}
	var ws []modelWrite
	for n := 1 + mr.r.IntN(6); n > 0; n-- {
		w := mr.write()
		ws = append(ws, w)
		switch w.kind {
		case "set":
			b.Set([]byte(w.key), []byte(w.value))
		case "delete":
			b.Delete([]byte(w.key))
		case "deleterange":
			b.DeleteRange([]byte(w.key), []byte(w.end))
		}
		if pb != nil {
			addToPebble(pb, w)
		}
	}
	mr.note("%d: batch %v", i, ws)
	if err := mr.d.Apply(b, NoSync); err != nil {
		mr.fatalf("Apply: %v", err)
	}
	if pb != nil {
		if err := mr.p.Apply(pb, pebble.NoSync); err != nil {
			mr.fatalf("pebble Apply: %v", err)
		}
	}
	for _, w := range ws {
		mr.model.apply(w)
	}
}

// ingestTableSpec is one table of a random ingestion: a range deletion
// (none when del[0] is empty) and point writes in key order.
type ingestTableSpec struct {
	del    [2]string
	points []modelWrite
}

// ingest ingests 1 to 3 random tables of disjoint key ranges into bloomkv
// (written with our writer) and Pebble (with its own, at its table
// format), and applies them to the model: each table's range deletion
// deletes what was there before, not the table's own keys.
func (mr *modelRun) ingest(i int) {
	keys := map[string]bool{}
	for n := 1 + mr.r.IntN(30); n > 0; n-- {
		keys[fmt.Sprintf("k%03d", mr.r.IntN(400))] = true
	}
	sorted := slices.Sorted(maps.Keys(keys))
	var tables []ingestTableSpec
	for len(sorted) > 0 {
		n := 1 + mr.r.IntN(len(sorted))
		group := sorted[:n]
		sorted = sorted[n:]
		var spec ingestTableSpec
		if mr.r.IntN(3) == 0 && len(group) > 1 {
			spec.del = [2]string{group[0], group[len(group)-1] + "\x00"}
		}
		for _, k := range group {
			if mr.r.IntN(5) == 0 {
				spec.points = append(spec.points, modelWrite{kind: "delete", key: k})
			} else {
				spec.points = append(spec.points, modelWrite{kind: "set", key: k, value: fmt.Sprintf("ingested-%d-%s", i, k)})
			}
		}
		tables = append(tables, spec)
	}
	mr.ingests++
	mr.note("%d: ingest %d tables %v", i, len(tables), tables)
	var paths, ppaths []string
	for j, spec := range tables {
		p := fmt.Sprintf("/in/%d-%d.sst", mr.ingests, j)
		var entries []ingestEntry
		for _, w := range spec.points {
			entries = append(entries, ingestEntry{key: w.key, value: w.value, del: w.kind == "delete"})
		}
		var dels [][2]string
		if spec.del[0] != "" {
			dels = append(dels, spec.del)
		}
		writeIngestTable(mr.t, mr.fs, p, entries, dels...)
		paths = append(paths, p)
		if mr.p != nil {
			ppaths = append(ppaths, mr.pebbleIngestTable(p, spec))
		}
	}
	// Given out of key order at random: Ingest takes them in any.
	mr.r.Shuffle(len(paths), func(a, b int) {
		paths[a], paths[b] = paths[b], paths[a]
		if ppaths != nil {
			ppaths[a], ppaths[b] = ppaths[b], ppaths[a]
		}
	})
	if err := mr.d.Ingest(paths); err != nil {
		mr.fatalf("%d: Ingest: %v", i, err)
	}
	if mr.p != nil {
		if err := mr.p.Ingest(context.Background(), ppaths); err != nil {
			mr.fatalf("%d: pebble Ingest: %v", i, err)
		}
	}
	for _, spec := range tables {
		if spec.del[0] != "" {
			mr.model.apply(modelWrite{kind: "deleterange", key: spec.del[0], end: spec.del[1]})
		}
		for _, w := range spec.points {
			mr.model.apply(w)
		}
	}
}

// pebbleIngestTable writes spec with Pebble's writer at the table format
// of its store, on its file system, and returns the file's name.
func (mr *modelRun) pebbleIngestTable(name string, spec ingestTableSpec) string {
	if err := mr.pfs.MkdirAll("/in", 0o755); err != nil {
		mr.fatalf("pebble mkdir: %v", err)
	}
	f, err := mr.pfs.Create(name, pebblevfs.WriteCategoryUnspecified)
	if err != nil {
		mr.fatalf("pebble create: %v", err)
	}
	w := pebblesstable.NewWriter(objstorageprovider.NewFileWritable(f), pebblesstable.WriterOptions{TableFormat: mr.p.TableFormat()})
	for _, p := range spec.points {
		if p.kind == "delete" {
			err = w.Delete([]byte(p.key))
		} else {
			err = w.Set([]byte(p.key), []byte(p.value))
		}
		if err != nil {
			mr.fatalf("pebble table: %v", err)
		}
	}
	if spec.del[0] != "" {
		if err := w.DeleteRange([]byte(spec.del[0]), []byte(spec.del[1])); err != nil {
			mr.fatalf("pebble table: %v", err)
		}
	}
	if err := w.Close(); err != nil {
		mr.fatalf("pebble table: %v", err)
	}
	return name
}

func addToPebble(b *pebble.Batch, w modelWrite) {
	switch w.kind {
	case "set":
		b.Set([]byte(w.key), []byte(w.value), nil)
	case "delete":
		b.Delete([]byte(w.key), nil)
	case "deleterange":
		b.DeleteRange([]byte(w.key), []byte(w.end), nil)
	}
}

// reader is the DB or a snapshot, with Pebble's and the model's matches.
type reader struct {
	name  string
	get   func([]byte) ([]byte, error)
	mget  func([][]byte) ([][]byte, []error)
	iter  func(*IterOptions) (*Iterator, error)
	pget  func([]byte) ([]byte, error)
	piter func(*pebble.IterOptions) (*pebble.Iterator, error)
	m     view
}

func (mr *modelRun) pick() reader {
	pebbleGet := func(g func([]byte) ([]byte, interface{ Close() error }, error)) func([]byte) ([]byte, error) {
		return func(k []byte) ([]byte, error) {
			v, c, err := g(k)
			if err != nil {
				return nil, err
			}
			defer c.Close()
			return bytes.Clone(v), nil
		}
	}
	if len(mr.snaps) > 0 && mr.r.IntN(3) == 0 {
		j := mr.r.IntN(len(mr.snaps))
		s := mr.snaps[j]
		rd := reader{name: fmt.Sprintf("snapshot %d", j), get: s.d.Get, mget: s.d.MultiGet, iter: s.d.NewIter, m: s.m}
		if s.p != nil {
			rd.pget = pebbleGet(func(k []byte) ([]byte, interface{ Close() error }, error) {
				v, c, err := s.p.Get(k)
				return v, c, err
			})
			rd.piter = s.p.NewIter
		}
		return rd
	}
	rd := reader{name: "db", get: mr.d.Get, mget: mr.d.MultiGet, iter: mr.d.NewIter, m: mr.model}
	if mr.p != nil {
		rd.pget = pebbleGet(func(k []byte) ([]byte, interface{ Close() error }, error) {
			v, c, err := mr.p.Get(k)
			return v, c, err
		})
		rd.piter = mr.p.NewIter
	}
	return rd
}

func (mr *modelRun) get(i int) {
	rd := mr.pick()
	k := mr.key()
	got, err := rd.get([]byte(k))
	var pgot []byte
	var perr error
	if rd.pget != nil {
		pgot, perr = rd.pget([]byte(k))
	}
	want, ok := rd.m[k]
	switch {
	case err != nil && !errors.Is(err, ErrNotFound):
		mr.fatalf("%d: %s Get(%q): %v", i, rd.name, k, err)
	case ok != (err == nil) || string(got) != want:
		mr.fatalf("%d: %s Get(%q) = %q, %v; model %q, %v", i, rd.name, k, got, err, want, ok)
	case rd.pget != nil && (ok != (perr == nil) || string(pgot) != want):
		mr.fatalf("%d: %s Get(%q): pebble %q, %v; model %q, %v", i, rd.name, k, pgot, perr, want, ok)
	}
	// MultiGet of the key, a key after it and the key again.
	keys := [][]byte{[]byte(k), []byte(k + "\x00"), []byte(k)}
	vals, errs := rd.mget(keys)
	for j, key := range keys {
		want, ok := rd.m[string(key)]
		if err := errs[j]; (err != nil && !errors.Is(err, ErrNotFound)) || ok != (err == nil) || string(vals[j]) != want {
			mr.fatalf("%d: %s MultiGet(%q) key %d = %q, %v; model %q, %v", i, rd.name, keys, j, vals[j], err, want, ok)
		}
	}
}

// iterate runs a random walk of positioning and stepping calls on all three.
func (mr *modelRun) iterate(i int) {
	rd := mr.pick()
	var lower, upper []byte
	if mr.r.IntN(2) == 0 {
		// The empty key as a lower bound is no bound (and trips Pebble's
		// race-mode invariant checks, which index a seek key's first byte).
		if lower = []byte(mr.key()); len(lower) == 0 {
			lower = nil
		}
	}
	if mr.r.IntN(2) == 0 {
		// Pebble reads an empty upper bound as none: leave it out.
		if upper = []byte(mr.key()); len(upper) == 0 {
			upper = nil
		}
		if lower != nil && upper != nil && bytes.Compare(lower, upper) > 0 {
			lower, upper = upper, lower
		}
	}
	it, err := rd.iter(&IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		mr.fatalf("NewIter: %v", err)
	}
	defer it.Close()
	pit := &pebbleIter{}
	if rd.piter != nil {
		if pit.it, err = rd.piter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper}); err != nil {
			mr.fatalf("pebble NewIter: %v", err)
		}
		defer pit.it.Close()
	}
	keys := rd.m.sortedIn(lower, upper)
	pos := -1 // index into keys; -1 or len(keys) when invalid
	var ops []string
	for step := 0; step < 40; step++ {
		var op string
		var ok, pok bool
		switch n := mr.r.IntN(10); {
		case n == 0 || step == 0 && n < 3:
			op, ok, pok = "First", it.First(), pit.do((*pebble.Iterator).First)
			pos = 0
		case n == 1 || step == 0 && n < 5:
			op, ok, pok = "Last", it.Last(), pit.do((*pebble.Iterator).Last)
			pos = len(keys) - 1
		case n == 2 || step == 0 && n < 8:
			k := mr.seekKey()
			op, ok, pok = fmt.Sprintf("SeekGE(%q)", k), it.SeekGE(k), pit.do(func(p *pebble.Iterator) bool { return p.SeekGE(k) })
			if lower != nil && bytes.Compare(k, lower) < 0 {
				k = lower
			}
			pos, _ = slices.BinarySearch(keys, string(k))
		case n == 3 || step == 0:
			k := mr.seekKey()
			op, ok, pok = fmt.Sprintf("SeekLT(%q)", k), it.SeekLT(k), pit.do(func(p *pebble.Iterator) bool { return p.SeekLT(k) })
			if upper != nil && bytes.Compare(k, upper) > 0 {
				k = upper
			}
			p, _ := slices.BinarySearch(keys, string(k))
			pos = p - 1
		case n < 7:
			if pos < 0 || pos >= len(keys) {
				continue
			}
			op, ok, pok = "Next", it.Next(), pit.do((*pebble.Iterator).Next)
			pos++
		default:
			if pos < 0 || pos >= len(keys) {
				continue
			}
			op, ok, pok = "Prev", it.Prev(), pit.do((*pebble.Iterator).Prev)
			pos--
		}
		ops = append(ops, op)
		want := pos >= 0 && pos < len(keys)
		if ok != want || ok != it.Valid() {
			mr.fatalf("%d: %s iter [%q, %q) %v: valid %v, model %v (%d keys), err %v", i, rd.name, lower, upper, ops, ok, want, len(keys), it.Error())
		}
		checkPebble := pit.it != nil
		if checkPebble && pok != want {
			mr.fatalf("%d: %s iter [%q, %q) %v: pebble valid %v, model %v", i, rd.name, lower, upper, ops, pok, want)
		}
		if !want {
			continue
		}
		if string(it.Key()) != keys[pos] || string(it.Value()) != rd.m[keys[pos]] {
			mr.fatalf("%d: %s iter [%q, %q) %v: at %q=%q, model %q=%q", i, rd.name, lower, upper, ops, it.Key(), it.Value(), keys[pos], rd.m[keys[pos]])
		}
		if !checkPebble {
			continue
		}
		if pv, _ := pit.value(); string(pit.it.Key()) != keys[pos] || string(pv) != rd.m[keys[pos]] {
			mr.fatalf("%d: %s iter [%q, %q) %v: pebble at %q, model %q", i, rd.name, lower, upper, ops, pit.it.Key(), keys[pos])
		}
	}
	if err := it.Error(); err != nil {
		mr.fatalf("iterator: %v", err)
	}
}

// scanAll compares a full forward and backward scan with the model.
func (mr *modelRun) scanAll(i int) {
	mr.note("%d: scan", i)
	keys := mr.model.sortedIn(nil, nil)
	it, err := mr.d.NewIter(nil)
	if err != nil {
		mr.fatalf("NewIter: %v", err)
	}
	defer it.Close()
	var got []string
	for ok := it.First(); ok; ok = it.Next() {
		got = append(got, string(it.Key()))
		if string(it.Value()) != mr.model[string(it.Key())] {
			mr.fatalf("%d: scan: %q=%q, model %q", i, it.Key(), it.Value(), mr.model[string(it.Key())])
		}
	}
	if !slices.Equal(got, keys) {
		mr.fatalf("%d: forward scan has %d keys, model %d", i, len(got), len(keys))
	}
	got = got[:0]
	for ok := it.Last(); ok; ok = it.Prev() {
		got = append(got, string(it.Key()))
	}
	slices.Reverse(got)
	if !slices.Equal(got, keys) {
		mr.fatalf("%d: backward scan has %d keys, model %d", i, len(got), len(keys))
	}
	if err := it.Error(); err != nil {
		mr.fatalf("scan: %v", err)
	}
}

// pebbleIter is a Pebble iterator, or nothing without Pebble.
type pebbleIter struct{ it *pebble.Iterator }

func (p *pebbleIter) do(fn func(*pebble.Iterator) bool) bool { return p.it != nil && fn(p.it) }

func (p *pebbleIter) value() ([]byte, error) { return p.it.ValueAndErr() }

// quietPebbleLogger drops Pebble's log lines.
type quietPebbleLogger struct{}

func (quietPebbleLogger) Infof(string, ...any)  {}
func (quietPebbleLogger) Errorf(string, ...any) {}
func (quietPebbleLogger) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
}
