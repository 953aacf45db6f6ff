//go:build unix

package bloomkv

import (
	"syscall"
	"time"
)

// processCPUTime is the user and system CPU time the process has used, GC
// workers included; under contention from other processes it varies less
// than wall time.
func processCPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
