//go:build !unix

package benchutil

import "time"

// CPUTime returns 0: the process's CPU time is not measured on this system.
func CPUTime() time.Duration { return 0 }
