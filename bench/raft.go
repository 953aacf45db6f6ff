package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/bloomkv/bloomkv"
	"github.com/bloomkv/bloomkv/internal/benchutil"
	"github.com/bloomkv/bloomkv/internal/humanize"
	"github.com/bloomkv/bloomkv/raftstore"
	"github.com/bloomkv/bloomkv/vfs"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	raftwal "github.com/hashicorp/raft-wal"
	"go.etcd.io/bbolt"
)

// The raft workload, run only when named: raftstore against the stores and
// stacks Go programs run under github.com/hashicorp/raft.
//
//  1. Log stores side by side (bloomkv's raftstore.LogStore, raft-boltdb/v2,
//     raft-wal), each in a directory of its own, driven by timed loops of
//     the shapes of hashicorp/raft's bench package (whose functions take a
//     *testing.B and restart their indexes at 1 on every b.N round, which
//     raft-wal refuses): StoreLogs in batches of 64 entries (raft's
//     MaxAppendEntries), synced; single StoreLogs; GetLog of recent entries;
//     FirstIndex and LastIndex; the stable store's Set, Get, SetUint64 and
//     GetUint64; and the prefix truncations raft makes after snapshots
//     (DeleteRange), down to the last entries, after which each store
//     reclaims what it can. Disk bytes are measured after the batches and
//     after the truncation.
//  2. Two 3-node clusters on loopback TCP in this process, built directly on
//     hashicorp/raft with one configuration and one transport (raftstore.Node
//     takes no other stores): the bloomkv stack (raftstore.LogStore and
//     raftstore.FSM) and a Consul-style one (raft-boltdb behind raft's
//     LogCache, as Consul runs it, and a bbolt FSM); 64 clients write
//     100-byte values on the leader, then read them linearizably.
//  3. raftstore.Node.Compare between two replicas that differ in 100 keys,
//     its bytes against those of shipping the keys.

// raftStores names the log stores, in the order of even runs.
var raftStores = []string{"bloomkv", "raft-boltdb", "raft-wal"}

// raftStacks names the cluster stacks, in the order of even runs.
var raftStacks = []string{"bloomkv", "consul-style"}

// The log store operations, in the order they run and print.
const (
	opStoreLogs  = "StoreLogs x64"
	opStoreLog   = "StoreLog"
	opGetLog     = "GetLog"
	opFirstIndex = "FirstIndex"
	opLastIndex  = "LastIndex"
	opSet        = "Set"
	opGet        = "Get"
	opSetUint64  = "SetUint64"
	opGetUint64  = "GetUint64"
	opDelete     = "DeleteRange"
	opReclaim    = "reclaim"
)

var raftOps = []string{opStoreLogs, opStoreLog, opGetLog, opFirstIndex, opLastIndex, opSet, opGet, opSetUint64, opGetUint64, opDelete, opReclaim}

const (
	// raftBatch is the entries of a StoreLogs call: raft's MaxAppendEntries.
	raftBatch = 64
	// raftKeepMax is the most entries the truncation keeps.
	raftKeepMax = 10_000
	// raftTruncateStep is the entries each DeleteRange drops: raft's
	// default SnapshotThreshold, the entries between two snapshots.
	raftTruncateStep = 8192
	// raftClients is the cluster's concurrent clients.
	raftClients = 64
	// raftDiffs is the keys in which the compared replicas differ.
	raftDiffs = 100
)

// raftReport is the raft workload's part of the JSON report: the settings,
// every figure of every run, and the goals.
type raftReport struct {
	Entries     int `json:"entries"`
	DataBytes   int `json:"data_bytes"`
	Keep        int `json:"keep"`
	Clients     int `json:"clients"`
	CompareKeys int `json:"compare_keys"`
	Runs        int `json:"runs"`
	// Rows holds every figure, one value per run.
	Rows    []*raftRow `json:"rows"`
	Goals   []raftGoal `json:"goals"`
	Seconds float64    `json:"seconds"`
}

// raftRow is one figure of one subject (a store, a stack), per run.
type raftRow struct {
	Section string    `json:"section"` // "log", "disk", "cluster", "compare" or "catchup"
	Subject string    `json:"subject"`
	Measure string    `json:"measure"`
	Values  []float64 `json:"values"`
}

type raftGoal struct {
	Name   string  `json:"name"`
	Target float64 `json:"target"`
	AtMost bool    `json:"at_most"`
	// Got is the median over the runs of the ratio within each run; Min
	// and Max their range.
	Got float64 `json:"got"`
	Min float64 `json:"min"`
	Max float64 `json:"max"`
	Met bool    `json:"met"`
}

// raftFigures collects one run's figures.
type raftFigures struct {
	rows []*raftRow
}

func (f *raftFigures) add(section, subject, measure string, v float64) {
	f.rows = append(f.rows, &raftRow{Section: section, Subject: subject, Measure: measure, Values: []float64{v}})
}

// row returns the report's row, nil if none.
func (r *raftReport) row(section, subject, measure string) *raftRow {
	for _, w := range r.Rows {
		if w.Section == section && w.Subject == subject && w.Measure == measure {
			return w
		}
	}
	return nil
}

// merge appends a run's figures to the report's rows.
func (r *raftReport) merge(f *raftFigures) {
	for _, x := range f.rows {
		if w := r.row(x.Section, x.Subject, x.Measure); w != nil {
			w.Values = append(w.Values, x.Values...)
		} else {
			r.Rows = append(r.Rows, x)
		}
	}
}

