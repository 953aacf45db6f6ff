//go:build !race

package bloomkv

import (
	"encoding/binary"
	"testing"
)

// The race detector makes sync.Pool drop objects at random, so the counts
// below hold only in a normal build.

// TestCommitsDoNotAllocate checks that Set, Delete and Apply of a reused
// batch allocate nothing in the store when no flush is due.
func TestCommitsDoNotAllocate(t *testing.T) {
	d := mustOpen(t, t.TempDir(), &Options{MemTableSize: 64 << 20, Logger: quietLogger()})
	defer d.Close()
	key := make([]byte, 16)
	value := make([]byte, 100)
	var i uint64
	next := func() []byte {
		i++
		binary.BigEndian.PutUint64(key, i*0x9E3779B97F4A7C15)
		binary.BigEndian.PutUint64(key[8:], i)
		return key
	}
	b := d.NewBatch()
	ops := []struct {
		name string
		op   func() error
	}{
		{"Set", func() error { return d.Set(next(), value, NoSync) }},
		{"Delete", func() error { return d.Delete(next(), NoSync) }},
		{"Apply", func() error {
			b.Reset()
			b.Set(next(), value)
			b.Delete(next())
			return d.Apply(b, NoSync)
		}},
	}
	for _, o := range ops {
		var err error
		for range 100 { // warm the pools
			err = o.op()
		}
		allocs := testing.AllocsPerRun(1000, func() {
			if e := o.op(); e != nil {
				err = e
			}
		})
		if err != nil {
			t.Fatalf("%s: %v", o.name, err)
		}
		if allocs != 0 {
			t.Errorf("%s: %v allocations per call, want 0", o.name, allocs)
		}
	}
}
