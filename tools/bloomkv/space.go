package main

// find, db space, db properties and sstable space: questions about a
// store's tables and WALs, bloomkv's or Pebble's, answered from the files.

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/bloomkv/bloomkv"
	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/batchrepr"
	"github.com/bloomkv/bloomkv/internal/humanize"
	"github.com/bloomkv/bloomkv/internal/manifest"
	"github.com/bloomkv/bloomkv/internal/pebblestore"
	"github.com/bloomkv/bloomkv/sstable"
)

// storeTable is a table of a store's current version.
type storeTable struct {
	level int // -1: a flushable ingest's table (Pebble's), in no level
	path  string
	size  uint64
	// ov is the sequence number every key of the table reads at (an
	// ingested table's); 0: as stored.
	ov base.SeqNum
	// virtual is the number of a virtual table (of a Pebble store), part
	// of the file at path: only its keys from lo to hi (exclusive when
	// hiExcl) are its. 0: a table of its own.
	virtual    uint64
	lo, hi     []byte
	hiExcl     bool
	whereLabel string // find's "where", when not the level's
	// smallest and largest are the user keys the manifest bounds the
	// table's entries and range deletions by; largest is exclusive when
	// largestExcl (a range deletion's end).
	smallest, largest []byte
	largestExcl       bool
	// pebble is a Pebble store's table, whose values in blob files the
	// store resolves.
	pebble *pebblestore.Table
}

// holds reports whether the table holds versions of key: always, but for a
// virtual table only within its bounds.
func (st *storeTable) holds(key []byte) bool {
	if st.virtual == 0 {
		return true
	}
	c := bytes.Compare(key, st.hi)
	return bytes.Compare(key, st.lo) >= 0 && (c < 0 || c == 0 && !st.hiExcl)
}

// virtualName names a virtual table ("" for a table of its own).
func (st *storeTable) virtualName() string {
	if st.virtual == 0 {
		return ""
	}
	return fmt.Sprintf("%06d.sst", st.virtual)
}

// clip narrows [start, end) (nil: unbounded) to a virtual table's bounds.
func (st *storeTable) clip(start, end []byte) ([]byte, []byte) {
	if st.virtual == 0 {
		return start, end
	}
	if start == nil || bytes.Compare(start, st.lo) < 0 {
		start = st.lo
	}
	hi := st.hi
	if !st.hiExcl {
		hi = append(bytes.Clone(hi), 0)
	}
	if end == nil || bytes.Compare(end, hi) > 0 {
		end = hi
	}
	return start, end
}

// storeFiles are a store's current tables, level by level (level 0 newest
// first, the others in key order).
type storeFiles struct {
	dir    string
	pebble bool
	tables []storeTable
	// wals are the WALs holding writes not in tables, when the store says
	// (Pebble's); nil: every WAL in the directory.
	wals map[string]bool
	// store is the Pebble store, open until close.
	store *pebblestore.Store
}

// close closes the Pebble store currentTables opened.
func (sf *storeFiles) close() {
	if sf.store != nil {
		sf.store.Close()
	}
}

// currentTables opens the store in dir read-only, as the db commands do,
// and returns its current tables.
func currentTables(dir string) (*storeFiles, error) {
	sf := &storeFiles{dir: dir}
	if pebblestore.IsPebble(dir) {
		sf.pebble = true
		s, err := pebblestore.Open(dir)
		if err != nil {
			return nil, err
		}
		sf.store = s
		{
			sf.wals = map[string]bool{}
			for _, w := range s.WALs {
				sf.wals[filepath.Base(w)] = true
			}
			add := func(t *pebblestore.Table) {
				st := storeTable{level: t.Level, path: t.Path, size: t.Meta.Size, pebble: t,
					smallest: t.Meta.Smallest.UserKey, largest: t.Meta.Largest.UserKey, largestExcl: t.Meta.Largest.SeqNum() == base.SeqNumMax}
				if t.Meta.SmallestSeq == t.Meta.LargestSeq {
					st.ov = t.Meta.SmallestSeq // as Pebble reads an ingested table
				}
				if t.Pebble.Virtual {
					st.virtual, st.lo, st.hi, st.hiExcl = t.Meta.FileNum, t.Meta.Smallest.UserKey, t.Meta.Largest.UserKey, t.Meta.Largest.SeqNum() == base.SeqNumMax
				}
				if t.Level < 0 {
					st.whereLabel = "flushable ingest"
				}
				sf.tables = append(sf.tables, st)
			}
			for i := range s.Flushable {
				add(&s.Flushable[i])
			}
			for l := range s.Tables {
				for i := range s.Tables[l] {
					add(&s.Tables[l][i])
				}
			}
		}
		return sf, nil
	}
	err := withDB(dir, func(d *bloomkv.DB) error {
		levels, err := d.SSTables()
		if err != nil {
			return err
		}
		for l, tables := range levels {
			for _, t := range tables {
				st := storeTable{level: l, path: filepath.Join(dir, t.Name), size: t.Size,
					smallest: t.Smallest, largest: t.Largest, largestExcl: t.LargestExclusive}
				if t.Ingested {
					st.ov = base.SeqNum(t.SmallestSeq)
				}
				sf.tables = append(sf.tables, st)
			}
		}
		return nil
	})
	return sf, err
}

