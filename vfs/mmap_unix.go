//go:build unix

package vfs

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// mapFile maps the first size bytes of f read-only. Point reads touch a few
// pages each, so the kernel is told not to read ahead on a fault.
func mapFile(f *os.File, size int) ([]byte, error) {
	if strconv.IntSize < 64 {
		return nil, unix.ENOTSUP // keep the address space of 32-bit platforms
	}
	data, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, err
	}
	_ = unix.Madvise(data, unix.MADV_RANDOM) // advice only
	return data, nil
}

func unmapFile(data []byte) error { return unix.Munmap(data) }
