package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/humanize"
	"github.com/bloomkv/bloomkv/sstable"
)

func sstableCmd(e *env) *cobra.Command {
	return group("sstable", "Inspect sstables: properties, layout, scan, check, filter",
		propertiesCmd(e), layoutCmd(e), scanCmd(e), checkCmd(e), filterCmd(e), sstableSpaceCmd(e))
}

// table is an open sstable file.
type table struct {
	name string
	f    *os.File
	r    *sstable.Reader
}

func openTable(name string) (*table, error) { return openTableAt(name, 0) }

// openTableAt opens a table of a store whose keys all read at sequence
// number ov (an ingested table's; 0: as stored).
func openTableAt(name string, ov base.SeqNum) (*table, error) {
	return openTableWith(name, sstable.ReaderOptions{SeqNumOverride: ov})
}

// openTableWith opens a table with reader options o, naming it name.
func openTableWith(name string, o sstable.ReaderOptions) (*table, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if st.IsDir() {
		f.Close()
		return nil, fmt.Errorf("%s is a directory, not a table", name)
	}
	o.FileName = name
	r, err := sstable.NewReader(f, st.Size(), o)
	if err != nil {
		f.Close()
		return nil, err
	}
	return &table{name: name, f: f, r: r}, nil
}

// eachTable opens every file and calls fn; a file that cannot be opened is
// reported and skipped. The sstable commands read a table of CockroachDB's
// comparer too, in its own key order (the db commands do not).
func (e *env) eachTable(files []string, fn func(t *table) error) {
	for _, name := range files {
		t, err := openTableWith(name, sstable.ReaderOptions{ForeignComparers: true})
		if err == nil {
			err = fn(t)
			t.f.Close()
		}
		if err != nil {
			e.fail(err)
		}
	}
}

// blockSizes sums the bytes of each kind of block, trailers included.
func blockSizes(l *sstable.Layout) map[sstable.BlockKind]uint64 {
	sizes := map[sstable.BlockKind]uint64{}
	for _, b := range l.Blocks {
		sizes[b.Kind] += b.Handle.Length + sstable.BlockTrailerLen
	}
	return sizes
}

// seqRange returns the sequence numbers a table holds: from its properties
// where it states them (bloomkv's tables), else by reading every entry.
func seqRange(r *sstable.Reader) (lo, hi base.SeqNum, err error) {
	if p := r.Properties(); p.HasSeqNums {
		return p.SmallestSeqNum, p.LargestSeqNum, nil
	}
	first := true
	note := func(s base.SeqNum) {
		if first {
			lo, hi, first = s, s, false
		}
		lo, hi = min(lo, s), max(hi, s)
	}
	it := r.NewIter()
	for ok := it.First(); ok; ok = it.Next() {
		note(it.Key().SeqNum())
	}
	if err := it.Close(); err != nil {
		return 0, 0, err
	}
	for _, d := range r.RangeDeletions() {
		note(d.SeqNum)
	}
	return lo, hi, nil
}

type propertiesOut struct {
	File          string `json:"file"`
	Format        string `json:"format"`
	FormatVersion uint32 `json:"format_version"`
	FileSize      uint64 `json:"file_size"`
	DataSize      uint64 `json:"data_size"`
	IndexSize     uint64 `json:"index_size"`
	FilterSize    uint64 `json:"filter_size"`
	MetaSize      uint64 `json:"meta_size"`
	// ValueSize is the bytes of Pebble's value blocks, which hold values
	// kept out of the data blocks.
	ValueSize        uint64  `json:"value_blocks_size,omitempty"`
	DataBlocks       int     `json:"data_blocks"`
	IndexType        string  `json:"index_type"`
	Entries          uint64  `json:"entries"`
	Deletions        uint64  `json:"deletions"`
	RangeDeletions   uint64  `json:"range_deletions"`
	RawKeySize       uint64  `json:"raw_key_size"`
	RawValueSize     uint64  `json:"raw_value_size"`
	Compression      string  `json:"compression"`
	Comparer         string  `json:"comparer"`
	FilterPolicy     string  `json:"filter_policy"`
	FilterBitsPerKey float64 `json:"filter_bits_per_key"`
	SmallestSeq      uint64  `json:"smallest_seq"`
	LargestSeq       uint64  `json:"largest_seq"`
	Smallest         string  `json:"smallest_key,omitempty"`
	Largest          string  `json:"largest_key,omitempty"`
	// Unreadable names the fields read from data blocks that could not
	// be read, with why (sstable check reports the damage).
	Unreadable map[string]string `json:"unreadable,omitempty"`
	Properties map[string]string `json:"properties"`
}

