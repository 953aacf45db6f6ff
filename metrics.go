package bloomkv

// The store's metrics: what Metrics reports, and the counters behind it.

import (
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"time"

	"github.com/bloomkv/bloomkv/internal/cache"
	"github.com/bloomkv/bloomkv/internal/humanize"
	"github.com/bloomkv/bloomkv/internal/manifest"
)

// NumLevels is the number of levels of the tree, 0 to 6.
const NumLevels = manifest.NumLevels

// CacheMetrics are the block cache's counters and size.
type CacheMetrics = cache.Metrics

// Metrics reports the store's state and counters since Open.
type Metrics struct {
	Levels [NumLevels]LevelMetrics
	// BaseLevel is the level level 0 compacts into: the highest level the
	// data needs under the dynamic level targets (Options.LBaseMaxBytes).
	BaseLevel int
	// MemTableSize is the bytes in the mutable memtable;
	// ImmutableMemTables the frozen ones awaiting a flush.
	MemTableSize       int64
	ImmutableMemTables int
	// MemTableReserve is the bytes of arena chunks prepared for the next
	// memtables, kept ready so that writes do not fault in fresh memory
	// (Options.MemTableSize).
	MemTableReserve int64
	// WALBytes is the bytes written to the write-ahead log.
	WALBytes   uint64
	Flushes    uint64
	FlushBytes uint64
	// Compactions counts the merges that rewrote tables, and the bytes they
	// read and wrote; Moves the compactions that only moved tables down a
	// level.
	Compactions                           uint64
	CompactionBytesIn, CompactionBytesOut uint64
	Moves                                 uint64
	// Ingests counts the calls of Ingest that added tables, and
	// IngestedTables and IngestedBytes the tables and bytes they added.
	Ingests, IngestedTables, IngestedBytes uint64
	BlockCache                             CacheMetrics
	// TableMemory is the bytes the open tables hold in memory outside the
	// block cache: their index and filter blocks.
	TableMemory uint64
	// Filter counts the table filters' answers to Get: probes, "no"
	// answers (each a data-block read skipped), and false positives (the
	// filter said maybe and the table lacked the key).
	FilterProbes, FilterNegatives, FilterFalsePositives uint64
	WriteStalls                                         uint64
	WriteStallDuration                                  time.Duration
	// Snapshots is the number of open snapshots.
	Snapshots int
	// DiffFilter describes the differential-file filter.
	DiffFilter DiffFilterMetrics
}

// DiffFilterMetrics describes the differential-file filter: the counting
// filter of the user keys with a version above the base level, which a Get
// probes first (DB.MayHaveChanged).
type DiffFilterMetrics struct {
	// On is true while Gets consult the filter: it is enabled, the last
	// level holds data, and the filter is built.
	On bool
	// LastLevel is the filter's base: the last level, the one the changes
	// merge into, or -1 while it holds no table. (Metrics.BaseLevel is
	// another level: the one level 0 compacts into.)
	LastLevel int
	// Keys is the number of versions the filter counts: the point entries
	// in the memtables and in the levels above the base.
	Keys int64
	// Capacity is the number of keys the filter is sized for, and Bytes its
	// memory.
	Capacity int
	Bytes    int
	// DesignFPRate is the false-positive rate at capacity; FPRate the
	// expected rate at Keys.
	DesignFPRate, FPRate float64
	// Skips counts Gets the filter answered "no": they read the base level
	// only. Maybes counts those it answered "maybe", and FalseMaybes those
	// of them that found no version of the key above the base.
	Skips, Maybes, FalseMaybes uint64
	// Rebuilds counts filters built: at Open, when the base level changed,
	// and when the differential outgrew the filter or shrank far below it.
	Rebuilds uint64
	// Idle is true while the filter is off because, when writes outgrew
	// it, it had answered "no" to fewer Gets than it counted versions: its
	// upkeep cost the writes more than it saved the reads. Gets bring it
	// back: it is built again after 16 Ki Gets, twice as many for each
	// time in a row it was dropped so.
	Idle bool
}

