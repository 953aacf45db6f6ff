package bloomkv

// Format versions: what a store's files need of the code that opens them,
// and raising a store's version.

import (
	"errors"
	"fmt"

	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/manifest"
)

// FormatVersion is the version of a store's on-disk format: which records
// its MANIFEST may hold. A build opens stores of every version up to
// FormatNewest and refuses newer ones with ErrUnsupportedFormat.
//
// A new store is created at Options.FormatVersion (FormatNewest by
// default). An existing store keeps its version when opened, unless
// Options.FormatVersion asks for a newer one: Open then raises it (the
// manifest Open writes records the new version), as
// DB.RatchetFormatVersion does for an open store. There is no downgrade:
// once a store is at a version, builds that do not know that version cannot
// open it.
type FormatVersion uint64

// The format versions, oldest first.
const (
	// FormatOriginal is the format of stores written before versions were
	// recorded: MANIFEST tags 1 to 7, no version field. Builds from before
	// format versions open such a store, with one exception: tag 7 (a
	// WAL's size at a clean Close, manifest.ClosedLog) is written by every
	// clean Close, and builds that do not know it refuse a store last
	// closed cleanly by a build that does, reporting "unknown tag 7" as
	// corruption. Format versions are recorded so that a build refusing a
	// store it cannot read says why (ErrUnsupportedFormat) instead.
	FormatOriginal FormatVersion = manifest.FormatOriginal
	// FormatVersioned records the version in the manifest (tag 8, the
	// first field of each manifest's first edit). Builds from before
	// format versions refuse it as corruption ("unknown tag 8"); later
	// builds that do not know a store's version refuse it with
	// ErrUnsupportedFormat, naming both versions.
	FormatVersioned FormatVersion = manifest.FormatVersioned
	// FormatIngest records tables added by DB.Ingest, whose keys take
	// the sequence number the ingestion assigned (manifest tag 9).
	// DB.Ingest needs it.
	FormatIngest FormatVersion = manifest.FormatIngest
	// FormatWALSyncOffsets writes the write-ahead logs in WAL-sync chunks
	// (the chunk format Pebble names so): each chunk's header also holds
	// the log's number and the offset through which the log was synced
	// when the chunk was written. A synced log then writes zeros ahead of
	// its records, which makes a synced write cheaper, and recovery still
	// tells corruption before a synced offset from a crash's lost tail
	// after it. The logs written before the store reaches this version
	// keep their format. Builds that do not know it cannot read such logs.
	FormatWALSyncOffsets FormatVersion = manifest.FormatWALSyncOffsets
	// FormatNewest is the newest version this build supports, the default
	// for new stores.
	FormatNewest = FormatWALSyncOffsets
)

// String returns the version's number and name, e.g. "2 (FormatVersioned)".
func (v FormatVersion) String() string {
	name := "unknown to this build"
	switch v {
	case FormatOriginal:
		name = "FormatOriginal"
	case FormatVersioned:
		name = "FormatVersioned"
	case FormatIngest:
		name = "FormatIngest"
	case FormatWALSyncOffsets:
		name = "FormatWALSyncOffsets"
	}
	return fmt.Sprintf("%d (%s)", uint64(v), name)
}

// errStoreTooNew is Open's error for a store of a version newer than this
// build supports, read at offset off of manifest file name.
func errStoreTooNew(name string, off int64, v uint64) error {
	return fmt.Errorf("bloomkv: %s: edit at offset %d: the store is at format version %d, newer than this build supports (FormatNewest, %v): "+
		"open it with a newer build: %w", name, off, v, FormatNewest, ErrUnsupportedFormat)
}

// noteFormat follows the format version through the manifest's edits as
// Open reads them: the first edit sets it (FormatOriginal without a version
// field), later ones may raise it. It returns the version after edit e, the
// i-th, of manifest name.
func noteFormat(name string, i int, format FormatVersion, e *manifest.VersionEdit) (FormatVersion, error) {
	v := FormatVersion(e.FormatVersion)
	switch {
	case v == 0 && i == 0:
		return FormatOriginal, nil
	case v == 0:
		return format, nil
	case v < format:
		return 0, base.CorruptionErrorf("bloomkv: %s: edit %d records format version %d, below the %d an earlier edit recorded", name, i, v, format)
	}
	return v, nil
}

// checkEditFormat refuses an edit, the i-th of manifest name, that holds
// what the store's format version does not allow.
func checkEditFormat(name string, i int, format FormatVersion, e *manifest.VersionEdit) error {
	for _, nf := range e.NewFiles {
		if nf.Meta.SeqNumOverride != 0 && format < FormatIngest {
			return base.CorruptionErrorf("bloomkv: %s: edit %d adds table %s ingested at sequence number %d, which format version %v cannot record",
				name, i, tableName(nf.Meta.FileNum), nf.Meta.SeqNumOverride, format)
		}
	}
	return nil
}

// FormatVersion returns the store's format version.
func (d *DB) FormatVersion() FormatVersion {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.mu.formatVersion
}

// RatchetFormatVersion raises the store's format version to v, durably:
// from then on the store may hold what v allows, and builds that do not
// know v cannot open it. A v at or below the store's version does nothing
// (there is no downgrade); one newer than FormatNewest is refused with
// ErrUnsupportedFormat.
func (d *DB) RatchetFormatVersion(v FormatVersion) error {
	if d.closedFlag.Load() {
		return ErrClosed
	}
	if d.opts.ReadOnly {
		return ErrReadOnly
	}
	if v > FormatNewest {
		return fmt.Errorf("bloomkv: format version %d is newer than this build supports (FormatNewest, %v): %w", uint64(v), FormatNewest, ErrUnsupportedFormat)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	// A raise under way is seen before the version is compared: d.mu stays
	// held from here to the edit, so no other raise comes between.
	d.waitEditLocked()
	switch {
	case d.mu.closed:
		return ErrClosed
	case d.mu.bgErr != nil:
		return d.mu.bgErr
	case v <= d.mu.formatVersion:
		return nil
	}
	if err := d.logAndApplyLocked(&manifest.VersionEdit{FormatVersion: uint64(v)}); err != nil {
		err = fmt.Errorf("bloomkv: raising the format version to %v failed; the store takes no more writes until reopened: %w", v, err)
		if d.mu.bgErr == nil {
			d.mu.bgErr = err
		}
		d.mu.cond.Broadcast()
		return err
	}
	d.opts.Logger.Info("bloomkv: format version raised", "dir", d.dir, "from", d.mu.formatVersion.String(), "to", v.String())
	d.mu.formatVersion = v
	return nil
}

// checkFormatOption checks Options.FormatVersion.
func checkFormatOption(v FormatVersion) error {
	if v > FormatNewest {
		return fmt.Errorf("bloomkv: Options.FormatVersion %d is newer than this build supports (FormatNewest, %v): %w", uint64(v), FormatNewest, ErrUnsupportedFormat)
	}
	return nil
}

// asUnsupported reports whether err is the manifest's refusal of a newer
// format, and its version.
func asUnsupported(err error) (uint64, bool) {
	var ue *manifest.UnsupportedFormatError
	if errors.As(err, &ue) {
		return ue.Version, true
	}
	return 0, false
}