// runRaft runs the raft workload cfg.runs times in dir, the stores' and
// stacks' order reversed every other run, and reports the medians.
func runRaft(cfg *config, dir string, prog func(string)) (*raftReport, error) {
	start := time.Now()
	dir = filepath.Join(dir, "raft")
	if !cfg.keep {
		defer os.RemoveAll(dir)
	}
	rep := &raftReport{
		Entries: max(2*cfg.n, 2*raftBatch), DataBytes: cfg.valueSize, Clients: raftClients,
		CompareKeys: max(4*cfg.n, 2*raftDiffs), Runs: cfg.runs,
	}
	rep.Keep = min(raftKeepMax, rep.Entries/10)
	for run := range cfg.runs {
		runDir := filepath.Join(dir, fmt.Sprintf("run-%d", run))
		label := ""
		if cfg.runs > 1 {
			label = fmt.Sprintf("run %d/%d: ", run+1, cfg.runs)
		}
		f, err := rep.runOnce(cfg, runDir, run, func(s string) { prog("raft: " + label + s) })
		if !cfg.keep {
			if rerr := os.RemoveAll(runDir); err == nil {
				err = rerr
			}
		}
		if err != nil {
			return nil, err
		}
		rep.merge(f)
	}
	rep.checkGoals()
	rep.Seconds = time.Since(start).Seconds()
	return rep, nil
}

func (r *raftReport) runOnce(cfg *config, dir string, run int, prog func(string)) (*raftFigures, error) {
	f := &raftFigures{}
	stores, stacks := slices.Clone(raftStores), slices.Clone(raftStacks)
	if run%2 == 1 {
		slices.Reverse(stores)
		slices.Reverse(stacks)
	}
	for _, s := range stores {
		prog(fmt.Sprintf("log store %s: %s entries", s, commas(float64(r.Entries))))
		if err := r.benchLogStore(s, filepath.Join(dir, "log-"+s), cfg.seed+uint64(run), f); err != nil {
			return nil, fmt.Errorf("log store %s: %w", s, err)
		}
	}
	for _, s := range stacks {
		prog(fmt.Sprintf("cluster %s: %d clients", s, raftClients))
		if err := benchCluster(s, filepath.Join(dir, "cluster-"+s), cfg, f); err != nil {
			return nil, fmt.Errorf("cluster %s: %w", s, err)
		}
	}
	prog(fmt.Sprintf("compare: %s keys, %d differing", commas(float64(r.CompareKeys)), raftDiffs))
	if err := r.benchCompare(filepath.Join(dir, "compare"), cfg, f); err != nil {
		return nil, fmt.Errorf("compare: %w", err)
	}
	return f, nil
}

// logStore is a store under test: raft's two interfaces, how to reclaim the
// space of truncated entries, and how to close it.
type logStore interface {
	raft.LogStore
	raft.StableStore
	reclaim() error
	Close() error
}

type bloomkvLogStore struct{ *raftstore.LogStore }

// reclaim compacts the log's key range: the range deletion's tables drop.
func (s bloomkvLogStore) reclaim() error { return s.DB().Compact([]byte{'l'}, []byte{'l' + 1}) }

// boltLogStore is raft-boltdb: its file keeps its size, the freed pages
// staying on its free list.
type boltLogStore struct{ *raftboltdb.BoltStore }

func (boltLogStore) reclaim() error { return nil }

// walLogStore is raft-wal: DeleteRange of a prefix drops whole segments.
type walLogStore struct{ *raftwal.WAL }

func (walLogStore) reclaim() error { return nil }

func openLogStore(name, dir string) (logStore, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	switch name {
	case "bloomkv":
		s, err := raftstore.OpenLogStore(dir, nil)
		if err != nil {
			return nil, err
		}
		return bloomkvLogStore{s}, nil
	case "raft-boltdb":
		s, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(dir, "raft.db")})
		if err != nil {
			return nil, fmt.Errorf("open raft-boltdb: %w", err)
		}
		return boltLogStore{s}, nil
	case "raft-wal":
		s, err := raftwal.Open(dir, raftwal.WithLogger(hclog.NewNullLogger()))
		if err != nil {
			return nil, fmt.Errorf("open raft-wal: %w", err)
		}
		return walLogStore{s}, nil
	}
	return nil, fmt.Errorf("unknown log store %q", name)
}

// timed runs op n times, each timed into a histogram, and adds its rate
// (items per second, items counted by op) and p99 to f.
func timed(f *raftFigures, store, name string, n int, op func(i int) (items int, err error)) error {
	h := newHist()
	var items int64
	start := time.Now()
	for i := range n {
		t := time.Now()
		k, err := op(i)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		h.RecordValue(time.Since(t).Nanoseconds())
		items += int64(k)
	}
	el := time.Since(start).Seconds()
	f.add("log", store, name+" /s", float64(items)/el)
	f.add("log", store, name+" p99 µs", float64(h.ValueAtQuantile(99))/1e3)
	return nil
}

