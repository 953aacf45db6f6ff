package main

// manifest summarize and manifest check: a manifest's edits replayed, in
// bloomkv's dialect or Pebble's, counted or checked.

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/spf13/cobra"

	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/humanize"
	"github.com/bloomkv/bloomkv/internal/manifest"
)

// editKind classifies an edit by what it shows: a snapshot of a version (a
// manifest's first edit, naming the comparer), a flush (tables added with
// a new log number, none deleted), an ingestion (tables added, none
// deleted, no log number), a compaction (tables deleted, and added or
// moved), or other (no tables).
func editKind(ed *manifest.VersionEdit) string {
	switch {
	case ed.ComparerName != "":
		return "snapshot"
	case len(ed.DeletedFiles) > 0:
		return "compaction"
	case len(ed.NewFiles) > 0 && ed.LogNumber != 0:
		return "flush"
	case len(ed.NewFiles) > 0:
		return "ingest"
	}
	return "other"
}

// editKinds are the kinds of edit in the order summarize prints them.
var editKinds = []string{"snapshot", "flush", "ingest", "compaction", "other"}

type levelSummaryOut struct {
	Level         int               `json:"level"`
	Added         int               `json:"tables_added"`
	Deleted       int               `json:"tables_deleted"`
	BytesAdded    uint64            `json:"bytes_added"`
	BytesDeleted  uint64            `json:"bytes_deleted"`
	BytesAddedBy  map[string]uint64 `json:"bytes_added_by"` // by kind of edit
	Tables        int               `json:"tables"`         // in the final version
	Size          uint64            `json:"size"`
	TablesAddedBy map[string]int    `json:"tables_added_by"`
}

type summaryOut struct {
	File        string            `json:"file"`
	Format      string            `json:"format,omitempty"` // "pebble" for Pebble's manifests
	Edits       int               `json:"edits"`
	EditsByKind map[string]int    `json:"edits_by_kind"`
	End         string            `json:"end"`
	TornAt      int64             `json:"torn_at,omitempty"`
	NextFileNum uint64            `json:"next_file_num"`
	LastSeq     uint64            `json:"last_seq"`
	Levels      []levelSummaryOut `json:"levels"`
	Tables      int               `json:"tables"`
	Size        uint64            `json:"size"`
	Buckets     []bucketOut       `json:"buckets,omitempty"` // with --edits
}

// replayed is a manifest read and decoded.
type replayed struct {
	name   string
	recs   []manifestRecord
	edits  []decodedEdit
	pebble bool
	// decodeErr is why the edit after the last of edits did not decode.
	decodeErr error
	tornAt    int64
	tornWhy   string
	torn      bool
}

// replayManifest reads and decodes a manifest; a file that holds no edit is
// an error.
func replayManifest(name string) (*replayed, error) {
	recs, r, err := readManifest(name)
	if err != nil {
		return nil, err
	}
	rp := &replayed{name: name, recs: recs}
	rp.edits, rp.pebble, rp.decodeErr = decodeManifest(name, recs)
	rp.tornAt, rp.tornWhy, rp.torn = r.TornTail()
	if len(recs) == 0 {
		if rp.torn {
			return nil, fmt.Errorf("%s: not a manifest: no record at offset 0 (%s)", name, rp.tornWhy)
		}
		return nil, fmt.Errorf("%s: not a manifest: it holds no version edits", name)
	}
	if len(rp.edits) == 0 {
		return nil, fmt.Errorf("%s: not a manifest: %w", name, rp.decodeErr)
	}
	return rp, nil
}

func manifestSummarizeCmd(e *env) *cobra.Command {
	var per int
	c := &cobra.Command{
		Use:   "summarize FILE",
		Short: "Count a manifest's edits and the tables and bytes they add and delete per level",
		Long: `Replay a manifest (bloomkv's or Pebble's) and count its edits by kind
(snapshot: a first edit naming the comparer; flush: tables added with a
log number; ingest: tables added without one; compaction: tables deleted,
others added or moved), and per level the tables added and deleted, the
bytes added (by kind of edit) and deleted, and the final shape of the LSM.
With --edits N, also the bytes added and deleted per level in each run of N
edits.`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(c *cobra.Command, a []string) error {
			if per < 0 {
				return usageError{fmt.Errorf("--edits %d is negative", per)}
			}
			return e.manifestSummarize(a[0], per)
		},
	}
	c.Flags().IntVar(&per, "edits", 0, "also summarize each run of this many edits (0: the whole manifest only)")
	return c
}

// bucketOut is what a run of edits added and deleted, per level.
type bucketOut struct {
	FirstEdit    int                        `json:"first_edit"`
	LastEdit     int                        `json:"last_edit"`
	BytesAdded   [manifest.NumLevels]uint64 `json:"bytes_added"`
	BytesDeleted [manifest.NumLevels]uint64 `json:"bytes_deleted"`
}

