// Package sstable will read and write bloomkv's sorted string tables in the
// RocksDB/LevelDB block-based format, each with a filterblock filter. It
// arrives with the "sstable" issue.
package sstable
