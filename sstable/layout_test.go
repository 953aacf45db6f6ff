package sstable

import (
	"bytes"
	"math/rand/v2"
	"testing"

	pebble "github.com/cockroachdb/pebble/v2/sstable"

	"github.com/bloomkv/bloomkv/internal/base"
)

// checkLayout asserts that the blocks tile the file: each block and its
// trailer end where the next begins, the last where the footer begins.
func checkLayout(t *testing.T, rd *Reader, l *Layout) map[BlockKind]int {
	t.Helper()
	kinds := map[BlockKind]int{}
	next := uint64(0)
	for _, b := range l.Blocks {
		if b.Err != nil {
			t.Fatalf("%s block %s: %v", b.Kind, b.Handle, b.Err)
		}
		if b.Handle.Offset != next {
			t.Fatalf("%s block at %d, want %d (blocks do not tile the file)", b.Kind, b.Handle.Offset, next)
		}
		next = b.Handle.Offset + b.Handle.Length + blockTrailerLen
		kinds[b.Kind]++
	}
	if next != l.FooterOffset || l.FooterOffset+l.FooterLength != rd.Size() {
		t.Fatalf("blocks end at %d, footer %d+%d, file %d", next, l.FooterOffset, l.FooterLength, rd.Size())
	}
	return kinds
}

func TestLayoutAndCheck(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	spec := randomSpec(r, 3000)
	for _, compress := range []bool{false, true} {
		data := writeSpec(t, spec, WriterOptions{BlockSize: 512, Compression: compressionIf(!compress)})
		rd := openTable(t, data)
		l := rd.Layout()
		kinds := checkLayout(t, rd, l)
		p := rd.Properties()
		if uint64(kinds[BlockData]) != p.NumDataBlocks || kinds[BlockIndex] != 1 || kinds[BlockMetaindex] != 1 ||
			kinds[BlockProperties] != 1 || kinds[BlockFilter] != 1 || kinds[BlockRangeDel] != 1 {
			t.Fatalf("block kinds %v, %d data blocks stated", kinds, p.NumDataBlocks)
		}
		// The records of the data blocks are the table's entries.
		var got []entry
		for _, b := range l.Blocks {
			if b.Kind != BlockData {
				continue
			}
			if !compress && b.Compression != NoCompression {
				t.Fatalf("block %s compressed with %s", b.Handle, b.Compression)
			}
			err := rd.BlockRecords(b, func(k, v []byte) bool {
				ik, ok := base.DecodeInternalKey(k)
				if !ok {
					t.Fatalf("undecodable key %x", k)
				}
				got = append(got, entry{ik.Clone(), bytes.Clone(v)})
				return true
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		sameEntries(t, got, spec.entries, "data block records")
		rep := rd.Check()
		if err := rep.Err(); err != nil {
			t.Fatalf("check of a sound table: %v", err)
		}
		users := map[string]bool{}
		for _, e := range spec.entries {
			users[string(e.key.UserKey)] = true
		}
		if !rep.Complete || rep.Entries != uint64(len(spec.entries)) || rep.UserKeys != uint64(len(users)) || rep.Blocks != len(l.Blocks) ||
			rep.RangeDeletions != len(rd.RangeDeletions()) || !bytes.Equal(rep.Smallest.UserKey, spec.entries[0].key.UserKey) {
			t.Fatalf("report %+v; want %d entries, %d user keys, %d blocks", rep, len(spec.entries), len(users), len(l.Blocks))
		}
		f, err := rd.TableFilter()
		if err != nil || f == nil || f.Policy != FilterPolicyName || f.StatedKeys != int64(len(users)) || f.BitsPerKey != 10 {
			t.Fatalf("filter %+v, %v", f, err)
		}
		if est := f.EstimatedKeys; est < 0.9*float64(len(users)) || est > 1.1*float64(len(users)) {
			t.Fatalf("estimated %.0f keys, table has %d", est, len(users))
		}
		if rate := f.ExpectedFPRate(uint64(len(users))); rate < 0.001 || rate > 0.02 {
			t.Fatalf("expected false-positive rate %v at 10 bits/key", rate)
		}
		if err := rd.BlockRecords(l.Blocks[indexOfKind(l, BlockFilter)], func(k, v []byte) bool { return true }); err == nil {
			t.Fatal("a filter block listed entries")
		}
	}
}

func indexOfKind(l *Layout, k BlockKind) int {
	for i, b := range l.Blocks {
		if b.Kind == k {
			return i
		}
	}
	return -1
}

func TestLayoutAndCheckOfPebbleTables(t *testing.T) {
	for i, format := range []pebble.TableFormat{pebble.TableFormatLevelDB, pebble.TableFormatRocksDBv2} {
		r := rand.New(rand.NewPCG(uint64(i), 17))
		spec := randomSpec(r, 3000)
		if format == pebble.TableFormatLevelDB {
			spec.dels = nil
		}
		rd := openTable(t, writePebbleTable(t, spec, format, true))
		checkLayout(t, rd, rd.Layout())
		rep := rd.Check()
		if err := rep.Err(); err != nil {
			t.Fatalf("%v: check: %v", format, err)
		}
		if rep.Entries != uint64(len(spec.entries)) {
			t.Fatalf("%v: checked %d entries, want %d", format, rep.Entries, len(spec.entries))
		}
		f, err := rd.TableFilter()
		if err != nil || f == nil || f.Policy != "rocksdb.BuiltinBloomFilter" || f.LineBits != 512 || f.StatedKeys != -1 {
			t.Fatalf("%v: filter %+v, %v", format, f, err)
		}
		if est := f.EstimatedKeys; est < 0.9*float64(rep.UserKeys) || est > 1.1*float64(rep.UserKeys) {
			t.Fatalf("%v: estimated %.0f keys, table has %d", format, est, rep.UserKeys)
		}
	}
}
