// Package batchrepr decodes the encoding of a write batch, which is also a
// WAL record: LevelDB's write batch, with RocksDB's range-deletion kind.
//
//	seq (uint64 LE) | count (uint32 LE) | count × (kind byte | varint-prefixed key | varint-prefixed value)
//
// A deletion has no value; a set's value is its value; a range deletion's is
// the exclusive end of its range. The store and the inspection tool both read
// batches through it.
package batchrepr

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/bloomkv/bloomkv/internal/base"
)

// HeaderLen is the length of the header: sequence number and count.
const HeaderLen = 12

// Entry is one decoded write.
type Entry struct {
	Kind       base.Kind
	Key, Value []byte
}

// Decode checks an encoded batch (a WAL record) and calls fn, when not nil,
// for each write with its sequence number; it returns the batch's first
// sequence number and its count. Errors wrap base.ErrCorruption and name the
// offset within the record.
func Decode(data []byte, fn func(seq base.SeqNum, e Entry)) (base.SeqNum, uint32, error) {
	return decode(data, fn, false)
}

// kindLogData is Pebble's log data: written to the WAL only, it takes no
// sequence number and is not counted in the header.
const kindLogData base.Kind = 3

// pebbleKinds are the kinds of entry Pebble's batches hold, each with whether
// a value follows its key: DEL, SET, MERGE, LOGDATA, SINGLEDEL, RANGEDEL,
// RANGEKEYDEL, RANGEKEYUNSET, RANGEKEYSET, INGESTSST, DELSIZED, EXCISE.
var pebbleKinds = map[base.Kind]bool{
	0: false, 1: true, 2: true, 3: false, 7: false, 15: true,
	19: true, 20: true, 21: true, 22: false, 23: true, 24: true,
}

// DecodePebble is Decode for the batches Pebble writes to its WAL, with
// Pebble's kinds of entry besides bloomkv's: MERGE, SINGLEDEL, range keys
// (their values as stored), DELSIZED, log data (passed to fn with the
// sequence number of the entry after it, as it takes none), INGESTSST and
// EXCISE. The count is of the entries that take sequence numbers.
func DecodePebble(data []byte, fn func(seq base.SeqNum, e Entry)) (base.SeqNum, uint32, error) {
	return decode(data, fn, true)
}

func decode(data []byte, fn func(seq base.SeqNum, e Entry), pebble bool) (base.SeqNum, uint32, error) {
	if len(data) < HeaderLen {
		return 0, 0, base.CorruptionErrorf("batch of %d bytes is shorter than its header", len(data))
	}
	seq := base.SeqNum(binary.LittleEndian.Uint64(data))
	count := binary.LittleEndian.Uint32(data[8:])
	if seq > base.SeqNumMax || uint64(seq)+uint64(count) > uint64(base.SeqNumMax)+1 {
		return 0, 0, base.CorruptionErrorf("batch sequence numbers %d+%d out of range", seq, count)
	}
	off := HeaderLen
	for i := uint32(0); i < count || (pebble && off < len(data)); {
		if off >= len(data) {
			return 0, 0, base.CorruptionErrorf("batch ends after %d of %d entries at offset %d", i, count, off)
		}
		kind := base.Kind(data[off])
		hasValue, known := kind != base.KindDelete, kind == base.KindSet || kind == base.KindDelete || kind == base.KindRangeDelete
		if pebble {
			hasValue, known = pebbleKinds[kind]
		}
		if !known {
			return 0, 0, base.CorruptionErrorf("batch entry %d: unknown kind %d at offset %d", i, kind, off)
		}
		if kind != kindLogData && i == count {
			return 0, 0, base.CorruptionErrorf("batch holds more than its %d entries: entry at offset %d", count, off)
		}
		off++
		key, n, err := lengthPrefixed(data, off)
		if err != nil {
			return 0, 0, base.CorruptionErrorf("batch entry %d key: %w", i, err)
		}
		off = n
		var value []byte
		if hasValue {
			if value, n, err = lengthPrefixed(data, off); err != nil {
				return 0, 0, base.CorruptionErrorf("batch entry %d value: %w", i, err)
			}
			off = n
			if kind == base.KindRangeDelete && bytes.Compare(key, value) >= 0 {
				return 0, 0, base.CorruptionErrorf("batch entry %d: empty or inverted range deletion at offset %d", i, off)
			}
		}
		if fn != nil {
			fn(seq+base.SeqNum(i), Entry{kind, key, value})
		}
		if kind != kindLogData {
			i++
		}
	}
	if off != len(data) {
		return 0, 0, base.CorruptionErrorf("batch has %d bytes after its %d entries at offset %d", len(data)-off, count, off)
	}
	return seq, count, nil
}

// lengthPrefixed decodes a varint-prefixed byte string at off, returning it
// and the offset after it.
func lengthPrefixed(data []byte, off int) ([]byte, int, error) {
	n, l := binary.Uvarint(data[off:])
	if l <= 0 {
		return nil, 0, fmt.Errorf("bad length varint at offset %d", off)
	}
	off += l
	if n > uint64(len(data)-off) {
		return nil, 0, fmt.Errorf("length %d at offset %d overruns the batch", n, off-l)
	}
	return data[off : off+int(n) : off+int(n)], off + int(n), nil
}
