package base

import "fmt"

// SizeMismatch describes a file of size bytes whose manifest records
// recorded bytes, naming the offset where the two part: "is truncated at
// offset N: ..." or "is longer than recorded: ...".
func SizeMismatch(size, recorded uint64) string {
	if size < recorded {
		return fmt.Sprintf("is truncated at offset %d: the manifest records %d bytes", size, recorded)
	}
	return fmt.Sprintf("is longer than recorded: the manifest records %d bytes, the file holds %d more from offset %d", recorded, size-recorded, recorded)
}
