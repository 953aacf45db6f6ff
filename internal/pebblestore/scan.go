package pebblestore

// Reading keys: Scan's merge of the memtables and tables with their range
// deletions, and Get.

import (
	"bytes"
	"container/heap"
	"slices"

	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/rangedel"
	"github.com/bloomkv/bloomkv/sstable"
)

// rangeDels returns every range deletion of the store, fragmented.
func (s *Store) rangeDels() ([]rangedel.Tombstone, error) {
	all := slices.Clone(s.memDels)
	err := s.tables(func(t *Table) error {
		tr, err := s.reader(t)
		if err != nil {
			return err
		}
		lo, hi, hiExcl := t.bounds()
		if hi != nil && !hiExcl {
			hi = append(bytes.Clone(hi), 0) // the next user key
		}
		for _, d := range tr.r.RangeDeletions() {
			if tr.ov != 0 {
				d.SeqNum = tr.ov
			}
			if lo != nil && bytes.Compare(d.Start, lo) < 0 {
				d.Start = lo
			}
			if hi != nil && bytes.Compare(d.End, hi) > 0 {
				d.End = hi
			}
			if bytes.Compare(d.Start, d.End) < 0 {
				all = append(all, d)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return rangedel.Fragment(all), nil
}

// source is one sorted run of point entries: a table or the WALs' writes.
type source struct {
	it  *sstable.Iter // nil for the memory's
	s   *Store
	t   *Table // the table it reads
	ov  base.SeqNum
	mem []memEntry
	i   int
	key base.InternalKey
	// lower and upper bound a virtual table's keys (nil: none); upper is
	// exclusive when upperExcl.
	lower, upper []byte
	upperExcl    bool
}

func (src *source) load(ok bool) bool {
	if src.it != nil {
		if !ok {
			return false
		}
		src.key = src.it.Key()
		if src.upper != nil {
			if c := bytes.Compare(src.key.UserKey, src.upper); c > 0 || c == 0 && src.upperExcl {
				return false
			}
		}
		if src.ov != 0 {
			src.key.Trailer = base.MakeTrailer(src.ov, src.key.Kind())
		}
		return true
	}
	if src.i >= len(src.mem) {
		return false
	}
	src.key = src.mem[src.i].key
	return true
}

func (src *source) value() ([]byte, error) {
	if src.it == nil {
		return src.mem[src.i].value, nil
	}
	v := src.it.Value()
	if b, ok := any(src.it).(blobIter); ok && b.IsBlobReference() {
		return src.s.BlobValue(src.t, v)
	}
	return v, nil
}

// blobIter is what an sstable iterator that reads Pebblev6 and later tables
// offers: whether the current value is held in a blob file, Value then
// returning the value-prefix byte and inline handle the table stores.
type blobIter interface{ IsBlobReference() bool }

// resolvesBlobs reports whether the sstable iterator tells values held in
// blob files apart, so that scans resolve them with BlobValue.
func resolvesBlobs() bool {
	_, ok := any((*sstable.Iter)(nil)).(blobIter)
	return ok
}

func (src *source) next() bool {
	if src.it != nil {
		return src.load(src.it.Next())
	}
	src.i++
	return src.load(true)
}

func (src *source) seek(lo []byte) bool {
	if src.it != nil {
		if src.lower != nil && bytes.Compare(lo, src.lower) < 0 {
			lo = src.lower
		}
		if lo == nil {
			return src.load(src.it.First())
		}
		return src.load(src.it.SeekGE(lo))
	}
	src.i = 0
	if lo != nil {
		src.i, _ = slices.BinarySearchFunc(src.mem, lo, func(e memEntry, k []byte) int { return bytes.Compare(e.key.UserKey, k) })
	}
	return src.load(true)
}

// mergeHeap orders sources by their current internal key.
type mergeHeap []*source

func (h mergeHeap) Len() int           { return len(h) }
func (h mergeHeap) Less(i, j int) bool { return base.CompareInternal(h[i].key, h[j].key) < 0 }
func (h mergeHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *mergeHeap) Push(x any)        { *h = append(*h, x.(*source)) }
func (h *mergeHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// Scan calls fn with each live key in [lo, hi) (nil: unbounded) and its
// value, in order, as Pebble's iterator would return them, until fn
// returns false. The key and value are valid only during fn.
func (s *Store) Scan(lo, hi []byte, fn func(key, value []byte) bool) error {
	dels, err := s.rangeDels()
	if err != nil {
		return err
	}
	var srcs []*source
	defer func() {
		for _, src := range srcs {
			if src.it != nil {
				src.it.Close()
			}
		}
	}()
	h := mergeHeap{}
	add := func(src *source) error {
		srcs = append(srcs, src)
		if src.seek(lo) {
			h = append(h, src)
		} else if src.it != nil {
			return src.it.Error()
		}
		return nil
	}
	if err := add(&source{mem: s.mem}); err != nil {
		return err
	}
	err = s.tables(func(t *Table) error {
		tr, err := s.reader(t)
		if err != nil {
			return err
		}
		lo, hi, hiExcl := t.bounds()
		return add(&source{it: tr.r.NewIter(), ov: tr.ov, s: s, t: tr.t, lower: lo, upper: hi, upperExcl: hiExcl})
	})
	if err != nil {
		return err
	}
	heap.Init(&h)
	var (
		cur      []byte   // the user key being resolved
		operands [][]byte // its merge operands, newest first
		done     bool     // its versions below are hidden
		value    []byte   // the SET that ended them, when haveBase
		haveBase bool
	)
	flush := func() (bool, error) {
		switch {
		case cur == nil:
			return true, nil
		case len(operands) > 0:
			if s.merger != concatenateMerger {
				return false, base.UnsupportedErrorf("pebblestore: %s: key %q has merge operands, merger %q is not %s", s.Dir, cur, s.merger, concatenateMerger)
			}
			var v []byte
			if haveBase {
				v = append(v, value...)
			}
			for i := len(operands) - 1; i >= 0; i-- {
				v = append(v, operands[i]...)
			}
			return fn(cur, v), nil
		case haveBase:
			return fn(cur, value), nil
		}
		return true, nil
	}
	for len(h) > 0 {
		src := h[0]
		k := src.key
		if hi != nil && bytes.Compare(k.UserKey, hi) >= 0 {
			break
		}
		if cur == nil || !bytes.Equal(cur, k.UserKey) {
			more, err := flush()
			if err != nil || !more {
				return err
			}
			cur, operands, done, value, haveBase = append(cur[:0:0], k.UserKey...), nil, false, nil, false
		}
		if !done {
			if rangedel.Cover(dels, k.UserKey, base.SeqNumMax+1) > k.SeqNum() {
				done = true // deleted by a newer range deletion, and all older
			} else {
				switch k.Kind() {
				case base.KindSet, kindSetWithDelete:
					v, err := src.value()
					if err != nil {
						return err
					}
					done, haveBase, value = true, true, bytes.Clone(v)
				case base.KindDelete, kindSingleDelete, kindDeleteSized:
					done = true
				case kindMerge:
					v, err := src.value()
					if err != nil {
						return err
					}
					operands = append(operands, bytes.Clone(v))
				default:
					return base.CorruptionErrorf("pebblestore: %s: key %s has a kind no table holds", s.Dir, k)
				}
			}
		}
		if src.next() {
			heap.Fix(&h, 0)
		} else {
			if src.it != nil {
				if err := src.it.Error(); err != nil {
					return err
				}
			}
			heap.Pop(&h)
		}
	}
	_, err = flush()
	return err
}

// Get returns the value of key, or ErrNotFound.
func (s *Store) Get(key []byte) ([]byte, error) {
	var value []byte
	found := false
	err := s.Scan(key, append(bytes.Clone(key), 0), func(_, v []byte) bool {
		value, found = bytes.Clone(v), true
		return false
	})
	if err == nil && !found {
		err = ErrNotFound
	}
	return value, err
}
