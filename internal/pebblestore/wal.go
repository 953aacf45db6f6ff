package pebblestore

// Replaying the store's WALs into memtables, flushable ingests included.

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/batchrepr"
	"github.com/bloomkv/bloomkv/internal/manifest"
	"github.com/bloomkv/bloomkv/internal/rangedel"
	"github.com/bloomkv/bloomkv/internal/record"
)

// readWALs replays the WALs numbered from the manifest's log number on into
// memory, in order. Torn tails end a log, as in recovery.
func (s *Store) readWALs(names []os.DirEntry) error {
	type wal struct {
		num  uint64
		name string
	}
	var wals []wal
	for _, n := range names {
		num, ok := strings.CutSuffix(n.Name(), ".log")
		if !ok {
			continue
		}
		if v, err := strconv.ParseUint(num, 10, 64); err == nil && v >= s.LogNumber {
			wals = append(wals, wal{v, n.Name()})
		}
	}
	slices.SortFunc(wals, func(a, b wal) int { return cmp.Compare(a.num, b.num) })
	for _, w := range wals {
		s.WALs = append(s.WALs, w.name)
		if err := s.replay(filepath.Join(s.Dir, w.name), w.num); err != nil {
			return err
		}
	}
	slices.SortFunc(s.mem, func(a, b memEntry) int { return base.CompareInternal(a.key, b.key) })
	return nil
}

// replay reads one WAL's batches into memory.
func (s *Store) replay(name string, num uint64) error {
	f, err := os.Open(name)
	if err != nil {
		return fmt.Errorf("pebblestore: WAL: %w", err)
	}
	defer f.Close()
	r, err := record.NewReaderOptions(f, name, record.Options{Pebble: true, LogNum: num})
	if err != nil {
		return err
	}
	for {
		rec, err := r.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		var (
			bad     error
			ingests []uint64 // the file numbers of a flushable ingest
			excise  *rangedel.Tombstone
		)
		first, _, err := batchrepr.DecodePebble(rec, func(seq base.SeqNum, e batchrepr.Entry) {
			s.LastSeq = max(s.LastSeq, seq)
			switch e.Kind {
			case base.KindSet, base.KindDelete, kindMerge, kindSingleDelete, kindDeleteSized:
				s.mem = append(s.mem, memEntry{base.MakeInternalKey(bytes.Clone(e.Key), seq, e.Kind), bytes.Clone(e.Value)})
			case base.KindRangeDelete:
				s.memDels = append(s.memDels, rangedel.Tombstone{Start: bytes.Clone(e.Key), End: bytes.Clone(e.Value), SeqNum: seq})
				s.walDels++
			case kindIngestSST:
				n, w := binary.Uvarint(e.Key)
				if w <= 0 || w != len(e.Key) {
					bad = base.CorruptionErrorf("flushable ingest names file %x, not a file number", e.Key)
				}
				ingests = append(ingests, n)
			case kindExcise:
				if excise != nil {
					bad = base.CorruptionErrorf("a flushable ingest with two excises")
				}
				excise = &rangedel.Tombstone{Start: bytes.Clone(e.Key), End: bytes.Clone(e.Value)}
			}
			// Range keys and log data do not change point reads.
		})
		if err == nil {
			err = bad
		}
		if err == nil && (ingests != nil || excise != nil) {
			err = s.addFlushable(first, ingests, excise)
		}
		if err != nil {
			return fmt.Errorf("pebblestore: %s: record at offset %d: %w", name, r.Offset(), err)
		}
	}
}

// addFlushable records a flushable ingest whose batch's sequence numbers
// start at first: as Pebble assigns them, the excise (a deletion of every
// older key in its span) takes the first and the tables the next ones, in
// the batch's order; without an excise the tables take them from first.
func (s *Store) addFlushable(first base.SeqNum, files []uint64, excise *rangedel.Tombstone) error {
	if len(files) == 0 {
		return base.CorruptionErrorf("an excise with no ingested table")
	}
	seq := first
	if excise != nil {
		excise.SeqNum = seq
		s.memDels = append(s.memDels, *excise)
		seq++
	}
	for _, n := range files {
		path := filepath.Join(s.Dir, fmt.Sprintf("%06d.sst", n))
		st, err := os.Stat(path)
		if err != nil {
			return fmt.Errorf("flushable ingest of table %06d: %w", n, err)
		}
		m := &manifest.FileMetadata{FileNum: n, Size: uint64(st.Size()), SmallestSeq: seq, LargestSeq: seq}
		s.Flushable = append(s.Flushable, Table{Level: -1, Meta: m, Path: path})
		seq++
	}
	return nil
}
