// Package pebblestore reads a store Pebble wrote, read-only and without
// Pebble: its marker files, its manifest (manifest.DecodePebble), its WALs
// (record and batchrepr in Pebble's formats) and its tables (the sstable
// reader, Pebble's row formats). It serves the inspection tool, which
// answers db commands on a Pebble store as Pebble would; the store's engine
// never uses it. It writes nothing: files are only opened for reading.
//
// It reads stores whose tables are in formats the sstable reader reads
// (Pebble's row formats, Pebblev1 to v4: its default up to format major
// version 018, and later with columnar blocks off), including flushable
// ingests still in a WAL (with their excises) and virtual tables (the
// parts of a table an excise left), and refuses, as unsupported, synthetic
// prefixes and suffixes and merges under a merger other than Pebble's
// default concatenation. It opens stores with blob files (format major
// version 024 on) and resolves a table's inline blob handle to its value
// (BlobValue); scans resolve the values a table holds in blob files once
// the sstable iterator tells them apart (IsBlobReference), and until then
// the tables that hold them are refused.
package pebblestore

// Opening a store Pebble wrote: its marker files, the Store, its tables and
// their readers.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/manifest"
	"github.com/bloomkv/bloomkv/internal/rangedel"
	"github.com/bloomkv/bloomkv/sstable"
)

// ErrNotFound is returned by Get for a key the store does not hold.
var ErrNotFound = errors.New("pebblestore: not found")

// The kinds of point entry Pebble writes besides SET and DEL.
const (
	kindMerge         base.Kind = 2
	kindLogData       base.Kind = 3
	kindSingleDelete  base.Kind = 7
	kindSetWithDelete base.Kind = 18
	kindIngestSST     base.Kind = 22
	kindDeleteSized   base.Kind = 23
	kindExcise        base.Kind = 24
)

// concatenateMerger is the name of Pebble's default merger, which joins a
// key's merge operands oldest first onto its base value.
const concatenateMerger = "pebble.concatenate"

// IsPebble reports whether dir holds a Pebble store: a manifest marker
// and no CURRENT file (Pebble from format major version 013 on), or a
// CURRENT file and an OPTIONS file Pebble wrote (older Pebble). bloomkv
// writes neither markers nor OPTIONS files.
func IsPebble(dir string) bool {
	names, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	_, err = os.Stat(filepath.Join(dir, "CURRENT"))
	current := err == nil
	for _, n := range names {
		if strings.HasPrefix(n.Name(), "marker.manifest.") && !current {
			return true
		}
	}
	if options := newestOptions(names); current && options != "" {
		data, err := os.ReadFile(filepath.Join(dir, options))
		return err == nil && strings.Contains(string(data), "pebble_version=")
	}
	return false
}

// Table is a table of the store's current version, with Pebble's details.
type Table struct {
	Level  int
	Meta   *manifest.FileMetadata
	Pebble manifest.PebbleTable
	// Path is the table's file: for a virtual table (Pebble.Virtual), the
	// backing file it is a part of, read only within Meta's bounds.
	Path string
}

// bounds returns the user keys a table's entries are read within: all for
// a physical table; for a virtual table, from its smallest key to its
// largest, which is exclusive when it is a sentinel.
func (t *Table) bounds() (lo, hi []byte, hiExclusive bool) {
	if !t.Pebble.Virtual {
		return nil, nil, false
	}
	return t.Meta.Smallest.UserKey, t.Meta.Largest.UserKey, t.Meta.Largest.SeqNum() == base.SeqNumMax
}

// Store is a Pebble store opened read-only.
type Store struct {
	Dir string
	// FormatVersion is the format major version the marker names (0 when
	// there is none), Manifest the current manifest's file name, Options
	// the newest OPTIONS file's name ("" when there is none).
	FormatVersion uint64
	Manifest      string
	Options       string
	// LogNumber is the manifest's log number: the WALs numbered from it on
	// hold writes not in tables; WALs lists them.
	LogNumber uint64
	WALs      []string
	// LastSeq is the newest sequence number, of the manifest or the WALs.
	LastSeq base.SeqNum
	// Version is the manifest's last version; Tables its tables by level.
	Version *manifest.Version
	Tables  [manifest.NumLevels][]Table
	// Flushable are the tables of flushable ingests: ingested while
	// memtables overlapped them, named in a WAL and not yet in the
	// manifest. Each reads at the sequence number the WAL's batch gives it
	// (its Meta's SmallestSeq and LargestSeq); Level is -1.
	Flushable []Table
	// BlobFiles are the version's blob files by blob file ID (which a
	// rewrite keeps while the file number changes).
	BlobFiles map[uint64]manifest.PebbleBlobFile

	mem     []memEntry           // the WALs' point writes, sorted
	memDels []rangedel.Tombstone // the WALs' range deletions, and excises
	walDels int                  // how many of memDels are range deletions
	readers map[uint64]*tableReader
	blobs   map[uint64]*blobReader // by file number
	merger  string
}

type memEntry struct {
	key   base.InternalKey
	value []byte
}

type tableReader struct {
	f  *os.File
	r  *sstable.Reader
	t  *Table
	ov base.SeqNum // the sequence number every key reads as; 0: as stored
}

// ErrInUse is wrapped by Open's error for a store a Pebble process has
// open.
var ErrInUse = errors.New("pebblestore: store in use by another process")

