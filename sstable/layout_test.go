package sstable

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
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
		data := writeSpec(t, spec, WriterOptions{BlockSize: 512, DisableCompression: !compress})
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

// reseal recomputes the checksum of the block at bh after a test changed it.
func reseal(data []byte, bh BlockHandle) {
	typ := data[bh.Offset+bh.Length]
	binary.LittleEndian.PutUint32(data[bh.Offset+bh.Length+1:], maskedCRC(data[bh.Offset:bh.Offset+bh.Length], typ))
}

func TestCheckFindsProblems(t *testing.T) {
	var spec tableSpec
	for i := range 400 {
		spec.entries = append(spec.entries, entry{base.MakeInternalKey(fmt.Appendf(nil, "k%04d", i), 5, base.KindSet), []byte("v")})
	}
	opts := WriterOptions{BlockSize: 256, BlockRestartInterval: 1, DisableCompression: true}
	clean := writeSpec(t, spec, opts)
	l := openTable(t, clean).Layout()

	t.Run("checksum", func(t *testing.T) {
		data := bytes.Clone(clean)
		b := l.Blocks[indexOfKind(l, BlockData)+1]
		data[b.Handle.Offset+3] ^= 0x10
		rd := openTable(t, data)
		lay := rd.Layout()
		if got := lay.Blocks[indexOfKind(l, BlockData)+1]; !errors.Is(got.Err, ErrCorruption) {
			t.Fatalf("layout: damaged block has error %v", got.Err)
		}
		rep := rd.Check()
		err := rep.Err()
		if !errors.Is(err, ErrCorruption) || !strings.Contains(err.Error(), "checksum mismatch") || !strings.Contains(err.Error(), b.Handle.String()) {
			t.Fatalf("check: %v", err)
		}
		if rep.Entries == 0 || rep.Complete {
			t.Fatalf("check stopped at the damaged block, or called the report complete: %+v", rep)
		}
		if rep.Largest == nil || !bytes.Equal(rep.Largest.UserKey, []byte("k0399")) {
			t.Fatalf("largest key read %v, want k0399", rep.Largest)
		}
	})
	t.Run("order", func(t *testing.T) {
		data := bytes.Clone(clean)
		// With no prefix compression the key is in the block as written;
		// ':' sorts after '9', so k0100 becomes k010: after k0101..k0109.
		i := bytes.Index(data, []byte("k0100"))
		data[i+4] = ':'
		for _, b := range l.Blocks {
			if b.Kind == BlockData && uint64(i) >= b.Handle.Offset && uint64(i) < b.Handle.Offset+b.Handle.Length {
				reseal(data, b.Handle)
			}
		}
		rep := openTable(t, data).Check()
		var all []string
		for _, p := range rep.Problems {
			all = append(all, p.Error())
		}
		joined := strings.Join(all, "\n")
		for _, want := range []string{"out of order", "index separator", "false negative"} {
			if !strings.Contains(joined, want) {
				t.Fatalf("no problem mentions %q:\n%s", want, joined)
			}
		}
	})
	t.Run("false negative", func(t *testing.T) {
		data := bytes.Clone(clean)
		fb := l.Blocks[indexOfKind(l, BlockFilter)].Handle
		clear(data[fb.Offset : fb.Offset+64]) // the first line's bits
		reseal(data, fb)
		rep := openTable(t, data).Check()
		if err := rep.Err(); err == nil || !strings.Contains(err.Error(), "false negative") {
			t.Fatalf("check: %v", err)
		}
	})
	t.Run("footer padding", func(t *testing.T) {
		for _, format := range []TableFormat{TableFormatLevelDB, TableFormatRocksDBv2} {
			o := opts
			o.TableFormat = format
			data := writeSpec(t, spec, o)
			data[len(data)-9] = 0x5a // the last padding byte, just before the version or magic
			if format == TableFormatRocksDBv2 {
				data[len(data)-13] = 0x5a
				data[len(data)-9] = 0
			}
			err := openTable(t, data).Check().Err()
			if err == nil || !strings.Contains(err.Error(), "padding byte") {
				t.Fatalf("%v: check: %v", format, err)
			}
		}
	})
	t.Run("properties", func(t *testing.T) {
		var b bytes.Buffer
		w, _ := NewWriter(&b, opts)
		for _, e := range spec.entries {
			w.Add(e.key, e.value)
		}
		w.props.NumEntries = 7 // a writer that miscounts
		w.Close()
		err := openTable(t, b.Bytes()).Check().Err()
		if err == nil || !strings.Contains(err.Error(), "properties state 7 entries") {
			t.Fatalf("check: %v", err)
		}
	})
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
