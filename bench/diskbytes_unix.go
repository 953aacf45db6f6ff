//go:build unix

package main

import (
	"io/fs"
	"syscall"
)

// fileBytes is the bytes a file takes on disk: its size, or the blocks
// allocated to it when fewer. Badger and bbolt size their files ahead of
// the data (Badger's memtable log and value log are sparse files of up to
// 2 GiB), and only the blocks written hold anything.
func fileBytes(info fs.FileInfo) int64 {
	if st, ok := info.Sys().(*syscall.Stat_t); ok && st.Blocks*512 < info.Size() {
		return st.Blocks * 512
	}
	return info.Size()
}
