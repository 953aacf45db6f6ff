package pebblestore

// Blob values: the store's blob files and the values tables hold in them.

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/blobfile"
	"github.com/bloomkv/bloomkv/internal/manifest"
)

type blobReader struct {
	f    *os.File
	r    *blobfile.Reader
	path string
}

// BlobValue returns the value table t holds in a blob file. inline is the
// value as the table stores it: a value-prefix byte marking a blob value,
// then the inline handle (blobfile.DecodeInlineHandle), whose reference
// index picks one of the table's blob references. The reference's blob
// file ID names, through the version's blob files, the file NNNNNN.blob
// beside the tables. The value is valid until the store is closed. A handle
// naming no reference, a blob file the version lacks, or no value of its
// length is an error wrapping base.ErrCorruption.
func (s *Store) BlobValue(t *Table, inline []byte) ([]byte, error) {
	h, err := blobfile.DecodeInlineHandle(inline)
	if err != nil {
		return nil, fmt.Errorf("pebblestore: %s: %w", t.Path, err)
	}
	refs := t.Pebble.BlobReferences
	if uint64(h.ReferenceIndex) >= uint64(len(refs)) {
		return nil, base.CorruptionErrorf("pebblestore: %s: inline handle %s names blob reference %d of %d", t.Path, h, h.ReferenceIndex, len(refs))
	}
	id := refs[h.ReferenceIndex].FileID
	bf, ok := s.BlobFiles[id]
	if !ok {
		return nil, base.CorruptionErrorf("pebblestore: %s: inline handle %s names blob file %d, which the version does not hold", t.Path, h, id)
	}
	br, err := s.blobReader(bf)
	if err != nil {
		return nil, err
	}
	v, err := br.r.Value(h.Handle)
	if err != nil {
		return nil, fmt.Errorf("pebblestore: %s (blob file %d, for %s): %w", br.path, id, t.Path, err)
	}
	return v, nil
}

// blobReader returns the reader of a blob file, opening it on first use.
func (s *Store) blobReader(bf manifest.PebbleBlobFile) (*blobReader, error) {
	if br, ok := s.blobs[bf.FileNum]; ok {
		return br, nil
	}
	path := filepath.Join(s.Dir, fmt.Sprintf("%06d.blob", bf.FileNum))
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("pebblestore: blob file %d: %w", bf.ID, err)
	}
	st, err := f.Stat()
	if err == nil {
		var r *blobfile.Reader
		if r, err = blobfile.Open(f, st.Size()); err == nil {
			br := &blobReader{f: f, r: r, path: path}
			s.blobs[bf.FileNum] = br
			return br, nil
		}
	}
	f.Close()
	return nil, fmt.Errorf("pebblestore: %s: %w", path, err)
}
