// Package crdbkey orders CockroachDB's engine keys, as the tables
// CockroachDB writes through Pebble record them (comparer
// "cockroach_comparator"), for the inspection of such tables.
//
// An engine key is a roachpb key, a 0x00 sentinel, an optional version and,
// when there is a version, a last byte holding the version's length plus
// one (the sentinel is not counted). A key without a version ends at its
// sentinel, a 0x00 that then reads as "no version". The prefix of a key is
// everything up to and including the sentinel; its suffix is the version
// with its length byte.
//
// Versions are MVCC timestamps (8 bytes of wall time, big-endian; 12 with a
// 4-byte logical time; 13 with an obsolete synthetic flag byte) or, for
// keys of the lock table, 17 opaque bytes. Keys sort by prefix, bytewise;
// among the versions of one prefix, the key without a version first, then
// the versions in descending byte order, newest timestamp first, after
// dropping the synthetic byte and a zero logical time (which do not change
// a timestamp).
//
// The functions here never panic: a key too short for the length its last
// byte states reads as a prefix without a suffix.
package crdbkey

import "bytes"

// Names a CockroachDB table records: its comparer (property
// rocksdb.comparator) and the key schema of its columnar data blocks
// (property pebble.colblk.schema).
const (
	ComparerName  = "cockroach_comparator"
	KeySchemaName = "crdb1"
)

// Version lengths with a meaning of their own.
const (
	wallLen      = 8
	logicalLen   = 12
	syntheticLen = 13
)

// Split returns the length of key's prefix: the roachpb key and the
// sentinel.
func Split(key []byte) int {
	if len(key) == 0 {
		return 0
	}
	n := int(key[len(key)-1])
	if n > len(key) {
		return len(key) // malformed: the whole key as its prefix
	}
	return len(key) - n
}

// Compare orders engine keys a and b: by prefix, then by version, a key
// without one first and the newest timestamp next.
func Compare(a, b []byte) int {
	pa, pb := Split(a), Split(b)
	if c := bytes.Compare(a[:pa], b[:pb]); c != 0 {
		return c
	}
	sa, sb := a[pa:], b[pb:]
	if len(sa) == 0 || len(sb) == 0 {
		return len(sa) - len(sb) // no version first
	}
	// Later versions first: the order of the normalized versions,
	// reversed.
	return bytes.Compare(normalized(sb), normalized(sa))
}

// normalized returns the version of the non-empty suffix s, without its
// length byte, a timestamp's synthetic byte or a zero logical time.
func normalized(s []byte) []byte {
	v := s[:len(s)-1]
	if len(v) == syntheticLen {
		v = v[:logicalLen]
	}
	if len(v) == logicalLen && v[8]|v[9]|v[10]|v[11] == 0 {
		v = v[:wallLen]
	}
	return v
}
