package main

// Values a Pebble table keeps in blob files: sstable scan shows each as its
// reference, and resolves it when the blob files are given (--blob-file) or
// when the table lies in a Pebble store whose manifest names them.

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/bloomkv/bloomkv/internal/blobfile"
	"github.com/bloomkv/bloomkv/internal/pebblestore"
)

// blobRefOut is a value held in a blob file: the table's reference to the
// file, the value's place in it, and the file it was read from when
// resolved.
type blobRefOut struct {
	Reference uint32 `json:"reference"`
	Block     uint32 `json:"block"`
	Value     uint32 `json:"value_id"`
	Length    uint32 `json:"length"`
	File      string `json:"file,omitempty"`
}

// blobValues resolves a table's inline blob handles.
type blobValues struct {
	// given are the blob files named by --blob-file, by reference index.
	given []string
	files map[string]*blobfile.Reader
	// store and tbl are the Pebble store the table lies in and the
	// table in its version, when there is one.
	store *pebblestore.Store
	tbl   *pebblestore.Table
}

// newBlobValues prepares to resolve the blob values of the table at path:
// through the given files, or else through the Pebble store in the table's
// directory when its version holds the table.
func newBlobValues(path string, given []string) *blobValues {
	bv := &blobValues{given: given, files: map[string]*blobfile.Reader{}}
	if len(given) > 0 {
		return bv
	}
	dir := filepath.Dir(path)
	num, err := strconv.ParseUint(strings.TrimSuffix(filepath.Base(path), ".sst"), 10, 64)
	if err != nil || !pebblestore.IsPebble(dir) {
		return bv
	}
	s, err := pebblestore.Open(dir)
	if err != nil {
		return bv // the table is read on its own; values stay references
	}
	for l := range s.Tables {
		for i := range s.Tables[l] {
			if t := &s.Tables[l][i]; t.Meta.FileNum == num && !t.Pebble.Virtual {
				bv.store, bv.tbl = s, t
				return bv
			}
		}
	}
	s.Close()
	return bv
}

// close closes what the resolver opened.
func (bv *blobValues) close() {
	for _, r := range bv.files {
		r.Close()
	}
	if bv.store != nil {
		bv.store.Close()
	}
}

// resolve returns the reference an inline handle makes and, when the blob
// file is at hand, the value (nil otherwise).
func (bv *blobValues) resolve(inline []byte) (blobRefOut, []byte, error) {
	h, err := blobfile.DecodeInlineHandle(inline)
	if err != nil {
		return blobRefOut{}, nil, err
	}
	ref := blobRefOut{Reference: h.ReferenceIndex, Block: h.BlockID, Value: h.ValueID, Length: h.ValueLen}
	switch {
	case int(h.ReferenceIndex) < len(bv.given):
		name := bv.given[h.ReferenceIndex]
		r, ok := bv.files[name]
		if !ok {
			f, err := os.Open(name)
			if err != nil {
				return ref, nil, err
			}
			st, err := f.Stat()
			if err == nil {
				r, err = blobfile.Open(f, st.Size())
			}
			if err != nil {
				f.Close()
				return ref, nil, fmt.Errorf("%s: %w", name, err)
			}
			bv.files[name] = r
		}
		v, err := r.Value(h.Handle)
		if err != nil {
			return ref, nil, fmt.Errorf("%s: %w", name, err)
		}
		ref.File = name
		return ref, v, nil
	case bv.store != nil:
		v, err := bv.store.BlobValue(bv.tbl, inline)
		if err != nil {
			return ref, nil, err
		}
		if refs := bv.tbl.Pebble.BlobReferences; int(h.ReferenceIndex) < len(refs) {
			if bf, ok := bv.store.BlobFiles[refs[h.ReferenceIndex].FileID]; ok {
				ref.File = fmt.Sprintf("%06d.blob", bf.FileNum)
			}
		}
		return ref, v, nil
	}
	return ref, nil, nil
}
