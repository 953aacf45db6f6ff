package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/bloomkv/bloomkv"
	"github.com/bloomkv/bloomkv/internal/humanize"
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/syndtr/goleveldb/leveldb"
	lvlfilter "github.com/syndtr/goleveldb/leveldb/filter"
	"github.com/syndtr/goleveldb/leveldb/opt"
	"github.com/syndtr/goleveldb/leveldb/util"
)

// engineNames lists the engines -engines knows, in the order they run and
// print. bloomkv-nodiff is bloomkv with its differential-file filter turned
// off; pebble-l6 is Pebble whose point reads consult last-level filters;
// badger and bbolt are the other stores Go programs embed, an LSM tree that
// keeps large values apart and a copy-on-write B+tree.
var engineNames = []string{"bloomkv", "bloomkv-nodiff", "pebble", "pebble-l6", "goleveldb", "badger", "bbolt"}

// defaultEngines are the engines a run without -engines runs: all but
// pebble-l6, badger and bbolt, each of which would take the default run
// past three minutes on 2 cores (-engines bloomkv,pebble,badger,bbolt adds
// them).
var defaultEngines = []string{"bloomkv", "bloomkv-nodiff", "pebble", "goleveldb"}

// settings are the knobs every engine gets the same value of.
type settings struct {
	cacheBytes    int64
	memtableBytes int64
	bitsPerKey    int
	blockSize     int
	sync          bool
}

// engine is the part of a key-value store the workloads use.
type engine interface {
	set(key, value []byte) error
	del(key []byte) error
	// apply writes the pairs keys[i], values[i] as one atomic batch; the
	// slices may be reused once it returns.
	apply(keys, values [][]byte) error
	// get reports whether key is present, reading its value.
	get(key []byte) (bool, error)
	newIter() (iter, error)
	// compact compacts the whole key space to the last level.
	compact() error
	// flush writes the memtable to a level-0 table and waits for it.
	flush() error
	counters() counters
	// shape describes the tree: tables per level, and what else the
	// engine tells.
	shape() string
	close() error
}

// iter is a forward iterator.
type iter interface {
	seekGE(key []byte) bool
	first() bool
	next() bool
	value() []byte
	close() error
}

// counters are an engine's cumulative read and write counters; -1 marks one
// the engine does not expose.
type counters struct {
	// blockReads counts block-cache misses: blocks read from a table file.
	blockReads int64
	// filterProbes counts filter probes by point reads; filterMaybes the
	// probes that answered "maybe"; filterFalsePositives the maybes for a
	// key the table lacked (-1 where only maybes are counted).
	filterProbes, filterMaybes, filterFalsePositives int64
	// tableBytes counts bytes of tables written by flushes and compactions.
	tableBytes int64
	// pinnedBytes is index and filter memory held outside the block cache.
	pinnedBytes int64
	// diffSkips, diffMaybes and diffFalseMaybes count the answers of
	// bloomkv's differential-file filter to Gets (DiffFilterMetrics); -1
	// for the engines without one.
	diffSkips, diffMaybes, diffFalseMaybes int64
}

// withoutDiff marks the differential-filter counters absent, for the
// engines without one.
func withoutDiff(c counters) counters {
	c.diffSkips, c.diffMaybes, c.diffFalseMaybes = -1, -1, -1
	return c
}

// openEngine opens a fresh store of the named engine in dir.
func openEngine(name, dir string, s settings) (engine, error) {
	switch name {
	case "bloomkv":
		return openBloomkv(dir, s, false)
	case "bloomkv-nodiff":
		return openBloomkv(dir, s, true)
	case "pebble", "pebble-l6":
		e, err := openPebble(dir, s)
		switch {
		case err != nil:
			return nil, err
		case name == "pebble-l6":
			return pebbleL6Engine{e}, nil
		}
		return e, nil
	case "goleveldb":
		return openLevelDB(dir, s)
	case "badger":
		return openBadger(dir, s)
	case "bbolt":
		return openBbolt(dir, s)
	}
	return nil, fmt.Errorf("unknown engine %q (want one of %v)", name, engineNames)
}

