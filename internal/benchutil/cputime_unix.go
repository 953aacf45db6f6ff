//go:build unix

package benchutil

import (
	"syscall"
	"time"
)

// CPUTime returns the user and system CPU time the process has used, garbage
// collection included, or 0 where it cannot be measured. Other processes on
// the machine disturb it less than they do wall time.
func CPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
