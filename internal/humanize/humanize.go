// Package humanize formats quantities for people: the store's metrics and
// the inspection tool print sizes through it.
package humanize

import "fmt"

// Bytes formats a byte count with a binary unit: "512 B", "1.5 KiB".
func Bytes(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n), -1
	for v >= unit && i < 4 {
		v /= unit
		i++
	}
	return fmt.Sprintf("%.1f %ciB", v, "KMGTP"[i])
}
