// Package memtable will hold bloomkv's in-memory write buffer: a B-tree of
// internal keys that readers traverse while a writer inserts. It arrives with
// the "bloomkv DB, part 1" issue.
package memtable
