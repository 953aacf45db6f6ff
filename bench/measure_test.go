package main

import (
	"io"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/bloomkv/bloomkv/internal/benchutil"
	"github.com/dgraph-io/badger/v4/y"
)

// TestBadgerBlockReadsAcrossReopen: the compact row's block reads per op on
// Badger is a count of block-cache misses, so it cannot be negative.
func TestBadgerBlockReadsAcrossReopen(t *testing.T) {
	cfg, err := parseFlags([]string{"-n", "20000", "-duration", "200ms", "-dir", t.TempDir(), "-workloads", "readrandom,compact"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	r := &runner{cfg: cfg, engine: "badger", dir: filepath.Join(cfg.dir, "badger"),
		s:    settings{cacheBytes: 256 << 10, memtableBytes: 1 << 20, bitsPerKey: 10, blockSize: 4096},
		vals: newValues(cfg.valueSize, 1), prog: lineProgress{w: io.Discard}}
	results, err := r.runAll(plan(cfg.workloads))
	if err != nil {
		t.Fatal(err)
	}
	for _, res := range results {
		if res.BlockReadsPerOp != nil {
			t.Logf("%s: block reads/op %v", res.Workload, *res.BlockReadsPerOp)
			if *res.BlockReadsPerOp < 0 {
				t.Errorf("%s on badger: block reads/op %v, negative", res.Workload, *res.BlockReadsPerOp)
			}
		}
	}
}

// TestReadWhileWritingPairedRates: bloomkv's figures for a diff
// workload are its "on" side's, so the paired "on" ops/s (JSON
// paired.on_ops_per_sec, and the note) is the workload's ops/s, as on
// readrandom; readwhilewriting runs 2 readers.
func TestReadWhileWritingPairedRates(t *testing.T) {
	cfg, err := parseFlags([]string{"-n", "5000", "-duration", "200ms", "-dir", t.TempDir(), "-workloads", "readwhilewriting"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	r := &runner{cfg: cfg, engine: "bloomkv", dir: filepath.Join(cfg.dir, "bloomkv"),
		s:    settings{cacheBytes: 1 << 20, memtableBytes: 256 << 10, bitsPerKey: 10, blockSize: 4096},
		vals: newValues(cfg.valueSize, 1), prog: lineProgress{w: io.Discard}}
	results, err := r.runAll(plan(cfg.workloads))
	if err != nil {
		t.Fatal(err)
	}
	res := results[0]
	if res.Paired == nil {
		t.Fatal("no paired result")
	}
	t.Logf("ops/s %.0f, paired on %.0f off %.0f; note %q", res.OpsPerSec, res.Paired.OnOpsPerSec, res.Paired.OffOpsPerSec, noteOf(&res))
	if d := res.Paired.OnOpsPerSec / res.OpsPerSec; d < 0.99 || d > 1.01 {
		t.Errorf("readwhilewriting on bloomkv: ops/s %.0f, but the paired \"on\" side's %.0f (%.2f×)", res.OpsPerSec, res.Paired.OnOpsPerSec, d)
	}
}

// TestBadgerBloomBitsPerKey: Badger's table builder sizes each filter with
// y.BloomBitsPerKey(keys, BloomFalsePositive) and passes the result to
// y.NewFilter as bits per key; the header says Badger gets -bits bits/key.
func TestBadgerBloomBitsPerKey(t *testing.T) {
	for _, bits := range []int{6, 10, 16} {
		s := settings{bitsPerKey: bits}
		got := y.BloomBitsPerKey(100_000, badgerFalsePositive(s))
		if got != bits {
			t.Errorf("-bits %d: Badger builds its filters with %d bits per key (BloomFalsePositive %.5f)", bits, got, badgerFalsePositive(s))
		}
	}
}

// TestPebbleTableBytesExcludeTheWAL: counters().tableBytes is the bytes of tables
// flushes and compactions wrote (the write amp's numerator); writes that
// stay in the memtable have written no table yet.
func TestPebbleTableBytesExcludeTheWAL(t *testing.T) {
	s := settings{cacheBytes: 1 << 20, memtableBytes: 4 << 20, bitsPerKey: 10, blockSize: 4096}
	e, err := openEngine("pebble", filepath.Join(t.TempDir(), "pebble"), s)
	if err != nil {
		t.Fatal(err)
	}
	defer e.close()
	vals := newValues(100, 1)
	rng := rand.New(rand.NewPCG(1, 2))
	key := make([]byte, benchutil.KeyLen)
	for i := range uint64(10_000) { // about 1.1 MiB: the memtable holds it
		if err := e.set(benchutil.MakeKey(key, presentID(i)), vals.Next(rng)); err != nil {
			t.Fatal(err)
		}
	}
	if c := e.counters(); c.tableBytes != 0 {
		t.Errorf("pebble: %d table bytes written before any flush (the WAL's bytes?)", c.tableBytes)
	}
}
