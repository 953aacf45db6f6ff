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

// ErrUnsupportedFormat is wrapped by every error that reports a file in a
// format bloomkv recognizes as another engine's or version's, or does not
// recognize at all, but does not read: not damage, but nothing to read it
// with. Test for it with errors.Is.
var ErrUnsupportedFormat = errors.New("bloomkv: unsupported format")

// UnsupportedErrorf returns an error built from format and args, as
// fmt.Errorf would, that also wraps ErrUnsupportedFormat.
func UnsupportedErrorf(format string, args ...any) error {
	return fmt.Errorf(format+": %w", append(args, ErrUnsupportedFormat)...)
}
