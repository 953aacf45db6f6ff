package bloomkv

// The errors the API returns, checkable with errors.Is.

import (
	"errors"

	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/vfs"
)

// ErrLocked is wrapped by the error Open returns when another DB (in this
// process or another) holds the store's directory.
var ErrLocked = vfs.ErrLocked

// ErrCorruption is wrapped by every error that reports stored data failing a
// format check or a checksum. Test for it with errors.Is.
var ErrCorruption = base.ErrCorruption

// ErrNotFound is returned by Get for a key the store does not hold.
var ErrNotFound = errors.New("bloomkv: not found")

// ErrClosed is returned by operations on a closed DB.
var ErrClosed = errors.New("bloomkv: closed")

// ErrReadOnly is returned by writes to a store opened ReadOnly.
var ErrReadOnly = errors.New("bloomkv: store opened read-only")

// ErrTooLarge is wrapped by the error returned for a key, value or batch
// beyond MaxKeySize, MaxValueSize or MaxBatchSize.
var ErrTooLarge = errors.New("bloomkv: too large")

// ErrUnsupportedFormat is wrapped by the error Open returns for a store of a
// newer format version than this build supports (FormatNewest), which names
// both versions; by the errors of calls that need a newer format than the
// store's (Ingest) or than the build's (RatchetFormatVersion); and by those
// reporting a file in a format bloomkv recognizes as another engine's or
// version's (Pebble's columnar tables, say), or does not recognize at all,
// and does not read. It does not mark damage on its own: a table of the
// store that cannot be read is reported as corruption too, as the store
// wrote it.
var ErrUnsupportedFormat = base.ErrUnsupportedFormat
