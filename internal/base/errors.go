// Package base holds the definitions every bloomkv package shares: the
// sentinel errors, and (as the engine grows) internal keys and comparers.
package base

import (
	"errors"
	"fmt"
)

// ErrCorruption is wrapped by every error that reports data which failed a
// format check or a checksum. Test for it with errors.Is.
var ErrCorruption = errors.New("bloomkv: corruption")

// CorruptionErrorf returns an error built from format and args, as
// fmt.Errorf would, that also wraps ErrCorruption. format may itself use %w to
// wrap an underlying cause. Callers name the file and offset where known.
func CorruptionErrorf(format string, args ...any) error {
	return fmt.Errorf(format+": %w", append(args, ErrCorruption)...)
}

// ErrUnsupportedFormat is wrapped by every error that reports a store or file
// in a format bloomkv does not read: a store or manifest of a format version
// newer than this build knows, another engine's file of a version it does
// not read, or a file it does not recognize at all. It is not damage: a
// newer build, or another tool, reads the data. Test for it with errors.Is.
var ErrUnsupportedFormat = errors.New("bloomkv: unsupported format")

// UnsupportedErrorf returns an error built from format and args, as
// fmt.Errorf would, that also wraps ErrUnsupportedFormat.
func UnsupportedErrorf(format string, args ...any) error {
	return fmt.Errorf(format+": %w", append(args, ErrUnsupportedFormat)...)
}
