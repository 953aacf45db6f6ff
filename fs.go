package bloomkv

import "github.com/bloomkv/bloomkv/vfs"

// ErrLocked is wrapped by the error Open returns when another DB (in this
// process or another) holds the store's directory.
var ErrLocked = vfs.ErrLocked
