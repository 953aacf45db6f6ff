//go:build !unix

package riblt

import "time"

// cpuTime returns 0: the tests measure CPU time on Unix systems only.
func cpuTime() time.Duration { return 0 }
