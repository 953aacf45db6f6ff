package main

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bloomkv/bloomkv"
	"github.com/bloomkv/bloomkv/internal/benchutil"
)

// batchGetter is an engine that reads a batch of keys in one call.
type batchGetter interface {
	// multiGet reads keys and returns how many were present.
	multiGet(keys [][]byte) (found int, err error)
}

func (e *bloomkvEngine) multiGet(keys [][]byte) (int, error) {
	_, errs := e.db.MultiGet(keys)
	found := 0
	for _, err := range errs {
		switch {
		case err == nil:
			found++
		case !errors.Is(err, bloomkv.ErrNotFound):
			return found, err
		}
	}
	return found, nil
}

// How a multiget workload reads each batch.
const (
	byBatch  = iota // one multiGet call where the engine has it, else a get per key
	bySingle        // a get per key, one after the other
	byFanOut        // a get per key, each on a goroutine of its own, waited for together
)

// multiGetWorkloads returns the multiget workloads: for each kind of key and
// batch size, the batched reads (bloomkv's MultiGet; on Pebble, a get per
// key), then their companions, the same batches of the same keys read by
// single gets on bloomkv and fanned out over goroutines on Pebble, which
// the goals compare the batched reads with. The batches of 16 run only when
// named: with them, the default run would pass three minutes on 2 cores.
func multiGetWorkloads() []workload {
	kinds := []struct{ name, desc string }{
		{"present", "random loaded keys"},
		{"absent", "absent keys between loaded ones"},
		{"zipf", "loaded keys, zipfian (theta 0.99, hot keys scattered)"},
	}
	var out []workload
	for _, size := range []int{100, 16} {
		for _, k := range kinds {
			name := fmt.Sprintf("multiget-%s-%d", k.name, size)
			out = append(out,
				workload{name: name, desc: fmt.Sprintf("batches of %d %s, read by MultiGet (engines without one: a get per key, in turn) on the store as readhot left it; "+
					"ops are keys, latencies per batch", size, k.desc),
					needs: "fillrandom", absentReads: k.name == "absent", companion: name + "-gets", engines: []string{"bloomkv", "pebble", "pebble-l6"},
					named: size == 16, run: multiGetRun(name, k.name, size, byBatch)},
				workload{name: name + "-gets", desc: fmt.Sprintf("the %s batches read by a get per key, in turn", name),
					needs: "fillrandom", absentReads: k.name == "absent", companion: name + "-fanout", engines: []string{"bloomkv"}, named: size == 16, run: multiGetRun(name, k.name, size, bySingle)},
				workload{name: name + "-fanout", desc: fmt.Sprintf("the %s batches read by a get per key, each on a goroutine of its own (as Pebble's users fan reads out)", name),
					needs: "fillrandom", absentReads: k.name == "absent", engines: []string{"pebble"}, named: size == 16, run: multiGetRun(name, k.name, size, byFanOut)},
			)
		}
	}
	return out
}

// multiGetRun returns the run of a multiget workload: batches of size keys
// of the kind named, drawn as the workload name draws them on every engine
// and in every mode, read in the given mode for a third of the duration.
func multiGetRun(name, kind string, size, mode int) func(r *runner) (*measurement, error) {
	return func(r *runner) (*measurement, error) {
		rng := r.rng(name)
		var id func() uint64
		switch kind {
		case "present":
			id = func() uint64 { return presentID(rng.Uint64N(r.n())) }
		case "absent":
			id = func() uint64 { return absentID(rng.Uint64N(r.n())) }
		default:
			z := benchutil.NewZipf(r.n(), 0.99)
			id = func() uint64 { return presentID(benchutil.Scatter(z.Next(rng), r.n())) }
		}
		arena := make([]byte, size*benchutil.KeyLen)
		keys := make([][]byte, size)
		read := readBatch(r.main.e, mode)
		d := max(r.cfg.duration/3, time.Millisecond)
		label := name
		if mode == bySingle {
			label += "-gets"
		} else if mode == byFanOut {
			label += "-fanout"
		}
		bar := r.prog.start(label, d.Milliseconds())
		defer bar.finish()
		m := &measurement{hist: newHist(), note: fmt.Sprintf("batches of %d; p50 and p99 per batch", size)}
		start := time.Now()
		t := start
		for batches := 0; ; batches++ {
			for j := range keys {
				keys[j] = benchutil.MakeKey(arena[j*benchutil.KeyLen:(j+1)*benchutil.KeyLen], id())
			}
			found, err := read(keys)
			if err != nil {
				return nil, err
			}
			if want := size; kind == "absent" && found != 0 || kind != "absent" && found != want {
				return nil, fmt.Errorf("%s: %d of a batch of %d keys found", label, found, size)
			}
			now := time.Now()
			_ = m.hist.RecordValue(int64(now.Sub(t)))
			t = now
			m.ops += int64(size)
			if batches&63 == 0 {
				bar.set(now.Sub(start).Milliseconds())
			}
			if now.Sub(start) >= d {
				break
			}
		}
		m.elapsed = t.Sub(start)
		return m, nil
	}
}

// readBatch returns how e reads a batch of keys in mode, reporting how many
// were present.
func readBatch(e engine, mode int) func(keys [][]byte) (int, error) {
	if bg, ok := e.(batchGetter); ok && mode == byBatch {
		return bg.multiGet
	}
	if mode == byFanOut {
		return func(keys [][]byte) (int, error) {
			var found atomic.Int64
			errs := make([]error, len(keys))
			var wg sync.WaitGroup
			for i, k := range keys {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ok, err := e.get(k)
					if ok {
						found.Add(1)
					}
					errs[i] = err
				}()
			}
			wg.Wait()
			return int(found.Load()), errors.Join(errs...)
		}
	}
	return func(keys [][]byte) (int, error) {
		found := 0
		for _, k := range keys {
			ok, err := e.get(k)
			if err != nil {
				return found, err
			}
			if ok {
				found++
			}
		}
		return found, nil
	}
}
