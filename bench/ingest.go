package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/bloomkv/bloomkv/internal/benchutil"
	bkvsstable "github.com/bloomkv/bloomkv/sstable"
	"github.com/cockroachdb/pebble/v2/objstorage/objstorageprovider"
	"github.com/cockroachdb/pebble/v2/sstable"
	pebblevfs "github.com/cockroachdb/pebble/v2/vfs"
)

// ingestTables is the number of tables the ingest workload ingests, each of
// n/ingestTables keys; ingestChecks the gets of their keys after.
const (
	ingestTables = 20
	ingestChecks = 1000
)

// ingester is an engine that ingests tables written for it.
type ingester interface {
	// writeIngestTable writes a table for ingestion at path, with the
	// engine's own table writer and its store's settings: keys (in
	// increasing order) with their values.
	writeIngestTable(path string, keys, values [][]byte) error
	// ingest ingests the tables at paths atomically, in one call.
	ingest(paths []string) error
}

// ingestEngines are the engines that run the ingest workload: goleveldb
// has no ingestion.
var ingestEngines = []string{"bloomkv", "bloomkv-nodiff", "pebble", "pebble-l6"}

// ingest writes ingestTables tables of consecutive loaded keys (disjoint
// ranges), untimed, with the engine's own writer, then times one Ingest of
// them into a new store and gets of ingestChecks of their keys, each of
// which must be found. Its ops are the keys ingested.
func (r *runner) ingest() (*measurement, error) {
	st, err := r.openStore(r.dir + "-ingest")
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*measurement, error) {
		_ = st.e.close()
		return nil, err
	}
	in, ok := st.e.(ingester)
	if !ok {
		return fail(fmt.Errorf("%s cannot ingest tables", r.engine))
	}
	tableDir := r.dir + "-ingest-tables"
	if err := os.MkdirAll(tableDir, 0o755); err != nil {
		return fail(err)
	}
	defer os.RemoveAll(tableDir)
	rng := r.rng("ingest")
	per := max(r.n()/ingestTables, 1)
	var files []string
	bar := r.prog.start("ingest tables", ingestTables)
	for t := range uint64(ingestTables) {
		keys, values := make([][]byte, per), make([][]byte, per)
		for j := range per {
			keys[j] = benchutil.MakeKey(make([]byte, benchutil.KeyLen), presentID(t*per+j))
			values[j] = append([]byte(nil), r.vals.Next(rng)...)
		}
		p := filepath.Join(tableDir, fmt.Sprintf("%02d.sst", t))
		if err := in.writeIngestTable(p, keys, values); err != nil {
			bar.finish()
			return fail(fmt.Errorf("writing %s: %w", p, err))
		}
		files = append(files, p)
		bar.set(int64(t + 1))
	}
	bar.finish()
	total := per * ingestTables
	bar = r.prog.start("ingest", 0)
	start := time.Now()
	err = in.ingest(files)
	var found int64
	key := make([]byte, benchutil.KeyLen)
	for i := 0; err == nil && i < ingestChecks; i++ {
		var ok bool
		ok, err = st.e.get(benchutil.MakeKey(key, presentID(rng.Uint64N(total))))
		if ok {
			found++
		}
	}
	elapsed := time.Since(start)
	bar.finish()
	if err != nil {
		return fail(err)
	}
	if found != ingestChecks {
		return fail(fmt.Errorf("%d of %d ingested keys read back", found, ingestChecks))
	}
	return &measurement{ops: int64(total), elapsed: elapsed, store: st,
		note: fmt.Sprintf("%d tables of %d keys, then %d gets", ingestTables, per, ingestChecks)}, nil
}

func (e *bloomkvEngine) writeIngestTable(path string, keys, values [][]byte) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	// The store's own table settings (Snappy is the writer's default).
	buf := bufio.NewWriterSize(f, 256<<10)
	w, err := bkvsstable.NewWriter(buf, bkvsstable.WriterOptions{BlockSize: e.opts.BlockSize, BloomBitsPerKey: e.opts.BloomBitsPerKey})
	for i := 0; err == nil && i < len(keys); i++ {
		err = w.Set(keys[i], values[i])
	}
	if err == nil {
		err = w.Close()
	}
	if err == nil {
		err = buf.Flush()
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func (e *bloomkvEngine) ingest(paths []string) error { return e.db.Ingest(paths) }

// writeIngestTable writes with Pebble's writer at its store's table format
// and with its store's settings for the last level (the writer options its
// own flushes and compactions use), synced as Pebble requires.
func (e *pebbleEngine) writeIngestTable(path string, keys, values [][]byte) error {
	f, err := pebblevfs.Default.Create(path, pebblevfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	w := sstable.NewWriter(objstorageprovider.NewFileWritable(f), e.opts.MakeWriterOptions(6, e.db.TableFormat()))
	for i := 0; err == nil && i < len(keys); i++ {
		err = w.Set(keys[i], values[i])
	}
	if cerr := w.Close(); err == nil { // the writable syncs and closes the file
		err = cerr
	}
	return err
}

func (e *pebbleEngine) ingest(paths []string) error {
	return e.db.Ingest(context.Background(), paths)
}
