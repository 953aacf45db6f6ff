package base

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// SeqNum is a sequence number: every write to the store gets the next one, and
// a read at sequence number s sees exactly the writes numbered below s.
type SeqNum uint64

// SeqNumMax is the largest sequence number an internal key can carry (56
// bits); a read at SeqNumMax sees every write.
const SeqNumMax SeqNum = 1<<56 - 1

// Kind is the kind of an internal key, stored in the low byte of its trailer.
// The values are those LevelDB, RocksDB and Pebble use, so tables interoperate.
type Kind uint8

// The kinds bloomkv writes.
const (
	KindDelete      Kind = 0
	KindSet         Kind = 1
	KindRangeDelete Kind = 15
	// KindSeparator marks the shortened keys of an index block, which are
	// not real keys (Pebble's value).
	KindSeparator Kind = 17
	// KindMax is the largest kind; with a sequence number it makes the
	// trailer that sorts first among a user key's versions at that number.
	KindMax Kind = 24
)

// foreignKinds names the kinds other engines' files hold (Pebble's names).
var foreignKinds = map[Kind]string{2: "MERGE", 3: "LOGDATA", 7: "SINGLEDEL", 22: "INGESTSST", 24: "EXCISE", 18: "SETWITHDEL", 19: "RANGEKEYDEL", 20: "RANGEKEYUNSET", 21: "RANGEKEYSET", 23: "DELSIZED"}

func (k Kind) String() string {
	switch k {
	case KindDelete:
		return "DEL"
	case KindSet:
		return "SET"
	case KindRangeDelete:
		return "RANGEDEL"
	}
	if name, ok := foreignKinds[k]; ok {
		return name
	}
	return fmt.Sprintf("KIND(%d)", uint8(k))
}

// TrailerLen is the size of the trailer that ends an encoded internal key.
const TrailerLen = 8

// Trailer is seq<<8 | kind, stored little-endian after the user key.
type Trailer uint64

// MakeTrailer returns the trailer of (seq, kind).
func MakeTrailer(seq SeqNum, kind Kind) Trailer { return Trailer(seq)<<8 | Trailer(kind) }

// SeqNum returns the trailer's sequence number.
func (t Trailer) SeqNum() SeqNum { return SeqNum(t >> 8) }

// Kind returns the trailer's kind.
func (t Trailer) Kind() Kind { return Kind(t) }

// InternalKey is a user key with the sequence number and kind of one version
// of it. Internal keys sort by user key ascending, then trailer descending, so
// a user key's newest version comes first.
type InternalKey struct {
	UserKey []byte
	Trailer Trailer
}

// MakeInternalKey returns the internal key of (userKey, seq, kind).
func MakeInternalKey(userKey []byte, seq SeqNum, kind Kind) InternalKey {
	return InternalKey{UserKey: userKey, Trailer: MakeTrailer(seq, kind)}
}

// SeqNum returns the key's sequence number.
func (k InternalKey) SeqNum() SeqNum { return k.Trailer.SeqNum() }

// Kind returns the key's kind.
func (k InternalKey) Kind() Kind { return k.Trailer.Kind() }

// Size returns the length of the key's encoding.
func (k InternalKey) Size() int { return len(k.UserKey) + TrailerLen }

// Append appends the key's encoding (user key, then the trailer as 8 bytes
// little-endian) to dst.
func (k InternalKey) Append(dst []byte) []byte {
	dst = append(dst, k.UserKey...)
	return binary.LittleEndian.AppendUint64(dst, uint64(k.Trailer))
}

// DecodeInternalKey splits an encoded internal key. ok is false when enc is
// shorter than a trailer. The returned key aliases enc.
func DecodeInternalKey(enc []byte) (k InternalKey, ok bool) {
	n := len(enc) - TrailerLen
	if n < 0 {
		return InternalKey{}, false
	}
	return InternalKey{UserKey: enc[:n:n], Trailer: Trailer(binary.LittleEndian.Uint64(enc[n:]))}, true
}

// RangeDeleteSentinelTrailer is the trailer of a table's largest key when
// that key is the exclusive end of a range deletion: it sorts before every
// real entry with that user key, so the table holds none of them.
const RangeDeleteSentinelTrailer = Trailer(SeqNumMax)<<8 | Trailer(KindRangeDelete)

// MakeRangeDeleteSentinel returns the key that bounds a table whose range
// deletion ends (exclusively) at end.
func MakeRangeDeleteSentinel(end []byte) InternalKey {
	return InternalKey{UserKey: end, Trailer: RangeDeleteSentinelTrailer}
}

// IsExclusiveSentinel reports whether k is a range deletion's exclusive end
// (MakeRangeDeleteSentinel) rather than a key the table holds.
func (k InternalKey) IsExclusiveSentinel() bool { return k.Trailer == RangeDeleteSentinelTrailer }

// Clone returns a copy of k that does not alias its user key. The copy of an
// empty user key is empty, not nil (callers read nil as "no bound").
func (k InternalKey) Clone() InternalKey {
	return InternalKey{UserKey: append(make([]byte, 0, len(k.UserKey)), k.UserKey...), Trailer: k.Trailer}
}

func (k InternalKey) String() string {
	return fmt.Sprintf("%q#%d,%s", k.UserKey, k.SeqNum(), k.Kind())
}

// CompareInternal orders internal keys: user key ascending (bytewise), then
// trailer descending.
func CompareInternal(a, b InternalKey) int {
	if c := bytes.Compare(a.UserKey, b.UserKey); c != 0 {
		return c
	}
	switch {
	case a.Trailer > b.Trailer:
		return -1
	case a.Trailer < b.Trailer:
		return 1
	}
	return 0
}

// CompareEncoded orders two encoded internal keys as CompareInternal orders
// their decodings; a key too short to hold a trailer sorts by its bytes.
func CompareEncoded(a, b []byte) int {
	na, nb := len(a)-TrailerLen, len(b)-TrailerLen
	if na < 0 || nb < 0 {
		return bytes.Compare(a, b)
	}
	if c := bytes.Compare(a[:na], b[:nb]); c != 0 {
		return c
	}
	ta, tb := binary.LittleEndian.Uint64(a[na:]), binary.LittleEndian.Uint64(b[nb:])
	switch {
	case ta > tb:
		return -1
	case ta < tb:
		return 1
	}
	return 0
}

// ComparerName is the name of bloomkv's (bytewise) user-key order as tables
// record it; it is LevelDB's, so that Pebble and RocksDB accept our tables.
const ComparerName = "leveldb.BytewiseComparator"
