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

import (
	"bytes"
	"cmp"
	"container/heap"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/batchrepr"
	"github.com/bloomkv/bloomkv/internal/blobfile"
	"github.com/bloomkv/bloomkv/internal/manifest"
	"github.com/bloomkv/bloomkv/internal/rangedel"
	"github.com/bloomkv/bloomkv/internal/record"
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

// newestOptions returns the name of the highest-numbered OPTIONS file among
// names, or "".
func newestOptions(names []os.DirEntry) string {
	var best uint64
	name := ""
	for _, n := range names {
		if num, ok := strings.CutPrefix(n.Name(), "OPTIONS-"); ok {
			if v, err := strconv.ParseUint(num, 10, 64); err == nil && v >= best {
				best, name = v, n.Name()
			}
		}
	}
	return name
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

type blobReader struct {
	f    *os.File
	r    *blobfile.Reader
	path string
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

// Open reads the store in dir: the markers, the manifest and the WALs. The
// tables are opened when first read. Errors name the file and offset.
func Open(dir string) (*Store, error) {
	s := &Store{Dir: dir, readers: map[uint64]*tableReader{}, blobs: map[uint64]*blobReader{}, BlobFiles: map[uint64]manifest.PebbleBlobFile{},
		merger: concatenateMerger}
	names, err := os.ReadDir(dir)
	if err != nil {
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

// readWALs replays the WALs numbered from the manifest's log number on into
// memory, in order. Torn tails end a log, as in recovery.
func (s *Store) readWALs(names []os.DirEntry) error {
	type wal struct {
		num  uint64
		name string
	}
	var wals []wal
	for _, n := range names {
		num, ok := strings.CutSuffix(n.Name(), ".log")
		if !ok {
			continue
		}
		if v, err := strconv.ParseUint(num, 10, 64); err == nil && v >= s.LogNumber {
			wals = append(wals, wal{v, n.Name()})
		}
	}
	slices.SortFunc(wals, func(a, b wal) int { return cmp.Compare(a.num, b.num) })
	for _, w := range wals {
		s.WALs = append(s.WALs, w.name)
		if err := s.replay(filepath.Join(s.Dir, w.name), w.num); err != nil {
			return err
		}
	}
	slices.SortFunc(s.mem, func(a, b memEntry) int { return base.CompareInternal(a.key, b.key) })
	return nil
}

// replay reads one WAL's batches into memory.
func (s *Store) replay(name string, num uint64) error {
	f, err := os.Open(name)
	if err != nil {
		return fmt.Errorf("pebblestore: WAL: %w", err)
	}
	defer f.Close()
	r, err := record.NewReaderOptions(f, name, record.Options{Pebble: true, LogNum: num})
	if err != nil {
		return err
	}
	for {
		rec, err := r.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		var (
			bad     error
			ingests []uint64 // the file numbers of a flushable ingest
			excise  *rangedel.Tombstone
		)
		first, _, err := batchrepr.DecodePebble(rec, func(seq base.SeqNum, e batchrepr.Entry) {
			s.LastSeq = max(s.LastSeq, seq)
			switch e.Kind {
			case base.KindSet, base.KindDelete, kindMerge, kindSingleDelete, kindDeleteSized:
				s.mem = append(s.mem, memEntry{base.MakeInternalKey(bytes.Clone(e.Key), seq, e.Kind), bytes.Clone(e.Value)})
			case base.KindRangeDelete:
				s.memDels = append(s.memDels, rangedel.Tombstone{Start: bytes.Clone(e.Key), End: bytes.Clone(e.Value), SeqNum: seq})
				s.walDels++
			case kindIngestSST:
				n, w := binary.Uvarint(e.Key)
				if w <= 0 || w != len(e.Key) {
					bad = base.CorruptionErrorf("flushable ingest names file %x, not a file number", e.Key)
				}
				ingests = append(ingests, n)
			case kindExcise:
				if excise != nil {
					bad = base.CorruptionErrorf("a flushable ingest with two excises")
				}
				excise = &rangedel.Tombstone{Start: bytes.Clone(e.Key), End: bytes.Clone(e.Value)}
			}
			// Range keys and log data do not change point reads.
		})
		if err == nil {
			err = bad
		}
		if err == nil && (ingests != nil || excise != nil) {
			err = s.addFlushable(first, ingests, excise)
		}
		if err != nil {
			return fmt.Errorf("pebblestore: %s: record at offset %d: %w", name, r.Offset(), err)
		}
	}
}

// addFlushable records a flushable ingest whose batch's sequence numbers
// start at first: as Pebble assigns them, the excise (a deletion of every
// older key in its span) takes the first and the tables the next ones, in
// the batch's order; without an excise the tables take them from first.
func (s *Store) addFlushable(first base.SeqNum, files []uint64, excise *rangedel.Tombstone) error {
	if len(files) == 0 {
		return base.CorruptionErrorf("an excise with no ingested table")
	}
	seq := first
	if excise != nil {
		excise.SeqNum = seq
		s.memDels = append(s.memDels, *excise)
		seq++
	}
	for _, n := range files {
		path := filepath.Join(s.Dir, fmt.Sprintf("%06d.sst", n))
		st, err := os.Stat(path)
		if err != nil {
			return fmt.Errorf("flushable ingest of table %06d: %w", n, err)
		}
		m := &manifest.FileMetadata{FileNum: n, Size: uint64(st.Size()), SmallestSeq: seq, LargestSeq: seq}
		s.Flushable = append(s.Flushable, Table{Level: -1, Meta: m, Path: path})
		seq++
	}
	return nil
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

// rangeDels returns every range deletion of the store, fragmented.
func (s *Store) rangeDels() ([]rangedel.Tombstone, error) {
	all := slices.Clone(s.memDels)
	err := s.tables(func(t *Table) error {
		tr, err := s.reader(t)
		if err != nil {
			return err
		}
		lo, hi, hiExcl := t.bounds()
		if hi != nil && !hiExcl {
			hi = append(bytes.Clone(hi), 0) // the next user key
		}
		for _, d := range tr.r.RangeDeletions() {
			if tr.ov != 0 {
				d.SeqNum = tr.ov
			}
			if lo != nil && bytes.Compare(d.Start, lo) < 0 {
				d.Start = lo
			}
			if hi != nil && bytes.Compare(d.End, hi) > 0 {
				d.End = hi
			}
			if bytes.Compare(d.Start, d.End) < 0 {
				all = append(all, d)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return rangedel.Fragment(all), nil
}

// source is one sorted run of point entries: a table or the WALs' writes.
type source struct {
	it  *sstable.Iter // nil for the memory's
	s   *Store
	t   *Table // the table it reads
	ov  base.SeqNum
	mem []memEntry
	i   int
	key base.InternalKey
	// lower and upper bound a virtual table's keys (nil: none); upper is
	// exclusive when upperExcl.
	lower, upper []byte
	upperExcl    bool
}

func (src *source) load(ok bool) bool {
	if src.it != nil {
		if !ok {
			return false
		}
		src.key = src.it.Key()
		if src.upper != nil {
			if c := bytes.Compare(src.key.UserKey, src.upper); c > 0 || c == 0 && src.upperExcl {
				return false
			}
		}
		if src.ov != 0 {
			src.key.Trailer = base.MakeTrailer(src.ov, src.key.Kind())
		}
		return true
	}
	if src.i >= len(src.mem) {
		return false
	}
	src.key = src.mem[src.i].key
	return true
}

func (src *source) value() ([]byte, error) {
	if src.it == nil {
		return src.mem[src.i].value, nil
	}
	v := src.it.Value()
	if b, ok := any(src.it).(blobIter); ok && b.IsBlobReference() {
		return src.s.BlobValue(src.t, v)
	}
	return v, nil
}

// blobIter is what an sstable iterator that reads Pebblev6 and later tables
// offers: whether the current value is held in a blob file, Value then
// returning the value-prefix byte and inline handle the table stores.
type blobIter interface{ IsBlobReference() bool }

// resolvesBlobs reports whether the sstable iterator tells values held in
// blob files apart, so that scans resolve them with BlobValue.
func resolvesBlobs() bool {
	_, ok := any((*sstable.Iter)(nil)).(blobIter)
	return ok
}

func (src *source) next() bool {
	if src.it != nil {
		return src.load(src.it.Next())
	}
	src.i++
	return src.load(true)
}

func (src *source) seek(lo []byte) bool {
	if src.it != nil {
		if src.lower != nil && bytes.Compare(lo, src.lower) < 0 {
			lo = src.lower
		}
		if lo == nil {
			return src.load(src.it.First())
		}
		return src.load(src.it.SeekGE(lo))
	}
	src.i = 0
	if lo != nil {
		src.i, _ = slices.BinarySearchFunc(src.mem, lo, func(e memEntry, k []byte) int { return bytes.Compare(e.key.UserKey, k) })
	}
	return src.load(true)
}

// mergeHeap orders sources by their current internal key.
type mergeHeap []*source

func (h mergeHeap) Len() int           { return len(h) }
func (h mergeHeap) Less(i, j int) bool { return base.CompareInternal(h[i].key, h[j].key) < 0 }
func (h mergeHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *mergeHeap) Push(x any)        { *h = append(*h, x.(*source)) }
func (h *mergeHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// Scan calls fn with each live key in [lo, hi) (nil: unbounded) and its
// value, in order, as Pebble's iterator would return them, until fn
// returns false. The key and value are valid only during fn.
func (s *Store) Scan(lo, hi []byte, fn func(key, value []byte) bool) error {
	dels, err := s.rangeDels()
	if err != nil {
		return err
	}
	var srcs []*source
	defer func() {
		for _, src := range srcs {
			if src.it != nil {
				src.it.Close()
			}
		}
	}()
	h := mergeHeap{}
	add := func(src *source) error {
		srcs = append(srcs, src)
		if src.seek(lo) {
			h = append(h, src)
		} else if src.it != nil {
			return src.it.Error()
		}
		return nil
	}
	if err := add(&source{mem: s.mem}); err != nil {
		return err
	}
	err = s.tables(func(t *Table) error {
		tr, err := s.reader(t)
		if err != nil {
			return err
		}
		lo, hi, hiExcl := t.bounds()
		return add(&source{it: tr.r.NewIter(), ov: tr.ov, s: s, t: tr.t, lower: lo, upper: hi, upperExcl: hiExcl})
	})
	if err != nil {
		return err
	}
	heap.Init(&h)
	var (
		cur      []byte   // the user key being resolved
		operands [][]byte // its merge operands, newest first
		done     bool     // its versions below are hidden
		value    []byte   // the SET that ended them, when haveBase
		haveBase bool
	)
	flush := func() (bool, error) {
		switch {
		case cur == nil:
			return true, nil
		case len(operands) > 0:
			if s.merger != concatenateMerger {
				return false, base.UnsupportedErrorf("pebblestore: %s: key %q has merge operands, merger %q is not %s", s.Dir, cur, s.merger, concatenateMerger)
			}
			var v []byte
			if haveBase {
				v = append(v, value...)
			}
			for i := len(operands) - 1; i >= 0; i-- {
				v = append(v, operands[i]...)
			}
			return fn(cur, v), nil
		case haveBase:
			return fn(cur, value), nil
		}
		return true, nil
	}
	for len(h) > 0 {
		src := h[0]
		k := src.key
		if hi != nil && bytes.Compare(k.UserKey, hi) >= 0 {
			break
		}
		if cur == nil || !bytes.Equal(cur, k.UserKey) {
			more, err := flush()
			if err != nil || !more {
				return err
			}
			cur, operands, done, value, haveBase = append(cur[:0:0], k.UserKey...), nil, false, nil, false
		}
		if !done {
			if rangedel.Cover(dels, k.UserKey, base.SeqNumMax+1) > k.SeqNum() {
				done = true // deleted by a newer range deletion, and all older
			} else {
				switch k.Kind() {
				case base.KindSet, kindSetWithDelete:
					v, err := src.value()
					if err != nil {
						return err
					}
					done, haveBase, value = true, true, bytes.Clone(v)
				case base.KindDelete, kindSingleDelete, kindDeleteSized:
					done = true
				case kindMerge:
					v, err := src.value()
					if err != nil {
						return err
					}
					operands = append(operands, bytes.Clone(v))
				default:
					return base.CorruptionErrorf("pebblestore: %s: key %s has a kind no table holds", s.Dir, k)
				}
			}
		}
		if src.next() {
			heap.Fix(&h, 0)
		} else {
			if src.it != nil {
				if err := src.it.Error(); err != nil {
					return err
				}
			}
			heap.Pop(&h)
		}
	}
	_, err = flush()
	return err
}

// Get returns the value of key, or ErrNotFound.
func (s *Store) Get(key []byte) ([]byte, error) {
	var value []byte
	found := false
	err := s.Scan(key, append(bytes.Clone(key), 0), func(_, v []byte) bool {
		value, found = bytes.Clone(v), true
		return false
	})
	if err == nil && !found {
		err = ErrNotFound
	}
	return value, err
}

// CheckStats are what Check read.
type CheckStats struct {
	Tables, Blocks, BlobFiles int
	// Entries counts the tables' point entries; RangeDeletions the
	// tables' range-deletion fragments and the WALs' range deletions as
	// written, unfragmented;
	// LiveKeys the keys a full scan returns.
	Entries, RangeDeletions, LiveKeys uint64
}

// Check verifies every table (sstable.Reader.Check: checksums, structure,
// key order, filter, properties), each table against the manifest (size,
// keys within its bounds, sequence numbers within its range), every blob
// file (checksums and structure of each block, size against the
// manifest), and that a full scan returns keys in increasing order. It
// returns every problem.
func (s *Store) Check() (CheckStats, []error) {
	st := CheckStats{RangeDeletions: uint64(s.walDels)}
	problems := s.checkBlobFiles(&st)
	checked := map[string]bool{} // backing files of virtual tables
	s.tables(func(t *Table) error {
		st.Tables++
		if t.Pebble.Virtual {
			if checked[t.Path] {
				return nil
			}
			checked[t.Path] = true
		}
		tr, err := s.reader(t)
		if err != nil {
			problems = append(problems, err)
			return nil
		}
		rep := tr.r.Check()
		st.Blocks += rep.Blocks
		st.Entries += rep.Entries
		st.RangeDeletions += uint64(rep.RangeDeletions)
		problems = append(problems, rep.Problems...)
		// A flushable table is not in the manifest, and a virtual one's
		// size and bounds are not its file's.
		if t.Level >= 0 && !t.Pebble.Virtual {
			problems = append(problems, s.checkAgainstManifest(tr, rep)...)
		}
		return nil
	})
	var prev []byte
	err := s.Scan(nil, nil, func(k, _ []byte) bool {
		if prev != nil && bytes.Compare(prev, k) >= 0 {
			problems = append(problems, base.CorruptionErrorf("pebblestore: %s: scan returned %q after %q", s.Dir, k, prev))
		}
		prev = append(prev[:0], k...)
		st.LiveKeys++
		return true
	})
	if err != nil {
		problems = append(problems, err)
	}
	return st, problems
}

// checkBlobFiles reads every block of every blob file of the version.
func (s *Store) checkBlobFiles(st *CheckStats) []error {
	var problems []error
	ids := slices.Sorted(maps.Keys(s.BlobFiles))
	for _, id := range ids {
		bf := s.BlobFiles[id]
		st.BlobFiles++
		br, err := s.blobReader(bf)
		if err != nil {
			problems = append(problems, err)
			continue
		}
		if bf.Size != 0 && br.r.Size() != bf.Size {
			problems = append(problems, base.CorruptionErrorf("pebblestore: %s: %d bytes, the manifest records %d", br.path, br.r.Size(), bf.Size))
		}
		for _, b := range br.r.Layout().Blocks {
			if b.Err != nil {
				problems = append(problems, fmt.Errorf("pebblestore: %s: %w", br.path, b.Err))
			}
		}
	}
	return problems
}

// checkAgainstManifest compares a table with what the manifest records of
// it.
func (s *Store) checkAgainstManifest(tr *tableReader, rep *sstable.CheckReport) []error {
	m := tr.t.Meta
	var problems []error
	bad := func(format string, args ...any) {
		problems = append(problems, base.CorruptionErrorf("pebblestore: %s: "+format, append([]any{tr.t.Path}, args...)...))
	}
	lo, hi, err := tr.r.KeyRange()
	if err != nil {
		return append(problems, err)
	}
	if lo != nil && (bytes.Compare(lo.UserKey, m.Smallest.UserKey) < 0 || bytes.Compare(hi.UserKey, m.Largest.UserKey) > 0) {
		bad("keys %q-%q outside the manifest's bounds %q-%q", lo.UserKey, hi.UserKey, m.Smallest.UserKey, m.Largest.UserKey)
	}
	if tr.ov == 0 && rep.Entries > 0 && (rep.SmallestSeq < m.SmallestSeq || rep.LargestSeq > m.LargestSeq) {
		bad("sequence numbers %d-%d outside the manifest's %d-%d", rep.SmallestSeq, rep.LargestSeq, m.SmallestSeq, m.LargestSeq)
	}
	return problems
}

// OptionsFile returns the store's newest OPTIONS file parsed: its sections
// in order, each with its key=value lines in order.
func (s *Store) OptionsFile() ([]Section, error) {
	if s.Options == "" {
		return nil, fmt.Errorf("pebblestore: %s: no OPTIONS file", s.Dir)
	}
	name := filepath.Join(s.Dir, s.Options)
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	return ParseOptions(name, data)
}

// Section is a section of an OPTIONS file: [Name] and its options.
type Section struct {
	Name    string
	Options [][2]string
}

// ParseOptions parses an OPTIONS file: [section] lines, key=value lines in
// them, blank lines and ; or # comments. Anything else is an error naming
// the line.
func ParseOptions(name string, data []byte) ([]Section, error) {
	var out []Section
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, ";") || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			out = append(out, Section{Name: line[1 : len(line)-1]})
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || len(out) == 0 {
				return nil, fmt.Errorf("pebblestore: %s: line %d is neither a [section] nor a key=value in one: %q", name, i+1, line)
			}
			sec := &out[len(out)-1]
			sec.Options = append(sec.Options, [2]string{strings.TrimSpace(k), strings.TrimSpace(v)})
		}
	}
	return out, nil
}