// eachCurrentTable opens each table of the store in dir's levels in turn
// and calls fn with it, stopping at the first error. (A Pebble store's
// flushable ingests, in no level yet, are left out.)
func eachCurrentTable(dir string, fn func(st *storeTable, t *table) error) error {
	sf, err := currentTables(dir)
	if err != nil {
		return err
	}
	defer sf.close()
	for i := range sf.tables {
		st := &sf.tables[i]
		if st.level < 0 {
			continue
		}
		t, err := openTable(st.path)
		if err != nil {
			return err
		}
		err = fn(st, t)
		t.f.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// rangeBytes returns the bytes (trailers included) of a table's data
// blocks that may hold keys in [start, end) (nil: unbounded), as its index
// places them, and how many of its data blocks those are of how many.
// smallest is the table's smallest user key, the low bound of its first
// block. The caller leaves out a table whose keys all lie outside the
// range: the last block's separator may lie past the table's largest key.
func rangeBytes(t *table, start, end, smallest []byte) (size uint64, blocks, total int, err error) {
	// Block i holds keys after separator i-1 and up to separator i; block
	// 0 holds keys from smallest.
	prev := smallest
	visit := func(sep []byte, bh sstable.BlockHandle) {
		total++
		lo, hi := prev, sep
		overlaps := (start == nil || hi == nil || t.r.Compare(hi, start) >= 0) &&
			(end == nil || t.r.Compare(lo, end) < 0)
		if overlaps {
			blocks++
			size += bh.Length + sstable.BlockTrailerLen
		}
		prev = sep
	}
	l := t.r.Blocks()
	var index []sstable.BlockInfo
	for _, b := range l.Blocks {
		if b.Err != nil {
			return 0, 0, 0, b.Err
		}
		if b.Kind == sstable.BlockIndexPartition || (b.Kind == sstable.BlockIndex && !twoLevel(l)) {
			index = append(index, b)
		}
	}
	// Partitions lie in file order, which is their key order.
	for _, b := range index {
		var bad error
		err := t.r.BlockRecords(b, func(k, v []byte) bool {
			bh, n := sstable.DecodeBlockHandle(v)
			if n == 0 {
				bad = fmt.Errorf("%s: %s block %s: bad block handle %x", t.name, b.Kind, b.Handle, v)
				return false
			}
			visit(bytes.Clone(userKey(k)), bh)
			return true
		})
		if err == nil {
			err = bad
		}
		if err != nil {
			return 0, 0, 0, err
		}
	}
	return size, blocks, total, nil
}

// tableRangeBytes is rangeBytes for a table on its own, bounded by the
// keys it holds: a range that meets none of them is no block.
func tableRangeBytes(t *table, start, end []byte) (size uint64, blocks, total int, err error) {
	lo, hi, err := t.r.KeyRange()
	if err != nil {
		return 0, 0, 0, err
	}
	if lo == nil || !overlaps(t.r.Compare, start, end, lo.UserKey, hi.UserKey, hi.IsExclusiveSentinel()) {
		_, _, total, err := rangeBytes(t, nil, nil, nil)
		return 0, 0, total, err
	}
	return rangeBytes(t, start, end, lo.UserKey)
}

// overlaps reports whether [start, end) (nil: unbounded) meets the keys
// from lo to hi, hi exclusive when hiExcl.
func overlaps(cmp func(a, b []byte) int, start, end, lo, hi []byte, hiExcl bool) bool {
	if end != nil && cmp(lo, end) >= 0 {
		return false
	}
	if start != nil {
		c := cmp(hi, start)
		if c < 0 || c == 0 && hiExcl {
			return false
		}
	}
	return true
}

// within reports whether the keys from lo to hi (hi exclusive when hiExcl)
// all lie in [start, end) (nil: unbounded).
func within(cmp func(a, b []byte) int, start, end, lo, hi []byte, hiExcl bool) bool {
	if start != nil && cmp(lo, start) < 0 {
		return false
	}
	if end != nil {
		c := cmp(hi, end)
		if c > 0 || c == 0 && !hiExcl {
			return false
		}
	}
	return true
}

// twoLevel reports whether a table's index is partitioned.
func twoLevel(l *sstable.Layout) bool {
	for _, b := range l.Blocks {
		if b.Kind == sstable.BlockIndexPartition {
			return true
		}
	}
	return false
}

// userKey is the user key of an encoded internal key (the whole of a
// shorter one).
func userKey(k []byte) []byte {
	if len(k) < 8 {
		return k
	}
	return k[:len(k)-8]
}

type spaceOut struct {
	File       string `json:"file"`
	Start      string `json:"start,omitempty"`
	End        string `json:"end,omitempty"`
	Size       uint64 `json:"size"`
	DataBlocks int    `json:"data_blocks"`
	OfBlocks   int    `json:"of_data_blocks"`
	FileSize   uint64 `json:"file_size"`
}

// describe prints the range in text output.
func (f *rangeFlags) describe() string {
	s, e := "-inf", "+inf"
	if f.r.Start != nil {
		s = quoteKey(f.r.Start)
	}
	if f.r.End != nil {
		e = quoteKey(f.r.End)
	}
	return "[" + s + ", " + e + ")"
}

// out formats the range for JSON output ("" when unbounded).
func (f *rangeFlags) out(fm *formats) (start, end string) {
	if f.r.Start != nil {
		start = fm.k(f.r.Start)
	}
	if f.r.End != nil {
		end = fm.k(f.r.End)
	}
	return start, end
}

func sstableSpaceCmd(e *env) *cobra.Command {
	var fm formats
	var b rangeFlags
	c := &cobra.Command{
		Use:   "space FILE... [--start K] [--end K]",
		Short: "Print the bytes of a table's data blocks that overlap a key range",
		Long: `Print the bytes (with their trailers) of the table's data blocks that may
hold keys from --start (inclusive) to --end (exclusive), as the index places
them: a block overlaps when the keys between its separator and the one
before meet the range. Without bounds, every data block.`,
		Args: args(cobra.MinimumNArgs(1)),
		RunE: func(c *cobra.Command, files []string) error {
			if err := b.parse(c); err != nil {
				return err
			}
			e.eachTable(files, func(t *table) error {
				size, n, total, err := tableRangeBytes(t, b.r.Start, b.r.End)
				if err != nil {
					return err
				}
				out := spaceOut{File: t.name, Size: size, DataBlocks: n, OfBlocks: total, FileSize: t.r.Size()}
				out.Start, out.End = b.out(&fm)
				if e.json {
					e.emit(out)
					return nil
				}
				e.printf("%s: %s: %d bytes (%s) in %d of %s; file %d bytes\n", t.name, b.describe(), size, humanize.Bytes(size), n, plural(total, "data block"), out.FileSize)
				return nil
			})
			return nil
		},
	}
	b.register(c)
	fm.register(c, e, formatQuoted)
	return c
}

type levelSpaceOut struct {
	Level  int    `json:"level"`
	Tables int    `json:"tables"` // holding data blocks in the range
	Size   uint64 `json:"size"`
}

type dbSpaceOut struct {
	Dir    string          `json:"dir"`
	Start  string          `json:"start,omitempty"`
	End    string          `json:"end,omitempty"`
	Levels []levelSpaceOut `json:"levels"`
	Tables int             `json:"tables"`
	Size   uint64          `json:"size"`
}

func dbSpaceCmd(e *env) *cobra.Command {
	var fm formats
	var b rangeFlags
	c := &cobra.Command{
		Use:   "space DIR [--start K] [--end K]",
		Short: "Print the bytes on disk of each level's tables within a key range",
		Long: `Print, level by level and in total, the bytes on disk of the store's
current tables within the key range from --start (inclusive) to --end
(exclusive), by the rule of Pebble's DB.EstimateDiskUsage for the tables'
own bytes: a table whose keys (by the manifest's bounds) all lie in the
range counts whole; a table the range cuts counts the data blocks its index
places in the range (sstable space); a table whose keys all lie outside it
counts nothing, so a range outside every table's bounds is 0 bytes (a
range between two keys of one table counts the blocks that hold it).
Without bounds,
every table's size. A virtual table (Pebble's: part of a file an excise
left) counts within its own bounds. Unlike Pebble's estimate, values kept
in blob files, and the share of a cut table's value blocks, are not
counted.`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(c *cobra.Command, a []string) error {
			if err := b.parse(c); err != nil {
				return err
			}
			out := dbSpaceOut{Dir: a[0]}
			out.Start, out.End = b.out(&fm)
			for l := range manifest.NumLevels {
				out.Levels = append(out.Levels, levelSpaceOut{Level: l})
			}
			err := eachCurrentTable(a[0], func(st *storeTable, t *table) error {
				size, err := st.spaceIn(t, b.r.Start, b.r.End)
				if err == nil && size > 0 {
					out.Levels[st.level].Tables++
					out.Levels[st.level].Size += size
					out.Tables++
					out.Size += size
				}
				return err
			})
			if err != nil {
				return err
			}
			if e.json {
				e.emit(out)
				return nil
			}
			e.printf("%s: %s: %d bytes (%s) in %s\n", a[0], b.describe(), out.Size, humanize.Bytes(out.Size), plural(out.Tables, "table"))
			for _, l := range out.Levels {
				e.printf("  L%d: %d bytes in %s\n", l.Level, l.Size, plural(l.Tables, "table"))
			}
			return nil
		},
	}
	b.register(c)
	fm.register(c, e, formatQuoted)
	return c
}

// spaceIn returns the bytes of a store's table t within [start, end) (nil:
// unbounded), as db space counts them: the whole table when its bounds lie
// in the range, none when they lie outside it, else its data blocks in it.
func (st *storeTable) spaceIn(t *table, start, end []byte) (uint64, error) {
	lo, hi, hiExcl := st.smallest, st.largest, st.largestExcl
	if st.virtual != 0 {
		lo, hi, hiExcl = st.lo, st.hi, st.hiExcl
	}
	if !overlaps(t.r.Compare, start, end, lo, hi, hiExcl) {
		return 0, nil
	}
	if within(t.r.Compare, start, end, lo, hi, hiExcl) {
		return st.size, nil
	}
	start, end = st.clip(start, end)
	size, _, _, err := rangeBytes(t, start, end, lo)
	return size, err
}

// propSums are table properties summed over tables.
type propSums struct {
	Level          int    `json:"level"` // -1: all levels
	Tables         int    `json:"tables"`
	FileSize       uint64 `json:"file_size"`
	DataSize       uint64 `json:"data_size"`
	IndexSize      uint64 `json:"index_size"`
	FilterSize     uint64 `json:"filter_size"`
	Entries        uint64 `json:"entries"`
	Deletions      uint64 `json:"deletions"`
	RangeDeletions uint64 `json:"range_deletions"`
	RawKeySize     uint64 `json:"raw_key_size"`
	RawValueSize   uint64 `json:"raw_value_size"`
}

// add adds a table's properties, measured as sstable properties measures
// them.
func (s *propSums) add(r *sstable.Reader) {
	p := r.Properties()
	sizes := blockSizes(r.Blocks())
	s.Tables++
	s.FileSize += r.Size()
	s.DataSize += sizes[sstable.BlockData]
	s.IndexSize += sizes[sstable.BlockIndex] + sizes[sstable.BlockIndexPartition]
	s.FilterSize += sizes[sstable.BlockFilter]
	s.Entries += p.NumEntries
	s.Deletions += p.NumDeletions
	s.RangeDeletions += p.NumRangeDeletions
	s.RawKeySize += p.RawKeySize
	s.RawValueSize += p.RawValueSize
}

type dbPropertiesOut struct {
	Dir    string     `json:"dir"`
	Levels []propSums `json:"levels"`
	Total  propSums   `json:"total"`
}

func dbPropertiesCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "properties DIR",
		Short: "Print the current tables' properties summed per level and in total",
		Long: `Print the properties of the store's current tables (as sstable
properties gives them) summed per level and over all levels: tables, file,
data, index and filter sizes, entries, deletions, range deletions, raw key
and value sizes. A file behind several virtual tables (Pebble's: the parts
of a table an excise left) counts once, at its first table's level.`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(c *cobra.Command, a []string) error {
			out := dbPropertiesOut{Dir: a[0], Total: propSums{Level: -1}}
			for l := range manifest.NumLevels {
				out.Levels = append(out.Levels, propSums{Level: l})
			}
			counted := map[string]bool{}
			err := eachCurrentTable(a[0], func(st *storeTable, t *table) error {
				if counted[st.path] {
					return nil
				}
				counted[st.path] = true
				out.Levels[st.level].add(t.r)
				out.Total.add(t.r)
				return nil
			})
			if err != nil {
				return err
			}
			if e.json {
				e.emit(out)
				return nil
			}
			e.printf("%s\n", a[0])
			e.printf("  %-5s %6s %10s %10s %8s %8s %9s %9s %9s %10s %10s\n", "level", "tables", "file", "data", "index", "filter",
				"entries", "deletions", "rangedels", "raw keys", "raw values")
			for _, s := range append(out.Levels, out.Total) {
				name := fmt.Sprintf("L%d", s.Level)
				if s.Level < 0 {
					name = "total"
				}
				e.printf("  %-5s %6d %10d %10d %8d %8d %9d %9d %9d %10d %10d\n", name, s.Tables, s.FileSize, s.DataSize, s.IndexSize, s.FilterSize,
					s.Entries, s.Deletions, s.RangeDeletions, s.RawKeySize, s.RawValueSize)
			}
			return nil
		},
	}
}

