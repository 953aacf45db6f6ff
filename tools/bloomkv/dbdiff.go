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
	// BaseLevel is the deepest level holding tables, -1 when none.
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
	// Probed is the live keys asked MayHaveChanged (all of them, or the
	// first --sample in key order), Maybes those it answered true for.
	Probed  int64 `json:"probed"`
	Sampled bool  `json:"sampled"`
	Maybes  int64 `json:"maybes"`
	// FPRateMin and FPRateMax bound the false-positive rate over the
	// probed keys whose newest version is in the base (see the help).
	FPRateMin float64 `json:"fp_rate_min"`
	FPRateMax float64 `json:"fp_rate_max"`
}

func dbDiffCmd(e *env) *cobra.Command {
	var sample int
	c := &cobra.Command{
		Use:   "diff DIR",
		Short: "Describe the differential-file filter: base level, differential, parameters, measured false positives",
		Long: `Describe the store's differential-file filter, the counting Bloom filter of
the user keys with a version above the base level (the deepest level holding
tables) that a Get probes first (DB.MayHaveChanged):

  - the base level, and whether Gets consult the filter (it is off when
    disabled, when no level holds tables, or while it is being built);
  - the differential: the versions the filter counts (the point entries in
    the memtables and in the levels above the base, so a key written three
    times counts three, and deletions count), the memtables (opened
    read-only, what the write-ahead logs replayed is one frozen memtable),
    and the tables and bytes of each level above the base that holds tables;
  - the filter's capacity, bytes, false-positive rate at capacity (design),
    and expected rate at its count;
  - a measurement: every live key of the store, in key order (or the first N
    with --sample N), is asked MayHaveChanged, and the keys answered true
    are counted (M of P probed). The public API does not tell which keys
    have a version above the base, so the false-positive rate over the
    probed keys whose newest version is in the base is given as bounds: at
    most T = min(M, versions counted) of the M are true positives, so the
    rate lies between (M-T)/(P-T) and M/P. After a full compaction (no
    versions counted) both bounds are the measured rate. While the filter
    is off every key is answered true, and the text says so instead.

The store is opened read-only; the exit status is 1 when it cannot be opened
or a file of it cannot be read.`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(c *cobra.Command, a []string) error {
			if sample < 0 {
				return usageError{fmt.Errorf("--sample %d is negative", sample)}
			}
			return withDB(a[0], func(d *bloomkv.DB) error { return e.dbDiff(a[0], d, sample) })
		},
	}
	c.Flags().IntVar(&sample, "sample", 0, "probe only the first N live keys in key order (0: all)")
	return c
}

func (e *env) dbDiff(dir string, d *bloomkv.DB, sample int) error {
	m := d.Metrics()
	df := m.DiffFilter
	out := dbDiffOut{Dir: dir, On: df.On, BaseLevel: df.BaseLevel, Versions: df.Keys, MemTableBytes: m.MemTableSize,
		ImmutableMemTables: m.ImmutableMemTables, Levels: []diffLevelOut{}, Capacity: df.Capacity, FilterBytes: df.Bytes,
		DesignFPRate: df.DesignFPRate, ExpectedFPRate: df.FPRate}
	for l := 0; l < df.BaseLevel && l < len(m.Levels); l++ {
		if lm := m.Levels[l]; lm.Files > 0 {
			out.Levels = append(out.Levels, diffLevelOut{Level: l, Tables: lm.Files, Bytes: lm.Bytes})
		}
	}
	it, err := d.NewIter(nil)
	if err != nil {
		return err
	}
	for ok := it.First(); ok; ok = it.Next() {
		if sample > 0 && out.Probed == int64(sample) {
			out.Sampled = true
			break
		}
		out.Probed++
		if d.MayHaveChanged(it.Key()) {
			out.Maybes++
		}
	}
	if err := it.Close(); err != nil {
		return err
	}
	out.FPRateMin, out.FPRateMax = fpBounds(out.Probed, out.Maybes, out.Versions)
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
	probed := fmt.Sprintf("all %s", plural(out.Probed, "live key"))
	if out.Sampled {
		probed = fmt.Sprintf("the first %s", plural(out.Probed, "live key"))
	}
	fp := fmt.Sprintf("false-positive rate over those in the base alone %s to %s", percent(out.FPRateMin), percent(out.FPRateMax))
	if !out.On {
		fp = "the filter is off, so it answers true for every key"
	}
	e.printf("  measured      %d of %s may have changed (%s); %s\n", out.Maybes, probed, percent(ratioOf(out.Maybes, out.Probed)), fp)
	return nil
}

// fpBounds bounds the false-positive rate over the probed keys whose newest
// version is in the base, given that maybes of probed keys may have
// changed and the filter counts versions versions: at most
// t = min(maybes, versions) of the maybes are true, and the rate
// (maybes-t')/(probed-t') over the true count t' ≤ t falls as t' grows.
func fpBounds(probed, maybes, versions int64) (lo, hi float64) {
	t := min(maybes, versions)
	return ratioOf(maybes-t, probed-t), ratioOf(maybes, probed)
}

// ratioOf is a/b, 0 when b is 0.
func ratioOf(a, b int64) float64 {
	if b <= 0 {
		return 0
	}
	return float64(a) / float64(b)
}
