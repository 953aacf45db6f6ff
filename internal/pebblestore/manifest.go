package pebblestore

// Reading the store's manifest: its edits, its levels and its blob files.

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/manifest"
	"github.com/bloomkv/bloomkv/internal/record"
)

// readManifest builds the version from the manifest's edits. A torn final
// edit is dropped, as Pebble drops it.
func (s *Store) readManifest() error {
	name := filepath.Join(s.Dir, s.Manifest)
	f, err := os.Open(name)
	if err != nil {
		return fmt.Errorf("pebblestore: manifest: %w", err)
	}
	defer f.Close()
	r, err := record.NewReader(f, name)
	if err != nil {
		return err
	}
	v := &manifest.Version{}
	details := map[uint64]manifest.PebbleTable{}
	for n := 0; ; n++ {
		rec, err := r.Next()
		if err == io.EOF {
			if n == 0 {
				_, why, _ := r.TornTail()
				return base.CorruptionErrorf("pebblestore: %s: no version edit (%s)", name, why)
			}
			break
		}
		if err != nil {
			return err
		}
		ed, err := manifest.DecodePebble(rec)
		if err == nil {
			err = s.checkEdit(ed)
		}
		if err == nil {
			v, err = v.Apply(&ed.VersionEdit)
		}
		if err == nil {
			err = s.applyBlobFiles(ed)
		}
		if err != nil {
			return fmt.Errorf("pebblestore: %s: edit %d at offset %d: %w", name, n, r.Offset(), err)
		}
		if ed.ComparerName != "" && ed.ComparerName != base.ComparerName {
			return base.UnsupportedErrorf("pebblestore: %s: comparer %q, not %q", name, ed.ComparerName, base.ComparerName)
		}
		for i, nf := range ed.NewFiles {
			details[nf.Meta.FileNum] = ed.Tables[i]
		}
		if ed.LogNumber != 0 {
			s.LogNumber = ed.LogNumber
		}
		s.LastSeq = max(s.LastSeq, ed.LastSeq)
	}
	s.Version = v
	for l := range manifest.NumLevels {
		for f := range v.Level(l) {
			pt := details[f.FileNum]
			file := f.FileNum
			if pt.Virtual {
				file = pt.BackingFileNum
			}
			s.Tables[l] = append(s.Tables[l], Table{Level: l, Meta: f, Pebble: pt,
				Path: filepath.Join(s.Dir, fmt.Sprintf("%06d.sst", file))})
		}
	}
	return nil
}

// checkEdit refuses what this reader cannot read as Pebble would.
func (s *Store) checkEdit(ed *manifest.PebbleEdit) error {
	for i, t := range ed.Tables {
		switch {
		case t.SyntheticPrefix != nil || t.SyntheticSuffix != nil:
			return base.UnsupportedErrorf("table %d has a synthetic prefix or suffix", ed.NewFiles[i].Meta.FileNum)
		}
	}
	return nil
}

// applyBlobFiles applies an edit's removed, then added, blob files to
// s.BlobFiles. A blob file removed must be live under that file number.
func (s *Store) applyBlobFiles(ed *manifest.PebbleEdit) error {
	for _, b := range ed.DeletedBlobFiles {
		if cur, ok := s.BlobFiles[b.ID]; !ok || cur.FileNum != b.FileNum {
			return base.CorruptionErrorf("blob file %d (%06d.blob) is deleted but not live", b.ID, b.FileNum)
		}
		delete(s.BlobFiles, b.ID)
	}
	for _, b := range ed.NewBlobFiles {
		if cur, ok := s.BlobFiles[b.ID]; ok {
			return base.CorruptionErrorf("blob file %d (%06d.blob) is added while live as %06d.blob", b.ID, b.FileNum, cur.FileNum)
		}
		s.BlobFiles[b.ID] = b
	}
	return nil
}
