package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/bloomkv/bloomkv"
	"github.com/bloomkv/bloomkv/internal/humanize"
)

type diffLevelOut struct {
	Level  int    `json:"level"`
	Tables int    `json:"tables"`
	Bytes  uint64 `json:"bytes"`
}

type dbDiffOut struct {
	Dir string `json:"dir"`
	// On: Gets consult the filter (DiffFilterMetrics.On).
	On bool `json:"on"`
	// BaseLevel is the base level (the last level), -1 while it holds no
	// table.
	BaseLevel int `json:"base_level"`
	// Versions is the differential's size as the filter counts it: the
	// point entries in the memtables and the levels above the base.
	Versions int64 `json:"versions"`
	// MemTableBytes is the mutable memtable's size; ImmutableMemTables
	// counts the frozen ones (opened read-only, the store holds what its
	// write-ahead logs replayed in one).
	MemTableBytes      int64 `json:"memtable_bytes"`
	ImmutableMemTables int   `json:"immutable_memtables"`
	// Levels are the levels above the base that hold tables.
	Levels         []diffLevelOut `json:"levels"`
	Capacity       int            `json:"capacity"`
	FilterBytes    int            `json:"filter_bytes"`
	DesignFPRate   float64        `json:"design_fp_rate"`
	ExpectedFPRate float64        `json:"expected_fp_rate"`
	// The measurement (bloomkv.DB.CheckDiffFilter) over the base level's
	// distinct keys (all, or the first --sample): BaseKeys probed; Changed
	// those with a version above the base, Missed those of them the filter
	// said no for (a false negative: never); Unchanged the others, and
	// FalseMaybes those of them it said maybe for, FPRate their share.
	BaseKeys    int64   `json:"base_keys"`
	Sampled     bool    `json:"sampled"`
	Changed     int64   `json:"changed"`
	Missed      int64   `json:"missed"`
	Unchanged   int64   `json:"unchanged"`
	FalseMaybes int64   `json:"false_maybes"`
	FPRate      float64 `json:"fp_rate"`
}

func dbDiffCmd(e *env) *cobra.Command {
	var sample int
	c := &cobra.Command{
		Use:   "diff DIR",
		Short: "Describe the differential-file filter: base level, differential, parameters, measured false positives",
		Long: `Describe the store's differential-file filter, the counting Bloom filter of
the user keys with a version above the base level (the last level) that a Get
probes first (DB.MayHaveChanged):

  - the base level, and whether Gets consult the filter (it is off when
    disabled, while the last level holds no table, or while it is being
    built);
  - the differential: the versions the filter counts (the point entries in
    the memtables and in the levels above the base, so a key written three
    times counts three, and deletions count), the memtables (opened
    read-only, what the write-ahead logs replayed is one frozen memtable),
    and the tables and bytes of each level above the base that holds tables;
  - the filter's capacity, bytes, false-positive rate at capacity (design),
    and expected rate at its count;
  - a measurement over the base level's distinct keys (all, or the first N
    in the order of its tables with --sample N): each is searched for in
    the memtables and every level above the base without the filter, to
    tell the changed keys (a version above the base) from the unchanged,
    and asked the filter. It prints the unchanged keys the filter answered
    maybe for (its false-positive rate on keys of the base) and the changed
    keys it answered no for, which must be none: any is reported as an
    error. While the filter is off only the base's keys are counted.

The store is opened read-only; the exit status is 1 when it cannot be opened
or a file of it cannot be read. On a terminal, a progress line on stderr
shows the share of the tables' bytes read.`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(c *cobra.Command, a []string) error {
			if sample < 0 {
				return usageError{fmt.Errorf("--sample %d is negative", sample)}
			}
			return e.withDBProgress(a[0], "diff", func(d *bloomkv.DB) error { return e.dbDiff(a[0], d, sample) })
		},
	}
	c.Flags().IntVar(&sample, "sample", 0, "probe only the first N distinct keys of the base level, in the order of its tables (0: all)")
	return c
}

func (e *env) dbDiff(dir string, d *bloomkv.DB, sample int) error {
	m := d.Metrics()
	df := m.DiffFilter
	out := dbDiffOut{Dir: dir, On: df.On, BaseLevel: df.LastLevel, Versions: df.Keys, MemTableBytes: m.MemTableSize,
		ImmutableMemTables: m.ImmutableMemTables, Levels: []diffLevelOut{}, Capacity: df.Capacity, FilterBytes: df.Bytes,
		DesignFPRate: df.DesignFPRate, ExpectedFPRate: df.FPRate}
	for l := 0; l < df.LastLevel && l < len(m.Levels); l++ {
		if lm := m.Levels[l]; lm.Files > 0 {
			out.Levels = append(out.Levels, diffLevelOut{Level: l, Tables: lm.Files, Bytes: lm.Bytes})
		}
	}
	chk, err := d.CheckDiffFilter(sample)
	if err != nil {
		return err
	}
	out.BaseKeys, out.Changed, out.Missed = chk.BaseKeys, chk.Changed, chk.Missed
	out.Unchanged, out.FalseMaybes, out.FPRate = chk.Unchanged, chk.FalseMaybes, chk.FPRate()
	out.Sampled = sample > 0 && chk.BaseKeys == int64(sample)
	if out.Missed > 0 {
		defer func() {
			e.fail(fmt.Errorf("%s: the differential-file filter answered no for %s with a version above the base (false negatives)", dir, plural(out.Missed, "key")))
		}()
	}
	if e.json {
		e.emit(out)
		return nil
	}
	state := "on"
	if !out.On {
		state = "off"
	}
	base := "no base level (no tables)"
	if out.BaseLevel >= 0 {
		base = fmt.Sprintf("base level L%d", out.BaseLevel)
	}
	e.printf("%s: differential-file filter %s, %s\n", dir, state, base)
	e.printf("  differential  %s above the base (counted by the filter)\n", plural(out.Versions, "version"))
	e.printf("    memtables   %d bytes in the mutable one (%s), %d frozen\n", out.MemTableBytes, humanize.Bytes(uint64(out.MemTableBytes)), out.ImmutableMemTables)
	for _, l := range out.Levels {
		e.printf("    L%d          %s, %d bytes (%s)\n", l.Level, plural(l.Tables, "table"), l.Bytes, humanize.Bytes(l.Bytes))
	}
	e.printf("  filter        capacity %d keys, %d bytes; false-positive rate %s at capacity, %s expected at %d versions\n",
		out.Capacity, out.FilterBytes, percent(out.DesignFPRate), percent(out.ExpectedFPRate), out.Versions)
	probed := fmt.Sprintf("all %s", plural(out.BaseKeys, "key"))
	if out.Sampled {
		probed = fmt.Sprintf("the first %s", plural(out.BaseKeys, "key"))
	}
	if !out.On {
		e.printf("  measured      %s of the base; the filter is off, so it answers maybe for every key\n", probed)
		return nil
	}
	e.printf("  measured      %s of the base: %d changed since (a version above the base), %d missed; %d unchanged, %d answered maybe: false-positive rate %s\n",
		probed, out.Changed, out.Missed, out.Unchanged, out.FalseMaybes, percent(out.FPRate))
	return nil
}
