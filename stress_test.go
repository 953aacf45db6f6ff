package bloomkv

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bloomkv/bloomkv/vfs"
)

const (
	stressWriters = 3
	stressKeys    = 100 // per writer
)

// stressKey returns writer w's key i, or its twin: the two are always
// written together, in one batch.
func stressKey(w, i int, twin bool) []byte {
	if twin {
		return fmt.Appendf(nil, "s%d-%03d~", w, i)
	}
	return fmt.Appendf(nil, "s%d-%03d", w, i)
}

// stressValue encodes a version and some padding; stressVersion decodes it.
func stressValue(ver int64, pad int) []byte {
	return append(strconv.AppendInt(nil, ver, 10), bytes.Repeat([]byte{':'}, pad)...)
}

func stressVersion(v []byte) (int64, error) {
	return strconv.ParseInt(string(bytes.TrimRight(v, ":")), 10, 64)
}

// stressState is what the writers have acknowledged: for each key, its
// version (positive: set, negative: deleted, 0: never written).
type stressState [stressWriters][stressKeys]atomic.Int64

// TestStress runs writers, readers, snapshot readers, iterators, flushes,
// compactions, Check and Metrics concurrently for a bounded time (CI runs it
// under -race). Writers set or delete a key and its twin in one batch, with
// increasing versions. Readers never see a version older than one
// acknowledged before they read (nor a key missing whose last acknowledged
// write was a set, unless a newer delete came); snapshots and iterators
// always see both twins at the same version, and a snapshot answers the same
// at the end of its life as at the start; Check finds nothing. At the end,
// and after a reopen, the store holds exactly the last acknowledged writes.
func TestStress(t *testing.T) {
	stress(t, "stress", time.Duration(trials(2, 3, 120))*time.Second, nil)
}

// TestStressSlowFlushEnd is TestStress with a FlushEnd listener that takes
// a millisecond: compactions then often install their results while a
// flush's listener runs, between the flush's edit and its return.
func TestStressSlowFlushEnd(t *testing.T) {
	stress(t, "stress with a slow FlushEnd", time.Duration(trials(1, 2, 60))*time.Second, func(o *Options) {
		o.EventListener.FlushEnd = func(FlushInfo) { time.Sleep(time.Millisecond) }
	})
}

