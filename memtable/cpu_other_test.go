//go:build !unix

package memtable

import "testing"

// cpuMeter reports nothing where getrusage is missing.
func cpuMeter(b *testing.B) (stop func()) { return func() {} }
