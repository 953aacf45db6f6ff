package sstable

// Range keys: Pebble (from TableFormatPebblev2) stores them in their own
// block, named in the metaindex, as a row block of internal keys (the start
// key, with a sequence number and a range-key kind) whose values hold the end
// key and the suffixes and values. bloomkv reads them for inspection only: a
// store's point reads do not see them (nor do Pebble's, unless asked).

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/bloomkv/bloomkv/internal/base"
)

// metaRangeKeyName is the metaindex name of Pebble's range-key block.
const metaRangeKeyName = "pebble.range_key"

// The range-key kinds (Pebble's values).
const (
	KindRangeKeyDelete base.Kind = 19
	KindRangeKeyUnset  base.Kind = 20
	KindRangeKeySet    base.Kind = 21
)

// RangeKey is one stored range key of a Pebble table: over the user keys in
// [Start, End), a RANGEKEYSET (Suffixes with their Values), RANGEKEYUNSET
// (Suffixes) or RANGEKEYDEL (neither) with its sequence number and kind.
type RangeKey struct {
	Start, End []byte
	Trailer    base.Trailer
	Suffixes   [][]byte
	Values     [][]byte // a RANGEKEYSET's values, one per suffix
}

// RangeKeys returns the table's range keys in the order they are stored
// (start key, then trailer descending), reading their block; none when the
// table has no range-key block.
func (t *Reader) RangeKeys() ([]RangeKey, error) {
	bh, ok := t.meta[metaRangeKeyName]
	if !ok {
		return nil, nil
	}
	b, err := t.readBlock(bh, BlockRangeKey.String())
	if err != nil {
		return nil, err
	}
	return decodeRangeKeys(b, t.where(BlockRangeKey.String(), bh), t.order)
}

// decodeRangeKeys decodes and checks a range-key block: every entry a range
// key with a well-formed value and an end after its start, fragments that do
// not overlap unless equal, in order o.
func decodeRangeKeys(b []byte, where blockWhere, o keyOrder) ([]RangeKey, error) {
	var it blockIter
	if err := it.init(b, false, where); err != nil {
		return nil, err
	}
	var out []RangeKey
	for ok := it.first(); ok; ok = it.next() {
		k, ok := base.DecodeInternalKey(it.key)
		if !ok {
			return nil, it.corrupt(it.offset, fmt.Sprintf("range key %x is not an internal key", it.key))
		}
		rk, why := decodeRangeKeyValue(k, it.value, o)
		if why != "" {
			return nil, it.corrupt(it.offset, fmt.Sprintf("range key %s: %s", k, why))
		}
		if n := len(out); n > 0 {
			p := out[n-1]
			if c := o.compare(p.Start, rk.Start); c > 0 || (c == 0 && !bytes.Equal(p.End, rk.End)) || (c < 0 && o.compare(p.End, rk.Start) > 0) {
				return nil, it.corrupt(it.offset, fmt.Sprintf("range key %s overlaps or precedes the one before it", k))
			}
		}
		out = append(out, rk)
	}
	return out, it.err
}

// decodeRangeKeyValue decodes the range key stored as k and value v, copying
// its bytes; why says what is wrong when it cannot. Its end must follow its
// start in order o.
func decodeRangeKeyValue(k base.InternalKey, v []byte, o keyOrder) (rk RangeKey, why string) {
	rk = RangeKey{Start: bytes.Clone(k.UserKey), Trailer: k.Trailer}
	switch k.Kind() {
	case KindRangeKeyDelete:
		rk.End = bytes.Clone(v) // the end key alone, without a length
	case KindRangeKeySet, KindRangeKeyUnset:
		end, rest, ok := varstring(v)
		if !ok {
			return rk, "bad end key"
		}
		rk.End = bytes.Clone(end)
		for len(rest) > 0 {
			var s, val []byte
			if s, rest, ok = varstring(rest); !ok {
				return rk, "bad suffix"
			}
			rk.Suffixes = append(rk.Suffixes, bytes.Clone(s))
			if k.Kind() == KindRangeKeyUnset {
				continue
			}
			if val, rest, ok = varstring(rest); !ok {
				return rk, "bad value"
			}
			rk.Values = append(rk.Values, bytes.Clone(val))
		}
		if k.Kind() == KindRangeKeySet && len(rk.Suffixes) == 0 {
			return rk, "a RANGEKEYSET without values"
		}
	default:
		return rk, "not a range-key kind"
	}
	if o.compare(rk.Start, rk.End) >= 0 {
		return rk, fmt.Sprintf("end %q is not after the start", rk.End)
	}
	return rk, ""
}

// varstring decodes a uvarint length and that many bytes from the start of
// b.
func varstring(b []byte) (s, rest []byte, ok bool) {
	n, l := binary.Uvarint(b)
	if l <= 0 || n > uint64(len(b)-l) {
		return nil, nil, false
	}
	return b[l : l+int(n)], b[l+int(n):], true
}

// DecodeRangeKey decodes one entry of a range-key block of a table of
// bloomkv's (bytewise) key order, as BlockRecords yields it, into a range
// key whose bytes are its own.
func DecodeRangeKey(key, value []byte) (RangeKey, error) {
	return decodeRangeKey(key, value, orderBytewise)
}

// DecodeRangeKey decodes one entry of t's range-key block, as BlockRecords
// yields it, in the table's key order, into a range key whose bytes are
// its own.
func (t *Reader) DecodeRangeKey(key, value []byte) (RangeKey, error) {
	return decodeRangeKey(key, value, t.order)
}

func decodeRangeKey(key, value []byte, o keyOrder) (RangeKey, error) {
	k, ok := base.DecodeInternalKey(key)
	if !ok {
		return RangeKey{}, corruptionf("range key %x is not an internal key", key)
	}
	rk, why := decodeRangeKeyValue(k, value, o)
	if why != "" {
		return RangeKey{}, corruptionf("range key %s: %s", k, why)
	}
	return rk, nil
}
