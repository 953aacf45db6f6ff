package main

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/bloomkv/bloomkv"
	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/batchrepr"
	"github.com/bloomkv/bloomkv/internal/manifest"
	"github.com/bloomkv/bloomkv/internal/record"
	"github.com/bloomkv/bloomkv/sstable"
)

func walCmd(e *env) *cobra.Command {
	var fm formats
	dump := &cobra.Command{
		Use:   "dump FILE",
		Short: "Print every batch of a write-ahead log",
		Long: `Print every record of a write-ahead log (NNNNNN.log): its file offset,
the batch's first sequence number and count, and each write (SET key value,
DEL key, RANGEDEL start end). A torn tail (a write cut off by a crash) is
reported and ends the log, as recovery would; damage before the end is an
error naming the offset.`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(c *cobra.Command, a []string) error { return e.walDump(a[0], &fm) },
	}
	fm.register(dump, e, formatQuoted)
	return group("wal", "Inspect write-ahead logs", dump)
}

func manifestCmd(e *env) *cobra.Command {
	var fm formats
	dump := &cobra.Command{
		Use:   "dump FILE",
		Short: "Print every version edit of a manifest and the version they build",
		Long: `Print every version edit of a manifest (MANIFEST-NNNNNN): comparer,
log number, next file number, last sequence number, tables added (level,
file, size, key and sequence ranges) and removed; then the version the edits
build, level by level. Damage is an error naming the edit and offset.`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(c *cobra.Command, a []string) error { return e.manifestDump(a[0], &fm) },
	}
	fm.register(dump, e, formatQuoted)
	return group("manifest", "Inspect manifests", dump, manifestSummarizeCmd(e), manifestCheckCmd(e), manifestLSMCmd(e))
}

// openLog opens a log-format file (WAL or manifest), reading the chunk
// formats of Pebble's WALs too; a WAL's log number, which Pebble's chunks
// carry, is taken from its name (NNNNNN.log).
func openLog(name string) (*record.Reader, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.IsDir() {
		return nil, fmt.Errorf("%s is a directory, not a log", name)
	}
	opts := record.Options{Pebble: true}
	if num, ok := strings.CutSuffix(filepath.Base(name), ".log"); ok {
		opts.LogNum, _ = strconv.ParseUint(num, 10, 64)
	}
	return record.NewReaderOptions(f, name, opts)
}

type walEntryOut struct {
	Seq   uint64  `json:"seq"`
	Kind  string  `json:"kind"`
	Key   string  `json:"key"`
	Value *string `json:"value,omitempty"` // a set's value, a range deletion's end; nil for a deletion
}

type walRecordOut struct {
	File    string        `json:"file"`
	Offset  int64         `json:"offset"`
	Seq     uint64        `json:"seq"`
	Count   uint32        `json:"count"`
	Entries []walEntryOut `json:"entries"`
}

type logEndOut struct {
	File       string `json:"file"`
	End        string `json:"end"`                   // "clean" or "torn"
	EOFTrailer bool   `json:"eof_trailer,omitempty"` // a Pebble log closed with its trailer
	Records    int    `json:"records"`
	TornAt     int64  `json:"torn_at,omitempty"`
	TornWhy    string `json:"torn_why,omitempty"`
	// ZeroedAt is where zeros written ahead of a synced log's records
	// begin, when the log ends there.
	ZeroedAt int64  `json:"zeroed_at,omitempty"`
	Entries  uint64 `json:"entries,omitempty"`
	FirstSeq uint64 `json:"first_seq,omitempty"`
	LastSeq  uint64 `json:"last_seq,omitempty"`
}