func propertiesCmd(e *env) *cobra.Command {
	var fm formats
	c := &cobra.Command{
		Use:   "properties FILE...",
		Short: "Print a table's format, sizes, counts, compression, filter, sequence and key range",
		Long: `Print a table's format, sizes on disk (file, data, index, filter, other meta
blocks, and Pebble's value blocks where the table has them; blocks as
stored, with their trailers: with the footer they make up the file), entries, deletions, range
deletions, raw key and value sizes, compression, comparer, filter policy and
bits per key, sequence-number range, smallest and largest key, and every
stored property as the writer recorded it (rocksdb.index.size, for one, is
the writer's own measure, not the bytes on disk). Counts are the ones the
properties block states. Sequence numbers come from the properties where
the table states them; a data block that cannot be read leaves the fields
read from data blocks "unreadable" (sstable check reports the damage).`,
		Args: args(cobra.MinimumNArgs(1)),
		RunE: func(c *cobra.Command, files []string) error {
			e.eachTable(files, func(t *table) error { return e.properties(t, &fm) })
			return nil
		},
	}
	fm.register(c, e, formatQuoted)
	return c
}

func (e *env) properties(t *table, fm *formats) error {
	r, p := t.r, t.r.Properties()
	l := r.Blocks() // where the blocks lie, without reading them all
	sizes := blockSizes(l)
	out := propertiesOut{
		File: t.name, Format: l.Format.String(), FormatVersion: l.FormatVersion, FileSize: r.Size(),
		DataSize: sizes[sstable.BlockData], IndexSize: sizes[sstable.BlockIndex] + sizes[sstable.BlockIndexPartition],
		FilterSize: sizes[sstable.BlockFilter],
		MetaSize: sizes[sstable.BlockMetaindex] + sizes[sstable.BlockProperties] + sizes[sstable.BlockRangeDel] +
			sizes[sstable.BlockMeta] + sizes[sstable.BlockRangeKey] + sizes[sstable.BlockValueIndex] + sizes[sstable.BlockBlobRefIndex],
		ValueSize: sizes[sstable.BlockValue],
		IndexType: "single block", Entries: p.NumEntries, Deletions: p.NumDeletions, RangeDeletions: p.NumRangeDeletions,
		RawKeySize: p.RawKeySize, RawValueSize: p.RawValueSize, Compression: p.CompressionName, Comparer: p.ComparerName,
		FilterPolicy: p.FilterPolicy, Properties: map[string]string{},
	}
	for _, b := range l.Blocks {
		if b.Kind == sstable.BlockData {
			out.DataBlocks++
		}
		if b.Kind == sstable.BlockProperties && b.Err == nil {
			err := r.BlockRecords(b, func(k, v []byte) bool {
				out.Properties[string(k)] = sstable.DescribeProperty(string(k), v)
				return true
			})
			if err != nil {
				return err
			}
		}
	}
	if p.IndexType == 2 {
		out.IndexType = "two-level"
	}
	f, err := r.TableFilter()
	if err != nil {
		return err
	}
	if f != nil {
		out.FilterPolicy = f.Policy
		var keys uint64
		switch {
		case f.StatedKeys >= 0:
			keys = uint64(f.StatedKeys)
		case p.NumEntries >= p.NumRangeDeletions:
			keys = p.NumEntries - p.NumRangeDeletions // RocksDB states no key count
		}
		if keys > 0 {
			out.FilterBitsPerKey = float64(f.Lines*f.LineBits) / float64(keys)
		}
	}
	// A damaged data block leaves the fields read from data blocks
	// unknown; the rest still prints.
	unreadable := func(field string, err error) {
		if out.Unreadable == nil {
			out.Unreadable = map[string]string{}
		}
		out.Unreadable[field] = err.Error()
	}
	if lo, hi, err := seqRange(r); err != nil {
		unreadable("sequence numbers", err)
	} else {
		out.SmallestSeq, out.LargestSeq = uint64(lo), uint64(hi)
	}
	if small, large, err := r.KeyRange(); err != nil {
		unreadable("key range", err)
	} else if small != nil {
		out.Smallest, out.Largest = fm.ikey(*small), fm.ikey(*large)
	}
	if e.json {
		e.emit(out)
		return nil
	}
	e.printf("%s\n", t.name)
	e.printf("  format             %s (version %d)\n", out.Format, out.FormatVersion)
	e.printf("  file size          %d (%s)\n", out.FileSize, humanize.Bytes(out.FileSize))
	e.printf("  data blocks        %d bytes on disk in %s\n", out.DataSize, plural(out.DataBlocks, "block"))
	e.printf("  index blocks       %d bytes on disk (%s)\n", out.IndexSize, out.IndexType)
	e.printf("  filter block       %d bytes on disk\n", out.FilterSize)
	e.printf("  other meta blocks  %d bytes on disk\n", out.MetaSize)
	if out.ValueSize > 0 {
		e.printf("  value blocks       %d bytes on disk\n", out.ValueSize)
	}
	e.printf("  entries            %d (deletions %d, range deletions %d)\n", out.Entries, out.Deletions, out.RangeDeletions)
	e.printf("  raw key size       %d\n", out.RawKeySize)
	e.printf("  raw value size     %d\n", out.RawValueSize)
	e.printf("  compression        %s\n", orNone(out.Compression))
	e.printf("  comparer           %s\n", orNone(out.Comparer))
	if out.FilterPolicy != "" {
		e.printf("  filter policy      %s, %.2f bits/key\n", out.FilterPolicy, out.FilterBitsPerKey)
	} else {
		e.printf("  filter policy      (none)\n")
	}
	if why, bad := out.Unreadable["sequence numbers"]; bad {
		e.printf("  sequence numbers   (unreadable: %s)\n", why)
	} else {
		e.printf("  sequence numbers   %d-%d\n", out.SmallestSeq, out.LargestSeq)
	}
	if why, bad := out.Unreadable["key range"]; bad {
		e.printf("  key range          (unreadable: %s)\n", why)
	} else {
		e.printf("  smallest key       %s\n", orNone(out.Smallest))
		e.printf("  largest key        %s\n", orNone(out.Largest))
	}
	names := make([]string, 0, len(out.Properties))
	for n := range out.Properties {
		names = append(names, n)
	}
	slices.Sort(names)
	e.printf("  stored properties (as the writer recorded them):\n")
	for _, n := range names {
		e.printf("    %-40s %s\n", n, out.Properties[n])
	}
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

type blockOut struct {
	Offset      uint64      `json:"offset"`
	Length      uint64      `json:"length"`
	Kind        string      `json:"kind"`
	Name        string      `json:"name,omitempty"`
	Compression string      `json:"compression,omitempty"`
	Checksum    string      `json:"checksum"`
	Error       string      `json:"error,omitempty"`
	Records     []recordOut `json:"records,omitempty"`
}

type recordOut struct {
	Key   string `json:"key"`
	Value string `json:"value,omitempty"`
}

type layoutOut struct {
	File          string     `json:"file"`
	Format        string     `json:"format"`
	FormatVersion uint32     `json:"format_version"`
	FileSize      uint64     `json:"file_size"`
	Blocks        []blockOut `json:"blocks"`
}

func layoutCmd(e *env) *cobra.Command {
	var fm formats
	var verbose bool
	c := &cobra.Command{
		Use:   "layout FILE...",
		Short: "List every block with offset, length, compression and checksum status",
		Long: `List every block of a table in file order: offset, length (without the
5-byte trailer), kind, compression and whether its checksum and contents
are sound, then the footer. With -v, list each block's records: entries of
data blocks, separators and handles of index blocks, names and handles of
the metaindex, properties, range deletions, and a filter's geometry.`,
		Args: args(cobra.MinimumNArgs(1)),
		RunE: func(c *cobra.Command, files []string) error {
			e.eachTable(files, func(t *table) error { return e.layout(t, &fm, verbose) })
			return nil
		},
	}
	c.Flags().BoolVarP(&verbose, "verbose", "v", false, "list each block's records")
	fm.register(c, e, formatSize)
	return c
}

func (e *env) layout(t *table, fm *formats, verbose bool) error {
	r := t.r
	l := r.Layout()
	out := layoutOut{File: t.name, Format: l.Format.String(), FormatVersion: l.FormatVersion, FileSize: r.Size()}
	var bad error
	for _, b := range l.Blocks {
		bo := blockOut{Offset: b.Handle.Offset, Length: b.Handle.Length, Kind: b.Kind.String(), Name: b.Name,
			Compression: b.Compression.String(), Checksum: "ok"}
		if b.Err != nil {
			bo.Checksum, bo.Error = "bad", b.Err.Error()
			if bad == nil {
				bad = b.Err
			}
		} else if verbose {
			recs, err := blockRecords(t, b, fm)
			if err != nil {
				return err
			}
			bo.Records = recs
		}
		out.Blocks = append(out.Blocks, bo)
	}
	out.Blocks = append(out.Blocks, blockOut{Offset: l.FooterOffset, Length: l.FooterLength, Kind: "footer", Checksum: "n/a"})
	if e.json {
		e.emit(out)
	} else {
		e.printf("%s: %s (version %d), %d bytes, %s\n", t.name, out.Format, out.FormatVersion, out.FileSize, plural(len(l.Blocks), "block"))
		e.printf("  %10s %8s  %-15s  %-13s  %s\n", "offset", "length", "kind", "compression", "checksum")
		for _, b := range out.Blocks {
			status := b.Checksum
			if b.Error != "" {
				status += ": " + b.Error
			}
			if b.Name != "" && b.Kind != "properties" && b.Kind != "range-del" {
				status += "  " + b.Name
			}
			e.printf("  %10d %8d  %-15s  %-13s  %s\n", b.Offset, b.Length, b.Kind, b.Compression, status)
			for _, rec := range b.Records {
				if rec.Value != "" {
					e.printf("      %s %s\n", rec.Key, rec.Value)
				} else {
					e.printf("      %s\n", rec.Key)
				}
			}
		}
	}
	if bad != nil {
		e.fail(bad)
	}
	return nil
}

// blockRecords describes a sound block's records for layout -v.
func blockRecords(t *table, b sstable.BlockInfo, fm *formats) ([]recordOut, error) {
	r := t.r
	var out []recordOut
	if b.Kind == sstable.BlockFilter {
		f, err := r.TableFilter()
		if err != nil {
			return nil, err
		}
		if f == nil || b.Name != "fullfilter."+f.Policy {
			return []recordOut{{Key: "filter in a format bloomkv does not read"}}, nil
		}
		return []recordOut{{Key: fmt.Sprintf("%d lines of %d bits, k=%d, %d bits set", f.Lines, f.LineBits, f.Probes, f.BitsSet)}}, nil
	}
	var ferr error
	err := r.BlockRecords(b, func(k, v []byte) bool {
		switch b.Kind {
		case sstable.BlockData:
			ik, ok := base.DecodeInternalKey(k)
			if !ok {
				ferr = fmt.Errorf("%s: %s block %s: key %x is not an internal key", t.name, b.Kind, b.Handle, k)
				return false
			}
			out = append(out, recordOut{fm.ikey(ik), fm.v(v)})
		case sstable.BlockIndex, sstable.BlockIndexPartition:
			ik, _ := base.DecodeInternalKey(k)
			h, _ := sstable.DecodeBlockHandle(v)
			out = append(out, recordOut{fm.ikey(ik), "-> " + h.String()})
		case sstable.BlockMetaindex:
			h, _ := sstable.DecodeBlockHandle(v)
			out = append(out, recordOut{string(k), "-> " + h.String()})
		case sstable.BlockProperties:
			out = append(out, recordOut{string(k), "= " + sstable.DescribeProperty(string(k), v)})
		case sstable.BlockRangeDel:
			ik, _ := base.DecodeInternalKey(k)
			out = append(out, recordOut{fmt.Sprintf("[%s, %s) #%d", fm.k(ik.UserKey), fm.k(v), ik.SeqNum()), ""})
		case sstable.BlockRangeKey:
			rk, err := t.r.DecodeRangeKey(k, v)
			if err != nil {
				ferr = fmt.Errorf("%s: %s block %s: %w", t.name, b.Kind, b.Handle, err)
				return false
			}
			o := rangeKeyOut(t.name, rk, fm)
			out = append(out, recordOut{fmt.Sprintf("[%s, %s) #%d,%s", o.Key, o.End, o.Seq, o.Kind), strings.Join(o.Items, " ")})
		default:
			out = append(out, recordOut{quoteKey(k), fm.v(v)})
		}
		return true
	})
	if ferr != nil {
		return nil, ferr
	}
	return out, err
}

type scanOut struct {
	File  string  `json:"file"`
	Key   string  `json:"key"`
	Seq   uint64  `json:"seq"`
	Kind  string  `json:"kind"`
	Value *string `json:"value,omitempty"` // nil for a deletion
	End   string  `json:"end,omitempty"`   // a range deletion's or range key's exclusive end
	// Items are a range key's suffixes, each =value for a RANGEKEYSET.
	Items []string `json:"items,omitempty"`
	// Blob is the reference of a value in a blob file; Value is the value
	// when the blob file was at hand.
	Blob *blobRefOut `json:"blob,omitempty"`
}

// rangeKeyOut describes a range key for scan and layout -v.
func rangeKeyOut(file string, rk sstable.RangeKey, fm *formats) scanOut {
	o := scanOut{File: file, Key: fm.k(rk.Start), End: fm.k(rk.End), Seq: uint64(rk.Trailer.SeqNum()), Kind: rk.Trailer.Kind().String()}
	for i, s := range rk.Suffixes {
		item := fm.k(s)
		if rk.Values != nil {
			item += "=" + fm.v(rk.Values[i])
		}
		o.Items = append(o.Items, item)
	}
	return o
}

func scanCmd(e *env) *cobra.Command {
	var fm formats
	var b bounds
	var blobFiles []string
	c := &cobra.Command{
		Use:     "scan FILE...",
		Aliases: []string{"dump"}, // the verb wal, manifest and blob use
		Short:   "Print a table's entries and range deletions in key order (also: dump)",
		Long: `Print a table's point entries (key#seq,kind and value), range
deletions ([start, end)#seq,RANGEDEL) and, in Pebble's tables, range keys
([start, end)#seq,RANGEKEYSET suffix=value...; RANGEKEYUNSET suffix...;
RANGEKEYDEL) in key order, from --start (inclusive) to --end (exclusive), at
most --count of them.

A value a Pebble table keeps in a blob file (Pebblev6 on, format major
version 024) shows as its reference (blob reference, block, value number,
length), followed by the value when the blob file is at hand: the files
--blob-file names, in the order of the table's blob references, or, when
the table lies in a Pebble store whose version holds it, the files its
manifest names.`,
		Args: args(cobra.MinimumNArgs(1)),
		RunE: func(c *cobra.Command, files []string) error {
			if err := b.parse(c); err != nil {
				return err
			}
			e.eachTable(files, func(t *table) error {
				bv := newBlobValues(t.name, blobFiles)
				defer bv.close()
				return e.scan(t, &fm, &b, bv)
			})
			return nil
		},
	}
	c.Flags().StringArrayVar(&blobFiles, "blob-file", nil, "a blob file holding the table's values, in the order of its blob references (repeatable)")
	b.register(c)
	fm.register(c, e, formatQuoted)
	return c
}

func (e *env) scan(t *table, fm *formats, b *bounds, bv *blobValues) error {
	r := t.r
	overlaps := func(start, end []byte) bool {
		return (b.end == nil || r.Compare(start, b.end) < 0) && (b.start == nil || r.Compare(end, b.start) > 0)
	}
	var spans []scanOut // range deletions, then range keys, each in order
	var starts [][]byte
	for _, d := range r.RangeDeletions() {
		if overlaps(d.Start, d.End) {
			spans = append(spans, scanOut{File: t.name, Key: fm.k(d.Start), End: fm.k(d.End), Seq: uint64(d.SeqNum), Kind: base.KindRangeDelete.String()})
			starts = append(starts, d.Start)
		}
	}
	rks, err := r.RangeKeys()
	if err != nil {
		return err
	}
	for _, rk := range rks {
		if overlaps(rk.Start, rk.End) {
			spans = append(spans, rangeKeyOut(t.name, rk, fm))
			starts = append(starts, rk.Start)
		}
	}
	// In start order; a range deletion before a range key at the same start.
	order := make([]int, len(spans))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(i, j int) int { return r.Compare(starts[i], starts[j]) })
	it := r.NewIter()
	ok := false
	if b.start != nil {
		ok = it.SeekGE(b.start)
	} else {
		ok = it.First()
	}
	if !e.json {
		e.printf("%s\n", t.name)
	}
	n := 0
	more := func() bool { return b.count == 0 || n < b.count }
	print := func(o scanOut) {
		n++
		if e.json {
			e.emit(o)
			return
		}
		key := fmt.Sprintf("%s#%d,%s", o.Key, o.Seq, o.Kind)
		switch {
		case o.End != "":
			e.printf("%s\n", strings.TrimRight(fmt.Sprintf("  [%s, %s)#%d,%s %s", o.Key, o.End, o.Seq, o.Kind, strings.Join(o.Items, " ")), " "))
		case o.Blob != nil:
			ref := fmt.Sprintf("blob(ref %d, block %d, value %d, %d bytes)", o.Blob.Reference, o.Blob.Block, o.Blob.Value, o.Blob.Length)
			if o.Blob.File != "" {
				ref = fmt.Sprintf("blob(%s, block %d, value %d, %d bytes)", o.Blob.File, o.Blob.Block, o.Blob.Value, o.Blob.Length)
			}
			if o.Value != nil {
				ref += " " + *o.Value
			}
			e.printf("  %s %s\n", key, ref)
		case o.Value != nil:
			e.printf("%s\n", strings.TrimRight("  "+key+" "+*o.Value, " "))
		default:
			e.printf("  %s\n", key)
		}
	}
	for more() {
		ok = ok && (b.end == nil || r.Compare(it.Key().UserKey, b.end) < 0)
		// Spans come before the points at or after their start.
		if len(order) > 0 && (!ok || r.Compare(starts[order[0]], it.Key().UserKey) <= 0) {
			print(spans[order[0]])
			order = order[1:]
			continue
		}
		if !ok {
			break
		}
		k := it.Key()
		o := scanOut{File: t.name, Key: fm.k(k.UserKey), Seq: uint64(k.SeqNum()), Kind: k.Kind().String()}
		switch {
		case it.IsBlobReference():
			ref, v, err := bv.resolve(it.Value())
			if err != nil {
				it.Close()
				return fmt.Errorf("%s: key %s: %w", t.name, fm.k(k.UserKey), err)
			}
			o.Blob = &ref
			if v != nil {
				s := fm.v(v)
				o.Value = &s
			}
		case isValueKind(k.Kind()):
			v := fm.v(it.Value())
			o.Value = &v
		}
		print(o)
		ok = it.Next()
	}
	return it.Close()
}