// foundOut is a version of a key in a file.
type foundOut struct {
	File  string `json:"file"`
	Where string `json:"where"`           // "L3", "not in the current version", "WAL", "obsolete WAL"
	Level *int   `json:"level,omitempty"` // a current table's level
	// Virtual names a virtual table (Pebble's) whose part of File holds
	// the version.
	Virtual string `json:"virtual,omitempty"`
	// InBlobFile says the value is in one of a Pebble store's blob files,
	// resolved from the handle the table holds.
	InBlobFile bool `json:"in_blob_file,omitempty"`
	// Offset is the WAL record's offset (nil for a table).
	Offset *int64 `json:"offset,omitempty"`
	Seq    uint64 `json:"seq"`
	Kind   string `json:"kind"`
	Value  string `json:"value,omitempty"` // a set's value, a range deletion's span
}

func findCmd(e *env) *cobra.Command {
	var fm formats
	c := &cobra.Command{
		Use:   "find DIR KEY",
		Short: "List every file of a store that holds a version of KEY, newest first",
		Long: `List every version of KEY in the store's files, newest first: in its
tables (the current version's, with their level, and any other table file
lying in the directory, "not in the current version") and its WALs (with
the batch's offset; a Pebble WAL older than the manifest's log number, kept
for reuse and already flushed, is an "obsolete WAL"), each with the
version's kind and sequence number. A range deletion covering KEY counts as
a version (kind RANGEDEL, its span). Exit status 1 when no file holds KEY.`,
		Args: dirThenKey,
		RunE: func(c *cobra.Command, a []string) error {
			key, err := parseKey(a[1])
			if err != nil {
				return err
			}
			return e.find(key, a[0], &fm)
		},
	}
	fm.register(c, e, formatQuoted)
	return c
}