func (e *env) walDump(name string, fm *formats) error {
	r, err := openLog(name)
	if err != nil {
		return err
	}
	if !e.json {
		e.printf("%s\n", name)
	}
	end := logEndOut{File: name, End: "clean"}
	for {
		rec, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		out := walRecordOut{File: name, Offset: r.Offset()}
		seq, count, err := batchrepr.DecodePebble(rec, func(seq base.SeqNum, en batchrepr.Entry) {
			o := walEntryOut{Seq: uint64(seq), Kind: en.Kind.String(), Key: fm.k(en.Key)}
			if v, ok := walValue(seq, en, fm); ok {
				o.Value = &v
			}
			out.Entries = append(out.Entries, o)
		})
		if err != nil {
			return fmt.Errorf("%s: record at offset %d: %w", name, r.Offset(), err)
		}
		out.Seq, out.Count = uint64(seq), count
		end.Records++
		end.Entries += uint64(count)
		if count > 0 {
			if end.FirstSeq == 0 {
				end.FirstSeq = uint64(seq)
			}
			end.LastSeq = uint64(seq) + uint64(count) - 1
		}
		if e.json {
			e.emit(out)
			continue
		}
		e.printf("  offset %d: batch seq %d, %s\n", out.Offset, out.Seq, plural(out.Count, "entry"))
		for _, en := range out.Entries {
			v := ""
			if en.Value != nil {
				v = *en.Value
			}
			e.printf("%s\n", strings.TrimRight(fmt.Sprintf("    %-8s %s %s", en.Kind, en.Key, v), " "))
		}
	}
	end.EOFTrailer = r.EOFTrailer()
	if off, why, torn := r.TornTail(); torn {
		if end.Records == 0 && off == 0 {
			return fmt.Errorf("%s: not a log: no record at offset 0 (%s)", name, why)
		}
		end.End, end.TornAt, end.TornWhy = "torn", off, why
	}
	if off, ok := r.ZeroedTail(); ok {
		end.ZeroedAt = off
	}
	if e.json {
		e.emit(end)
		return nil
	}
	e.printf("  end: %s", end.End)
	if end.EOFTrailer {
		e.printf(" (EOF trailer)")
	}
	if end.End == "torn" {
		e.printf(" at offset %d (%s): recovery drops the tail", end.TornAt, end.TornWhy)
	}
	if end.ZeroedAt > 0 {
		e.printf(" at offset %d (zeros written ahead follow)", end.ZeroedAt)
	}
	e.printf("\n  %s, %s", plural(end.Records, "record"), plural(end.Entries, "entry"))
	if end.Entries > 0 {
		e.printf(", sequence numbers %d-%d", end.FirstSeq, end.LastSeq)
	}
	e.printf("\n")
	return nil
}

// walValue describes a batch entry's value, and whether it has one: a set's
// or merge's value, a range deletion's end, a range key's end and suffixes
// (with values for a set), a sized deletion's size, an excise's end.
func walValue(seq base.SeqNum, en batchrepr.Entry, fm *formats) (string, bool) {
	switch en.Kind {
	case base.KindSet, kindSetWithDelete, kindMerge:
		return fm.v(en.Value), true
	case base.KindRangeDelete, kindExcise:
		return fm.k(en.Value), true
	case sstable.KindRangeKeySet, sstable.KindRangeKeyUnset, sstable.KindRangeKeyDelete:
		rk, err := sstable.DecodeRangeKey(base.MakeInternalKey(en.Key, seq, en.Kind).Append(nil), en.Value)
		if err != nil {
			return fmt.Sprintf("%s (undecodable: %v)", fm.v(en.Value), err), true
		}
		o := rangeKeyOut("", rk, fm)
		return strings.TrimRight(o.End+" "+strings.Join(o.Items, " "), " "), true
	case kindDeleteSized:
		if n, l := binary.Uvarint(en.Value); l > 0 && l == len(en.Value) {
			return fmt.Sprintf("size %d", n), true
		}
		return fm.v(en.Value), true
	}
	return "", false
}

// Pebble's kinds of entry that carry a value, besides range keys:
// SETWITHDEL is a set that a compaction found over a deletion.
const (
	kindMerge         base.Kind = 2
	kindSetWithDelete base.Kind = 18
	kindDeleteSized   base.Kind = 23
	kindExcise        base.Kind = 24
)

// isValueKind reports whether a point entry of kind k holds a value: a set
// (SET, SETWITHDEL) or a merge operand.
func isValueKind(k base.Kind) bool {
	return k == base.KindSet || k == kindSetWithDelete || k == kindMerge
}