func (e *env) manifestSummarize(name string, per int) error {
	rp, err := replayManifest(name)
	if err != nil {
		return err
	}
	if rp.decodeErr != nil {
		return rp.decodeErr
	}
	out := summaryOut{File: name, Edits: len(rp.edits), EditsByKind: map[string]int{}, End: "clean"}
	if rp.pebble {
		out.Format = "pebble"
	}
	if rp.torn {
		out.End, out.TornAt = "torn", rp.tornAt
	}
	levels := make([]levelSummaryOut, manifest.NumLevels)
	for l := range levels {
		levels[l] = levelSummaryOut{Level: l, BytesAddedBy: map[string]uint64{}, TablesAddedBy: map[string]int{}}
	}
	v := &manifest.Version{}
	for i, ed := range rp.edits {
		kind := editKind(ed.VersionEdit)
		out.EditsByKind[kind]++
		var b *bucketOut
		if per > 0 {
			if i%per == 0 {
				out.Buckets = append(out.Buckets, bucketOut{FirstEdit: i})
			}
			b = &out.Buckets[len(out.Buckets)-1]
			b.LastEdit = i
		}
		for _, d := range ed.DeletedFiles {
			if d.Level < 0 || d.Level >= manifest.NumLevels {
				continue // Apply below reports it
			}
			levels[d.Level].Deleted++
			for f := range v.Level(d.Level) {
				if f.FileNum == d.FileNum {
					levels[d.Level].BytesDeleted += f.Size
					if b != nil {
						b.BytesDeleted[d.Level] += f.Size
					}
				}
			}
		}
		for _, nf := range ed.NewFiles {
			if nf.Level < 0 || nf.Level >= manifest.NumLevels {
				continue
			}
			ls := &levels[nf.Level]
			ls.Added++
			ls.BytesAdded += nf.Meta.Size
			ls.BytesAddedBy[kind] += nf.Meta.Size
			ls.TablesAddedBy[kind]++
			if b != nil {
				b.BytesAdded[nf.Level] += nf.Meta.Size
			}
		}
		if v, err = v.Apply(ed.VersionEdit); err != nil {
			return fmt.Errorf("%s: edit %d at offset %d: %w (manifest check lists every problem)", name, i, rp.recs[i].off, err)
		}
		out.NextFileNum = max(out.NextFileNum, ed.NextFileNum)
		out.LastSeq = max(out.LastSeq, uint64(ed.LastSeq))
	}
	for l := range levels {
		levels[l].Tables, levels[l].Size = v.NumFiles(l), v.LevelSize(l)
		out.Tables += levels[l].Tables
		out.Size += levels[l].Size
	}
	out.Levels = levels
	if e.json {
		e.emit(out)
		return nil
	}
	if rp.pebble {
		e.printf("%s (Pebble)\n", name)
	} else {
		e.printf("%s\n", name)
	}
	e.printf("  %s:", plural(out.Edits, "edit"))
	for _, k := range editKinds {
		if n := out.EditsByKind[k]; n > 0 {
			e.printf(" %d %s", n, k)
		}
	}
	e.printf("\n  end: %s", out.End)
	if rp.torn {
		e.printf(" at offset %d (%s): recovery drops the tail", rp.tornAt, rp.tornWhy)
	}
	e.printf("\n  next file %d, last sequence %d\n", out.NextFileNum, out.LastSeq)
	e.printf("  %5s %7s %9s %12s %12s  %-44s %s\n", "level", "added", "deleted", "bytes added", "deleted", "bytes added by flush/ingest/compaction/snapshot", "now")
	for _, ls := range out.Levels {
		by := fmt.Sprintf("%d/%d/%d/%d", ls.BytesAddedBy["flush"], ls.BytesAddedBy["ingest"], ls.BytesAddedBy["compaction"], ls.BytesAddedBy["snapshot"])
		e.printf("  L%-4d %7d %9d %12d %12d  %-44s %s, %d bytes\n", ls.Level, ls.Added, ls.Deleted, ls.BytesAdded, ls.BytesDeleted, by, plural(ls.Tables, "table"), ls.Size)
	}
	e.printf("  final version: %s, %d bytes (%s)\n", plural(out.Tables, "table"), out.Size, humanize.Bytes(out.Size))
	if len(out.Buckets) > 0 {
		e.printf("  bytes added +, deleted - per level, by runs of %s:\n", plural(per, "edit"))
		for _, b := range out.Buckets {
			e.printf("    edits %d-%d:", b.FirstEdit, b.LastEdit)
			for l := range manifest.NumLevels {
				if b.BytesAdded[l] != 0 || b.BytesDeleted[l] != 0 {
					e.printf("  L%d +%d -%d", l, b.BytesAdded[l], b.BytesDeleted[l])
				}
			}
			e.printf("\n")
		}
	}
	return nil
}

