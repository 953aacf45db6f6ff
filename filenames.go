package bloomkv

// The names of the store's files (logs, tables, manifests, CURRENT), and
// reading them back.

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/vfs"
)

// The files of a store: NNNNNN.log (WAL), NNNNNN.sst (table),
// MANIFEST-NNNNNN, CURRENT (names the live manifest) and LOCK.
const (
	currentName = "CURRENT"
	lockName    = "LOCK"
)

type fileKind int

const (
	kindUnknown fileKind = iota
	kindLog
	kindTable
	kindManifest
)

func logName(num uint64) string { return fmt.Sprintf("%06d.log", num) }

func tableName(num uint64) string { return fmt.Sprintf("%06d.sst", num) }

func manifestName(num uint64) string { return fmt.Sprintf("MANIFEST-%06d", num) }

// parseName returns the kind and number of a store file's name.
func parseName(name string) (fileKind, uint64) {
	var kind fileKind
	var digits string
	switch {
	case strings.HasSuffix(name, ".log"):
		kind, digits = kindLog, strings.TrimSuffix(name, ".log")
	case strings.HasSuffix(name, ".sst"):
		kind, digits = kindTable, strings.TrimSuffix(name, ".sst")
	case strings.HasPrefix(name, "MANIFEST-"):
		kind, digits = kindManifest, strings.TrimPrefix(name, "MANIFEST-")
	default:
		return kindUnknown, 0
	}
	n, err := strconv.ParseUint(digits, 10, 64)
	if err != nil || len(digits) < 6 {
		return kindUnknown, 0
	}
	return kind, n
}

// setCurrent points CURRENT at manifest num atomically: write a temporary
// file, sync it, rename it over CURRENT, sync the directory.
func setCurrent(fs vfs.FS, dir string, num uint64) error {
	tmp := vfs.Join(dir, fmt.Sprintf("CURRENT.%06d.dbtmp", num))
	f, err := fs.Create(tmp)
	if err != nil {
		return err
	}
	_, err = io.WriteString(f, manifestName(num)+"\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fs.Rename(tmp, vfs.Join(dir, currentName))
	}
	if err == nil {
		err = fs.SyncDir(dir)
	}
	if err != nil {
		fs.Remove(tmp)
		return fmt.Errorf("bloomkv: setting CURRENT to %s: %w", manifestName(num), err)
	}
	return nil
}

// readCurrent returns the manifest number CURRENT names.
func readCurrent(fs vfs.FS, dir string) (uint64, error) {
	f, err := fs.Open(vfs.Join(dir, currentName))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 256))
	if err != nil {
		return 0, fmt.Errorf("bloomkv: reading %s: %w", currentName, err)
	}
	s := string(b)
	if !strings.HasSuffix(s, "\n") {
		return 0, base.CorruptionErrorf("bloomkv: %s: %q does not end in a newline", vfs.Join(dir, currentName), s)
	}
	kind, num := parseName(strings.TrimSuffix(s, "\n"))
	if kind != kindManifest {
		return 0, base.CorruptionErrorf("bloomkv: %s: %q names no manifest", vfs.Join(dir, currentName), s)
	}
	return num, nil
}