// benchLogStore runs the log store operations on a fresh store in dir.
func (r *raftReport) benchLogStore(name, dir string, seed uint64, f *raftFigures) (err error) {
	s, err := openLogStore(name, dir)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := s.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("close: %w", cerr)
		}
	}()
	rng := rand.New(rand.NewPCG(seed, 0x726166746c6f67))
	data := make([]byte, r.DataBytes*1024)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	// entry returns the entry at index i: Data is a random slice of the
	// random block, incompressible, and AppendedAt is set as raft's leader
	// sets it.
	entry := func(i uint64) *raft.Log {
		off := rng.IntN(len(data) - r.DataBytes)
		return &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: data[off : off+r.DataBytes], AppendedAt: time.Now()}
	}
	n := r.Entries
	batches := (n + raftBatch - 1) / raftBatch
	logs := make([]*raft.Log, 0, raftBatch)
	if err := timed(f, name, opStoreLogs, batches, func(b int) (int, error) {
		logs = logs[:0]
		for i := b * raftBatch; i < min(n, (b+1)*raftBatch); i++ {
			logs = append(logs, entry(uint64(i+1)))
		}
		return len(logs), s.StoreLogs(logs)
	}); err != nil {
		return err
	}
	full, _, err := settledDirBytes(dir, true)
	if err != nil {
		return err
	}
	f.add("disk", name, fmt.Sprintf("after %s entries", commas(float64(n))), float64(full))

	singles := max(n/1000, 50)
	if err := timed(f, name, opStoreLog, singles, func(i int) (int, error) {
		return 1, s.StoreLog(entry(uint64(n + i + 1)))
	}); err != nil {
		return err
	}
	last := uint64(n + singles)
	reads := max(n/10, 1000)
	var l raft.Log
	recent := uint64(min(raftKeepMax, n))
	if err := timed(f, name, opGetLog, reads, func(int) (int, error) {
		return 1, s.GetLog(last-rng.Uint64N(recent), &l)
	}); err != nil {
		return err
	}
	if err := timed(f, name, opFirstIndex, reads, func(int) (int, error) {
		_, err := s.FirstIndex()
		return 1, err
	}); err != nil {
		return err
	}
	if err := timed(f, name, opLastIndex, reads, func(int) (int, error) {
		_, err := s.LastIndex()
		return 1, err
	}); err != nil {
		return err
	}
	val := data[:r.DataBytes]
	if err := timed(f, name, opSet, singles, func(i int) (int, error) {
		return 1, s.Set([]byte{byte(i)}, val)
	}); err != nil {
		return err
	}
	if err := timed(f, name, opGet, reads, func(i int) (int, error) {
		_, err := s.Get([]byte{byte(i % min(singles, 256))})
		return 1, err
	}); err != nil {
		return err
	}
	if err := timed(f, name, opSetUint64, singles, func(i int) (int, error) {
		return 1, s.SetUint64([]byte{'u', byte(i)}, uint64(i))
	}); err != nil {
		return err
	}
	if err := timed(f, name, opGetUint64, reads, func(i int) (int, error) {
		_, err := s.GetUint64([]byte{'u', byte(i % min(singles, 256))})
		return 1, err
	}); err != nil {
		return err
	}

	// Truncation as raft makes it after snapshots: prefixes of a
	// snapshot's worth of entries, until the last r.Keep remain.
	keepFrom := last - uint64(r.Keep) + 1
	first := uint64(1)
	steps := int((keepFrom - first + raftTruncateStep - 1) / raftTruncateStep)
	if err := timed(f, name, opDelete, steps, func(int) (int, error) {
		hi := min(first+raftTruncateStep-1, keepFrom-1)
		err := s.DeleteRange(first, hi)
		k := int(hi - first + 1)
		first = hi + 1
		return k, err
	}); err != nil {
		return err
	}
	start := time.Now()
	if err := s.reclaim(); err != nil {
		return fmt.Errorf("reclaim: %w", err)
	}
	f.add("log", name, opReclaim+" s", time.Since(start).Seconds())
	if fi, err := s.FirstIndex(); err != nil || fi != keepFrom {
		return fmt.Errorf("first index %d after truncation, want %d (%v)", fi, keepFrom, err)
	}
	if err := s.GetLog(keepFrom, &l); err != nil {
		return fmt.Errorf("get first kept entry: %w", err)
	}
	after, _, err := settledDirBytes(dir, true)
	if err != nil {
		return err
	}
	f.add("disk", name, fmt.Sprintf("after truncation to %s", commas(float64(r.Keep))), float64(after))
	f.add("disk", name, "after truncation / live bytes", float64(after)/float64(r.liveBytes()))
	return nil
}

// liveBytes is what the kept entries hold: each entry's index, term, type
// and data.
func (r *raftReport) liveBytes() int64 {
	return int64(r.Keep) * int64(8+8+1+r.DataBytes)
}

// raftCluster is three raft nodes of one stack in this process.
type raftCluster struct {
	nodes []*raftNode
}

// raftNode is one member: its raft, its FSM's reads, and what to close.
type raftNode struct {
	raft *raft.Raft
	fsm  clusterFSM
	// closers close the node's stores after raft shut down.
	closers []func() error
	trans   *raft.NetworkTransport
}

// clusterFSM is what the benchmark needs of a stack's state machine beyond
// raft.FSM: the command setting a key, the applied index, and a read.
type clusterFSM interface {
	raft.FSM
	command(key, val []byte) []byte
	applied() uint64
	get(key []byte) ([]byte, error)
}

// raftConfig is the one configuration both stacks run: raft's defaults.
func raftConfig(id string, logger hclog.Logger) *raft.Config {
	c := raft.DefaultConfig()
	c.LocalID = raft.ServerID(id)
	c.Logger = logger
	return c
}

