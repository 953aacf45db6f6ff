// Package sstable reads and writes bloomkv's sorted string tables in the
// RocksDB/LevelDB block-based format, each with a filterblock filter, and
// reads the tables Pebble writes: its row formats Pebblev1 to v4 and its
// columnar formats Pebblev5 to v7.
//
// Columnar tables (columnar.go) are read through the same row-block path
// as the others: each columnar block (decoded by internal/colblk) is turned
// into the equivalent row block when it is read, before the block cache, so
// the cost falls on Pebble's columnar tables only, once per block read. Of
// Pebble's key schemas only the default one is read; a table of another is
// ErrUnsupportedFormat, naming the schema. A value Pebble holds in a blob
// file (Pebblev6 and up) is returned as its reference (Iter.IsBlobReference,
// Iter.BlobHandle); resolving it is the blob-file reader's business.
package sstable