type checkOut struct {
	File           string   `json:"file"`
	OK             bool     `json:"ok"`
	Blocks         int      `json:"blocks"`
	Entries        uint64   `json:"entries"`
	UserKeys       uint64   `json:"user_keys"`
	RangeDeletions int      `json:"range_deletions"`
	Filter         string   `json:"filter,omitempty"`
	Problems       []string `json:"problems,omitempty"`
	MoreProblems   int      `json:"more_problems,omitempty"`
}

func checkCmd(e *env) *cobra.Command {
	var verbose bool
	c := &cobra.Command{
		Use:   "check FILE...",
		Short: "Verify checksums, key order, and that every key passes the table's filter",
		Long: `Read every block of a table and verify its checksum and structure, that
point keys are in strictly increasing order within and across blocks, that
each index separator lies between its block and the next, that every user
key passes the table's filter (bloomkv's or Pebble's: a filter must have no
false negatives), and that the properties' counts match. A table with
problems is reported on stderr (the first problem and how many more; -v
lists them all on stdout) and the exit status is 1.`,
		Args: args(cobra.MinimumNArgs(1)),
		RunE: func(c *cobra.Command, files []string) error {
			e.eachTable(files, func(t *table) error { return e.check(t, verbose) })
			return nil
		},
	}
	c.Flags().BoolVarP(&verbose, "verbose", "v", false, "list every problem")
	return c
}

