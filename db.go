// Package bloomkv is an embedded LSM key-value store whose sstables each
// carry a cache-line-blocked Bloom filter, so that a read of a key a table
// does not hold costs one cache line of memory instead of a disk read.
//
// The store itself (Open, Get, Set, Delete, batches, iterators, snapshots) is
// being built issue by issue; see README.md for what works today.
package bloomkv

import "github.com/bloomkv/bloomkv/internal/base"

// ErrCorruption is wrapped by every error that reports stored data failing a
// format check or a checksum. Test for it with errors.Is.
var ErrCorruption = base.ErrCorruption