// describeEngine is the configuration line the report header prints.
func describeEngine(name string, s settings) string {
	switch name {
	case "bloomkv", "bloomkv-nodiff":
		o := bloomkvOptions(s, name == "bloomkv-nodiff")
		diff := "differential-file filter on (a Get of a key it rules out reads the base level only)"
		if o.DisableDiffFilter {
			diff = "DisableDiffFilter=true (every Get asks the memtables and every level above the base)"
		}
		return fmt.Sprintf("%s: CacheSize=%d MemTableSize=%d BloomBitsPerKey=%d (blocked, every level, Get probes all) BlockSize=%d Compression=snappy "+
			"L0CompactionThreshold=2 (L0 depth) L0StopWritesThreshold=12 LBaseMaxBytes=64MiB (dynamic base level) LevelMultiplier=10 TargetFileSize=2MiB MaxConcurrentCompactions=1; "+
			"index and filter blocks pinned outside the cache; %s; Sync=%v",
			name, o.CacheSize, o.MemTableSize, o.BloomBitsPerKey, o.BlockSize, diff, s.sync)
	case "pebble", "pebble-l6":
		o := pebbleOptions(s)
		reads := "default read path (Get skips L6 filters)"
		if name == "pebble-l6" {
			reads = "point reads by NewIter(&IterOptions{UseL6Filters: true}) + SeekPrefixGE, a new iterator per read " +
				"(DefaultComparer: Split takes the whole key, so the filters of every level, L6 included, are probed with it)"
		}
		return fmt.Sprintf("%s %s: Cache=%d (cache + 2 memtables, which Pebble charges to it) MemTableSize=%d Levels[*].FilterPolicy=bloom.FilterPolicy(%d) BlockSize=%d Compression=snappy "+
			"L0CompactionThreshold=%d L0StopWritesThreshold=%d LBaseMaxBytes=%d CompactionConcurrency=1 FormatMajorVersion=%s (default); "+
			"%s; index and filter blocks in the cache; Sync=%v",
			name, pebbleVersion, pebbleCacheBytes(s), o.MemTableSize, s.bitsPerKey, o.Levels[0].BlockSize,
			o.L0CompactionThreshold, o.L0StopWritesThreshold, o.LBaseMaxBytes, o.FormatMajorVersion, reads, s.sync)
	case "goleveldb":
		o := levelDBOptions(s)
		return fmt.Sprintf("goleveldb %s: BlockCacheCapacity=%d WriteBuffer=%d Filter=%s BlockSize=%d Compression=snappy "+
			"CompactionTableSize=2MiB CompactionTotalSize=10MiB x10 DisableBufferPool=true; filters on every level; index and filter blocks in the cache; "+
			"a flush (readbase workloads) is a close and reopen, which writes the memtable to a level-0 table and empties the block cache; Sync=%v",
			goleveldbVersion, o.BlockCacheCapacity, o.WriteBuffer, o.Filter.Name(), o.BlockSize, s.sync)
	case "badger":
		return describeBadger(s)
	case "bbolt":
		return describeBbolt(s)
	}
	return name
}

// ---- bloomkv

type bloomkvEngine struct {
	db   *bloomkv.DB
	wo   *bloomkv.WriteOptions
	opts *bloomkv.Options
}