type tableMetaOut struct {
	Level       int    `json:"level"`
	File        uint64 `json:"file"`
	Size        uint64 `json:"size"`
	Smallest    string `json:"smallest"`
	Largest     string `json:"largest"`
	SmallestSeq uint64 `json:"smallest_seq"`
	LargestSeq  uint64 `json:"largest_seq"`
	// SeqNumOverride is the sequence number an ingested table's keys
	// read at (its file stores them at 0); 0 for the others.
	SeqNumOverride uint64 `json:"seq_num_override,omitempty"`
}

type editOut struct {
	File   string `json:"file"`
	Edit   int    `json:"edit"`
	Offset int64  `json:"offset"`
	// FormatVersion is the store's format version the edit records (0:
	// none; a store none of whose edits records one is FormatOriginal).
	FormatVersion uint64         `json:"format_version,omitempty"`
	Comparer      string         `json:"comparer,omitempty"`
	LogNumber     uint64         `json:"log_number,omitempty"`
	NextFileNum   uint64         `json:"next_file_num,omitempty"`
	LastSeq       uint64         `json:"last_seq,omitempty"`
	Added         []tableMetaOut `json:"added,omitempty"`
	Deleted       []tableMetaOut `json:"deleted,omitempty"`
	ClosedLog     *closedLogOut  `json:"closed_log,omitempty"`
	Pebble        *pebbleEditOut `json:"pebble,omitempty"`
}

// closedLogOut is a WAL's size recorded at a clean close.
type closedLogOut struct {
	File uint64 `json:"file"`
	Size uint64 `json:"size"`
}

type versionOut struct {
	File    string `json:"file"`
	Format  string `json:"format,omitempty"` // "pebble" for Pebble's manifests
	Edits   int    `json:"edits"`
	End     string `json:"end"`
	TornAt  int64  `json:"torn_at,omitempty"`
	TornWhy string `json:"torn_why,omitempty"`
	// FormatVersion is the store's format version after the edits.
	FormatVersion uint64           `json:"format_version,omitempty"` // 0 for Pebble's
	Levels        [][]tableMetaOut `json:"levels"`
}

// ingested notes, in text output, a table ingested at a sequence number.
func (t tableMetaOut) ingested() string {
	if t.SeqNumOverride == 0 {
		return ""
	}
	return fmt.Sprintf("  ingested (stored at 0, read at %d)", t.SeqNumOverride)
}

func metaOut(fm *formats, l int, f *manifest.FileMetadata) tableMetaOut {
	return tableMetaOut{Level: l, File: f.FileNum, Size: f.Size, Smallest: fm.ikey(f.Smallest), Largest: fm.ikey(f.Largest),
		SmallestSeq: uint64(f.SmallestSeq), LargestSeq: uint64(f.LargestSeq), SeqNumOverride: uint64(f.SeqNumOverride)}
}

// manifestRecord is a manifest's record and its offset.
type manifestRecord struct {
	off int64
	rec []byte
}

// readManifest reads every record of a manifest.
func readManifest(name string) ([]manifestRecord, *record.Reader, error) {
	r, err := openLog(name)
	if err != nil {
		return nil, nil, err
	}
	var recs []manifestRecord
	for {
		rec, err := r.Next()
		if err == io.EOF {
			return recs, r, nil
		}
		if err != nil {
			return nil, nil, err
		}
		recs = append(recs, manifestRecord{r.Offset(), bytes.Clone(rec)})
	}
}

// decodedEdit is a manifest's edit in bloomkv's dialect or Pebble's.
type decodedEdit struct {
	*manifest.VersionEdit
	pebble *manifest.PebbleEdit // nil in bloomkv's dialect
}