func (e *env) find(key []byte, dir string, fm *formats) error {
	sf, err := currentTables(dir)
	if err != nil {
		return err
	}
	defer sf.close()
	var found []foundOut
	current := map[string]bool{}
	lookIn := func(st storeTable, where string, level *int) error {
		t, err := openTableAt(st.path, st.ov)
		if err != nil {
			return err
		}
		defer t.f.Close()
		if !st.holds(key) {
			return nil // outside a virtual table's part of its file
		}
		it := t.r.NewIter()
		for ok := it.SeekGE(key); ok && bytes.Equal(it.Key().UserKey, key); ok = it.Next() {
			k := it.Key()
			f := foundOut{File: filepath.Base(st.path), Where: where, Level: level, Virtual: st.virtualName(), Seq: uint64(k.SeqNum()), Kind: k.Kind().String()}
			switch {
			case it.IsBlobReference() && st.pebble != nil:
				v, err := sf.store.BlobValue(st.pebble, it.Value())
				if err != nil {
					it.Close()
					return err
				}
				f.Value, f.InBlobFile = fm.v(v), true
			case isValueKind(k.Kind()):
				f.Value = fm.v(it.Value())
			}
			found = append(found, f)
		}
		if err := it.Close(); err != nil {
			return err
		}
		for _, d := range t.r.RangeDeletions() {
			if d.Covers(key) {
				found = append(found, foundOut{File: filepath.Base(st.path), Where: where, Level: level, Virtual: st.virtualName(), Seq: uint64(d.SeqNum),
					Kind: base.KindRangeDelete.String(), Value: fmt.Sprintf("[%s, %s)", fm.k(d.Start), fm.k(d.End))})
			}
		}
		return nil
	}
	for _, st := range sf.tables {
		current[filepath.Base(st.path)] = true
		l := st.level
		where, level := fmt.Sprintf("L%d", l), &l
		if st.whereLabel != "" {
			where = st.whereLabel
		}
		if l < 0 {
			level = nil
		}
		if err := lookIn(st, where, level); err != nil {
			return err
		}
	}
	names, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, n := range names {
		switch name := n.Name(); {
		case strings.HasSuffix(name, ".sst") && !current[name]:
			if err := lookIn(storeTable{path: filepath.Join(dir, name)}, "not in the current version", nil); err != nil {
				return err
			}
		case strings.HasSuffix(name, ".log"):
			where := "WAL"
			if sf.wals != nil && !sf.wals[name] {
				where = "obsolete WAL" // below the manifest's log number: flushed
			}
			if err := findInWAL(filepath.Join(dir, name), where, key, fm, &found); err != nil {
				return err
			}
		}
	}
	slices.SortStableFunc(found, func(a, b foundOut) int { return cmp.Compare(b.Seq, a.Seq) })
	if e.json {
		for _, f := range found {
			e.emit(f)
		}
	} else {
		for _, f := range found {
			where := f.Where
			if strings.HasSuffix(f.Where, "WAL") {
				where = fmt.Sprintf("%s, batch at offset %d", f.Where, *f.Offset)
			}
			if f.Virtual != "" {
				where = fmt.Sprintf("%s, virtual table %s", f.Where, f.Virtual)
			}
			if f.InBlobFile {
				where += ", value in a blob file"
			}
			e.printf("%s\n", strings.TrimRight(fmt.Sprintf("seq %-8d %-8s %-12s %-28s %s", f.Seq, f.Kind, f.File, where, f.Value), " "))
		}
	}
	if len(found) == 0 {
		return fmt.Errorf("%s: no file holds key %s", dir, quoteKey(key))
	}
	return nil
}

// findInWAL appends the versions of key in a WAL's batches to found.
func findInWAL(name, where string, key []byte, fm *formats, found *[]foundOut) error {
	r, err := openLog(name)
	if err != nil {
		return err
	}
	for {
		rec, err := r.Next()
		if err != nil {
			if err == io.EOF {
				return nil
			}
			return err
		}
		off := r.Offset()
		_, _, err = batchrepr.DecodePebble(rec, func(seq base.SeqNum, en batchrepr.Entry) {
			hit := bytes.Equal(en.Key, key)
			if en.Kind == base.KindRangeDelete {
				hit = bytes.Compare(en.Key, key) <= 0 && bytes.Compare(key, en.Value) < 0
			}
			if !hit {
				return
			}
			f := foundOut{File: filepath.Base(name), Where: where, Offset: &off, Seq: uint64(seq), Kind: en.Kind.String()}
			if v, ok := walValue(seq, en, fm); ok {
				f.Value = v
				if en.Kind == base.KindRangeDelete {
					f.Value = fmt.Sprintf("[%s, %s)", fm.k(en.Key), v)
				}
			}
			*found = append(*found, f)
		})
		if err != nil {
			return fmt.Errorf("%s: record at offset %d: %w", name, off, err)
		}
	}
}
