package bloomkv

// What the reliability suites share (crash_test.go, kill_test.go,
// faults_test.go, corruption_test.go, stress_test.go): the mode, the trial
// counts, a mixed workload with its model, and the report line the long
// mode's script (.ci/long) collects.

import (
	"errors"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var longMode = flag.Bool("long", false, "run the reliability suites at their long-mode sizes (.ci/long)")

// trials returns a suite's size: long under -long, short under -short, else
// the size CI's plain 'go test' run uses.
func trials(short, ci, long int) int {
	switch {
	case *longMode:
		return long
	case testing.Short():
		return short
	}
	return ci
}

// report logs one line of a suite's counts; .ci/long collects these lines.
func report(t *testing.T, suite, format string, args ...any) {
	t.Helper()
	t.Logf("RELIABILITY %s: %s", suite, fmt.Sprintf(format, args...))
}

// A write is one entry of a batch: a set, a delete (value "") or, when end
// is set, a range deletion of [key, end).
type write struct {
	key, end, value string
}

// op is one step of a mixed workload: a batch applied with or without Sync,
// then perhaps a Flush or a Compact.
type op struct {
	writes []write
	sync   bool
	then   string // "", "flush" or "compact"
}

// workload generates a mixed workload over keys prefix000 to
// prefix{keys-1}: sets of values up to 3 KB (so a 64 KiB memtable fills every
// few dozen ops and flushes and compactions run during the writes), deletes,
// range deletions, batches of up to four writes, a third of them with Sync,
// and now and then an explicit Flush or Compact. The same seed gives the same
// ops.
type workload struct {
	r      *rand.Rand
	prefix string
	keys   int
	i      int
}

func newWorkload(seed uint64, prefix string, keys int) *workload {
	return &workload{r: rand.New(rand.NewPCG(seed, 17)), prefix: prefix, keys: keys}
}

func (wl *workload) key(i int) string { return fmt.Sprintf("%s%03d", wl.prefix, i) }

// next returns the workload's next op.
func (wl *workload) next() op {
	r := wl.r
	o := op{sync: r.IntN(3) == 0}
	for range 1 + r.IntN(4) {
		k := r.IntN(wl.keys)
		switch p := r.IntN(20); {
		case p < 3:
			o.writes = append(o.writes, write{key: wl.key(k)})
		case p < 5:
			o.writes = append(o.writes, write{key: wl.key(k), end: wl.key(k + 1 + r.IntN(4))})
		default:
			o.writes = append(o.writes, write{key: wl.key(k), value: fmt.Sprintf("v%d-%s", wl.i, strings.Repeat("x", r.IntN(3000)))})
		}
	}
	switch r.IntN(100) {
	case 0:
		o.then = "flush"
	case 1:
		o.then = "compact"
	}
	wl.i++
	return o
}

// mixedWorkload returns the first n ops of newWorkload(seed, prefix, keys).
func mixedWorkload(seed uint64, prefix string, keys, n int) []op {
	wl := newWorkload(seed, prefix, keys)
	ops := make([]op, n)
	for i := range ops {
		ops[i] = wl.next()
	}
	return ops
}

// apply runs o against d.
func (o op) apply(d *DB) error {
	b := d.NewBatch()
	for _, w := range o.writes {
		var err error
		switch {
		case w.end != "":
			err = b.DeleteRange([]byte(w.key), []byte(w.end))
		case w.value == "":
			err = b.Delete([]byte(w.key))
		default:
			err = b.Set([]byte(w.key), []byte(w.value))
		}
		if err != nil {
			return err
		}
	}
	wo := NoSync
	if o.sync {
		wo = Sync
	}
	if err := d.Apply(b, wo); err != nil {
		return err
	}
	switch o.then {
	case "flush":
		return d.Flush()
	case "compact":
		return d.Compact(nil, nil)
	}
	return nil
}

// applyTo applies o's writes to a model of the store.
func (o op) applyTo(m map[string]string) {
	for _, w := range o.writes {
		switch {
		case w.end != "":
			for k := range m {
				if k >= w.key && k < w.end {
					delete(m, k)
				}
			}
		case w.value == "":
			delete(m, w.key)
		default:
			m[w.key] = w.value
		}
	}
}

// model returns the store's contents after ops.
func model(ops []op) map[string]string {
	m := map[string]string{}
	for _, o := range ops {
		o.applyTo(m)
	}
	return m
}

// matchPrefix returns the n in [lo, hi] for which got equals the model after
// the first n ops, or -1 when there is none.
func matchPrefix(got map[string]string, ops []op, lo, hi int) int {
	hi = min(hi, len(ops))
	m := model(ops[:max(lo, 0)])
	for n := max(lo, 0); n <= hi; n++ {
		if maps.Equal(got, m) {
			return n
		}
		if n < len(ops) {
			ops[n].applyTo(m)
		}
	}
	return -1
}

// errMismatch marks a store that answered differently from itself: a Get
// and a scan of the same key disagreeing.
var errMismatch = errors.New("a Get and a scan disagree")

// readKeys returns the store's contents under prefix, read three times: a
// full scan of the prefix, a Get of each of keys keys (keys prefix000 on) and
// a MultiGet of them. A read error is returned as is; a disagreement wraps
// errMismatch.
func readKeys(d interface {
	Get([]byte) ([]byte, error)
	MultiGet([][]byte) ([][]byte, []error)
	NewIter(*IterOptions) (*Iterator, error)
}, prefix string, keys int) (map[string]string, error) {
	it, err := d.NewIter(&IterOptions{LowerBound: []byte(prefix), UpperBound: []byte(prefix + "\xff")})
	if err != nil {
		return nil, err
	}
	scan := map[string]string{}
	var order []string
	for ok := it.First(); ok; ok = it.Next() {
		scan[string(it.Key())] = string(it.Value())
		order = append(order, string(it.Key()))
	}
	if err := it.Close(); err != nil {
		return nil, err
	}
	if !slices.IsSorted(order) || len(order) != len(scan) {
		return nil, fmt.Errorf("%w: the scan's keys are out of order or repeated", errMismatch)
	}
	got := map[string]string{}
	for i := range keys {
		k := fmt.Sprintf("%s%03d", prefix, i)
		v, err := d.Get([]byte(k))
		switch {
		case errors.Is(err, ErrNotFound):
			continue
		case err != nil:
			return nil, err
		}
		got[k] = string(v)
	}
	if !maps.Equal(got, scan) {
		return nil, fmt.Errorf("%w: %d keys by Get, %d by the scan", errMismatch, len(got), len(scan))
	}
	batch := make([][]byte, keys)
	for i := range keys {
		batch[i] = fmt.Appendf(nil, "%s%03d", prefix, i)
	}
	vals, errs := d.MultiGet(batch)
	for i, k := range batch {
		switch v, ok := got[string(k)]; {
		case errs[i] != nil && !errors.Is(errs[i], ErrNotFound):
			return nil, errs[i]
		case ok != (errs[i] == nil) || string(vals[i]) != v:
			return nil, fmt.Errorf("%w: %s is %q (%v) by MultiGet, %q (%v) by Get", errMismatch, k, vals[i], errs[i], v, ok)
		}
	}
	return got, nil
}

// diffSummary describes how got differs from want, briefly.
func diffSummary(got, want map[string]string) string {
	var b strings.Builder
	n := 0
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if g, ok := got[k]; !ok || g != want[k] {
			if n < 3 {
				fmt.Fprintf(&b, " %s: have %.12q want %.12q;", k, g, want[k])
			}
			n++
		}
	}
	for _, k := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[k]; !ok {
			if n < 3 {
				fmt.Fprintf(&b, " %s: present, want absent;", k)
			}
			n++
		}
	}
	return fmt.Sprintf("%d keys differ:%s", n, b.String())
}

// fileLabel names the kind of a store file, for the reports.
func fileLabel(name string) string {
	base := filepath.Base(name)
	switch k, _ := parseName(base); k {
	case kindLog:
		return "WAL"
	case kindTable:
		return "sstable"
	case kindManifest:
		return "MANIFEST"
	}
	if strings.HasPrefix(base, "CURRENT") {
		return "CURRENT"
	}
	return base
}
