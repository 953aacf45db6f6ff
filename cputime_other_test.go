//go:build !unix

package bloomkv

import "time"

// processCPUTime is not measured here.
func processCPUTime() time.Duration { return 0 }