// openCluster starts three nodes of the stack in dir on loopback ports and
// waits for a leader.
func openCluster(stack, dir string) (c *raftCluster, err error) {
	c = &raftCluster{}
	defer func() {
		if err != nil {
			c.close()
		}
	}()
	logger := hclog.New(&hclog.LoggerOptions{Name: "raft-" + stack, Output: os.Stderr, Level: hclog.Error})
	var servers []raft.Server
	for i := range 3 {
		id := fmt.Sprintf("n%d", i+1)
		nd := filepath.Join(dir, id)
		n := &raftNode{}
		c.nodes = append(c.nodes, n)
		var logs raft.LogStore
		var stable raft.StableStore
		switch stack {
		case "bloomkv":
			ls, err := raftstore.OpenLogStore(filepath.Join(nd, "log"), nil)
			if err != nil {
				return nil, err
			}
			n.closers = append(n.closers, ls.Close)
			fsm, err := raftstore.OpenFSM(filepath.Join(nd, "fsm"), nil)
			if err != nil {
				return nil, err
			}
			n.closers = append(n.closers, fsm.Close)
			logs, stable, n.fsm = ls, ls, bloomkvFSM{fsm}
		case "consul-style":
			if err := os.MkdirAll(nd, 0o755); err != nil {
				return nil, err
			}
			bs, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(nd, "raft.db")})
			if err != nil {
				return nil, fmt.Errorf("open raft-boltdb: %w", err)
			}
			n.closers = append(n.closers, bs.Close)
			cache, err := raft.NewLogCache(512, bs)
			if err != nil {
				return nil, err
			}
			fsm, err := openBoltFSM(filepath.Join(nd, "fsm.db"))
			if err != nil {
				return nil, err
			}
			n.closers = append(n.closers, fsm.close)
			logs, stable, n.fsm = cache, bs, fsm
		default:
			return nil, fmt.Errorf("unknown stack %q", stack)
		}
		snaps, err := raft.NewFileSnapshotStoreWithLogger(filepath.Join(nd, "snapshots"), 2, logger)
		if err != nil {
			return nil, fmt.Errorf("snapshot store: %w", err)
		}
		if n.trans, err = raft.NewTCPTransportWithLogger("127.0.0.1:0", nil, 3, 10*time.Second, logger); err != nil {
			return nil, fmt.Errorf("transport: %w", err)
		}
		if n.raft, err = raft.NewRaft(raftConfig(id, logger), n.fsm, logs, stable, snaps, n.trans); err != nil {
			return nil, fmt.Errorf("start raft %s: %w", id, err)
		}
		servers = append(servers, raft.Server{ID: raft.ServerID(id), Address: n.trans.LocalAddr()})
	}
	if err := c.nodes[0].raft.BootstrapCluster(raft.Configuration{Servers: servers}).Error(); err != nil {
		return nil, fmt.Errorf("bootstrap: %w", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for c.leader() == nil {
		if time.Now().After(deadline) {
			return nil, errors.New("no leader after 30 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return c, nil
}

func (c *raftCluster) leader() *raftNode {
	for _, n := range c.nodes {
		if n.raft != nil && n.raft.State() == raft.Leader {
			return n
		}
	}
	return nil
}

func (c *raftCluster) close() error {
	var errs []error
	for _, n := range c.nodes {
		if n.raft != nil {
			errs = append(errs, n.raft.Shutdown().Error())
		}
		if n.trans != nil {
			errs = append(errs, n.trans.Close())
		}
		for i := len(n.closers) - 1; i >= 0; i-- {
			errs = append(errs, n.closers[i]())
		}
	}
	return errors.Join(errs...)
}

// benchCluster measures a stack's 3-node cluster: raftClients clients
// writing distinct keys on the leader for twice -duration, then reading
// the written keys linearizably for as long.
func benchCluster(stack, dir string, cfg *config, f *raftFigures) (err error) {
	c, err := openCluster(stack, dir)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := c.close(); err == nil && cerr != nil {
			err = fmt.Errorf("close: %w", cerr)
		}
	}()
	l := c.leader()
	// A barrier first: the leader's state then holds every entry of
	// earlier terms, as a linearizable read needs.
	if err := l.raft.Barrier(10 * time.Second).Error(); err != nil {
		return fmt.Errorf("barrier: %w", err)
	}
	d := 2 * cfg.duration
	// counts[c] is the keys client c wrote: ids c, c+64, ... (each client
	// sets only its own).
	counts := make([]int64, raftClients)
	wrote, wh, el, err := clients(d, cfg.seed, func(c int, i int64, rng *rand.Rand, val []byte) error {
		var key [benchutil.KeyLen]byte
		id := uint64(i)*raftClients + uint64(c)
		fut := l.raft.Apply(l.fsm.command(benchutil.MakeKey(key[:], id), val), 10*time.Second)
		if err := fut.Error(); err != nil {
			return err
		}
		if err, ok := fut.Response().(error); ok {
			return err
		}
		counts[c] = i + 1
		return nil
	}, cfg.valueSize)
	if err != nil {
		return fmt.Errorf("writes: %w", err)
	}
	f.add("cluster", stack, "writes/s", float64(wrote)/el)
	f.add("cluster", stack, "write p99 ms", float64(wh.ValueAtQuantile(99))/1e6)
	// A read picks one of the keys a client wrote.
	perClient := max(slices.Min(counts), 1)
	read, rh, el, err := clients(d, cfg.seed+1, func(c int, _ int64, rng *rand.Rand, _ []byte) error {
		var key [benchutil.KeyLen]byte
		id := uint64(rng.Int64N(perClient))*raftClients + uint64(c)
		k := benchutil.MakeKey(key[:], id)
		if err := linearizableRead(l); err != nil {
			return err
		}
		v, err := l.fsm.get(k)
		if err != nil {
			return fmt.Errorf("get %s: %w", k, err)
		}
		if len(v) != cfg.valueSize {
			return fmt.Errorf("get %s: %d bytes, want %d", k, len(v), cfg.valueSize)
		}
		return nil
	}, cfg.valueSize)
	if err != nil {
		return fmt.Errorf("reads: %w", err)
	}
	f.add("cluster", stack, "linearizable reads/s", float64(read)/el)
	f.add("cluster", stack, "read p99 ms", float64(rh.ValueAtQuantile(99))/1e6)
	return nil
}

// linearizableRead returns once a read of the leader's state sees every
// write acknowledged before the call: leadership confirmed by a quorum
// after the commit index was read, and that index applied (as
// raftstore.Node's linearizable reads do).
func linearizableRead(l *raftNode) error {
	ci := l.raft.CommitIndex()
	if err := l.raft.VerifyLeader().Error(); err != nil {
		return fmt.Errorf("verify leader: %w", err)
	}
	for l.fsm.applied() < ci {
		time.Sleep(50 * time.Microsecond)
	}
	return nil
}

// clients runs op on raftClients goroutines for d, each with its own
// random source and value buffer, and returns the ops done, their
// latencies, and the seconds taken.
func clients(d time.Duration, seed uint64, op func(c int, i int64, rng *rand.Rand, val []byte) error, valueSize int) (int64, *hdrhistogram.Histogram, float64, error) {
	var wg sync.WaitGroup
	var stop atomic.Bool
	var total atomic.Int64
	hists := make([]*hdrhistogram.Histogram, raftClients)
	errs := make([]error, raftClients)
	start := time.Now()
	for c := range raftClients {
		hists[c] = newHist()
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(c)))
			val := make([]byte, valueSize)
			for i := int64(0); !stop.Load(); i++ {
				for j := range val {
					val[j] = byte(rng.Uint32())
				}
				t := time.Now()
				if err := op(c, i, rng, val); err != nil {
					errs[c] = err
					stop.Store(true)
					return
				}
				hists[c].RecordValue(time.Since(t).Nanoseconds())
				total.Add(1)
			}
		}()
	}
	time.Sleep(d)
	stop.Store(true)
	wg.Wait()
	el := time.Since(start).Seconds()
	if err := errors.Join(errs...); err != nil {
		return 0, nil, 0, err
	}
	h := newHist()
	for _, x := range hists {
		h.Merge(x)
	}
	return total.Load(), h, el, nil
}

