package bloomkv

import (
	"fmt"

	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/manifest"
	"github.com/bloomkv/bloomkv/internal/record"
)

func (d *DB) allocFileNumLocked() uint64 {
	n := d.nextFileNum
	d.nextFileNum++
	return n
}

// writeNewManifest writes a manifest holding the whole current state and
// points CURRENT at it.
func (d *DB) writeNewManifest() error {
	num := d.allocFileNumLocked()
	name := d.path(manifestName(num))
	f, err := d.fs.Create(name)
	if err != nil {
		return fmt.Errorf("bloomkv: creating %s: %w", name, err)
	}
	w := record.NewWriter(f, 0)
	snap := &manifest.VersionEdit{ComparerName: base.ComparerName, LogNumber: d.logNumber, NextFileNum: d.nextFileNum, LastSeq: d.lastSeq}
	for l, m := range d.version.All() {
		snap.NewFiles = append(snap.NewFiles, manifest.NewFile{Level: l, Meta: m})
	}
	_, err = w.Write(snap.Encode())
	if err == nil {
		err = w.Flush()
	}
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = setCurrent(d.fs, d.dir, num)
	}
	if err != nil {
		f.Close()
		return fmt.Errorf("bloomkv: writing %s: %w", name, err)
	}
	if d.manifest != nil {
		d.manifest.Close()
	}
	d.manifest, d.manifestW, d.manifestNum = f, w, num
	return nil
}

// logAndApplyLocked records edit in the manifest (synced) and installs the new
// version. d.mu is held.
func (d *DB) logAndApplyLocked(edit *manifest.VersionEdit) error {
	edit.NextFileNum, edit.LastSeq = d.nextFileNum, d.lastSeq
	v, err := d.version.Apply(edit)
	if err != nil {
		return err
	}
	if _, err := d.manifestW.Write(edit.Encode()); err != nil {
		return err
	}
	if err := d.manifestW.Flush(); err != nil {
		return err
	}
	if err := d.manifest.Sync(); err != nil {
		return fmt.Errorf("bloomkv: syncing %s: %w", d.path(manifestName(d.manifestNum)), err)
	}
	d.version = v
	d.noteEditLocked(edit)
	if edit.LogNumber != 0 {
		d.logNumber = edit.LogNumber
	}
	return nil
}
