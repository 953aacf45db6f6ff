//go:build !unix

package main

import "io/fs"

// fileBytes is a file's size: where the system does not say how many
// blocks a file has, a sparse file counts whole.
func fileBytes(info fs.FileInfo) int64 { return info.Size() }