// LevelMetrics describes one level.
type LevelMetrics struct {
	Files int
	Bytes uint64
	// Score is the level's compaction score: at 1 or more it is due for
	// compaction (level 0: the most tables holding one key over
	// L0CompactionThreshold, or its tables over half of
	// L0StopWritesThreshold, or 1 when they can move down unrewritten or
	// when iterator seeks meeting them have paid for their compaction; the
	// last level and those above the base level: always 0; the others:
	// compensated bytes over Target, each deletion counting the mean bytes
	// of an entry below it, not counting tables a running compaction is
	// moving out).
	Score float64
	// Target is the size the level may reach before it is compacted into
	// the next, for the levels from the base level down to the one above
	// the last (see Options.LBaseMaxBytes); 0 for the others.
	Target uint64
	// BytesWritten is the bytes of tables written into the level (by
	// flushes for level 0, by compactions below it); BytesRead the bytes
	// compactions read from it; BytesMoved the bytes moved into it without
	// a rewrite; BytesIngested the bytes of tables Ingest put in it;
	// Compactions the compactions that wrote into it.
	BytesWritten, BytesRead, BytesMoved, BytesIngested uint64
	Compactions                                        uint64
}

// WriteAmplification is the bytes written to tables (flushes and
// compactions) per byte written to the write-ahead log; 0 before any write.
func (m *Metrics) WriteAmplification() float64 {
	if m.WALBytes == 0 {
		return 0
	}
	return float64(m.FlushBytes+m.CompactionBytesOut) / float64(m.WALBytes)
}

// FilterFalsePositiveRate is the share of filter probes that answered maybe
// for a key the table lacked; 0 before any probe.
func (m *Metrics) FilterFalsePositiveRate() float64 {
	if m.FilterProbes == 0 {
		return 0
	}
	return float64(m.FilterFalsePositives) / float64(m.FilterProbes)
}

// Metrics returns the store's metrics. It waits for no flush, compaction or
// write, and may be called at any time, from an EventListener too.
func (d *DB) Metrics() *Metrics {
	s := d.acquire()
	defer d.release(s)
	m := &Metrics{
		MemTableSize:         s.mem.mt.Size(),
		ImmutableMemTables:   len(s.imm),
		MemTableReserve:      d.chunks.reserve(),
		WALBytes:             d.metrics.walBytes.Load(),
		Flushes:              d.metrics.flushes.Load(),
		FlushBytes:           d.metrics.flushBytes.Load(),
		Compactions:          d.metrics.compactions.Load(),
		CompactionBytesIn:    d.metrics.compactBytesIn.Load(),
		CompactionBytesOut:   d.metrics.compactBytesOut.Load(),
		Moves:                d.metrics.moves.Load(),
		Ingests:              d.metrics.ingests.Load(),
		IngestedTables:       d.metrics.ingestedTables.Load(),
		IngestedBytes:        d.metrics.ingestedBytes.Load(),
		BlockCache:           d.cache.Metrics(),
		TableMemory:          d.tables.pinnedBytes(),
		FilterProbes:         d.metrics.filterProbes.Load(),
		FilterNegatives:      d.metrics.filterNegatives.Load(),
		FilterFalsePositives: d.metrics.filterFalsePositives.Load(),
		WriteStalls:          d.metrics.stalls.Load(),
		WriteStallDuration:   time.Duration(d.metrics.stallNanos.Load()),
	}
	// Metrics reads the read state and atomic counters, not d.mu's fields:
	// d.mu is taken only, briefly, to release a state replaced meanwhile.
	targets := d.levelTargets(s.version, nil)
	scores := d.levelScores(s.version, targets, nil)
	m.BaseLevel = targets.base
	m.Snapshots = int(d.metrics.snapshots.Load())
	m.DiffFilter = d.diffMetrics(s)
	for l := range manifest.NumLevels {
		c := &d.metrics.levels[l]
		m.Levels[l] = LevelMetrics{
			Files:         s.version.NumFiles(l),
			Bytes:         s.version.LevelSize(l),
			Score:         scores[l],
			Target:        targetBytes(targets.maxBytes[l]),
			BytesWritten:  c.bytesWritten.Load(),
			BytesRead:     c.bytesRead.Load(),
			BytesMoved:    c.bytesMoved.Load(),
			BytesIngested: c.bytesIngested.Load(),
			Compactions:   c.compactions.Load(),
		}
	}
	return m
}

// targetBytes returns a level's target for LevelMetrics: 0 for none.
func targetBytes(t float64) uint64 {
	if math.IsInf(t, 1) {
		return 0
	}
	return uint64(t)
}

