// Package raftstore replicates bloomkv with github.com/hashicorp/raft: a
// raft log and stable store on a bloomkv DB (LogStore), a state machine
// whose commands are batches and whose snapshots are sstables (FSM), and a
// replicated store with an HTTP API that a program embeds or runs (Node).
package raftstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/bloomkv/bloomkv"
	"github.com/hashicorp/raft"
)

// ErrCorruption is wrapped by the errors reporting a stored log record, a
// command or a snapshot stream that fails its format checks. It wraps
// bloomkv.ErrCorruption, so errors.Is matches either.
var ErrCorruption = fmt.Errorf("raftstore: corrupt data: %w", bloomkv.ErrCorruption)

// errNotFound is StableStore's error for a missing key: raft compares the
// error's text with "not found" to tell a fresh store from a failed one.
var errNotFound = errors.New("not found")

// Key layout of a LogStore's DB: log entries under prefixLog followed by the
// index, big-endian, so that keys sort by index; stable-store keys under
// prefixStable.
const (
	prefixLog    = 'l'
	prefixStable = 's'
)

// logRecordVersion is the first byte of every encoded log record.
const logRecordVersion = 1

// LogStore is a raft.LogStore and raft.StableStore on a bloomkv DB that it
// owns. Writes are synced before they return. It is safe for concurrent use.
type LogStore struct {
	db *bloomkv.DB

	// writeMu serializes the log's writes with the bounds they change:
	// raft truncates the log from its snapshot goroutine while appending
	// from its main one.
	writeMu sync.Mutex
	// mu guards first and last, the indexes of the first and last stored
	// entries (0 and 0 when empty), kept so that FirstIndex and LastIndex
	// read no table.
	mu          sync.Mutex
	first, last uint64
	// batchBytes bounds the batch of one write of StoreLogs
	// (storeLogsBytes).
	batchBytes int
}

var (
	_ raft.LogStore    = (*LogStore)(nil)
	_ raft.StableStore = (*LogStore)(nil)
)

