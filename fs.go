package bloomkv

import (
	"github.com/bloomkv/bloomkv/internal/cache"
	"github.com/bloomkv/bloomkv/internal/manifest"
	"github.com/bloomkv/bloomkv/internal/vfs"
)

// FS is a file system: every file a DB reads or writes goes through the one
// in Options.FS. Implement it to put a store on storage of your own; OSFS,
// NewMemFS and NewFaultFS return the ones bloomkv provides.
type FS = vfs.FS

// File is an open file of an FS.
type File = vfs.File

// Linker is implemented by an FS that can give a file a second name (a
// hard link). Checkpoint and Ingest link tables through it, and copy them on
// an FS without it.
type Linker = vfs.Linker

// MemFS is an in-memory FS that models what survives a crash: a file's
// contents as of its last Sync, and a directory's entries as of its last
// SyncDir. Its CrashClone method returns that state, as a disk would be
// found after a power loss.
type MemFS = vfs.MemFS

// FaultFS wraps an FS and fails the operations its injector picks, for
// tests of how a program copes with I/O errors.
type FaultFS = vfs.ErrorFS

// FaultOp names an FS operation a FaultFS can fail.
type FaultOp = vfs.Op

// The operations a FaultFS can fail.
const (
	FaultCreate  = vfs.OpCreate
	FaultOpen    = vfs.OpOpen
	FaultRead    = vfs.OpRead
	FaultWrite   = vfs.OpWrite
	FaultSync    = vfs.OpSync
	FaultClose   = vfs.OpClose
	FaultRemove  = vfs.OpRemove
	FaultRename  = vfs.OpRename
	FaultMkdir   = vfs.OpMkdir
	FaultList    = vfs.OpList
	FaultExists  = vfs.OpExists
	FaultSyncDir = vfs.OpSyncDir
	FaultLock    = vfs.OpLock
	FaultLink    = vfs.OpLink
)

// FaultInjector decides whether an operation on a file fails: it returns
// the error to fail with, or nil. It must be safe for concurrent use.
type FaultInjector = vfs.Injector

// ErrInjected is wrapped by the errors FailOnce injects.
var ErrInjected = vfs.ErrInjected

// ErrLocked is wrapped by the error Open returns when another DB (in this
// process or another) holds the store's directory.
var ErrLocked = vfs.ErrLocked

// OSFS returns the operating system's file system, the default.
func OSFS() FS { return vfs.Default }

// NewMemFS returns an empty in-memory file system.
func NewMemFS() *MemFS { return vfs.NewMem() }

// NewFaultFS returns a FaultFS over fs that fails nothing until its
// SetInjector is given an injector.
func NewFaultFS(fs FS) *FaultFS { return vfs.NewErrorFS(fs) }

// FailOnce returns an injector that fails the n-th (from 0) operation of
// kind op, or of any kind when op is nil, once, with an error wrapping
// ErrInjected.
func FailOnce(op *FaultOp, n int64) FaultInjector { return vfs.FailOnce(op, n) }

// CacheMetrics are the block cache's counters and size.
type CacheMetrics = cache.Metrics

// NumLevels is the number of levels of the tree, 0 to 6.
const NumLevels = manifest.NumLevels