// bloomkvFSM is raftstore.FSM with the benchmark's reads.
type bloomkvFSM struct{ *raftstore.FSM }

func (bloomkvFSM) command(key, val []byte) []byte {
	var b raftstore.Batch
	b.Set(key, val)
	return b.Bytes()
}

func (f bloomkvFSM) applied() uint64                { return f.Applied() }
func (f bloomkvFSM) get(key []byte) ([]byte, error) { return f.Get(key) }

// boltFSM is the Consul-style stack's state machine: keys and values in a
// bbolt bucket, the applied index beside them in the same transaction.
// Like raftstore.FSM it applies each batch raft hands it in one
// transaction, not synced (raft replays the log after a crash), and its
// snapshot is the database file (bbolt's Tx.WriteTo).
type boltFSM struct {
	path string
	// mu guards db: Restore swaps it.
	mu  sync.RWMutex
	db  *bbolt.DB
	app atomic.Uint64
}

var (
	boltKV      = []byte("kv")
	boltMeta    = []byte("meta")
	boltApplied = []byte("applied")
)

var _ raft.BatchingFSM = (*boltFSM)(nil)

func openBoltFSM(path string) (*boltFSM, error) {
	f := &boltFSM{path: path}
	if err := f.open(); err != nil {
		return nil, err
	}
	return f, nil
}

// open opens f.path into f.db, creating the buckets, and loads the applied
// index.
func (f *boltFSM) open() error {
	db, err := bbolt.Open(f.path, 0o600, &bbolt.Options{NoSync: true})
	if err != nil {
		return fmt.Errorf("open bbolt FSM: %w", err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		if _, err := tx.CreateBucketIfNotExists(boltKV); err != nil {
			return err
		}
		m, err := tx.CreateBucketIfNotExists(boltMeta)
		if err != nil {
			return err
		}
		if v := m.Get(boltApplied); len(v) == 8 {
			f.app.Store(binary.BigEndian.Uint64(v))
		}
		return nil
	})
	if err != nil {
		db.Close()
		return fmt.Errorf("open bbolt FSM: %w", err)
	}
	f.db = db
	return nil
}

func (f *boltFSM) close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.db.Close()
}

// command is a key's length as a uvarint, the key, then the value.
func (*boltFSM) command(key, val []byte) []byte {
	cmd := binary.AppendUvarint(nil, uint64(len(key)))
	return append(append(cmd, key...), val...)
}

func (f *boltFSM) applied() uint64 { return f.app.Load() }

func (f *boltFSM) get(key []byte) ([]byte, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var v []byte
	err := f.db.View(func(tx *bbolt.Tx) error {
		v = bytes.Clone(tx.Bucket(boltKV).Get(key))
		return nil
	})
	if err == nil && v == nil {
		err = bloomkv.ErrNotFound
	}
	return v, err
}

func (f *boltFSM) Apply(l *raft.Log) interface{} { return f.ApplyBatch([]*raft.Log{l})[0] }

// ApplyBatch applies the entries' commands and the last index in one
// transaction; a malformed command's response is its error.
func (f *boltFSM) ApplyBatch(logs []*raft.Log) []interface{} {
	resp := make([]interface{}, len(logs))
	f.mu.RLock()
	defer f.mu.RUnlock()
	var last uint64
	err := f.db.Update(func(tx *bbolt.Tx) error {
		kv := tx.Bucket(boltKV)
		for i, l := range logs {
			last = l.Index
			if l.Type != raft.LogCommand || l.Index <= f.app.Load() {
				continue
			}
			n, k := binary.Uvarint(l.Data)
			if k <= 0 || n > uint64(len(l.Data)-k) || n == 0 {
				resp[i] = fmt.Errorf("malformed command at index %d", l.Index)
				continue
			}
			if err := kv.Put(l.Data[k:k+int(n)], l.Data[k+int(n):]); err != nil {
				return err
			}
		}
		var b [8]byte
		binary.BigEndian.PutUint64(b[:], last)
		return tx.Bucket(boltMeta).Put(boltApplied, b[:])
	})
	if err != nil {
		for i := range resp {
			resp[i] = fmt.Errorf("apply: %w", err)
		}
		return resp
	}
	f.app.Store(max(f.app.Load(), last))
	return resp
}

type boltSnapshot struct{ tx *bbolt.Tx }

// Snapshot begins a read transaction, which Persist writes out.
func (f *boltFSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	tx, err := f.db.Begin(false)
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	return boltSnapshot{tx}, nil
}

func (s boltSnapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := s.tx.WriteTo(sink); err != nil {
		sink.Cancel()
		return fmt.Errorf("persist: %w", err)
	}
	return sink.Close()
}