// bloomkvOptions are bloomkv's options; noDiff turns its
// differential-file filter off.
func bloomkvOptions(s settings, noDiff bool) *bloomkv.Options {
	return &bloomkv.Options{
		CacheSize:         s.cacheBytes,
		MemTableSize:      s.memtableBytes,
		BloomBitsPerKey:   s.bitsPerKey,
		BlockSize:         s.blockSize,
		DisableDiffFilter: noDiff,
		// As Pebble's CompactionConcurrency: one, whatever the cores.
		MaxConcurrentCompactions: 1,
		Logger:                   slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
}

func openBloomkv(dir string, s settings, noDiff bool) (engine, error) {
	o := bloomkvOptions(s, noDiff)
	db, err := bloomkv.Open(dir, o)
	if err != nil {
		return nil, err
	}
	wo := bloomkv.NoSync
	if s.sync {
		wo = bloomkv.Sync
	}
	return &bloomkvEngine{db: db, wo: wo, opts: o}, nil
}

func (e *bloomkvEngine) set(k, v []byte) error { return e.db.Set(k, v, e.wo) }
func (e *bloomkvEngine) del(k []byte) error    { return e.db.Delete(k, e.wo) }

// apply copies the pairs into a new batch and commits it.
func (e *bloomkvEngine) apply(keys, values [][]byte) error {
	b := e.db.NewBatch()
	for i := range keys {
		if err := b.Set(keys[i], values[i]); err != nil {
			return err
		}
	}
	return e.db.Apply(b, e.wo)
}

func (e *bloomkvEngine) get(k []byte) (bool, error) {
	_, err := e.db.Get(k)
	if errors.Is(err, bloomkv.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

func (e *bloomkvEngine) newIter() (iter, error) {
	it, err := e.db.NewIter(nil)
	if err != nil {
		return nil, err
	}
	return bloomkvIter{it}, nil
}

// setDiffReads switches the differential-file filter's reads
// (diffSwitcher).
func (e *bloomkvEngine) setDiffReads(on bool) { e.db.SetDiffFilterReads(on) }

func (e *bloomkvEngine) compact() error { return e.db.Compact(nil, nil) }
func (e *bloomkvEngine) flush() error   { return e.db.Flush() }
func (e *bloomkvEngine) close() error   { return e.db.Close() }

func (e *bloomkvEngine) counters() counters {
	m := e.db.Metrics()
	return counters{
		blockReads:           int64(m.BlockCache.Misses),
		filterProbes:         int64(m.FilterProbes),
		filterMaybes:         int64(m.FilterProbes - m.FilterNegatives),
		filterFalsePositives: int64(m.FilterFalsePositives),
		tableBytes:           int64(m.FlushBytes + m.CompactionBytesOut),
		pinnedBytes:          int64(m.TableMemory),
		diffSkips:            int64(m.DiffFilter.Skips),
		diffMaybes:           int64(m.DiffFilter.Maybes),
		diffFalseMaybes:      int64(m.DiffFilter.FalseMaybes),
	}
}

func (e *bloomkvEngine) shape() string {
	m := e.db.Metrics()
	tables := make([]int64, len(m.Levels))
	for l, lm := range m.Levels {
		tables[l] = int64(lm.Files)
	}
	df := m.DiffFilter
	diff := "diff filter off"
	if df.On {
		diff = fmt.Sprintf("diff filter on: base L%d, %d versions above it", df.LastLevel, df.Keys)
	}
	return fmt.Sprintf("%s; memtable %s (+%d frozen); %s", levelShape(tables), humanize.Bytes(uint64(m.MemTableSize)), m.ImmutableMemTables, diff)
}

// levelShape lists the tables of each non-empty level.
func levelShape(tables []int64) string {
	var parts []string
	for l, n := range tables {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("L%d %d", l, n))
		}
	}
	if len(parts) == 0 {
		return "no tables"
	}
	return "tables per level: " + strings.Join(parts, ", ")
}

type bloomkvIter struct{ it *bloomkv.Iterator }

func (i bloomkvIter) seekGE(k []byte) bool { return i.it.SeekGE(k) }
func (i bloomkvIter) first() bool          { return i.it.First() }
func (i bloomkvIter) next() bool           { return i.it.Next() }
func (i bloomkvIter) value() []byte        { return i.it.Value() }
func (i bloomkvIter) close() error         { return i.it.Close() }

// ---- Pebble

type pebbleEngine struct {
	db    *pebble.DB
	cache interface{ Unref() }
	wo    *pebble.WriteOptions
	opts  *pebble.Options
}

func pebbleOptions(s settings) *pebble.Options {
	o := &pebble.Options{
		MemTableSize: uint64(s.memtableBytes),
		Logger:       quietPebbleLogger{},
	}
	for i := range o.Levels {
		o.Levels[i].BlockSize = s.blockSize
		o.Levels[i].FilterPolicy = bloom.FilterPolicy(s.bitsPerKey)
		o.Levels[i].Compression = func() *sstable.CompressionProfile { return sstable.SnappyCompression }
	}
	o.EnsureDefaults()
	return o
}

// pebbleCacheBytes is the cache Pebble gets: Pebble charges its memtables to
// the block cache (the mutable one and one kept for reuse), so it gets two
// memtables more, which leaves it the same bytes for blocks as the others.
func pebbleCacheBytes(s settings) int64 { return s.cacheBytes + 2*s.memtableBytes }

func openPebble(dir string, s settings) (*pebbleEngine, error) {
	o := pebbleOptions(s)
	c := pebble.NewCache(pebbleCacheBytes(s))
	o.Cache = c
	db, err := pebble.Open(dir, o)
	if err != nil {
		c.Unref()
		return nil, err
	}
	wo := pebble.NoSync
	if s.sync {
		wo = pebble.Sync
	}
	return &pebbleEngine{db: db, cache: c, wo: wo, opts: o}, nil
}

// The key and value are copied into Pebble's batch, so the callers' buffers
// may be reused at once.
func (e *pebbleEngine) set(k, v []byte) error { return e.db.Set(k, v, e.wo) }
func (e *pebbleEngine) del(k []byte) error    { return e.db.Delete(k, e.wo) }

// apply copies the pairs into a batch from Pebble's pool, commits it and
// returns it to the pool.
func (e *pebbleEngine) apply(keys, values [][]byte) error {
	b := e.db.NewBatch()
	for i := range keys {
		if err := b.Set(keys[i], values[i], nil); err != nil {
			b.Close()
			return err
		}
	}
	if err := b.Commit(e.wo); err != nil {
		b.Close()
		return err
	}
	return b.Close()
}

func (e *pebbleEngine) get(k []byte) (bool, error) {
	_, closer, err := e.db.Get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, closer.Close()
}

func (e *pebbleEngine) newIter() (iter, error) {
	it, err := e.db.NewIter(nil)
	if err != nil {
		return nil, err
	}
	return pebbleIter{it}, nil
}

func (e *pebbleEngine) compact() error {
	// Every key the benchmark writes sorts before 0xff.
	return e.db.Compact(context.Background(), nil, []byte{0xff}, true)
}

func (e *pebbleEngine) flush() error { return e.db.Flush() }

func (e *pebbleEngine) shape() string {
	m := e.db.Metrics()
	tables := make([]int64, len(m.Levels))
	for l := range m.Levels {
		tables[l] = m.Levels[l].TablesCount
	}
	return fmt.Sprintf("%s; L0 sublevels %d; %d memtables", levelShape(tables), m.Levels[0].Sublevels, m.MemTable.Count)
}

func (e *pebbleEngine) close() error {
	err := e.db.Close()
	e.cache.Unref()
	return err
}

func (e *pebbleEngine) counters() counters {
	m := e.db.Metrics()
	// The tables' bytes, summed over the levels: Metrics.Total adds the
	// WAL's bytes and the ingested ones to its TableBytesFlushed.
	var tableBytes uint64
	for i := range m.Levels {
		tableBytes += m.Levels[i].TableBytesFlushed + m.Levels[i].TableBytesCompacted
	}
	return withoutDiff(counters{
		blockReads:           m.BlockCache.Misses,
		filterProbes:         m.Filter.Hits + m.Filter.Misses,
		filterMaybes:         m.Filter.Misses,
		filterFalsePositives: -1,
		tableBytes:           int64(tableBytes),
	})
}

// pebbleL6Engine is Pebble whose point reads consult the last level's
// filters too, by Pebble's documented way: an iterator with UseL6Filters
// and SeekPrefixGE. Pebble's Get never reads L6 filters (a table there is
// opened with NeverUseFilterBlock unless the iterator options say
// UseL6Filters, file_cache.go). Everything but get is the pebble engine's.
type pebbleL6Engine struct{ *pebbleEngine }

// l6IterOptions are the options of pebble-l6's point-read iterators; only
// read, so one value serves every goroutine.
var l6IterOptions = pebble.IterOptions{UseL6Filters: true}

// get opens an iterator per read: an iterator reads the store as it was
// when it was opened (SetOptions refreshes a batch's view only, not the
// DB's), so one kept across reads would miss later writes and hold obsolete
// tables; and gets run on several goroutines at once (readwhilewriting).
// Pebble pools its iterators' memory itself, and an iterator per get still
// costs less than Get. With the default comparer,
// Split returns the whole key, so SeekPrefixGE finds k or nothing; the key
// is compared all the same.
func (e pebbleL6Engine) get(k []byte) (found bool, err error) {
	it, err := e.db.NewIter(&l6IterOptions)
	if err != nil {
		return false, err
	}
	if it.SeekPrefixGE(k) && bytes.Equal(it.Key(), k) {
		_, err = it.ValueAndErr()
		found = err == nil
	}
	if cerr := it.Close(); err == nil {
		err = cerr
	}
	return found && err == nil, err
}

type pebbleIter struct{ it *pebble.Iterator }

func (i pebbleIter) seekGE(k []byte) bool { return i.it.SeekGE(k) }
func (i pebbleIter) first() bool          { return i.it.First() }
func (i pebbleIter) next() bool           { return i.it.Next() }
func (i pebbleIter) value() []byte        { return i.it.Value() }
func (i pebbleIter) close() error         { return i.it.Close() }

// quietPebbleLogger drops Pebble's informational lines; errors still reach
// the benchmark through return values.
type quietPebbleLogger struct{}

func (quietPebbleLogger) Infof(string, ...interface{})  {}
func (quietPebbleLogger) Errorf(string, ...interface{}) {}
func (quietPebbleLogger) Fatalf(format string, args ...interface{}) {
	panic(fmt.Sprintf("pebble: "+format, args...))
}

// ---- goleveldb

type levelDBEngine struct {
	db  *leveldb.DB
	wo  *opt.WriteOptions
	dir string
	o   *opt.Options
}

func levelDBOptions(s settings) *opt.Options {
	return &opt.Options{
		BlockCacheCapacity: int(s.cacheBytes),
		WriteBuffer:        int(s.memtableBytes),
		Filter:             lvlfilter.NewBloomFilter(s.bitsPerKey),
		BlockSize:          s.blockSize,
		Compression:        opt.SnappyCompression,
		ErrorIfExist:       true,
		// With its buffer pool on, goleveldb reads index and filter blocks
		// into pooled buffers as large as a compaction's 2 MiB output
		// buffer and charges the cache their capacity, so a few blocks
		// fill it (util/buffer_pool.go, table/reader.go). Off, the cache
		// holds as many blocks as its size says.
		DisableBufferPool: true,
	}
}

func openLevelDB(dir string, s settings) (engine, error) {
	o := levelDBOptions(s)
	db, err := leveldb.OpenFile(dir, o)
	if err != nil {
		return nil, err
	}
	return &levelDBEngine{db: db, wo: &opt.WriteOptions{Sync: s.sync}, dir: dir, o: o}, nil
}

func (e *levelDBEngine) set(k, v []byte) error { return e.db.Put(k, v, e.wo) }
func (e *levelDBEngine) del(k []byte) error    { return e.db.Delete(k, e.wo) }

// apply copies the pairs into a new batch and writes it.
func (e *levelDBEngine) apply(keys, values [][]byte) error {
	b := new(leveldb.Batch)
	for i := range keys {
		b.Put(keys[i], values[i])
	}
	return e.db.Write(b, e.wo)
}

func (e *levelDBEngine) get(k []byte) (bool, error) {
	_, err := e.db.Get(k, nil)
	if errors.Is(err, leveldb.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

func (e *levelDBEngine) newIter() (iter, error) {
	return &levelDBIter{it: e.db.NewIterator(nil, nil)}, nil
}

func (e *levelDBEngine) compact() error { return e.db.CompactRange(util.Range{}) }
func (e *levelDBEngine) close() error   { return e.db.Close() }

// flush closes and reopens the store: goleveldb has no flush, and its
// recovery writes the replayed log to a level-0 table. (CompactRange over
// the memtable's keys would also compact every table overlapping them.)
func (e *levelDBEngine) flush() error {
	if err := e.db.Close(); err != nil {
		return err
	}
	o := *e.o
	o.ErrorIfExist = false
	db, err := leveldb.OpenFile(e.dir, &o)
	if err != nil {
		return err
	}
	e.db = db
	return nil
}

func (e *levelDBEngine) counters() counters {
	var st leveldb.DBStats
	if err := e.db.Stats(&st); err != nil {
		return withoutDiff(counters{blockReads: -1, filterProbes: -1, filterMaybes: -1, filterFalsePositives: -1, tableBytes: -1})
	}
	return withoutDiff(counters{
		blockReads:           st.BlockCache.MissCount,
		filterProbes:         -1,
		filterMaybes:         -1,
		filterFalsePositives: -1,
		tableBytes:           st.LevelWrite.Sum(),
	})
}

func (e *levelDBEngine) shape() string {
	var st leveldb.DBStats
	if err := e.db.Stats(&st); err != nil {
		return "unknown: " + err.Error()
	}
	tables := make([]int64, len(st.LevelTablesCounts))
	for l, n := range st.LevelTablesCounts {
		tables[l] = int64(n)
	}
	return levelShape(tables)
}

type levelDBIter struct {
	it interface {
		Seek([]byte) bool
		First() bool
		Next() bool
		Value() []byte
		Release()
		Error() error
	}
}

func (i *levelDBIter) seekGE(k []byte) bool { return i.it.Seek(k) }
func (i *levelDBIter) first() bool          { return i.it.First() }
func (i *levelDBIter) next() bool           { return i.it.Next() }
func (i *levelDBIter) value() []byte        { return i.it.Value() }
func (i *levelDBIter) close() error {
	err := i.it.Error()
	i.it.Release()
	return err
}