func (e *env) check(t *table, verbose bool) error {
	rep := t.r.Check()
	out := checkOut{File: t.name, OK: len(rep.Problems) == 0, Blocks: rep.Blocks, Entries: rep.Entries,
		UserKeys: rep.UserKeys, RangeDeletions: rep.RangeDeletions, MoreProblems: rep.MoreProblems}
	if f, err := t.r.TableFilter(); err == nil && f != nil {
		out.Filter = f.Policy
	}
	for _, p := range rep.Problems {
		out.Problems = append(out.Problems, p.Error())
	}
	if e.json {
		e.emit(out)
	} else {
		status := "ok"
		if !out.OK {
			status = plural(len(out.Problems)+out.MoreProblems, "problem")
		}
		filter := "no filter"
		if out.Filter != "" {
			filter = fmt.Sprintf("all %d user keys pass the %s filter", out.UserKeys, out.Filter)
			if !out.OK {
				filter = out.Filter + " filter probed"
			}
		}
		e.printf("%s: %s: %s, %s, %s; %s\n", t.name, status, plural(out.Blocks, "block"), plural(out.Entries, "entry"), plural(out.RangeDeletions, "range deletion"), filter)
		if verbose {
			for _, p := range out.Problems {
				e.printf("  %s\n", p)
			}
		}
	}
	if err := rep.Err(); err != nil {
		e.fail(err)
	}
	return nil
}

