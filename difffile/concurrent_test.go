package difffile

import (
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
)

// TestConcurrentAddRemoveProbe runs writers that add and remove their own
// keys (some many times, to saturate counters) while probers and encoders
// read. Each writer checks that every key it has added and not yet removed
// passes MayContain at every probe; at the end Count is exact.
func TestConcurrentAddRemoveProbe(t *testing.T) {
	const writers, readers, keysPerWriter, rounds = 6, 3, 300, 4
	// A small filter, so that writers share lines and words.
	f := mustNew(t, 200, 4)
	var outstanding atomic.Int64
	var writersDone sync.WaitGroup
	stop := make(chan struct{})
	var readersDone sync.WaitGroup
	errc := make(chan error, writers+readers)

	for r := range readers {
		readersDone.Add(1)
		go func() {
			defer readersDone.Done()
			probe := testKeys(byte(100+r), 1000)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				f.MayContain(probe[i%len(probe)])
				if i%500 == 0 {
					f.EstimateCount()
					f.NeedsGrowth()
					// Whatever state it catches, Encode must produce an
					// encoding Decode accepts.
					if _, err := Decode(f.Encode()); err != nil {
						errc <- err
						return
					}
				}
			}
		}()
	}
	for w := range writers {
		writersDone.Add(1)
		go func() {
			defer writersDone.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			keys := testKeys(byte(w), keysPerWriter)
			held := make([]int, len(keys))
			checkHeld := func() bool {
				for i, n := range held {
					if n > 0 && !f.MayContain(keys[i]) {
						errc <- errors.New("false negative for a key its writer holds")
						return false
					}
				}
				return true
			}
			for range rounds {
				for _, i := range rng.Perm(len(keys)) {
					times := 1
					if i%50 == 0 {
						times = 20
					}
					for range times {
						f.Add(keys[i])
						held[i]++
						outstanding.Add(1)
					}
					if !f.MayContain(keys[i]) {
						errc <- errors.New("false negative right after Add")
						return
					}
				}
				if !checkHeld() {
					return
				}
				for _, i := range rng.Perm(len(keys)) {
					for n := rng.IntN(held[i] + 1); n > 0; n-- {
						if !f.Remove(keys[i]) {
							errc <- errors.New("Remove of a held key failed")
							return
						}
						held[i]--
						outstanding.Add(-1)
					}
					if held[i] > 0 && !f.MayContain(keys[i]) {
						errc <- errors.New("false negative after a partial Remove")
						return
					}
				}
				if !checkHeld() {
					return
				}
			}
		}()
	}
	writersDone.Wait()
	close(stop)
	readersDone.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	if got, want := f.Count(), outstanding.Load(); got != want {
		t.Fatalf("Count %d, want %d", got, want)
	}
	if f.Saturated() == 0 {
		t.Fatal("no counter saturated; the test does not exercise saturation")
	}
	g, err := Decode(f.Encode())
	if err != nil {
		t.Fatal(err)
	}
	if g.Count() != f.Count() || g.Saturated() != f.Saturated() {
		t.Fatalf("decoded Count %d, Saturated %d; want %d, %d", g.Count(), g.Saturated(), f.Count(), f.Saturated())
	}
}