func (s boltSnapshot) Release() { s.tx.Rollback() }

// Restore writes the snapshot to a file beside the database and renames it
// over the database.
func (f *boltFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	tmp := f.path + ".restore"
	w, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	if _, err := io.Copy(w, rc); err != nil {
		w.Close()
		return fmt.Errorf("restore: %w", err)
	}
	if err := errors.Join(w.Sync(), w.Close()); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.db.Close(); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	if err := os.Rename(tmp, f.path); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	f.app.Store(0)
	return f.open()
}

// benchCompare loads r.CompareKeys keys into three replicas' state, makes
// one differ in raftDiffs keys, starts them as a raftstore.Node cluster,
// and compares the two. The state is written straight into each FSM's
// store, under its documented layout (STATE naming the store's directory,
// user keys under 'u'), before the nodes start: loading it through raft
// would take the run's time without changing what Compare ships.
func (r *raftReport) benchCompare(dir string, cfg *config, f *raftFigures) (err error) {
	var stateDirs []string
	for i := range 3 {
		fsmDir := filepath.Join(dir, fmt.Sprintf("n%d", i+1), "fsm")
		fsm, err := raftstore.OpenFSM(fsmDir, nil)
		if err != nil {
			return err
		}
		if err := fsm.Close(); err != nil {
			return err
		}
		name, err := os.ReadFile(filepath.Join(fsmDir, "STATE"))
		if err != nil {
			return err
		}
		stateDirs = append(stateDirs, filepath.Join(fsmDir, strings.TrimSpace(string(name))))
	}
	if err := loadCompareState(stateDirs, r.CompareKeys, cfg); err != nil {
		return err
	}
	copySecs, err := checkpointCopy(stateDirs[0], filepath.Join(dir, "checkpoint"), filepath.Join(dir, "copy"))
	if err != nil {
		return fmt.Errorf("checkpoint copy: %w", err)
	}

	var nodes []*raftstore.Node
	defer func() {
		for _, n := range nodes {
			if cerr := n.Close(); err == nil && cerr != nil {
				err = cerr
			}
		}
	}()
	for i := range 3 {
		// Few trailing entries: after a snapshot a joining node cannot be
		// sent the log (which lacks the state loaded beside raft), only the
		// snapshot.
		o := raftstore.Options{ID: fmt.Sprintf("n%d", i+1), Dir: filepath.Join(dir, fmt.Sprintf("n%d", i+1)),
			RaftAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", Bootstrap: i == 0, LogLevel: "error", TrailingLogs: 16}
		if i > 0 {
			o.Join = nodes[0].URL()
		}
		n, err := raftstore.Open(o)
		if err != nil {
			return err
		}
		nodes = append(nodes, n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	rep, err := nodes[0].Compare(ctx, nodes[1].URL())
	if err != nil {
		return err
	}
	el := time.Since(start).Seconds()
	if len(rep.Differences) != raftDiffs {
		return fmt.Errorf("compare found %d differences, want %d", len(rep.Differences), raftDiffs)
	}
	shipped := float64(rep.Diff.BytesAToB + rep.Diff.BytesBToA)
	keys := float64(r.CompareKeys * benchutil.KeyLen)
	f.add("compare", "bloomkv", "differences found", float64(len(rep.Differences)))
	f.add("compare", "bloomkv", "bytes shipped", shipped)
	f.add("compare", "bloomkv", "bytes of the keys", keys)
	f.add("compare", "bloomkv", "shipped / keys", shipped/keys)
	f.add("compare", "bloomkv", "seconds", el)

	catchUp, err := joinBySnapshot(ctx, nodes[0], filepath.Join(dir, "n4"), r.CompareKeys)
	if err != nil {
		return fmt.Errorf("join by snapshot: %w", err)
	}
	f.add("catchup", "bloomkv", "snapshot and join s", catchUp)
	f.add("catchup", "bloomkv", "checkpoint and copy s", copySecs)
	return nil
}

// joinBySnapshot times a fourth node's catching up with leader, whose
// state (n keys) was loaded beside raft: a snapshot of the leader, which
// truncates its log, then the node's joining until it has applied the
// leader's last index and serves the keys. The node is closed after.
func joinBySnapshot(ctx context.Context, leader *raftstore.Node, dir string, n int) (float64, error) {
	// More entries than the log keeps after a snapshot, so that the
	// snapshot truncates it.
	for i := range 64 {
		b := &raftstore.Batch{}
		b.Set([]byte(fmt.Sprintf("catch-up-%02d", i)), []byte("mark"))
		if err := leader.Apply(ctx, b); err != nil {
			return 0, err
		}
	}
	start := time.Now()
	if err := leader.Raft().Snapshot().Error(); err != nil {
		return 0, fmt.Errorf("snapshot: %w", err)
	}
	target := leader.Raft().AppliedIndex()
	node, err := raftstore.Open(raftstore.Options{ID: "n4", Dir: dir, RaftAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0",
		Join: leader.URL(), LogLevel: "error"})
	if err != nil {
		return 0, err
	}
	defer node.Close()
	for node.Raft().AppliedIndex() < target {
		if err := ctx.Err(); err != nil {
			return 0, fmt.Errorf("node n4 at applied index %d of %d: %w", node.Raft().AppliedIndex(), target, err)
		}
		time.Sleep(2 * time.Millisecond)
	}
	el := time.Since(start).Seconds()
	var key [benchutil.KeyLen]byte // (the FSM's user key, u+key, as loaded)
	benchutil.MakeKey(key[:], uint64(n-1))
	if _, err := node.Get(ctx, key[:], raftstore.Stale); err != nil {
		return 0, fmt.Errorf("node n4, caught up, lacks key %q: %w", key, err)
	}
	if st, err := node.Status(ctx); err != nil || st.Snapshot == "" {
		return 0, fmt.Errorf("node n4 did not install a snapshot (%+v, %v)", st, err)
	}
	return el, nil
}

// checkpointCopy times what a new replica costs without raft: a Checkpoint
// of the store in dir into ckpt, and a copy of its files into dst, each
// file synced, then the directory.
func checkpointCopy(dir, ckpt, dst string) (float64, error) {
	db, err := bloomkv.Open(dir, nil)
	if err != nil {
		return 0, err
	}
	start := time.Now()
	err = db.Checkpoint(ckpt)
	el := time.Since(start)
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, err
	}
	start = time.Now()
	if err := copyDir(ckpt, dst); err != nil {
		return 0, err
	}
	return (el + time.Since(start)).Seconds(), nil
}

// copyDir copies the files of src into a new directory dst, syncing each
// and then dst.
func copyDir(src, dst string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		if err := copyFileSync(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())); err != nil {
			return err
		}
	}
	d, err := os.Open(dst)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func copyFileSync(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	_, err = vfs.CopyFrom(vfs.Default, dst, in)
	return err
}

// loadCompareState writes n keys with values into the first state
// directory, copies it to the others by Checkpoint, and changes raftDiffs
// keys of the second: a third of them changed, a third deleted, a third
// added.
func loadCompareState(stateDirs []string, n int, cfg *config) error {
	db, err := bloomkv.Open(stateDirs[0], nil)
	if err != nil {
		return err
	}
	vals := newValues(cfg.valueSize, cfg.seed)
	rng := rand.New(rand.NewPCG(cfg.seed, 0x636d70))
	key := make([]byte, 1+benchutil.KeyLen)
	key[0] = 'u'
	b := db.NewBatch()
	for i := range n {
		benchutil.MakeKey(key[1:], uint64(i))
		if err := b.Set(key, vals.Next(rng)); err != nil {
			db.Close()
			return err
		}
		if b.Len() == 1000 || i == n-1 {
			if err := db.Apply(b, bloomkv.NoSync); err != nil {
				db.Close()
				return err
			}
			b = db.NewBatch()
		}
	}
	for _, d := range stateDirs[1:] {
		if err := os.RemoveAll(d); err != nil {
			db.Close()
			return err
		}
		if err := db.Checkpoint(d); err != nil {
			db.Close()
			return fmt.Errorf("checkpoint: %w", err)
		}
	}
	if err := db.Close(); err != nil {
		return err
	}
	db, err = bloomkv.Open(stateDirs[1], nil)
	if err != nil {
		return err
	}
	step := uint64(max(n/raftDiffs, 1))
	for i := range uint64(raftDiffs) {
		switch i % 3 {
		case 0:
			benchutil.MakeKey(key[1:], i*step)
			err = db.Set(key, []byte("changed"), bloomkv.NoSync)
		case 1:
			benchutil.MakeKey(key[1:], i*step)
			err = db.Delete(key, bloomkv.NoSync)
		default:
			benchutil.MakeKey(key[1:], uint64(n)+i)
			err = db.Set(key, []byte("added"), bloomkv.NoSync)
		}
		if err != nil {
			db.Close()
			return err
		}
	}
	return db.Close()
}

// median returns the median of the values, and their least and greatest.
func median(vals []float64) (med, lo, hi float64) {
	ps := make([]*float64, len(vals))
	for i := range vals {
		ps[i] = &vals[i]
	}
	m, l, h := medianRange(ps)
	if m == nil {
		return math.NaN(), math.NaN(), math.NaN()
	}
	return *m, *l, *h
}

// checkGoals computes each goal's ratio within each run, and its median.
func (r *raftReport) checkGoals() {
	ratio := func(name string, target float64, atMost bool, num, den *raftRow) {
		if num == nil || den == nil {
			return
		}
		var per []float64
		for i := range min(len(num.Values), len(den.Values)) {
			per = append(per, num.Values[i]/den.Values[i])
		}
		g := raftGoal{Name: name, Target: target, AtMost: atMost}
		g.Got, g.Min, g.Max = median(per)
		g.Met = g.Got >= target
		if atMost {
			g.Met = g.Got <= target
		}
		r.Goals = append(r.Goals, g)
	}
	one := &raftRow{Values: slices.Repeat([]float64{1}, r.Runs)}
	storeLogs := opStoreLogs + " /s"
	ratio("StoreLogs x64 entries/s, bloomkv / raft-boltdb", 3, false, r.row("log", "bloomkv", storeLogs), r.row("log", "raft-boltdb", storeLogs))
	ratio("StoreLogs x64 entries/s, bloomkv / raft-wal", 1, false, r.row("log", "bloomkv", storeLogs), r.row("log", "raft-wal", storeLogs))
	ratio("bloomkv disk after truncation / live entries' bytes", 1.2, true, r.row("disk", "bloomkv", "after truncation / live bytes"), one)
	ratio("cluster writes/s, bloomkv / consul-style", 2, false, r.row("cluster", "bloomkv", "writes/s"), r.row("cluster", "consul-style", "writes/s"))
	ratio("cluster write p99, bloomkv / consul-style", 1, true, r.row("cluster", "bloomkv", "write p99 ms"), r.row("cluster", "consul-style", "write p99 ms"))
	ratio("Compare bytes / shipping the keys", 0.01, true, r.row("compare", "bloomkv", "shipped / keys"), one)
	ratio("join by snapshot / Checkpoint and copy, seconds", 2, true, r.row("catchup", "bloomkv", "snapshot and join s"), r.row("catchup", "bloomkv", "checkpoint and copy s"))
}

// fig formats a row's median, with its range over several runs.
func (r *raftReport) fig(row *raftRow, format func(float64) string) string {
	if row == nil {
		return "-"
	}
	m, lo, hi := median(row.Values)
	if len(row.Values) < 2 {
		return format(m)
	}
	return fmt.Sprintf("%s (%s–%s)", format(m), format(lo), format(hi))
}

func rate(v float64) string { return commas(v) }

func micros(v float64) string {
	if v < 10 {
		return fmt.Sprintf("%.2f", v)
	}
	return commas(v)
}

func byteCount(v float64) string { return humanize.Bytes(uint64(v)) }

func (r *raftReport) table() string {
	var b strings.Builder
	runs := "one run"
	if r.Runs > 1 {
		runs = fmt.Sprintf("median (min–max) of %d runs", r.Runs)
	}
	fmt.Fprintf(&b, "\nraft log stores: %s entries of %d random bytes, StoreLogs in batches of %d, every write synced; %s\n",
		commas(float64(r.Entries)), r.DataBytes, raftBatch, runs)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "operation\tmeasure")
	for _, s := range raftStores {
		fmt.Fprintf(tw, "\t%s", s)
	}
	fmt.Fprint(tw, "\t\n")
	for _, op := range raftOps {
		measures := []string{op + " /s", op + " p99 µs"}
		units := []string{"entries/s", "p99 µs"}
		if op == opReclaim {
			measures, units = []string{op + " s"}, []string{"seconds"}
		} else if op != opStoreLogs && op != opDelete && op != opStoreLog && op != opGetLog {
			units[0] = "ops/s"
		}
		for i, m := range measures {
			fmt.Fprintf(tw, "%s\t%s", op, units[i])
			for _, s := range raftStores {
				format := rate
				if i == 1 {
					format = micros
				}
				if op == opReclaim {
					format = func(v float64) string { return fmt.Sprintf("%.2f", v) }
				}
				fmt.Fprintf(tw, "\t%s", r.fig(r.row("log", s, m), format))
			}
			fmt.Fprint(tw, "\t\n")
		}
	}
	for _, m := range []string{fmt.Sprintf("after %s entries", commas(float64(r.Entries))), fmt.Sprintf("after truncation to %s", commas(float64(r.Keep))), "after truncation / live bytes"} {
		fmt.Fprintf(tw, "disk\t%s", m)
		for _, s := range raftStores {
			format := byteCount
			if strings.HasSuffix(m, "live bytes") {
				format = func(v float64) string { return fmt.Sprintf("%.2f", v) }
			}
			fmt.Fprintf(tw, "\t%s", r.fig(r.row("disk", s, m), format))
		}
		fmt.Fprint(tw, "\t\n")
	}
	tw.Flush()
	fmt.Fprintf(&b, "(DeleteRange: prefixes of %d entries, down to the last %s; live bytes: %s, each kept entry's index, term, type and data; "+
		"reclaim: bloomkv compacts the log's range, raft-boltdb keeps its file, raft-wal has dropped its segments)\n",
		raftTruncateStep, commas(float64(r.Keep)), humanize.Bytes(uint64(r.liveBytes())))

	fmt.Fprintf(&b, "\nraft cluster: 3 nodes on loopback TCP in one process, raft's default configuration, %d clients on the leader, %d-byte values; %s\n",
		r.Clients, r.DataBytes, runs)
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "stack\twrites/s\twrite p99 ms\tlinearizable reads/s\tread p99 ms\t\n")
	ms := func(v float64) string { return fmt.Sprintf("%.2f", v) }
	for _, s := range raftStacks {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t\n", s, r.fig(r.row("cluster", s, "writes/s"), rate), r.fig(r.row("cluster", s, "write p99 ms"), ms),
			r.fig(r.row("cluster", s, "linearizable reads/s"), rate), r.fig(r.row("cluster", s, "read p99 ms"), ms))
	}
	tw.Flush()
	b.WriteString("(bloomkv: raftstore.LogStore and raftstore.FSM; consul-style: raft-boltdb/v2 behind raft's LogCache of 512 and a bbolt FSM, unsynced, a transaction per batch)\n")

	fmt.Fprintf(&b, "\nraft compare: raftstore.Node.Compare of two replicas of %s keys differing in %d; %s\n", commas(float64(r.CompareKeys)), raftDiffs, runs)
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "differences found\tbytes shipped\tbytes of the keys\tshipped / keys\tseconds\t\n")
	fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t\n", r.fig(r.row("compare", "bloomkv", "differences found"), rate),
		r.fig(r.row("compare", "bloomkv", "bytes shipped"), byteCount), r.fig(r.row("compare", "bloomkv", "bytes of the keys"), byteCount),
		r.fig(r.row("compare", "bloomkv", "shipped / keys"), func(v float64) string { return fmt.Sprintf("%.6f", v) }),
		r.fig(r.row("compare", "bloomkv", "seconds"), ms))
	tw.Flush()

	fmt.Fprintf(&b, "\nraft catch-up: a node joins a cluster whose leader holds %s keys, by a snapshot (taken at the join: the leader's log keeps 16 entries); "+
		"against a Checkpoint of the same store and a copy of its files, each synced; %s\n", commas(float64(r.CompareKeys)), runs)
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "snapshot and join s\tcheckpoint and copy s\t\n")
	fmt.Fprintf(tw, "%s\t%s\t\n", r.fig(r.row("catchup", "bloomkv", "snapshot and join s"), ms), r.fig(r.row("catchup", "bloomkv", "checkpoint and copy s"), ms))
	tw.Flush()

	b.WriteString("raft goals:\n")
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, g := range r.Goals {
		op, state := goalMark(g.AtMost, g.Met)
		got := fmt.Sprintf("%.3f", g.Got)
		if r.Runs > 1 {
			got += fmt.Sprintf(" (%.3f–%.3f)", g.Min, g.Max)
		}
		fmt.Fprintf(tw, "  %s\t%s %.2f\t%s\t%s\n", g.Name, op, g.Target, got, state)
	}
	tw.Flush()
	return b.String()
}