type filterOut struct {
	File           string  `json:"file"`
	Policy         string  `json:"policy"`
	Lines          int     `json:"lines"`
	LineBits       int     `json:"line_bits"`
	Probes         int     `json:"k"`
	FilterBytes    int     `json:"filter_bytes"`
	Keys           uint64  `json:"keys"`
	StatedKeys     int64   `json:"stated_keys"`
	EstimatedKeys  float64 `json:"estimated_keys"`
	BitsPerKey     float64 `json:"bits_per_key"`
	BitsSet        uint64  `json:"bits_set"`
	FillRatio      float64 `json:"fill_ratio"`
	ExpectedFPRate float64 `json:"expected_fp_rate"`
	AbsentProbes   int     `json:"absent_probes"`
	FalsePositives int     `json:"false_positives"`
	MeasuredFPRate float64 `json:"measured_fp_rate"`
}

func filterCmd(e *env) *cobra.Command {
	var probes int
	var seed uint64
	c := &cobra.Command{
		Use:   "filter FILE...",
		Short: "Measure a table's filter: geometry, bits set, estimated keys, false-positive rates",
		Long: `Describe a table's filter (bloomkv's blocked Bloom filter, or the
RocksDB built-in Bloom filter Pebble writes): lines, k, bits per key, the
fraction of bits set, the key count estimated from the bits set next to the
real count of distinct user keys, the false-positive rate the geometry
predicts, and the rate measured on --probes random keys the table does not
hold (drawn from --seed, so runs repeat). In a table of CockroachDB's
comparer the filter holds key prefixes (roachpb key and sentinel): those
are the keys counted, and the absent keys probed are engine keys without a
version.`,
		Args: args(cobra.MinimumNArgs(1)),
		RunE: func(c *cobra.Command, files []string) error {
			if probes < 0 {
				return usageError{fmt.Errorf("--probes %d is negative", probes)}
			}
			e.eachTable(files, func(t *table) error { return e.filter(t, probes, seed) })
			return nil
		},
	}
	c.Flags().IntVar(&probes, "probes", 100000, "random absent keys to measure the false-positive rate on")
	c.Flags().Uint64Var(&seed, "seed", 1, "seed of the random absent keys")
	return c
}