// stress runs TestStress's workload for dur, with the options set as
// adjust says (nil: none), and reports its counts as suite.
func stress(t *testing.T, suite string, dur time.Duration, adjust func(*Options)) {
	fs := vfs.NewMem()
	o := memOpts(fs)
	o.TargetFileSize = 32 << 10
	o.LBaseMaxBytes = 128 << 10
	o.MaxConcurrentCompactions = 2
	if adjust != nil {
		adjust(o)
	}
	d := mustOpen(t, "/db", o)
	// acked holds what writers have acknowledged; deleting the version of
	// the newest delete of each key a writer has begun (set before Apply: a
	// read may see a write before its acknowledgement).
	var acked, deleting stressState
	var stop atomic.Bool
	var failed atomic.Bool
	var wg sync.WaitGroup
	var counts struct {
		writes, reads, snapshots, iters, flushes, compactions, checks, diffChecks atomic.Int64
	}
	fail := func(format string, args ...any) {
		failed.Store(true)
		stop.Store(true)
		t.Errorf(format, args...)
	}
	run := func(name string, seed uint64, fn func(r *rand.Rand) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, 3))
			for !stop.Load() {
				if err := fn(r); err != nil {
					fail("%s: %v", name, err)
					return
				}
			}
		}()
	}

	for w := range stressWriters {
		var ver int64
		run(fmt.Sprintf("writer %d", w), uint64(w), func(r *rand.Rand) error {
			ver++
			i := r.IntN(stressKeys)
			b := d.NewBatch()
			state := ver
			if r.IntN(8) == 0 {
				state = -ver
				b.Delete(stressKey(w, i, false))
				b.Delete(stressKey(w, i, true))
			} else {
				v := stressValue(ver, r.IntN(200))
				b.Set(stressKey(w, i, false), v)
				b.Set(stressKey(w, i, true), v)
			}
			wo := NoSync
			if r.IntN(20) == 0 {
				wo = Sync
			}
			if state < 0 {
				deleting[w][i].Store(ver)
			}
			if err := d.Apply(b, wo); err != nil {
				return err
			}
			acked[w][i].Store(state)
			counts.writes.Add(1)
			return nil
		})
	}
	for rd := range 2 {
		run(fmt.Sprintf("reader %d", rd), 10+uint64(rd), func(r *rand.Rand) error {
			w, i := r.IntN(stressWriters), r.IntN(stressKeys)
			before := acked[w][i].Load()
			v, err := d.Get(stressKey(w, i, r.IntN(2) == 0))
			counts.reads.Add(1)
			switch {
			case errors.Is(err, ErrNotFound):
				if before > 0 && deleting[w][i].Load() < before {
					return fmt.Errorf("s%d-%03d not found; version %d was acknowledged before the read, and no delete after it", w, i, before)
				}
				return nil
			case err != nil:
				return err
			}
			got, err := stressVersion(v)
			if err != nil {
				return fmt.Errorf("s%d-%03d = %q: %v", w, i, v, err)
			}
			if got < max(before, -before) {
				return fmt.Errorf("s%d-%03d: read version %d after version %d was acknowledged", w, i, got, max(before, -before))
			}
			// A key and its twin, written in one batch, read in one
			// MultiGet: one view, the same version, not older.
			vs, errs := d.MultiGet([][]byte{stressKey(w, i, true), stressKey(w, i, false)})
			if (errs[0] == nil) != (errs[1] == nil) || !bytes.Equal(vs[0], vs[1]) ||
				errs[0] != nil && !errors.Is(errs[0], ErrNotFound) {
				return fmt.Errorf("MultiGet: s%d-%03d = %q, %v but its twin %q, %v", w, i, vs[1], errs[1], vs[0], errs[0])
			}
			if errs[0] == nil {
				if mv, err := stressVersion(vs[0]); err != nil || mv < got {
					return fmt.Errorf("MultiGet: s%d-%03d at version %d (%v) after Get read %d", w, i, mv, err, got)
				}
			}
			return nil
		})
	}
	// pairs checks that an iterator sees every key with its twin, at the
	// same version, in order.
	pairs := func(it *Iterator) error {
		var prev []byte
		walk := func() error {
			for ok := it.First(); ok; ok = it.Next() {
				k := bytes.Clone(it.Key())
				if prev != nil && bytes.Compare(prev, k) >= 0 {
					return fmt.Errorf("iterator: %q after %q", k, prev)
				}
				v := bytes.Clone(it.Value())
				if bytes.HasSuffix(k, []byte("~")) || !it.Next() || !bytes.Equal(it.Key(), append(k, '~')) {
					return fmt.Errorf("iterator: %q without its twin after it", k)
				}
				if !bytes.Equal(it.Value(), v) {
					return fmt.Errorf("iterator: %q at %q, its twin at %q: a batch seen in part", k, v, it.Value())
				}
				prev = bytes.Clone(it.Key())
			}
			return nil
		}
		err := walk()
		if cerr := it.Close(); err == nil {
			err = cerr
		}
		return err
	}
	run("snapshot reader", 20, func(r *rand.Rand) error {
		s, err := d.NewSnapshot()
		if err != nil {
			return err
		}
		defer s.Close()
		counts.snapshots.Add(1)
		w, i := r.IntN(stressWriters), r.IntN(stressKeys)
		first, err1 := s.Get(stressKey(w, i, false))
		twin, err2 := s.Get(stressKey(w, i, true))
		if (err1 == nil) != (err2 == nil) || !bytes.Equal(first, twin) {
			return fmt.Errorf("snapshot: s%d-%03d = %q, %v but its twin %q, %v", w, i, first, err1, twin, err2)
		}
		it, err := s.NewIter(&IterOptions{LowerBound: []byte(fmt.Sprintf("s%d-", w)), UpperBound: []byte(fmt.Sprintf("s%d.", w))})
		if err != nil {
			return err
		}
		if err := pairs(it); err != nil {
			return fmt.Errorf("snapshot %w", err)
		}
		again, err3 := s.Get(stressKey(w, i, false))
		if (err1 == nil) != (err3 == nil) || !bytes.Equal(first, again) {
			return fmt.Errorf("snapshot: s%d-%03d was %q, %v and is now %q, %v", w, i, first, err1, again, err3)
		}
		vs, errs := s.MultiGet([][]byte{stressKey(w, i, true), stressKey(w, i, false)})
		for j, v := range vs {
			if (errs[j] == nil) != (err1 == nil) || !bytes.Equal(v, first) {
				return fmt.Errorf("snapshot: s%d-%03d was %q, %v by Get, %q, %v by MultiGet", w, i, first, err1, v, errs[j])
			}
		}
		return nil
	})
	run("iterator", 30, func(r *rand.Rand) error {
		it, err := d.NewIter(nil)
		if err != nil {
			return err
		}
		counts.iters.Add(1)
		return pairs(it)
	})
	run("flusher", 40, func(r *rand.Rand) error {
		time.Sleep(time.Duration(r.IntN(20)) * time.Millisecond)
		counts.flushes.Add(1)
		return d.Flush()
	})
	run("compactor", 50, func(r *rand.Rand) error {
		time.Sleep(time.Duration(r.IntN(100)) * time.Millisecond)
		w := r.IntN(stressWriters)
		lo := r.IntN(stressKeys)
		counts.compactions.Add(1)
		return d.Compact(stressKey(w, lo, false), stressKey(w, min(lo+1+r.IntN(30), stressKeys-1), true))
	})
	run("checker", 60, func(r *rand.Rand) error {
		time.Sleep(time.Duration(r.IntN(200)) * time.Millisecond)
		counts.checks.Add(1)
		if _, err := d.Check(); err != nil {
			return err
		}
		if m := d.Metrics(); m.Levels[0].Files < 0 {
			return fmt.Errorf("metrics: %d L0 files", m.Levels[0].Files)
		}
		// The differential-file filter passes every version above the
		// base of the state it is read with, while writers, flushes and
		// compactions go on.
		s := d.acquire()
		bad := diffViolations(d, s)
		if s.diff != nil {
			counts.diffChecks.Add(1)
		}
		d.release(s)
		if len(bad) > 0 {
			return fmt.Errorf("the differential-file filter misses versions above the base: %v", bad)
		}
		return nil
	})

	time.Sleep(dur)
	stop.Store(true)
	wg.Wait()
	if failed.Load() {
		d.Close()
		return
	}
	verify := func(d *DB, when string) {
		t.Helper()
		var keys [][]byte
		for w := range stressWriters {
			for i := range stressKeys {
				keys = append(keys, stressKey(w, i, false), stressKey(w, i, true))
			}
		}
		checkMultiGet(t, when, d, keys)
		for w := range stressWriters {
			for i := range stressKeys {
				want := acked[w][i].Load()
				for _, twin := range []bool{false, true} {
					v, err := d.Get(stressKey(w, i, twin))
					switch {
					case want <= 0 && errors.Is(err, ErrNotFound):
					case want <= 0:
						t.Fatalf("%s: %s = %q, %v; its last write was a delete", when, stressKey(w, i, twin), v, err)
					case err != nil:
						t.Fatalf("%s: %s: %v; version %d was written", when, stressKey(w, i, twin), err, want)
					default:
						if got, _ := stressVersion(v); got != want {
							t.Fatalf("%s: %s at version %d, want %d", when, stressKey(w, i, twin), got, want)
						}
					}
				}
			}
		}
		if _, err := d.Check(); err != nil {
			t.Fatalf("%s: Check: %v", when, err)
		}
	}
	verify(d, "at the end")
	checkDiffFilter(t, d)
	m := d.Metrics()
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d = mustOpen(t, "/db", o)
	verify(d, "after reopening")
	d.Close()
	report(t, suite, "%v of %d writers, 2 readers, a snapshot reader, an iterator, a flusher, a compactor and a checker (race detector: %v): %d writes, %d reads, %d snapshots, %d iterations, %d Flush calls (%d flushes), %d Compact calls (%d compactions), %d Checks (%d with the differential-file filter on; %d Gets skipped the differential); 0 failures",
		dur, stressWriters, raceBuild, counts.writes.Load(), counts.reads.Load(), counts.snapshots.Load(), counts.iters.Load(),
		counts.flushes.Load(), m.Flushes, counts.compactions.Load(), m.Compactions, counts.checks.Load(), counts.diffChecks.Load(), m.DiffFilter.Skips)
}