// decodeManifest decodes a manifest's edits in the dialect, bloomkv's or
// Pebble's, that decodes more of them (bloomkv's on a tie); the error is
// that dialect's, naming the edit and offset. pebble says which.
func decodeManifest(name string, recs []manifestRecord) (edits []decodedEdit, pebble bool, err error) {
	decodeAll := func(decode func([]byte) (decodedEdit, error)) ([]decodedEdit, error) {
		var out []decodedEdit
		for i, r := range recs {
			ed, err := decode(r.rec)
			if err != nil {
				return out, fmt.Errorf("%s: edit %d at offset %d: %w", name, i, r.off, err)
			}
			out = append(out, ed)
		}
		return out, nil
	}
	ours, oursErr := decodeAll(func(b []byte) (decodedEdit, error) {
		ed, err := manifest.Decode(b)
		return decodedEdit{VersionEdit: ed}, err
	})
	if oursErr == nil {
		return ours, false, nil
	}
	theirs, theirsErr := decodeAll(func(b []byte) (decodedEdit, error) {
		ed, err := manifest.DecodePebble(b)
		if err != nil {
			return decodedEdit{}, err
		}
		return decodedEdit{VersionEdit: &ed.VersionEdit, pebble: ed}, nil
	})
	if len(theirs) > len(ours) || theirsErr == nil {
		return theirs, true, theirsErr
	}
	return ours, false, oursErr
}

// pebbleTableOut is Pebble's metadata of a table an edit adds.
type pebbleTableOut struct {
	Tag                 uint64   `json:"tag"`
	PointSmallest       string   `json:"point_smallest,omitempty"`
	PointLargest        string   `json:"point_largest,omitempty"`
	RangeKeySmallest    string   `json:"range_key_smallest,omitempty"`
	RangeKeyLargest     string   `json:"range_key_largest,omitempty"`
	CreationTime        int64    `json:"creation_time,omitempty"`
	MarkedForCompaction bool     `json:"marked_for_compaction,omitempty"`
	Virtual             bool     `json:"virtual,omitempty"`
	BackingFile         uint64   `json:"backing_file,omitempty"`
	SyntheticPrefix     string   `json:"synthetic_prefix,omitempty"`
	SyntheticSuffix     string   `json:"synthetic_suffix,omitempty"`
	BlobReferences      []string `json:"blob_references,omitempty"`
}

// pebbleEditOut is what a Pebble edit holds beyond bloomkv's fields.
type pebbleEditOut struct {
	PrevLogNumber    uint64           `json:"prev_log_number,omitempty"`
	Tables           []pebbleTableOut `json:"tables,omitempty"`
	CreatedBackings  []string         `json:"created_backings,omitempty"`
	RemovedBackings  []uint64         `json:"removed_backings,omitempty"`
	NewBlobFiles     []string         `json:"new_blob_files,omitempty"`
	DeletedBlobFiles []string         `json:"deleted_blob_files,omitempty"`
	CompactPointers  int              `json:"compact_pointers,omitempty"`
}

func pebbleOut(fm *formats, pe *manifest.PebbleEdit) *pebbleEditOut {
	o := &pebbleEditOut{PrevLogNumber: pe.PrevLogNumber, RemovedBackings: pe.RemovedBackings, CompactPointers: pe.CompactPointers}
	for _, t := range pe.Tables {
		to := pebbleTableOut{Tag: t.Tag, CreationTime: t.CreationTime, MarkedForCompaction: t.MarkedForCompaction,
			Virtual: t.Virtual, BackingFile: t.BackingFileNum}
		if t.HasPointKeys {
			to.PointSmallest, to.PointLargest = fm.ikey(t.PointSmallest), fm.ikey(t.PointLargest)
		}
		if t.HasRangeKeys {
			to.RangeKeySmallest, to.RangeKeyLargest = fm.ikey(t.RangeSmallest), fm.ikey(t.RangeLargest)
		}
		if t.SyntheticPrefix != nil {
			to.SyntheticPrefix = fm.k(t.SyntheticPrefix)
		}
		if t.SyntheticSuffix != nil {
			to.SyntheticSuffix = fm.k(t.SyntheticSuffix)
		}
		for _, b := range t.BlobReferences {
			to.BlobReferences = append(to.BlobReferences, fmt.Sprintf("blob %d: %d bytes", b.FileID, b.ValueSize))
		}
		o.Tables = append(o.Tables, to)
	}
	for _, b := range pe.CreatedBackings {
		o.CreatedBackings = append(o.CreatedBackings, fmt.Sprintf("%06d: %d bytes", b.FileNum, b.Size))
	}
	for _, b := range pe.NewBlobFiles {
		o.NewBlobFiles = append(o.NewBlobFiles, fmt.Sprintf("blob %d in %06d.blob: %d bytes, values %d bytes, created %d", b.ID, b.FileNum, b.Size, b.ValueSize, b.CreationTime))
	}
	for _, b := range pe.DeletedBlobFiles {
		o.DeletedBlobFiles = append(o.DeletedBlobFiles, fmt.Sprintf("blob %d in %06d.blob", b.ID, b.FileNum))
	}
	return o
}

