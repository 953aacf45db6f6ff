package memtable

import "github.com/bloomkv/bloomkv/internal/base"

// InternalKey is a key with its trailer of sequence number and kind, the
// form in which the memtable stores and orders entries.
type InternalKey = base.InternalKey

// SeqNum is a sequence number, the order in which writes were applied.
type SeqNum = base.SeqNum

// Kind is what an entry does to its key (set, delete, delete a range).
type Kind = base.Kind

// Trailer packs a sequence number and a kind.
type Trailer = base.Trailer