func (e *env) filter(t *table, probes int, seed uint64) error {
	f, err := t.r.TableFilter()
	if err != nil {
		return err
	}
	if f == nil {
		return fmt.Errorf("%s: the table has no filter bloomkv can read (policy %q)", t.name, t.r.Properties().FilterPolicy)
	}
	// The keys the filter holds: user keys, or in a table of CockroachDB's
	// comparer their prefixes (roachpb key and sentinel).
	prefix := func(k []byte) []byte { return k[:t.r.Split(k)] }
	keys := map[string]struct{}{}
	it := t.r.NewIter()
	for ok := it.First(); ok; ok = it.Next() {
		keys[string(prefix(it.Key().UserKey))] = struct{}{}
	}
	if err := it.Close(); err != nil {
		return err
	}
	bits := uint64(f.Lines * f.LineBits)
	out := filterOut{File: t.name, Policy: f.Policy, Lines: f.Lines, LineBits: f.LineBits, Probes: f.Probes,
		FilterBytes: f.Size, Keys: uint64(len(keys)), StatedKeys: f.StatedKeys, EstimatedKeys: f.EstimatedKeys,
		BitsSet: f.BitsSet, ExpectedFPRate: f.ExpectedFPRate(uint64(len(keys))), AbsentProbes: probes}
	if len(keys) > 0 {
		out.BitsPerKey = float64(bits) / float64(len(keys))
	}
	if bits > 0 {
		out.FillRatio = float64(f.BitsSet) / float64(bits)
	}
	rng := rand.New(rand.NewPCG(seed, 0x62666b))
	key := make([]byte, 16)
	if t.r.ComparerIsForeign() {
		key = make([]byte, 17) // an engine key without a version: 16 bytes and the sentinel
	}
	for i := 0; i < probes; {
		for j := range key[:16] {
			key[j] = byte(rng.Uint32())
		}
		if _, ok := keys[string(prefix(key))]; ok {
			continue // not absent
		}
		i++
		if f.MayContain(key) {
			out.FalsePositives++
		}
	}
	if probes > 0 {
		out.MeasuredFPRate = float64(out.FalsePositives) / float64(probes)
	}
	if e.json {
		e.emit(out)
		return nil
	}
	stated := "not recorded"
	if out.StatedKeys >= 0 {
		stated = fmt.Sprint(out.StatedKeys)
	}
	e.printf("%s\n", t.name)
	e.printf("  policy               %s\n", out.Policy)
	e.printf("  lines                %d of %d bits (%d bytes with the trailer)\n", out.Lines, out.LineBits, out.FilterBytes)
	e.printf("  probes per key (k)   %d\n", out.Probes)
	e.printf("  bits per key         %.2f\n", out.BitsPerKey)
	e.printf("  bits set             %d of %d (%.1f%%)\n", out.BitsSet, bits, 100*out.FillRatio)
	what := "user keys"
	if t.r.ComparerIsForeign() {
		what = "key prefixes"
	}
	e.printf("  keys                 %d distinct %s; filter states %s; estimated from the bits set %.1f\n", out.Keys, what, stated, out.EstimatedKeys)
	e.printf("  false-positive rate  %s expected for an ideal hash, %s measured (%d of %d absent keys)\n", percent(out.ExpectedFPRate), percent(out.MeasuredFPRate), out.FalsePositives, out.AbsentProbes)
	return nil
}