// OpenLogStore opens (creating if needed) the log store in dir, which it
// must have to itself. opts may be nil for bloomkv's defaults.
func OpenLogStore(dir string, opts *bloomkv.Options) (*LogStore, error) {
	db, err := bloomkv.Open(dir, opts)
	if err != nil {
		return nil, fmt.Errorf("raftstore: open log store %s: %w", dir, err)
	}
	s := &LogStore{db: db, batchBytes: storeLogsBytes}
	if err := s.loadBounds(); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// DB returns the store's bloomkv DB, for metrics and manual compaction.
func (s *LogStore) DB() *bloomkv.DB { return s.db }

// Close closes the store's DB.
func (s *LogStore) Close() error { return s.db.Close() }

func logKey(index uint64) []byte {
	var k [9]byte
	k[0] = prefixLog
	binary.BigEndian.PutUint64(k[1:], index)
	return k[:]
}

func stableKey(key []byte) []byte {
	return append([]byte{prefixStable}, key...)
}

// loadBounds reads the first and last stored indexes into s.first and s.last.
func (s *LogStore) loadBounds() error {
	it, err := s.db.NewIter(&bloomkv.IterOptions{LowerBound: []byte{prefixLog}, UpperBound: []byte{prefixLog + 1}})
	if err != nil {
		return fmt.Errorf("raftstore: scan log bounds: %w", err)
	}
	var first, last uint64
	if it.First() {
		first = binary.BigEndian.Uint64(it.Key()[1:])
		if it.Last() {
			last = binary.BigEndian.Uint64(it.Key()[1:])
		}
	}
	if err := it.Error(); err != nil {
		it.Close()
		return fmt.Errorf("raftstore: scan log bounds: %w", err)
	}
	if err := it.Close(); err != nil {
		return fmt.Errorf("raftstore: scan log bounds: %w", err)
	}
	s.mu.Lock()
	s.first, s.last = first, last
	s.mu.Unlock()
	return nil
}

// FirstIndex returns the index of the first stored entry, 0 if none.
func (s *LogStore) FirstIndex() (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.first, nil
}

// LastIndex returns the index of the last stored entry, 0 if none.
func (s *LogStore) LastIndex() (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last, nil
}

// GetLog reads the entry at index into log; raft.ErrLogNotFound if there is
// none.
func (s *LogStore) GetLog(index uint64, log *raft.Log) error {
	v, err := s.db.Get(logKey(index))
	if errors.Is(err, bloomkv.ErrNotFound) {
		return raft.ErrLogNotFound
	}
	if err != nil {
		return fmt.Errorf("raftstore: get log %d: %w", index, err)
	}
	if err := decodeLog(v, log); err != nil {
		return fmt.Errorf("raftstore: log %d: %w", index, err)
	}
	if log.Index != index {
		return fmt.Errorf("raftstore: log %d: record holds index %d: %w", index, log.Index, ErrCorruption)
	}
	return nil
}

// StoreLog stores one entry, synced.
func (s *LogStore) StoreLog(log *raft.Log) error {
	return s.StoreLogs([]*raft.Log{log})
}

// storeLogsBytes bounds the batch of one write of StoreLogs: raft hands it
// up to MaxAppendEntries entries at once, which together may pass
// bloomkv.MaxBatchSize though each fits a value.
const storeLogsBytes = 256 << 20

// A batch of storeLogsBytes and one more entry fits bloomkv.MaxBatchSize.
const _ = uint(bloomkv.MaxBatchSize - storeLogsBytes - 2*bloomkv.MaxValueSize)

// StoreLogs stores entries, synced: in one batch, or in several written in
// turn when together they pass storeLogsBytes (an error may then leave the
// first of them stored, as raft allows). An entry is at most about
// bloomkv.MaxValueSize bytes.
func (s *LogStore) StoreLogs(logs []*raft.Log) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	var buf []byte
	for len(logs) > 0 {
		b := s.db.NewBatch()
		lo, hi := logs[0].Index, logs[0].Index
		n := logsInBatch(logs, s.batchBytes)
		for _, l := range logs[:n] {
			buf = appendLog(buf[:0], l)
			if err := b.Set(logKey(l.Index), buf); err != nil {
				return fmt.Errorf("raftstore: store log %d: %w", l.Index, err)
			}
			lo, hi = min(lo, l.Index), max(hi, l.Index)
		}
		if err := s.db.Apply(b, bloomkv.Sync); err != nil {
			return fmt.Errorf("raftstore: store logs %d-%d: %w", lo, hi, err)
		}
		s.mu.Lock()
		if s.first == 0 || lo < s.first {
			s.first = lo
		}
		s.last = max(s.last, hi)
		s.mu.Unlock()
		logs = logs[n:]
	}
	return nil
}

// logsInBatch returns how many of logs, at least one, one batch of
// StoreLogs holds: as many as keep their data within bound bytes.
func logsInBatch(logs []*raft.Log, bound int) int {
	size := 0
	for i, l := range logs {
		size += len(l.Data) + len(l.Extensions) + 64 // the record's other fields, the key
		if i > 0 && size > bound {
			return i
		}
	}
	return len(logs)
}

// DeleteRange removes the entries from min to max, both included, with one
// range deletion, synced; compaction reclaims their space.
func (s *LogStore) DeleteRange(min, max uint64) error {
	if min > max {
		return nil
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	end := logKey(max + 1)
	if max == ^uint64(0) {
		end = []byte{prefixLog + 1}
	}
	if err := s.db.DeleteRange(logKey(min), end, bloomkv.Sync); err != nil {
		return fmt.Errorf("raftstore: delete logs %d-%d: %w", min, max, err)
	}
	s.mu.Lock()
	first, last := s.first, s.last
	s.mu.Unlock()
	covers := func(i uint64) bool { return i >= min && i <= max }
	if !covers(first) && !covers(last) {
		return nil
	}
	// raft keeps its log contiguous, so the new bounds follow from the old
	// ones: checked with a point read of the entry that becomes first or
	// last, and found by a scan only where that entry is missing (a scan
	// walks every entry the range deletion covers until compaction drops
	// them).
	var edge uint64
	switch {
	case covers(first) && covers(last):
		first, last = 0, 0
	case covers(first):
		first, edge = max+1, max+1
	default:
		last, edge = min-1, min-1
	}
	if edge != 0 {
		if _, err := s.db.Get(logKey(edge)); errors.Is(err, bloomkv.ErrNotFound) {
			return s.loadBounds()
		} else if err != nil {
			return fmt.Errorf("raftstore: read log %d: %w", edge, err)
		}
	}
	s.mu.Lock()
	s.first, s.last = first, last
	s.mu.Unlock()
	return nil
}

// Set stores a stable-store value, synced.
func (s *LogStore) Set(key, val []byte) error {
	if err := s.db.Set(stableKey(key), val, bloomkv.Sync); err != nil {
		return fmt.Errorf("raftstore: set %q: %w", key, err)
	}
	return nil
}

// Get returns a stable-store value; for a missing key, an error whose text
// is "not found", which raft takes as a fresh store.
func (s *LogStore) Get(key []byte) ([]byte, error) {
	v, err := s.db.Get(stableKey(key))
	if errors.Is(err, bloomkv.ErrNotFound) {
		return nil, errNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("raftstore: get %q: %w", key, err)
	}
	return v, nil
}

// SetUint64 stores a stable-store integer, synced.
func (s *LogStore) SetUint64(key []byte, val uint64) error {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], val)
	return s.Set(key, b[:])
}

