package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/bloomkv/bloomkv"
	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/humanize"
	"github.com/bloomkv/bloomkv/internal/pebblestore"
	"github.com/bloomkv/bloomkv/vfs"
)

func dbCmd(e *env) *cobra.Command {
	return group("db", "Inspect a whole store, bloomkv's or Pebble's, read-only (it must not be open elsewhere)",
		lsmCmd(e), getCmd(e), dbScanCmd(e), dbCheckCmd(e), dbDiffCmd(e), optionsCmd(e), dbSpaceCmd(e), dbPropertiesCmd(e))
}

// openDB opens the store in dir read-only. Nothing is written: the
// write-ahead logs are replayed into memory, not flushed.
func openDB(dir string) (*bloomkv.DB, error) { return openDBOn(dir, nil) }

// openDBOn is openDB reading through fs (nil: the operating system's).
func openDBOn(dir string, fs vfs.FS) (*bloomkv.DB, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("%s is not a directory", dir)
	}
	if pebblestore.IsPebble(dir) {
		return nil, base.UnsupportedErrorf("%s is a Pebble store: db lsm, get, scan, check, options, space, properties and find read it, this command does not", dir)
	}
	return bloomkv.Open(dir, &bloomkv.Options{
		FS:       fs,
		ReadOnly: true,
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
}

// withDBProgress is withDB for long work: on a terminal, a progress line
// of what names (with verb) shows how many of the bytes of the store's
// tables fn has read.
func (e *env) withDBProgress(dir, what string, fn func(d *bloomkv.DB) error) error {
	if !e.tty {
		return withDB(dir, fn)
	}
	rc := &readCounter{FS: vfs.Default}
	d, err := openDBOn(dir, rc)
	if err != nil {
		return err
	}
	total, err := tableBytes(d)
	if err == nil {
		rc.n.Store(0) // opening replayed the logs: not the work to show
		stop := e.startProgress(func() string { return rc.describe(what, total) })
		err = fn(d)
		stop()
	}
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// tableBytes is the size of a store's tables.
func tableBytes(d *bloomkv.DB) (uint64, error) {
	levels, err := d.SSTables()
	var n uint64
	for _, tables := range levels {
		for _, t := range tables {
			n += t.Size
		}
	}
	return n, err
}

// withDB runs fn on the store in dir and closes it.
func withDB(dir string, fn func(d *bloomkv.DB) error) error {
	d, err := openDB(dir)
	if err != nil {
		return err
	}
	err = fn(d)
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

type lsmTableOut struct {
	File string `json:"file"`
	// Backing is the file a virtual table (of a Pebble store) is part of.
	Backing     string `json:"backing,omitempty"`
	Size        uint64 `json:"size"`
	Smallest    string `json:"smallest"`
	Largest     string `json:"largest"`
	Exclusive   bool   `json:"largest_exclusive,omitempty"`
	SmallestSeq uint64 `json:"smallest_seq"`
	LargestSeq  uint64 `json:"largest_seq"`
	// Problem says how the file differs from what the manifest records:
	// missing, or of another size (FileSize).
	Problem  string `json:"problem,omitempty"`
	FileSize *int64 `json:"file_size,omitempty"`
}

// checkFile compares a table's file in dir with the manifest's record of
// it (a virtual table's size is its share of another file: not compared).
func (t *lsmTableOut) checkFile(dir string) error {
	if t.Backing != "" {
		return nil
	}
	path := filepath.Join(dir, t.File)
	st, err := os.Stat(path)
	switch {
	case err != nil:
		t.Problem = "missing"
		return fmt.Errorf("%s: the manifest lists it: %w", path, err)
	case uint64(st.Size()) != t.Size:
		n := st.Size()
		t.FileSize = &n
		t.Problem = "truncated"
		if uint64(n) > t.Size {
			t.Problem = "longer than recorded"
		}
		return base.CorruptionErrorf("%s %s", path, base.SizeMismatch(uint64(n), t.Size))
	}
	return nil
}

// checkFiles compares each table's file with the manifest's record of it,
// marking those that differ, and returns what it found.
func (out *lsmOut) checkFiles() []error {
	var errs []error
	check := func(t *lsmTableOut) {
		if err := t.checkFile(out.Dir); err != nil {
			errs = append(errs, err)
		}
	}
	for i := range out.Flushable {
		check(&out.Flushable[i])
	}
	for l := range out.Levels {
		for i := range out.Levels[l].Tables {
			check(&out.Levels[l].Tables[i])
		}
	}
	return errs
}

// emitLSM prints a store's levels, then each table whose file is not as
// the manifest records it, as a failure.
func (e *env) emitLSM(out lsmOut, print func(lsmOut)) {
	errs := out.checkFiles()
	if e.json {
		e.emit(out)
	} else {
		print(out)
	}
	for _, err := range errs {
		e.fail(err)
	}
}

type lsmLevelOut struct {
	Level  int           `json:"level"`
	Tables []lsmTableOut `json:"tables"`
	Size   uint64        `json:"size"`
}

type lsmOut struct {
	Dir string `json:"dir"`
	// Pebble's stores: "pebble", the format major version, the manifest,
	// OPTIONS file and WALs in use.
	Format        string   `json:"format,omitempty"`
	FormatVersion uint64   `json:"format_major_version,omitempty"`
	Manifest      string   `json:"manifest,omitempty"`
	OptionsFile   string   `json:"options_file,omitempty"`
	WALs          []string `json:"wals,omitempty"`
	// Flushable are a Pebble store's tables of flushable ingests: named
	// in a WAL, not yet in a level.
	Flushable []lsmTableOut `json:"flushable,omitempty"`
	Tables    int           `json:"tables"`
	Size      uint64        `json:"size"`
	Levels    []lsmLevelOut `json:"levels"`
	BlobFiles []string      `json:"blob_files,omitempty"` // a Pebble store's, as NNNNNN.blob
}

func lsmCmd(e *env) *cobra.Command {
	var fm formats
	c := &cobra.Command{
		Use:   "lsm DIR",
		Short: "Print the store's levels: tables, sizes and key ranges",
		Args:  args(cobra.ExactArgs(1)),
		RunE: func(c *cobra.Command, a []string) error {
			if pebblestore.IsPebble(a[0]) {
				return withPebble(a[0], func(s *pebblestore.Store) error { return e.pebbleLSM(a[0], s, &fm) })
			}
			return withDB(a[0], func(d *bloomkv.DB) error { return e.lsm(a[0], d, &fm) })
		},
	}
	fm.register(c, e, formatQuoted)
	return c
}

func (e *env) lsm(dir string, d *bloomkv.DB, fm *formats) error {
	levels, err := d.SSTables()
	if err != nil {
		return err
	}
	out := lsmOut{Dir: dir}
	for l, tables := range levels {
		lo := lsmLevelOut{Level: l, Tables: []lsmTableOut{}}
		for _, t := range tables {
			lo.Tables = append(lo.Tables, lsmTableOut{File: t.Name, Size: t.Size, Smallest: fm.k(t.Smallest),
				Largest: fm.k(t.Largest), Exclusive: t.LargestExclusive, SmallestSeq: t.SmallestSeq, LargestSeq: t.LargestSeq})
			lo.Size += t.Size
		}
		out.Tables += len(tables)
		out.Size += lo.Size
		out.Levels = append(out.Levels, lo)
	}
	e.emitLSM(out, e.printLSM)
	return nil
}

// printLSM prints the levels of a store.
func (e *env) printLSM(out lsmOut) {
	e.printf("%s: %s, %d bytes (%s)\n", out.Dir, plural(out.Tables, "table"), out.Size, humanize.Bytes(out.Size))
	for _, l := range out.Levels {
		e.printf("  L%d: %s, %d bytes\n", l.Level, plural(len(l.Tables), "table"), l.Size)
		for _, t := range l.Tables {
			end := "]"
			if t.Exclusive {
				end = ")"
			}
			virtual := ""
			if t.Backing != "" {
				virtual = fmt.Sprintf("  virtual, part of %s", t.Backing)
			}
			problem := ""
			if t.FileSize != nil {
				problem = fmt.Sprintf("  %s: the file holds %d bytes", strings.ToUpper(t.Problem), *t.FileSize)
			} else if t.Problem != "" {
				problem = "  " + strings.ToUpper(t.Problem)
			}
			e.printf("    %s  %8d bytes  [%s, %s%s  seqs %d-%d%s%s\n", t.File, t.Size, t.Smallest, t.Largest, end, t.SmallestSeq, t.LargestSeq, virtual, problem)
		}
	}
}

func getCmd(e *env) *cobra.Command {
	var fm formats
	c := &cobra.Command{
		Use:   "get DIR KEY",
		Short: "Print the value of KEY (exit status 1 when absent)",
		Args:  dirThenKey,
		RunE: func(c *cobra.Command, a []string) error {
			key, err := parseKey(a[1])
			if err != nil {
				return err
			}
			if pebblestore.IsPebble(a[0]) {
				return withPebble(a[0], func(s *pebblestore.Store) error { return e.pebbleGet(a[0], s, key, &fm) })
			}
			return withDB(a[0], func(d *bloomkv.DB) error {
				v, err := d.Get(key)
				return e.printGet(a[0], key, v, errors.Is(err, bloomkv.ErrNotFound), err, &fm)
			})
		},
	}
	fm.register(c, e, formatQuoted)
	return c
}

// printGet prints the value db get found for key, or returns why there is
// none.
func (e *env) printGet(dir string, key, v []byte, notFound bool, err error, fm *formats) error {
	if notFound {
		return fmt.Errorf("%s: key %s not found", dir, quoteKey(key))
	}
	if err != nil {
		return err
	}
	if e.json {
		e.emit(kvOut{Key: fm.k(key), Value: fm.v(v)})
	} else {
		e.printf("%s\n", fm.v(v))
	}
	return nil
}

// printKV prints a key and value of db scan.
func (e *env) printKV(fm *formats, k, v []byte) {
	if e.json {
		e.emit(kvOut{Key: fm.k(k), Value: fm.v(v)})
		return
	}
	e.printf("%s\n", strings.TrimRight(fm.k(k)+" "+fm.v(v), " "))
}

func dbScanCmd(e *env) *cobra.Command {
	var fm formats
	var b bounds
	c := &cobra.Command{
		Use:   "scan DIR",
		Short: "Print the store's live keys and values in order",
		Long: `Print the store's live keys and values (the newest version of each key,
deletions applied) from --start (inclusive) to --end (exclusive), at most
--count of them.`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(c *cobra.Command, a []string) error {
			if err := b.parse(c); err != nil {
				return err
			}
			if pebblestore.IsPebble(a[0]) {
				return withPebble(a[0], func(s *pebblestore.Store) error { return e.pebbleScan(s, &fm, &b) })
			}
			return withDB(a[0], func(d *bloomkv.DB) error { return e.dbScan(d, &fm, &b) })
		},
	}
	b.register(c)
	fm.register(c, e, formatQuoted)
	return c
}

func (e *env) dbScan(d *bloomkv.DB, fm *formats, b *bounds) error {
	it, err := d.NewIter(&bloomkv.IterOptions{LowerBound: b.start, UpperBound: b.end})
	if err != nil {
		return err
	}
	n := 0
	for ok := it.First(); ok && (b.count == 0 || n < b.count); ok = it.Next() {
		n++
		e.printKV(fm, it.Key(), it.Value())
	}
	return it.Close()
}

// kvOut is a key and its value (empty values kept).
type kvOut struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

type dbCheckOut struct {
	Dir            string   `json:"dir"`
	OK             bool     `json:"ok"`
	Tables         int      `json:"tables"`
	Blocks         int      `json:"blocks"`
	Entries        uint64   `json:"entries"`
	RangeDeletions uint64   `json:"range_deletions"`
	LiveKeys       uint64   `json:"live_keys"`
	Problems       []string `json:"problems,omitempty"`
}

func dbCheckCmd(e *env) *cobra.Command {
	var verbose bool
	c := &cobra.Command{
		Use:   "check DIR",
		Short: "Verify every table and the store's consistency (DB.Check)",
		Long: `Verify the store: every table block by block (checksums, key order,
index separators, every key in its filter, properties), that each table's
size, key range and sequence numbers are those the manifest records, and
that a full scan returns keys in order. Problems are reported on stderr (the
first and how many more; -v lists them all on stdout); the exit status is 1.`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(c *cobra.Command, a []string) error {
			if pebblestore.IsPebble(a[0]) {
				return withPebble(a[0], func(s *pebblestore.Store) error { return e.pebbleCheck(a[0], s, verbose) })
			}
			return e.withDBProgress(a[0], "check", func(d *bloomkv.DB) error {
				st, err := d.Check()
				out := dbCheckOut{Dir: a[0], OK: err == nil, Tables: st.Tables, Blocks: st.Blocks, Entries: st.Entries,
					RangeDeletions: st.RangeDeletions, LiveKeys: st.LiveKeys}
				var ce *bloomkv.CheckError
				if errors.As(err, &ce) {
					for _, p := range ce.Problems {
						out.Problems = append(out.Problems, p.Error())
					}
				} else if err != nil {
					return err
				}
				e.printCheck(out, verbose)
				if err != nil {
					e.fail(err)
				}
				return nil
			})
		},
	}
	c.Flags().BoolVarP(&verbose, "verbose", "v", false, "list every problem")
	return c
}

// printCheck prints the result of a store's check.
func (e *env) printCheck(out dbCheckOut, verbose bool) {
	if e.json {
		e.emit(out)
		return
	}
	status := "ok"
	if !out.OK {
		status = plural(len(out.Problems), "problem")
	}
	e.printf("%s: %s: %s, %s, %s, %s, %s\n", out.Dir, status, plural(out.Tables, "table"), plural(out.Blocks, "block"),
		plural(out.Entries, "entry"), plural(out.RangeDeletions, "range deletion"), plural(out.LiveKeys, "live key"))
	if verbose {
		for _, p := range out.Problems {
			e.printf("  %s\n", p)
		}
	}
}