// printPebbleEdit prints what a Pebble edit holds beyond bloomkv's fields:
// after each added table (the i-th line of adds), its Pebble details.
func (e *env) printPebbleTable(t pebbleTableOut) {
	var parts []string
	if t.PointSmallest != "" && t.RangeKeySmallest != "" {
		parts = append(parts, fmt.Sprintf("points %s .. %s", t.PointSmallest, t.PointLargest))
	}
	if t.RangeKeySmallest != "" {
		parts = append(parts, fmt.Sprintf("range keys %s .. %s", t.RangeKeySmallest, t.RangeKeyLargest))
	}
	if t.CreationTime != 0 {
		parts = append(parts, fmt.Sprintf("created %d", t.CreationTime))
	}
	if t.MarkedForCompaction {
		parts = append(parts, "marked for compaction")
	}
	if t.Virtual {
		parts = append(parts, fmt.Sprintf("virtual, backed by %06d", t.BackingFile))
	}
	if t.SyntheticPrefix != "" || t.SyntheticSuffix != "" {
		parts = append(parts, fmt.Sprintf("synthetic prefix %s suffix %s", t.SyntheticPrefix, t.SyntheticSuffix))
	}
	parts = append(parts, t.BlobReferences...)
	if len(parts) > 0 {
		e.printf("             %s\n", strings.Join(parts, "; "))
	}
}

