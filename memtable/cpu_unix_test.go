//go:build unix

package memtable

import (
	"syscall"
	"testing"
)

// cpuMeter reports the process's CPU time per op as cpu-ns/op when stopped:
// where other processes share the machine, wall time swings far more than
// CPU time does. Collector work on other threads counts.
func cpuMeter(b *testing.B) (stop func()) {
	start := cpuNanos()
	return func() { b.ReportMetric(float64(cpuNanos()-start)/float64(b.N), "cpu-ns/op") }
}

func cpuNanos() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
