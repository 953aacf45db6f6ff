package bloomkv

// levelIter: one level's tables read in key order as one iterator, each
// table opened as it is reached.

import (
	"bytes"
	"slices"

	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/manifest"
	"github.com/bloomkv/bloomkv/sstable"
)

// levelIter walks the tables of one level ≥ 1 (sorted, disjoint) as one
// sequence, opening each as it is reached.
type levelIter struct {
	tables *tableCache
	files  []*manifest.FileMetadata
	idx    int
	it     *sstable.Iter
	spare  *sstable.Iter // a closed iterator to reuse for the next table
	e      error
}

// open positions on table i, closing the current one unless it is table i;
// false past either end or on an error.
func (l *levelIter) open(i int) bool {
	if l.it != nil {
		if i == l.idx && l.e == nil && l.it.Error() == nil {
			return true // a seek within the table already open
		}
		if err := l.it.Error(); err != nil && l.e == nil {
			l.e = err
		}
		l.it.Close()
		l.spare, l.it = l.it, nil
	}
	l.idx = i
	if l.e != nil || i < 0 || i >= len(l.files) {
		return false
	}
	r, err := l.tables.get(l.files[i])
	if err != nil {
		l.e = err
		return false
	}
	if l.spare != nil {
		l.it, l.spare = l.spare, nil
		r.ResetIter(l.it)
	} else {
		l.it = r.NewIter()
	}
	return true
}

// settle moves on to the following (forward) or preceding tables while the
// current one has no more entries.
func (l *levelIter) settle(ok, forward bool) bool {
	for !ok {
		if l.it != nil && l.it.Error() != nil {
			return false
		}
		if forward {
			if !l.open(l.idx + 1) {
				return false
			}
			ok = l.it.First()
		} else {
			if !l.open(l.idx - 1) {
				return false
			}
			ok = l.it.Last()
		}
	}
	return true
}

func (l *levelIter) First() bool { return l.open(0) && l.settle(l.it.First(), true) }

func (l *levelIter) Last() bool {
	return l.open(len(l.files)-1) && l.settle(l.it.Last(), false)
}

func (l *levelIter) SeekGE(userKey []byte) bool {
	i, _ := slices.BinarySearchFunc(l.files, userKey, func(f *manifest.FileMetadata, k []byte) int {
		if f.Before(k) {
			return -1
		}
		return 1
	})
	return l.open(i) && l.settle(l.it.SeekGE(userKey), true)
}

func (l *levelIter) SeekLT(userKey []byte) bool {
	// The last table starting before userKey.
	i, _ := slices.BinarySearchFunc(l.files, userKey, func(f *manifest.FileMetadata, k []byte) int {
		if bytes.Compare(f.Smallest.UserKey, k) < 0 {
			return -1
		}
		return 1
	})
	return l.open(i-1) && l.settle(l.it.SeekLT(userKey), false)
}

func (l *levelIter) Next() bool {
	return l.it != nil && l.settle(l.it.Next(), true)
}

// nextKey is Next, returning the key Key would.
func (l *levelIter) nextKey() (base.InternalKey, bool) {
	if l.it == nil {
		return base.InternalKey{}, false
	}
	if k, ok := l.it.NextKey(); ok {
		return k, true
	}
	if !l.settle(false, true) {
		return base.InternalKey{}, false
	}
	return l.it.Key(), true
}

func (l *levelIter) Prev() bool {
	return l.it != nil && l.settle(l.it.Prev(), false)
}

func (l *levelIter) Key() base.InternalKey { return l.it.Key() }

func (l *levelIter) Value() []byte { return l.it.Value() }

func (l *levelIter) Error() error {
	if l.e != nil {
		return l.e
	}
	if l.it != nil {
		return l.it.Error()
	}
	return nil
}

func (l *levelIter) Close() error {
	err := l.Error()
	if l.it != nil {
		l.it.Close()
		l.spare, l.it = l.it, nil
	}
	return err
}