// GetUint64 returns a stable-store integer; for a missing key 0 and an
// error whose text is "not found", as Get.
func (s *LogStore) GetUint64(key []byte) (uint64, error) {
	v, err := s.Get(key)
	if err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("raftstore: stable key %q holds %d bytes, not a uint64: %w", key, len(v), ErrCorruption)
	}
	return binary.BigEndian.Uint64(v), nil
}

// appendLog appends l's record to dst: the version byte, then as uvarints
// the index, the term and the type, the data and the extensions each as a
// uvarint length and bytes, and the appended-at time as a zigzag varint of
// Unix nanoseconds, 0 standing for the zero time.
func appendLog(dst []byte, l *raft.Log) []byte {
	dst = append(dst, logRecordVersion)
	dst = binary.AppendUvarint(dst, l.Index)
	dst = binary.AppendUvarint(dst, l.Term)
	dst = binary.AppendUvarint(dst, uint64(l.Type))
	dst = binary.AppendUvarint(dst, uint64(len(l.Data)))
	dst = append(dst, l.Data...)
	dst = binary.AppendUvarint(dst, uint64(len(l.Extensions)))
	dst = append(dst, l.Extensions...)
	var at int64
	if !l.AppendedAt.IsZero() {
		at = l.AppendedAt.UnixNano()
	}
	return binary.AppendVarint(dst, at)
}

// decoder reads a record's fields in order; the first failure sticks.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("truncated or malformed %s: %w", what, ErrCorruption)
	}
}

func (d *decoder) uvarint(what string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail(what)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint(what string) int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail(what)
		return 0
	}
	d.b = d.b[n:]
	return v
}

// bytes returns a copy of a length-prefixed field, nil when empty.
func (d *decoder) bytes(what string) []byte {
	n := d.uvarint(what + " length")
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.fail(what)
		return nil
	}
	var v []byte
	if n > 0 {
		v = append([]byte(nil), d.b[:n]...)
	}
	d.b = d.b[n:]
	return v
}

// decodeLog decodes a record of appendLog into l.
func decodeLog(rec []byte, l *raft.Log) error {
	if len(rec) == 0 {
		return fmt.Errorf("empty log record: %w", ErrCorruption)
	}
	if rec[0] != logRecordVersion {
		return fmt.Errorf("log record version %d, want %d: %w", rec[0], logRecordVersion, ErrCorruption)
	}
	d := decoder{b: rec[1:]}
	l.Index = d.uvarint("index")
	l.Term = d.uvarint("term")
	typ := d.uvarint("type")
	l.Data = d.bytes("data")
	l.Extensions = d.bytes("extensions")
	at := d.varint("appended-at")
	if d.err != nil {
		return d.err
	}
	if typ > 255 {
		return fmt.Errorf("log type %d out of range: %w", typ, ErrCorruption)
	}
	if len(d.b) != 0 {
		return fmt.Errorf("%d bytes after the log record: %w", len(d.b), ErrCorruption)
	}
	l.Type = raft.LogType(typ)
	l.AppendedAt = time.Time{}
	if at != 0 {
		l.AppendedAt = time.Unix(0, at)
	}
	return nil
}