// String formats the metrics as a table: one row per level and a total,
// then the memtable, WAL, cache, filter and stall counters.
func (m *Metrics) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "level | tables |     size |   target | score |  written |     read |    moved | compactions\n")
	fmt.Fprintf(&b, "------+--------+----------+----------+-------+----------+----------+----------+------------\n")
	var files int
	var size, written, read, moved, compactions uint64
	for l, lm := range m.Levels {
		target := "-"
		if lm.Target > 0 {
			target = humanize.Bytes(lm.Target)
		}
		base := " "
		if l == m.BaseLevel {
			base = "*"
		}
		fmt.Fprintf(&b, "  %sL%d | %6d | %8s | %8s | %5.2f | %8s | %8s | %8s | %11d\n", base, l, lm.Files, humanize.Bytes(lm.Bytes), target, lm.Score,
			humanize.Bytes(lm.BytesWritten), humanize.Bytes(lm.BytesRead), humanize.Bytes(lm.BytesMoved), lm.Compactions)
		files += lm.Files
		size += lm.Bytes
		written += lm.BytesWritten
		read += lm.BytesRead
		moved += lm.BytesMoved
		compactions += lm.Compactions
	}
	fmt.Fprintf(&b, "total | %6d | %8s |        - |     - | %8s | %8s | %8s | %11d\n", files, humanize.Bytes(size),
		humanize.Bytes(written), humanize.Bytes(read), humanize.Bytes(moved), compactions)
	fmt.Fprintf(&b, "base level (*): L%d\n", m.BaseLevel)
	fmt.Fprintf(&b, "memtable: %s (+%d frozen, %s ready)   WAL written: %s   flushes: %d (%s)   write amplification: %.2f\n",
		humanize.Bytes(uint64(m.MemTableSize)), m.ImmutableMemTables, humanize.Bytes(uint64(m.MemTableReserve)), humanize.Bytes(m.WALBytes), m.Flushes, humanize.Bytes(m.FlushBytes), m.WriteAmplification())
	fmt.Fprintf(&b, "compactions: %d (read %s, wrote %s), moves: %d\n",
		m.Compactions, humanize.Bytes(m.CompactionBytesIn), humanize.Bytes(m.CompactionBytesOut), m.Moves)
	if m.Ingests > 0 {
		fmt.Fprintf(&b, "ingests: %d (%d tables, %s)\n", m.Ingests, m.IngestedTables, humanize.Bytes(m.IngestedBytes))
	}
	bc := m.BlockCache
	hitRate := 0.0
	if bc.Hits+bc.Misses > 0 {
		hitRate = 100 * float64(bc.Hits) / float64(bc.Hits+bc.Misses)
	}
	fmt.Fprintf(&b, "block cache: %s in use, %d hits, %d misses (%.1f%% hit); tables hold %s of index and filter blocks outside it\n",
		humanize.Bytes(uint64(bc.Bytes)), bc.Hits, bc.Misses, hitRate, humanize.Bytes(m.TableMemory))
	fmt.Fprintf(&b, "filters: %d probes, %d said no (data-block reads skipped), %d false positives (%.3f%%)\n",
		m.FilterProbes, m.FilterNegatives, m.FilterFalsePositives, 100*m.FilterFalsePositiveRate())
	fmt.Fprintf(&b, "write stalls: %d (%s)   open snapshots: %d\n", m.WriteStalls, m.WriteStallDuration.Round(time.Millisecond), m.Snapshots)
	return b.String()
}

type dbMetrics struct {
	filterProbes, filterNegatives, filterFalsePositives atomic.Uint64
	walBytes, flushes, flushBytes                       atomic.Uint64
	compactions, compactBytesIn, compactBytesOut        atomic.Uint64
	moves                                               atomic.Uint64
	ingests, ingestedTables, ingestedBytes              atomic.Uint64
	snapshots                                           atomic.Int64
	stalls                                              atomic.Uint64
	stallNanos                                          atomic.Int64
	levels                                              [manifest.NumLevels]levelCounters
}

type levelCounters struct {
	bytesWritten, bytesRead, bytesMoved, bytesIngested, compactions atomic.Uint64
}

// diffMetrics describes the filter s carries.
func (d *DB) diffMetrics(s *readState) DiffFilterMetrics {
	m := DiffFilterMetrics{
		LastLevel:   baseLevel(s.version),
		Skips:       d.mu.diff.skips.Load(),
		Maybes:      d.mu.diff.maybes.Load(),
		FalseMaybes: d.mu.diff.falseMaybes.Load(),
		Rebuilds:    d.mu.diff.rebuilds.Load(),
		Idle:        s.diffIdle,
	}
	if f := s.diff; f != nil {
		m.On = true
		m.Keys = f.Count()
		m.Capacity = f.Capacity()
		m.Bytes = f.SizeBytes()
		m.DesignFPRate = f.DesignFPRate()
		m.FPRate = f.ExpectedFPRate(float64(max(m.Keys, 0)))
	}
	return m
}
