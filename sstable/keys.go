package sstable

import "github.com/bloomkv/bloomkv/internal/base"

// InternalKey is a key as a table stores it: a user key and a trailer of
// sequence number and kind. Keys of a table order by user key ascending,
// then trailer descending.
type InternalKey = base.InternalKey

// SeqNum is a sequence number: the order in which a store applied its
// writes. Tables handed to a store's Ingest carry 0 in every key.
type SeqNum = base.SeqNum

// Kind is what an entry does to its key: set it, delete it, or delete a
// range starting at it.
type Kind = base.Kind

// Trailer packs a sequence number and a kind into the 8 bytes that follow a
// user key in a table.
type Trailer = base.Trailer

// The kinds of entry a table holds.
const (
	KindDelete      = base.KindDelete
	KindSet         = base.KindSet
	KindRangeDelete = base.KindRangeDelete
)

// SeqNumMax is the largest sequence number a key can carry (2^56-1).
const SeqNumMax = base.SeqNumMax

// MakeInternalKey returns the internal key of userKey at seq with kind.
func MakeInternalKey(userKey []byte, seq SeqNum, kind Kind) InternalKey {
	return base.MakeInternalKey(userKey, seq, kind)
}
