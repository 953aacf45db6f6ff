//go:build !unix

package vfs

import (
	"errors"
	"os"
)

func mapFile(*os.File, int) ([]byte, error) { return nil, errors.ErrUnsupported }

func unmapFile([]byte) error { return nil }
