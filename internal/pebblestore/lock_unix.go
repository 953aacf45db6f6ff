//go:build unix

package pebblestore

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// checkUnlocked fails, with an error wrapping ErrInUse, when another
// process holds the lock Pebble takes on its store's LOCK file (an
// exclusive fcntl lock) while it has the store open: what such a store
// holds on disk changes under a reader. It only asks; it takes no lock, so
// a Pebble DB of this process keeps its own.
func checkUnlocked(dir string) error {
	name := filepath.Join(dir, "LOCK")
	f, err := os.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // never opened by Pebble here, or copied without it
	}
	if err != nil {
		return fmt.Errorf("pebblestore: %w", err)
	}
	defer f.Close()
	lk := unix.Flock_t{Type: unix.F_RDLCK, Whence: io.SeekStart}
	if err := unix.FcntlFlock(f.Fd(), unix.F_GETLK, &lk); err != nil {
		return fmt.Errorf("pebblestore: asking for the lock on %s: %w", name, err)
	}
	if lk.Type != unix.F_UNLCK {
		return fmt.Errorf("pebblestore: %s is in use by another process (pid %d holds %s): %w", dir, lk.Pid, name, ErrInUse)
	}
	return nil
}
