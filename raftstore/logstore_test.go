package raftstore

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/bloomkv/bloomkv"
	"github.com/hashicorp/raft"
)

func openTestLogStore(t *testing.T, dir string) *LogStore {
	t.Helper()
	s, err := OpenLogStore(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func testLog(i uint64) *raft.Log {
	return &raft.Log{
		Index:      i,
		Term:       i/10 + 1,
		Type:       raft.LogCommand,
		Data:       []byte(fmt.Sprintf("data-%d", i)),
		Extensions: []byte{byte(i)},
		AppendedAt: time.Unix(1700000000, int64(i)),
	}
}

func storeRange(t *testing.T, s *LogStore, lo, hi uint64) {
	t.Helper()
	var logs []*raft.Log
	for i := lo; i <= hi; i++ {
		logs = append(logs, testLog(i))
	}
	if err := s.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
}

func checkBounds(t *testing.T, s *LogStore, first, last uint64) {
	t.Helper()
	f, err := s.FirstIndex()
	if err != nil {
		t.Fatal(err)
	}
	l, err := s.LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	if f != first || l != last {
		t.Fatalf("bounds %d-%d, want %d-%d", f, l, first, last)
	}
}

func TestLogStoreEmpty(t *testing.T) {
	s := openTestLogStore(t, t.TempDir())
	defer s.Close()
	checkBounds(t, s, 0, 0)
	var l raft.Log
	if err := s.GetLog(1, &l); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("GetLog on empty store: %v, want ErrLogNotFound", err)
	}
	if _, err := s.Get([]byte("k")); err == nil || err.Error() != "not found" {
		t.Fatalf("Get of missing key: %v, want \"not found\"", err)
	}
	v, err := s.GetUint64([]byte("CurrentTerm"))
	if v != 0 || err == nil || err.Error() != "not found" {
		t.Fatalf("GetUint64 of missing key: %d, %v", v, err)
	}
}

func TestLogStoreRoundTripAndRestart(t *testing.T) {
	dir := t.TempDir()
	s := openTestLogStore(t, dir)
	storeRange(t, s, 1, 100)
	if err := s.StoreLog(testLog(101)); err != nil {
		t.Fatal(err)
	}
	zero := &raft.Log{Index: 102, Term: 9, Type: raft.LogNoop}
	if err := s.StoreLog(zero); err != nil {
		t.Fatal(err)
	}
	checkBounds(t, s, 1, 102)
	if err := s.SetUint64([]byte("CurrentTerm"), 7); err != nil {
		t.Fatal(err)
	}
	if err := s.Set([]byte("LastVoteCand"), []byte("n2")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openTestLogStore(t, dir)
	defer s.Close()
	checkBounds(t, s, 1, 102)
	for i := uint64(1); i <= 101; i++ {
		var got raft.Log
		if err := s.GetLog(i, &got); err != nil {
			t.Fatal(err)
		}
		want := testLog(i)
		if got.Index != want.Index || got.Term != want.Term || got.Type != want.Type ||
			!bytes.Equal(got.Data, want.Data) || !bytes.Equal(got.Extensions, want.Extensions) ||
			!got.AppendedAt.Equal(want.AppendedAt) {
			t.Fatalf("log %d: got %+v, want %+v", i, got, want)
		}
	}
	var got raft.Log
	if err := s.GetLog(102, &got); err != nil {
		t.Fatal(err)
	}
	if got.Term != 9 || got.Type != raft.LogNoop || got.Data != nil || !got.AppendedAt.IsZero() {
		t.Fatalf("log 102: %+v", got)
	}
	if v, err := s.GetUint64([]byte("CurrentTerm")); err != nil || v != 7 {
		t.Fatalf("CurrentTerm %d, %v", v, err)
	}
	if v, err := s.Get([]byte("LastVoteCand")); err != nil || string(v) != "n2" {
		t.Fatalf("LastVoteCand %q, %v", v, err)
	}
}

func TestLogStoreDeleteRange(t *testing.T) {
	dir := t.TempDir()
	s := openTestLogStore(t, dir)
	storeRange(t, s, 1, 50)
	// A prefix, both ends included.
	if err := s.DeleteRange(1, 10); err != nil {
		t.Fatal(err)
	}
	checkBounds(t, s, 11, 50)
	var l raft.Log
	if err := s.GetLog(10, &l); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("GetLog(10) after delete: %v", err)
	}
	if err := s.GetLog(11, &l); err != nil {
		t.Fatal(err)
	}
	// A suffix, as raft removes conflicting entries.
	if err := s.DeleteRange(45, 50); err != nil {
		t.Fatal(err)
	}
	checkBounds(t, s, 11, 44)
	storeRange(t, s, 45, 46)
	checkBounds(t, s, 11, 46)
	// Everything.
	if err := s.DeleteRange(0, ^uint64(0)); err != nil {
		t.Fatal(err)
	}
	checkBounds(t, s, 0, 0)
	// Stable keys survive the log's deletion.
	if err := s.SetUint64([]byte("k"), 3); err != nil {
		t.Fatal(err)
	}
	storeRange(t, s, 60, 61)
	if err := s.DeleteRange(0, ^uint64(0)); err != nil {
		t.Fatal(err)
	}
	if v, err := s.GetUint64([]byte("k")); err != nil || v != 3 {
		t.Fatalf("stable key after log deletion: %d, %v", v, err)
	}
	s.Close()
	s = openTestLogStore(t, dir)
	defer s.Close()
	checkBounds(t, s, 0, 0)
}

// The log's disk shrinks after a truncation: the range deletion lets
// compaction drop the deleted entries' tables.
func TestLogStoreTruncationReclaimsDisk(t *testing.T) {
	s := openTestLogStore(t, t.TempDir())
	defer s.Close()
	const n, keep = 20000, 500
	rng := rand.New(rand.NewPCG(1, 2))
	for lo := uint64(1); lo <= n; lo += 500 {
		var logs []*raft.Log
		for i := lo; i < lo+500; i++ {
			val := make([]byte, 200)
			for j := range val {
				val[j] = byte(rng.Uint32())
			}
			logs = append(logs, &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: val})
		}
		if err := s.StoreLogs(logs); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DB().Flush(); err != nil {
		t.Fatal(err)
	}
	before := tableBytes(s.DB())
	if before < n*200/2 {
		t.Fatalf("tables hold %d bytes for %d entries of 200 bytes", before, n)
	}
	if err := s.DeleteRange(1, n-keep); err != nil {
		t.Fatal(err)
	}
	if err := s.DB().Compact([]byte{prefixLog}, []byte{prefixLog + 1}); err != nil {
		t.Fatal(err)
	}
	after := tableBytes(s.DB())
	t.Logf("tables: %d bytes before truncation, %d after keeping %d of %d entries", before, after, keep, n)
	if after > before/10 {
		t.Fatalf("tables hold %d bytes after truncation to %d of %d entries, %d before", after, keep, n, before)
	}
	checkBounds(t, s, n-keep+1, n)
}

func tableBytes(db *bloomkv.DB) uint64 {
	var sum uint64
	for _, l := range db.Metrics().Levels {
		sum += l.Bytes
	}
	return sum
}

func TestLogRecordMalformed(t *testing.T) {
	good := appendLog(nil, testLog(5))
	var l raft.Log
	if err := decodeLog(good, &l); err != nil {
		t.Fatal(err)
	}
	cases := map[string][]byte{
		"empty":         nil,
		"version":       append([]byte{9}, good[1:]...),
		"truncated":     good[:len(good)-3],
		"trailing":      append(append([]byte(nil), good...), 0),
		"huge length":   {logRecordVersion, 1, 1, 0, 0xff, 0xff, 0xff, 0xff, 0x0f},
		"only version":  {logRecordVersion},
		"type overflow": {logRecordVersion, 1, 1, 0x80, 0x04, 0, 0, 0},
	}
	for name, rec := range cases {
		if err := decodeLog(rec, &l); !errors.Is(err, ErrCorruption) || !errors.Is(err, bloomkv.ErrCorruption) {
			t.Errorf("%s: %v, want ErrCorruption", name, err)
		}
	}
	// A stored record that fails its checks is an error naming the index.
	s := openTestLogStore(t, t.TempDir())
	defer s.Close()
	if err := s.DB().Set(logKey(3), []byte{logRecordVersion, 3}, bloomkv.Sync); err != nil {
		t.Fatal(err)
	}
	if err := s.GetLog(3, &l); !errors.Is(err, ErrCorruption) {
		t.Fatalf("GetLog of a malformed record: %v", err)
	}
	// A record stored under another index's key.
	if err := s.DB().Set(logKey(4), appendLog(nil, testLog(8)), bloomkv.Sync); err != nil {
		t.Fatal(err)
	}
	if err := s.GetLog(4, &l); !errors.Is(err, ErrCorruption) {
		t.Fatalf("GetLog of a misplaced record: %v", err)
	}
}

// TestLogStoreDeleteRangeAcrossAGap: bounds after a deletion are found by
// a scan where the entry next to the deleted range is missing, as in a log
// with a gap, and match those a reopened store reads.
func TestLogStoreDeleteRangeAcrossAGap(t *testing.T) {
	dir := t.TempDir()
	s := openTestLogStore(t, dir)
	storeRange(t, s, 1, 10)
	storeRange(t, s, 20, 30)
	storeRange(t, s, 40, 45)
	if err := s.DeleteRange(1, 10); err != nil {
		t.Fatal(err)
	}
	checkBounds(t, s, 20, 45)
	if err := s.DeleteRange(41, 45); err != nil {
		t.Fatal(err)
	}
	checkBounds(t, s, 20, 40)
	if err := s.DeleteRange(31, 40); err != nil {
		t.Fatal(err)
	}
	checkBounds(t, s, 20, 30)
	s.Close()
	s = openTestLogStore(t, dir)
	defer s.Close()
	checkBounds(t, s, 20, 30)
}

// TestLogStoreRecentFromMemtable: GetLog of an entry still in the memtable
// reads no table: no filter probe, no block; an older, flushed one does.
func TestLogStoreRecentFromMemtable(t *testing.T) {
	s := openTestLogStore(t, t.TempDir())
	defer s.Close()
	storeRange(t, s, 1, 1000)
	if err := s.DB().Flush(); err != nil {
		t.Fatal(err)
	}
	storeRange(t, s, 1001, 1064)
	reads := func() uint64 {
		m := s.DB().Metrics()
		return m.FilterProbes + m.BlockCache.Hits + m.BlockCache.Misses
	}
	var l raft.Log
	before := reads()
	for i := uint64(1001); i <= 1064; i++ {
		if err := s.GetLog(i, &l); err != nil || l.Index != i {
			t.Fatalf("GetLog(%d) = %d, %v", i, l.Index, err)
		}
	}
	if got := reads() - before; got != 0 {
		t.Fatalf("GetLog of 64 entries in the memtable made %d filter probes and block reads", got)
	}
	if err := s.GetLog(500, &l); err != nil || l.Index != 500 {
		t.Fatalf("GetLog(500) = %d, %v", l.Index, err)
	}
	if reads() == before {
		t.Fatal("GetLog of a flushed entry read no table: the check above would pass vacuously")
	}
}
