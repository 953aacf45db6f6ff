package bloomkv

// Running independent steps in parallel (forEachParallel).

import (
	"sync"
	"sync/atomic"
)

// forEachParallel calls fn(0) to fn(n-1), up to width at once, and
// returns the error of the lowest i that failed.
func forEachParallel(n, width int, fn func(i int) error) error {
	errs := make([]error, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(n, width) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				errs[i] = fn(i)
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
