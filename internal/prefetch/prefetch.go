// Package prefetch asks the CPU to load memory into its caches ahead of use.
package prefetch

import "unsafe"

// Range asks the CPU to bring every cache line of b into its caches. It
// only hints: it never faults, and returns before the loads complete.
func Range(b []byte) {
	if len(b) > 0 {
		lines(&b[0], len(b))
	}
}

// Ptr asks the CPU to bring the cache line at p into its caches.
func Ptr(p unsafe.Pointer) { lines((*byte)(p), 1) }