// Open reads the store in dir: the markers, the manifest and the WALs. The
// tables are opened when first read. Errors name the file and offset. A
// store another process holds open, by Pebble's lock, is refused.
func Open(dir string) (*Store, error) {
	s := &Store{Dir: dir, readers: map[uint64]*tableReader{}, blobs: map[uint64]*blobReader{}, BlobFiles: map[uint64]manifest.PebbleBlobFile{},
		merger: concatenateMerger}
	names, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	if err := checkUnlocked(dir); err != nil {
		return nil, err
	}
	var manifestIter, formatIter uint64
	s.Options = newestOptions(names)
	for _, n := range names {
		name := n.Name()
		if rest, ok := strings.CutPrefix(name, "marker.manifest."); ok {
			it, value, err := parseMarker(rest)
			if err != nil {
				return nil, fmt.Errorf("pebblestore: %s: %w", filepath.Join(dir, name), err)
			}
			if it >= manifestIter {
				manifestIter, s.Manifest = it, value
			}
		} else if rest, ok := strings.CutPrefix(name, "marker.format-version."); ok {
			it, value, err := parseMarker(rest)
			if err == nil {
				var v uint64
				v, err = strconv.ParseUint(value, 10, 64)
				if err == nil && it >= formatIter {
					formatIter, s.FormatVersion = it, v
				}
			}
			if err != nil {
				return nil, fmt.Errorf("pebblestore: %s: bad format-version marker: %w", filepath.Join(dir, name), err)
			}
		}
	}
	if s.Manifest == "" {
		// Pebble before format major version 013 named the manifest in
		// CURRENT.
		current := filepath.Join(dir, "CURRENT")
		data, err := os.ReadFile(current)
		if err != nil {
			return nil, fmt.Errorf("pebblestore: %s: no manifest marker and no CURRENT: not a Pebble store: %w", dir, err)
		}
		line, ok := strings.CutSuffix(string(data), "\n")
		if !ok {
			return nil, base.CorruptionErrorf("pebblestore: %s: %q is not a line", current, data)
		}
		s.Manifest = line
	}
	if strings.ContainsAny(s.Manifest, `/\`) || !strings.HasPrefix(s.Manifest, "MANIFEST-") {
		return nil, fmt.Errorf("pebblestore: %s: the manifest marker names %q, not a manifest", dir, s.Manifest)
	}
	if err := s.readManifest(); err != nil {
		return nil, err
	}
	if err := s.readWALs(names); err != nil {
		return nil, err
	}
	return s, nil
}

// parseMarker splits a marker file's name after its kind: the iteration,
// a dot, and the value.
func parseMarker(rest string) (iter uint64, value string, err error) {
	num, value, ok := strings.Cut(rest, ".")
	if !ok || value == "" {
		return 0, "", fmt.Errorf("marker %q lacks a value", rest)
	}
	iter, err = strconv.ParseUint(num, 10, 64)
	return iter, value, err
}

// tables calls fn with every table the store reads: the flushable ones,
// then level by level.
func (s *Store) tables(fn func(t *Table) error) error {
	for i := range s.Flushable {
		if err := fn(&s.Flushable[i]); err != nil {
			return err
		}
	}
	for l := range s.Tables {
		for i := range s.Tables[l] {
			if err := fn(&s.Tables[l][i]); err != nil {
				return err
			}
		}
	}
	return nil
}

// Close closes the tables the store opened.
func (s *Store) Close() error {
	var first error
	for _, tr := range s.readers {
		if err := tr.f.Close(); err != nil && first == nil {
			first = err
		}
	}
	s.readers = nil
	for _, br := range s.blobs {
		br.r.Close()
		if err := br.f.Close(); err != nil && first == nil {
			first = err
		}
	}
	s.blobs = nil
	return first
}

// reader returns the reader of a table, opening it on first use.
func (s *Store) reader(t *Table) (*tableReader, error) {
	if tr, ok := s.readers[t.Meta.FileNum]; ok {
		return tr, nil
	}
	if len(t.Pebble.BlobReferences) > 0 && !resolvesBlobs() {
		// Its values in blob files would read as their inline handles.
		return nil, base.UnsupportedErrorf("pebblestore: %s (L%d): the table references blob files, whose values scans do not yet resolve", t.Path, t.Level)
	}
	f, err := os.Open(t.Path)
	if err != nil {
		return nil, fmt.Errorf("pebblestore: table %06d (L%d): %w", t.Meta.FileNum, t.Level, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !t.Pebble.Virtual && uint64(st.Size()) != t.Meta.Size {
		// A virtual table's size is its share of the file; any other's is
		// the file's, and a file of another size was cut or overwritten.
		f.Close()
		return nil, base.CorruptionErrorf("pebblestore: table %s (L%d) %s", t.Path, t.Level, base.SizeMismatch(uint64(st.Size()), t.Meta.Size))
	}
	r, err := sstable.NewReader(f, st.Size(), sstable.ReaderOptions{FileName: t.Path})
	if err != nil {
		f.Close()
		return nil, err
	}
	if name, ok := r.Properties().User["rocksdb.merge.operator"]; ok && string(name) != concatenateMerger {
		s.merger = string(name)
	}
	tr := &tableReader{f: f, r: r, t: t}
	if t.Meta.SmallestSeq == t.Meta.LargestSeq {
		// Pebble reads every key of such a table (an ingested one) at
		// the table's one sequence number.
		tr.ov = t.Meta.SmallestSeq
	}
	s.readers[t.Meta.FileNum] = tr
	return tr, nil
}
