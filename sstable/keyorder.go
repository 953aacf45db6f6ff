package sstable

// The order of user keys in a table. bloomkv's own tables, and Pebble's
// and RocksDB's under the bytewise comparer, order them bytewise: the
// reader's hot paths keep to that order with no indirection (orderBytewise
// is the zero value, tested before anything else). A table of another
// comparer the reader knows, CockroachDB's, is read when the caller asks
// for it (ReaderOptions.ForeignComparers), for inspection; the store never
// does.

import (
	"bytes"
	"cmp"

	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/crdbkey"
)

// keyOrder is the order of a table's user keys, named by its comparer.
type keyOrder uint8

const (
	orderBytewise keyOrder = iota // bloomkv's: base.ComparerName
	orderCRDB                     // CockroachDB's engine keys: crdbkey.ComparerName
)

// compare orders user keys a and b.
func (o keyOrder) compare(a, b []byte) int {
	if o == orderBytewise {
		return bytes.Compare(a, b)
	}
	return crdbkey.Compare(a, b)
}

// split returns the length of key's prefix, the part a table's filter
// holds: the whole key in the bytewise order.
func (o keyOrder) split(key []byte) int {
	if o == orderBytewise {
		return len(key)
	}
	return crdbkey.Split(key)
}

// compareEncoded orders encoded internal keys as base.CompareEncoded does,
// their user keys in order o.
func (o keyOrder) compareEncoded(a, b []byte) int {
	if o == orderBytewise {
		return base.CompareEncoded(a, b)
	}
	ka, oka := base.DecodeInternalKey(a)
	kb, okb := base.DecodeInternalKey(b)
	if !oka || !okb {
		return bytes.Compare(a, b)
	}
	return o.compareInternal(ka, kb)
}

// compareInternal orders internal keys: by user key in order o, then by
// trailer, descending.
func (o keyOrder) compareInternal(a, b base.InternalKey) int {
	if o == orderBytewise {
		return base.CompareInternal(a, b)
	}
	if c := o.compare(a.UserKey, b.UserKey); c != 0 {
		return c
	}
	return cmp.Compare(b.Trailer, a.Trailer)
}

// orderOf returns the key order a table's comparer name gives, if the
// reader knows it, allowing other comparers than bloomkv's only when
// foreign.
func orderOf(comparer string, foreign bool) (keyOrder, bool) {
	switch {
	case comparer == "" || comparer == base.ComparerName:
		return orderBytewise, true
	case comparer == crdbkey.ComparerName && foreign:
		return orderCRDB, true
	}
	return orderBytewise, false
}

// Compare orders user keys a and b as the table does: bytewise, or in the
// order of the table's comparer when the reader was opened with
// ForeignComparers.
func (t *Reader) Compare(a, b []byte) int { return t.order.compare(a, b) }

// Split returns the length of the prefix of the user key key that the
// table's comparer gives: the part of it a Pebble table's filter holds.
// It is the whole key under the bytewise comparer.
func (t *Reader) Split(key []byte) int { return t.order.split(key) }

// ComparerIsForeign reports whether the table's keys are ordered by a
// comparer other than bloomkv's bytewise one (CockroachDB's).
func (t *Reader) ComparerIsForeign() bool { return t.order != orderBytewise }