type manifestCheckOut struct {
	File     string   `json:"file"`
	Format   string   `json:"format,omitempty"`
	OK       bool     `json:"ok"`
	Edits    int      `json:"edits"`
	End      string   `json:"end"`
	Problems []string `json:"problems,omitempty"`
}

func manifestCheckCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "check FILE",
		Short: "Replay a manifest and check its invariants",
		Long: `Replay a manifest (bloomkv's or Pebble's) edit by edit and check that no
table is added while live or deleted from a level that does not hold it,
that the tables of levels 1 and up are sorted and disjoint after each edit,
that the next file number and last sequence number never decrease, and that
every table added numbers below the next file number. Each problem is one
line naming the edit and its offset, and the exit status is 1; "ok"
otherwise.`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(c *cobra.Command, a []string) error { return e.manifestCheck(a[0]) },
	}
}

// liveTable is a table of the replayed version.
type liveTable struct {
	level int
	meta  *manifest.FileMetadata
}

func (e *env) manifestCheck(name string) error {
	rp, err := replayManifest(name)
	if err != nil {
		return err
	}
	out := manifestCheckOut{File: name, Edits: len(rp.edits), End: "clean"}
	if rp.pebble {
		out.Format = "pebble"
	}
	if rp.torn {
		out.End = fmt.Sprintf("torn at offset %d", rp.tornAt)
	}
	live := map[uint64]liveTable{}
	var nextFile, lastSeq uint64
	for i, ed := range rp.edits {
		problem := func(format string, args ...any) {
			out.Problems = append(out.Problems, fmt.Sprintf("%s: edit %d at offset %d: %s", name, i, rp.recs[i].off, fmt.Sprintf(format, args...)))
		}
		if n := ed.NextFileNum; n != 0 {
			if n < nextFile {
				problem("next file number %d below the previous %d", n, nextFile)
			}
			nextFile = max(nextFile, n)
		}
		if s := uint64(ed.LastSeq); s != 0 {
			if s < lastSeq {
				problem("last sequence number %d below the previous %d", s, lastSeq)
			}
			lastSeq = max(lastSeq, s)
		}
		touched := map[int]bool{}
		for _, d := range ed.DeletedFiles {
			t, ok := live[d.FileNum]
			switch {
			case !ok:
				problem("deletes table %06d from L%d, which is not live", d.FileNum, d.Level)
			case t.level != d.Level:
				problem("deletes table %06d from L%d, but it is in L%d", d.FileNum, d.Level, t.level)
			default:
				delete(live, d.FileNum)
			}
		}
		for _, nf := range ed.NewFiles {
			num := nf.Meta.FileNum
			if t, ok := live[num]; ok {
				problem("adds table %06d to L%d, but it is live in L%d already", num, nf.Level, t.level)
			}
			if nextFile != 0 && num >= nextFile {
				problem("adds table %06d, not below the next file number %d", num, nextFile)
			}
			if nf.Level < 0 || nf.Level >= manifest.NumLevels {
				problem("adds table %06d to L%d, which does not exist", num, nf.Level)
				continue
			}
			live[num] = liveTable{nf.Level, nf.Meta}
			touched[nf.Level] = true
		}
		for l := 1; l < manifest.NumLevels; l++ {
			if !touched[l] {
				continue
			}
			var tables []*manifest.FileMetadata
			for _, t := range live {
				if t.level == l {
					tables = append(tables, t.meta)
				}
			}
			slices.SortFunc(tables, func(a, b *manifest.FileMetadata) int {
				if c := base.CompareInternal(a.Smallest, b.Smallest); c != 0 {
					return c
				}
				return cmp.Compare(a.FileNum, b.FileNum)
			})
			for j := 1; j < len(tables); j++ {
				if a, b := tables[j-1], tables[j]; !a.Before(b.Smallest.UserKey) {
					problem("L%d tables %06d [%s, %s] and %06d [%s, %s] overlap", l, a.FileNum, quoteKey(a.Smallest.UserKey), quoteKey(a.Largest.UserKey),
						b.FileNum, quoteKey(b.Smallest.UserKey), quoteKey(b.Largest.UserKey))
				}
			}
		}
	}
	if rp.decodeErr != nil {
		out.Problems = append(out.Problems, rp.decodeErr.Error())
	}
	out.OK = len(out.Problems) == 0
	if e.json {
		e.emit(out)
	} else if out.OK {
		e.printf("%s: ok: %s, end %s\n", name, plural(out.Edits, "edit"), out.End)
	} else {
		for _, p := range out.Problems {
			e.printf("%s\n", p)
		}
	}
	if !out.OK {
		err := fmt.Errorf("%s", out.Problems[0])
		if len(out.Problems) > 1 {
			err = fmt.Errorf("%w (and %d more problems)", err, len(out.Problems)-1)
		}
		e.fail(err)
	}
	return nil
}
