package main

import (
	"errors"
	"fmt"
	"math"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
)

// ---- Badger

var badgerVersion = moduleVersion("github.com/dgraph-io/badger/v4")

// badgerEngine is Badger used as its users use it: every write a
// transaction (DB.Update), every point read a read-only one (DB.View).
type badgerEngine struct {
	db  *badger.DB
	dir string
	s   settings
	// missesBefore is the block cache misses of the store before its last
	// reopen (flush), whose counters start again from 0.
	missesBefore uint64
}

// badgerBlockCache is the share of -cache Badger gets for data blocks; the
// rest is its index cache, which holds the tables' indexes and Bloom
// filters (the other engines keep those in their one cache, or pin them).
func badgerBlockCache(s settings) int64 { return s.cacheBytes - s.cacheBytes/4 }

// badgerFalsePositive is the Bloom false-positive rate Badger is given so
// that its filters get s.bitsPerKey bits per key: its table builder sizes a
// filter at ceil(-ln(rate)/ln 2) bits per key (y.BloomBitsPerKey), so the
// rate is 2^-bits, nudged up a hair so that rounding gives back the same
// bits.
func badgerFalsePositive(s settings) float64 {
	return math.Exp(-float64(s.bitsPerKey)*math.Ln2) * (1 + 1e-9)
}

func badgerOptions(dir string, s settings) badger.Options {
	return badger.DefaultOptions(dir).
		WithBlockCacheSize(badgerBlockCache(s)).
		WithIndexCacheSize(s.cacheBytes / 4).
		WithMemTableSize(s.memtableBytes).
		// One memtable being written and one being flushed, as the
		// others hold; Badger's default of 5 would hold more memory.
		WithNumMemtables(2).
		WithBloomFalsePositive(badgerFalsePositive(s)).
		WithBlockSize(s.blockSize).
		WithCompression(options.Snappy).
		// Badger refuses a single compactor: 2 is its least.
		WithNumCompactors(2).
		// Badger refuses a value threshold above its largest transaction,
		// 15% of the memtable; this is the largest it takes, so that values
		// live in the LSM tree as with the other engines.
		WithValueThreshold(15 * s.memtableBytes / 100).
		WithSyncWrites(s.sync).
		WithLogger(nil)
}

func openBadger(dir string, s settings) (engine, error) {
	db, err := badger.Open(badgerOptions(dir, s))
	if err != nil {
		return nil, fmt.Errorf("badger: %w", err)
	}
	return &badgerEngine{db: db, dir: dir, s: s}, nil
}

func describeBadger(s settings) string {
	o := badgerOptions("", s)
	return fmt.Sprintf("badger %s: BlockCacheSize=%d IndexCacheSize=%d (the two split -cache; indexes and Bloom filters in the index cache) "+
		"MemTableSize=%d NumMemtables=%d BloomFalsePositive=%.3g (%d bits/key) BlockSize=%d Compression=snappy NumCompactors=%d (its least) "+
		"NumLevelZeroTables=%d ValueThreshold=%d (the most Badger takes with this memtable: values this small live in the LSM tree, not the value log) DetectConflicts=%v (default) Logger=nil; "+
		"a write is a transaction (DB.Update), a batch one transaction, a point read DB.View; iterators PrefetchValues=false (values read as the scan reaches them); "+
		"a flush is a close and reopen, which writes the memtables to level-0 tables; compact is a flush then Flatten; SyncWrites=%v",
		badgerVersion, o.BlockCacheSize, o.IndexCacheSize, o.MemTableSize, o.NumMemtables, o.BloomFalsePositive, s.bitsPerKey, o.BlockSize,
		o.NumCompactors, o.NumLevelZeroTables, o.ValueThreshold, o.DetectConflicts, s.sync)
}

func (e *badgerEngine) set(k, v []byte) error {
	return e.db.Update(func(txn *badger.Txn) error { return txn.Set(k, v) })
}

func (e *badgerEngine) del(k []byte) error {
	return e.db.Update(func(txn *badger.Txn) error { return txn.Delete(k) })
}

// apply writes the pairs in one transaction, which holds the slices until
// it commits. A batch too big for one transaction fails rather than being
// split, which would make it no longer atomic: Badger caps a transaction
// at 15% of the memtable.
func (e *badgerEngine) apply(keys, values [][]byte) error {
	txn := e.db.NewTransaction(true)
	defer txn.Discard()
	for i := range keys {
		if err := txn.Set(keys[i], values[i]); errors.Is(err, badger.ErrTxnTooBig) {
			return fmt.Errorf("badger: a batch of %d keys does not fit one transaction with -memtable %d (raise it): %w", len(keys), e.s.memtableBytes, err)
		} else if err != nil {
			return fmt.Errorf("badger batch: %w", err)
		}
	}
	return txn.Commit()
}

func (e *badgerEngine) get(k []byte) (found bool, err error) {
	err = e.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(k)
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		found = true
		return item.Value(func([]byte) error { return nil })
	})
	return found && err == nil, err
}

func (e *badgerEngine) newIter() (iter, error) {
	txn := e.db.NewTransaction(false)
	return &badgerIter{txn: txn, it: txn.NewIterator(badger.IteratorOptions{})}, nil
}

// flush closes and reopens the store: Badger has no call that flushes its
// memtable, and Close writes it to a level-0 table.
func (e *badgerEngine) flush() error {
	// The reopened store counts its cache's misses from 0.
	if m := e.db.BlockCacheMetrics(); m != nil {
		e.missesBefore += m.Misses()
	}
	if err := e.db.Close(); err != nil {
		return fmt.Errorf("badger close: %w", err)
	}
	db, err := badger.Open(badgerOptions(e.dir, e.s))
	if err != nil {
		return fmt.Errorf("badger reopen: %w", err)
	}
	e.db = db
	return nil
}

// compact flushes the memtables, then Flatten compacts every table into one
// level.
func (e *badgerEngine) compact() error {
	if err := e.flush(); err != nil {
		return err
	}
	return e.db.Flatten(1)
}

func (e *badgerEngine) close() error { return e.db.Close() }

// counters: Badger counts its block-cache misses; it tells neither its
// filter probes nor the bytes its flushes and compactions write.
func (e *badgerEngine) counters() counters {
	c := withoutDiff(counters{blockReads: -1, filterProbes: -1, filterMaybes: -1, filterFalsePositives: -1, tableBytes: -1})
	if m := e.db.BlockCacheMetrics(); m != nil {
		c.blockReads = int64(e.missesBefore + m.Misses())
	}
	return c
}

func (e *badgerEngine) shape() string {
	levels := e.db.Levels()
	tables := make([]int64, len(levels))
	for i, l := range levels {
		tables[i] = int64(l.NumTables)
	}
	return levelShape(tables)
}

type badgerIter struct {
	txn *badger.Txn
	it  *badger.Iterator
	buf []byte
}

func (i *badgerIter) seekGE(k []byte) bool { i.it.Seek(k); return i.it.Valid() }
func (i *badgerIter) first() bool          { i.it.Rewind(); return i.it.Valid() }
func (i *badgerIter) next() bool           { i.it.Next(); return i.it.Valid() }

// value copies the value out: Badger lends it only inside Item.Value's
// callback. A failed read leaves nil.
func (i *badgerIter) value() []byte {
	v, err := i.it.Item().ValueCopy(i.buf[:0])
	if err != nil {
		return nil
	}
	i.buf = v
	return v
}

func (i *badgerIter) close() error {
	i.it.Close()
	i.txn.Discard()
	return nil
}
