package main

import (
	"fmt"
	"os"
	"path/filepath"

	bolt "go.etcd.io/bbolt"
)

// ---- bbolt

var bboltVersion = moduleVersion("go.etcd.io/bbolt")

// bboltBucket is the one bucket every key goes in.
var bboltBucket = []byte("bench")

// bboltEngine is bbolt used as its users use it: one file, one bucket,
// every write a read-write transaction (DB.Update), every point read a
// read-only one (DB.View).
type bboltEngine struct {
	db *bolt.DB
}

func bboltOptions(s settings) *bolt.Options {
	return &bolt.Options{
		NoSync:       !s.sync,
		FreelistType: bolt.FreelistMapType,
	}
}

// openBbolt opens the store as the file bolt.db in dir, so that the
// directory holds its files as it holds the other engines'.
func openBbolt(dir string, s settings) (engine, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	db, err := bolt.Open(filepath.Join(dir, "bolt.db"), 0o644, bboltOptions(s))
	if err != nil {
		return nil, fmt.Errorf("bbolt: %w", err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(bboltBucket)
		return err
	}); err != nil {
		db.Close()
		return nil, fmt.Errorf("bbolt: create bucket: %w", err)
	}
	return &bboltEngine{db: db}, nil
}

func describeBbolt(s settings) string {
	o := bboltOptions(s)
	return fmt.Sprintf("bbolt %s: one bucket, FreelistType=%s, NoFreelistSync=%v (default), pages of %d bytes (the OS page size); "+
		"no block cache: its reads are served by the OS page cache through its mmap of the file (-cache does not apply); "+
		"no memtable, Bloom filters or compression (-memtable, -bits and snappy do not apply); "+
		"a write is a read-write transaction (DB.Update), a batch one transaction, a point read DB.View; "+
		"a B+tree has nothing to flush or compact (the compact, readbase and ingest workloads do not run on it); NoSync=%v",
		bboltVersion, o.FreelistType, o.NoFreelistSync, os.Getpagesize(), o.NoSync)
}

func (e *bboltEngine) set(k, v []byte) error {
	return e.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bboltBucket).Put(k, v) })
}

func (e *bboltEngine) del(k []byte) error {
	return e.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bboltBucket).Delete(k) })
}

// apply writes the pairs in one transaction, which holds the slices until
// it commits.
func (e *bboltEngine) apply(keys, values [][]byte) error {
	return e.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bboltBucket)
		for i := range keys {
			if err := b.Put(keys[i], values[i]); err != nil {
				return fmt.Errorf("bbolt batch: %w", err)
			}
		}
		return nil
	})
}

func (e *bboltEngine) get(k []byte) (found bool, err error) {
	err = e.db.View(func(tx *bolt.Tx) error {
		found = tx.Bucket(bboltBucket).Get(k) != nil
		return nil
	})
	return found && err == nil, err
}

func (e *bboltEngine) newIter() (iter, error) {
	tx, err := e.db.Begin(false)
	if err != nil {
		return nil, fmt.Errorf("bbolt: %w", err)
	}
	return &bboltIter{tx: tx, c: tx.Bucket(bboltBucket).Cursor()}, nil
}

// flush has nothing to do: every commit writes its pages to the file.
func (e *bboltEngine) flush() error { return nil }

// compact has nothing to do: a B+tree is always in its final shape. The
// workloads that time a compaction do not run on bbolt.
func (e *bboltEngine) compact() error { return nil }

func (e *bboltEngine) close() error { return e.db.Close() }

// counters: bbolt reads through the OS page cache and has no filters or
// tables, so it counts none of these.
func (e *bboltEngine) counters() counters {
	return withoutDiff(counters{blockReads: -1, filterProbes: -1, filterMaybes: -1, filterFalsePositives: -1, tableBytes: -1})
}

func (e *bboltEngine) shape() string {
	var st bolt.BucketStats
	if err := e.db.View(func(tx *bolt.Tx) error {
		st = tx.Bucket(bboltBucket).Stats()
		return nil
	}); err != nil {
		return "unknown: " + err.Error()
	}
	return fmt.Sprintf("B+tree depth %d, %d branch and %d leaf pages, %d keys", st.Depth, st.BranchPageN, st.LeafPageN, st.KeyN)
}

// bboltIter is a cursor in a read-only transaction, which sees the store
// as it was when the iterator opened.
type bboltIter struct {
	tx *bolt.Tx
	c  *bolt.Cursor
	v  []byte
}

func (i *bboltIter) seekGE(k []byte) bool { return i.at(i.c.Seek(k)) }
func (i *bboltIter) first() bool          { return i.at(i.c.First()) }
func (i *bboltIter) next() bool           { return i.at(i.c.Next()) }
func (i *bboltIter) value() []byte        { return i.v }
func (i *bboltIter) close() error         { return i.tx.Rollback() }

func (i *bboltIter) at(k, v []byte) bool {
	i.v = v
	return k != nil
}