func (e *env) manifestDump(name string, fm *formats) error {
	recs, r, err := readManifest(name)
	if err != nil {
		return err
	}
	edits, pebble, decodeErr := decodeManifest(name, recs)
	if !e.json {
		if pebble {
			e.printf("%s (Pebble)\n", name)
		} else {
			e.printf("%s\n", name)
		}
	}
	v := &manifest.Version{}
	format := uint64(manifest.FormatOriginal)
	n := 0
	for ; n < len(edits); n++ {
		ed, off := edits[n], recs[n].off
		out := editOut{File: name, Edit: n, Offset: off, FormatVersion: ed.FormatVersion, Comparer: ed.ComparerName, LogNumber: ed.LogNumber,
			NextFileNum: ed.NextFileNum, LastSeq: uint64(ed.LastSeq)}
		for _, nf := range ed.NewFiles {
			out.Added = append(out.Added, metaOut(fm, nf.Level, nf.Meta))
		}
		for _, df := range ed.DeletedFiles {
			out.Deleted = append(out.Deleted, tableMetaOut{Level: df.Level, File: df.FileNum})
		}
		// Pebble writes an edit's deletions in map order: listed by level
		// and file, so that one store's dump reads the same every time.
		slices.SortFunc(out.Deleted, func(a, b tableMetaOut) int {
			return cmp.Or(cmp.Compare(a.Level, b.Level), cmp.Compare(a.File, b.File))
		})
		if c := ed.ClosedLog; c.Num != 0 {
			out.ClosedLog = &closedLogOut{File: c.Num, Size: c.Size}
		}
		if ed.pebble != nil {
			out.Pebble = pebbleOut(fm, ed.pebble)
		}
		if v, err = v.Apply(ed.VersionEdit); err != nil {
			return fmt.Errorf("%s: edit %d at offset %d: %w", name, n, off, err)
		}
		if ed.FormatVersion != 0 {
			format = ed.FormatVersion
		}
		if e.json {
			e.emit(out)
			continue
		}
		e.printf("  edit %d (offset %d)\n", n, out.Offset)
		if out.FormatVersion != 0 {
			e.printf("    format version   %v\n", bloomkv.FormatVersion(out.FormatVersion))
		}
		if out.Comparer != "" {
			e.printf("    comparer         %s\n", out.Comparer)
		}
		if out.LogNumber != 0 {
			e.printf("    log number       %d\n", out.LogNumber)
		}
		if p := out.Pebble; p != nil && p.PrevLogNumber != 0 {
			e.printf("    prev log number  %d\n", p.PrevLogNumber)
		}
		if out.NextFileNum != 0 {
			e.printf("    next file        %d\n", out.NextFileNum)
		}
		if out.LastSeq != 0 {
			e.printf("    last sequence    %d\n", out.LastSeq)
		}
		for i, a := range out.Added {
			e.printf("    add    L%d %06d  %d bytes  %s .. %s  seqs %d-%d%s\n", a.Level, a.File, a.Size, a.Smallest, a.Largest, a.SmallestSeq, a.LargestSeq, a.ingested())
			if out.Pebble != nil {
				e.printPebbleTable(out.Pebble.Tables[i])
			}
		}
		for _, d := range out.Deleted {
			e.printf("    delete L%d %06d\n", d.Level, d.File)
		}
		if c := out.ClosedLog; c != nil {
			e.printf("    closed log       %06d.log, %d bytes\n", c.File, c.Size)
		}
		if p := out.Pebble; p != nil {
			for _, b := range p.CreatedBackings {
				e.printf("    add backing      %s\n", b)
			}
			for _, b := range p.RemovedBackings {
				e.printf("    remove backing   %06d\n", b)
			}
			for _, b := range p.NewBlobFiles {
				e.printf("    add blob file    %s\n", b)
			}
			for _, b := range p.DeletedBlobFiles {
				e.printf("    delete blob file %s\n", b)
			}
			if p.CompactPointers > 0 {
				e.printf("    compaction pointers (ignored): %d\n", p.CompactPointers)
			}
		}
	}
	if decodeErr != nil {
		return decodeErr
	}
	vo := versionOut{File: name, Edits: n, End: "clean", FormatVersion: format, Levels: make([][]tableMetaOut, manifest.NumLevels)}
	if pebble {
		vo.Format, vo.FormatVersion = "pebble", 0
	}
	off, why, torn := r.TornTail()
	if n == 0 {
		if torn {
			return fmt.Errorf("%s: not a manifest: no record at offset 0 (%s)", name, why)
		}
		return fmt.Errorf("%s: not a manifest: it holds no version edits", name)
	}
	if torn {
		vo.End, vo.TornAt, vo.TornWhy = "torn", off, why
	}
	for l := range vo.Levels {
		vo.Levels[l] = []tableMetaOut{}
		for f := range v.Level(l) {
			vo.Levels[l] = append(vo.Levels[l], metaOut(fm, l, f))
		}
	}
	if e.json {
		e.emit(vo)
		return nil
	}
	e.printf("  end: %s", vo.End)
	if vo.End == "torn" {
		e.printf(" at offset %d (%s): recovery drops the tail", vo.TornAt, vo.TornWhy)
	}
	e.printf("\n")
	if !pebble {
		e.printf("  format version: %v\n", bloomkv.FormatVersion(vo.FormatVersion))
	}
	e.printf("  version after %d edits:\n", n)
	for l, files := range vo.Levels {
		if len(files) == 0 {
			continue
		}
		var size uint64
		for _, f := range files {
			size += f.Size
		}
		e.printf("    L%d: %s, %d bytes\n", l, plural(len(files), "table"), size)
		for _, f := range files {
			e.printf("      %06d  %d bytes  %s .. %s%s\n", f.File, f.Size, f.Smallest, f.Largest, f.ingested())
		}
	}
	return nil
}
