package bloomkv

// The manifest: version edits written and applied, and a new manifest when
// the old one grows.

import (
	"fmt"

	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/manifest"
	"github.com/bloomkv/bloomkv/internal/record"
	"github.com/bloomkv/bloomkv/vfs"
)

func (d *DB) allocFileNumLocked() uint64 {
	n := d.mu.nextFileNum
	d.mu.nextFileNum++
	return n
}

// writeNewManifest writes a manifest holding the whole current state and
// points CURRENT at it.
func (d *DB) writeNewManifest() error {
	num := d.allocFileNumLocked()
	name := d.path(manifestName(num))
	f, w, err := createManifest(d.fs, name, d.snapshotEditLocked())
	if err != nil {
		return err
	}
	if err := setCurrent(d.fs, d.dir, num); err != nil {
		f.Close()
		return fmt.Errorf("bloomkv: writing %s: %w", name, err)
	}
	if d.mu.manifest != nil {
		d.mu.manifest.Close()
	}
	d.mu.manifest, d.mu.manifestW, d.mu.manifestNum = f, w, num
	return nil
}

// snapshotEditLocked returns an edit that alone records the current state:
// the format version, the comparer, the version's tables, the log number,
// the next file number and the last sequence number. A new manifest starts with it. d.mu is held.
func (d *DB) snapshotEditLocked() *manifest.VersionEdit {
	snap := &manifest.VersionEdit{ComparerName: base.ComparerName, LogNumber: d.mu.logNumber, NextFileNum: d.mu.nextFileNum, LastSeq: d.mu.lastSeq}
	if d.mu.formatVersion >= FormatVersioned {
		// The first field of the first edit: a build that does not know
		// the version reads it before any tag it may not know.
		snap.FormatVersion = uint64(d.mu.formatVersion)
	}
	for l, m := range d.mu.version.All() {
		snap.NewFiles = append(snap.NewFiles, manifest.NewFile{Level: l, Meta: m})
	}
	return snap
}

// createManifest creates the manifest name holding edits, synced, and
// returns it open for appending.
func createManifest(fs vfs.FS, name string, edits ...*manifest.VersionEdit) (vfs.File, *record.Writer, error) {
	f, err := fs.Create(name)
	if err != nil {
		return nil, nil, fmt.Errorf("bloomkv: creating %s: %w", name, err)
	}
	w := record.NewWriter(f, 0)
	for _, e := range edits {
		if _, err = w.Write(e.Encode()); err != nil {
			break
		}
	}
	if err == nil {
		err = w.Flush()
	}
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("bloomkv: writing %s: %w", name, err)
	}
	return f, w, nil
}

// logAndApplyLocked records edit in the manifest (synced) and installs the new
// version. d.mu is held on entry and on return, and released while the
// edit is written and synced, so that commits and reads do not wait for
// the manifest's sync; an edit under way holds off every other one
// (waitEditLocked), and the version it replaces stays current until the
// edit is durable.
func (d *DB) logAndApplyLocked(edit *manifest.VersionEdit) error {
	d.waitEditLocked()
	if err := d.mu.manifestErr; err != nil {
		return fmt.Errorf("bloomkv: an earlier edit of %s failed: %w", d.path(manifestName(d.mu.manifestNum)), err)
	}
	edit.NextFileNum, edit.LastSeq = d.mu.nextFileNum, d.mu.lastSeq
	v, err := d.mu.version.Apply(edit)
	if err != nil {
		return err
	}
	d.mu.editing = true
	f, w, name := d.mu.manifest, d.mu.manifestW, d.path(manifestName(d.mu.manifestNum))
	d.mu.Unlock()
	err = writeEdit(f, w, name, edit)
	d.mu.Lock()
	d.mu.editing = false
	d.mu.cond.Broadcast()
	if err != nil {
		d.mu.manifestErr = err
		return err
	}
	d.mu.version = v
	d.noteEditLocked(edit)
	if edit.LogNumber != 0 {
		d.mu.logNumber = edit.LogNumber
	}
	return nil
}

// waitEditLocked waits until no version edit is being written. d.mu is
// held, and released while it waits.
func (d *DB) waitEditLocked() {
	for d.mu.editing {
		d.mu.cond.Wait()
	}
}

// writeEdit appends edit to the manifest f (written through w, named name)
// and syncs it.
func writeEdit(f vfs.File, w *record.Writer, name string, edit *manifest.VersionEdit) error {
	if _, err := w.Write(edit.Encode()); err != nil {
		return fmt.Errorf("bloomkv: writing %s: %w", name, err)
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("bloomkv: writing %s: %w", name, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("bloomkv: syncing %s: %w", name, err)
	}
	return nil
}
