package sstable

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/cache"
	"github.com/bloomkv/bloomkv/internal/rangedel"
)

// FuzzTable writes a table of fuzzed entries with fuzzed options, reads it
// back through every entry point of the Reader (it must read back exactly
// what was written), then damages it at fuzzed offsets and reads it again:
// the damaged table is refused with an error wrapping ErrCorruption or reads
// back as the original did, and no read panics or hangs.
//
// The inputs are small, a table of a dozen entries at most: Go's fuzzer
// minimises every input that finds new coverage, with executions that grow
// with the square of the input's length, and reports none meanwhile; and an
// execution costs this package's test binary much coverage bookkeeping
// before any work (it links Pebble, instrumented too). Inputs of whole
// tables of a few KiB would leave it minimising nearly all the time, and
// hardly ever executing new inputs.
//
// cfg selects the options (fuzzTableConfig), contents the entries
// (fuzzSpec) and damage what is done to the table (damageTable). With cfg's
// reseal bit the checksums of the damaged blocks are recomputed, so that the
// damage gets past them to the decoders: of blocks, compression, the
// properties, the filter, the range deletions. Such a table may then read
// back wrong without an error, or be refused as unsupported, but still never
// panics.
func FuzzTable(f *testing.F) {
	set := func(key string, seq byte, value string) []byte {
		return append(append([]byte{byte(len(key)) << 4}, key...), append([]byte{seq, byte(len(value))}, value...)...)
	}
	del := func(key string, seq byte) []byte {
		return append(append([]byte{byte(len(key))<<4 | 2}, key...), seq)
	}
	rangeDel := func(start, end string, seq byte) []byte {
		b := append(append([]byte{byte(len(start))<<4 | 3}, start...), seq, byte(len(end)))
		return append(b, end...)
	}
	join := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	contents := join(set("apple", 3, "red"), set("apple", 7, "green"), del("banana", 5), set("cherry", 2, "dark"),
		rangeDel("b", "c", 9), set("date", 4, ""), []byte{0x14, 'e', 1, 0x45, 'z'}) // "de" extends "d", a 160-byte value
	f.Add(uint32(0), contents, []byte{})
	f.Add(uint32(1<<7|3<<3), contents, []byte{0, 0x80, 0, 0x10})                      // uncompressed, restarts every 4: a flip
	f.Add(uint32(1<<10|1<<12), contents, []byte{2, 0xf0, 0, 0})                       // LevelDB, cached: truncated
	f.Add(uint32(2<<12|1<<11|1), contents, []byte{3, 0x40, 0, 4, 'x', 'y', 'z', 'w'}) // legacy range deletions, index and filter cached: overwritten
	f.Add(uint32(1<<14|5), contents, []byte{1, 0x20, 0, 0xff})                        // a set byte, checksums recomputed
	f.Add(uint32(1<<14|1<<8), contents, []byte{0, 0xc0, 0, 0x01})                     // no filter, checksums recomputed
	f.Add(uint32(1<<16|1<<15|1), contents, []byte{0, 0x60, 0, 0x04})                  // a block an entry, a two-level index
	f.Fuzz(fuzzTableOnce)
}

func fuzzTableOnce(t *testing.T, cfg uint32, contents, damage []byte) {
	if len(contents) > maxFuzzContents || len(damage) > maxFuzzDamage {
		return
	}
	c := decodeFuzzConfig(cfg)
	spec := fuzzSpec(contents, c.writer.TableFormat != TableFormatLevelDB)
	data := writeSpecWith(t, spec, c.writer, func(w *Writer) {
		w.legacyRangeDels, w.indexPartitionEntries = c.legacyRangeDels, c.indexPartition
	})
	probes := fuzzProbes(spec)
	want, err := readAll(data, probes, c.readerOptions())
	if err != nil {
		t.Fatalf("undamaged table: %v", err)
	}
	checkFuzzContents(t, c, spec, probes, want)

	bad := damageTable(data, damage)
	forged := false
	if c.reseal {
		for _, b := range want.rd.Blocks().Blocks {
			if end := b.Handle.Offset + b.Handle.Length + blockTrailerLen; end <= uint64(len(bad)) && !bytes.Equal(bad[b.Handle.Offset:end], data[b.Handle.Offset:end]) {
				reseal(bad, b.Handle)
				forged = true
			}
		}
	}
	got, err := readAll(bad, probes, c.readerOptions())
	switch {
	case err == nil:
		if !forged && !sameContents(got, want) {
			t.Fatal("damaged table read back different contents without an error")
		}
	case errors.Is(err, ErrCorruption), errors.Is(err, ErrUnsupportedFormat):
		// Damage detected, or a footer damaged into another format's
		// (an unknown magic number reads as an unknown format).
	case forged && (errors.Is(err, errReadsDisagree) || refusal(err)):
		// Sound checksums over damaged bytes: the reader cannot
		// tell every such table from a real one.
	default:
		t.Fatalf("damaged table: error %v does not wrap ErrCorruption", err)
	}
}

// FuzzTable runs no larger inputs: they find nothing that smaller ones
// cannot, and cost the fuzzer more, to run and to minimise.
const (
	maxFuzzContents = 64 // a dozen entries or so
	maxFuzzDamage   = 32 // eight damages
)

// fuzzTableConfig is what FuzzTable's cfg selects.
type fuzzTableConfig struct {
	writer          WriterOptions
	legacyRangeDels bool // RocksDB's older unfragmented range-deletion block
	// indexPartition is the entries of each index partition of a two-level
	// index; 0 for a one-level index.
	indexPartition int
	// cache is 0 for a reader without a block cache, 1 for one with a
	// small cache, 2 for one that also keeps its index and filter there.
	cache  int
	reseal bool
}

// decodeFuzzConfig reads cfg's bits: 0-2 the block size, 3-6 the restart
// interval, 7 no compression, 8-9 the filter's bits per key, 10 the LevelDB
// format, 11 legacy range deletions, 12-13 the cache, 14 reseal, 15 a
// two-level index with 16-17 the entries of a partition (1 to 4).
func decodeFuzzConfig(cfg uint32) fuzzTableConfig {
	bits := func(shift, n int) int { return int(cfg>>shift) & (1<<n - 1) }
	c := fuzzTableConfig{
		writer: WriterOptions{
			BlockSize:            []int{64, 1, 24, 128, 256, 512, 1024, 4096}[bits(0, 3)],
			BlockRestartInterval: 1 + bits(3, 4),
			Compression:          compressionIf(bits(7, 1) == 1),
			BloomBitsPerKey:      []int{10, -1, 1, 32}[bits(8, 2)],
		},
		legacyRangeDels: bits(11, 1) == 1,
		cache:           bits(12, 2) % 3,
		reseal:          bits(14, 1) == 1,
		indexPartition:  bits(15, 1) * (1 + bits(16, 2)),
	}
	if bits(10, 1) == 1 {
		c.writer.TableFormat = TableFormatLevelDB
	}
	return c
}

// readerOptions returns options for one reader: each gets its own cache, so
// that a damaged table's reader finds none of the original's blocks.
func (c fuzzTableConfig) readerOptions() ReaderOptions {
	if c.cache == 0 {
		return ReaderOptions{}
	}
	return ReaderOptions{Cache: cache.New(16<<10, cache.Options{Shards: 1}), FileNum: 1, CacheIndexAndFilterBlocks: c.cache == 2}
}

// fuzzSpec decodes a table's contents from b, a run of records: a head byte,
// the user key's bytes, a sequence-number byte, then for a set a value byte
// and the value, for a range deletion an end-key length byte and the end key.
// The head's low two bits are the kind (set, set, delete, range deletion);
// bit 2 appends the key's bytes to the previous record's key (shared
// prefixes); bit 3 counts the sequence number down from SeqNumMax; the high
// four bits are the key's length. A value byte v takes the next v&0x3f
// bytes, or with bit 6 set (v&0x3f)*32 copies of the next byte (compressible,
// larger than a block). Bytes past the end of b read as zeros. The entries
// are sorted and duplicates dropped: any b is a valid table.
func fuzzSpec(b []byte, rangeDels bool) tableSpec {
	next := func() byte {
		if len(b) == 0 {
			return 0
		}
		c := b[0]
		b = b[1:]
		return c
	}
	take := func(n int) []byte {
		k := make([]byte, n)
		for i := range k {
			k[i] = next()
		}
		return k
	}
	var spec tableSpec
	var prev []byte
	for len(b) > 0 && len(spec.entries)+len(spec.dels) < 100 {
		head := next()
		uk := take(int(head >> 4))
		if head&4 != 0 {
			uk = append(bytes.Clone(prev), uk...)
		}
		prev = uk
		seq := base.SeqNum(next())
		if head&8 != 0 {
			seq = base.SeqNumMax - seq
		}
		switch head & 3 {
		case 0, 1:
			var value []byte
			if v := next(); v&0x40 != 0 {
				value = bytes.Repeat([]byte{next()}, int(v&0x3f)*32)
			} else {
				value = take(int(v & 0x3f))
			}
			spec.entries = append(spec.entries, entry{base.MakeInternalKey(uk, seq, base.KindSet), value})
		case 2:
			spec.entries = append(spec.entries, entry{base.MakeInternalKey(uk, seq, base.KindDelete), nil})
		case 3:
			end := take(int(next() & 15))
			switch bytes.Compare(uk, end) {
			case 0:
				continue
			case 1:
				uk, end = end, uk
			}
			if rangeDels {
				spec.dels = append(spec.dels, tomb(uk, end, seq))
			}
		}
	}
	slices.SortFunc(spec.entries, func(a, b entry) int { return base.CompareInternal(a.key, b.key) })
	spec.entries = slices.CompactFunc(spec.entries, func(a, b entry) bool { return base.CompareInternal(a.key, b.key) == 0 })
	return spec
}

// fuzzProbes returns the user keys to look up and seek to: the table's keys,
// each followed by a zero byte (absent, between keys), the range deletions'
// bounds, and the extremes.
func fuzzProbes(spec tableSpec) [][]byte {
	probes := [][]byte{{}, {0xff, 0xff}}
	for _, e := range spec.entries {
		probes = append(probes, e.key.UserKey, append(bytes.Clone(e.key.UserKey), 0))
	}
	for _, d := range spec.dels {
		probes = append(probes, d.Start, d.End)
	}
	slices.SortFunc(probes, bytes.Compare)
	return slices.CompactFunc(probes, bytes.Equal)
}

// checkFuzzContents checks what readAll read from an undamaged table against
// spec, what was written.
func checkFuzzContents(t *testing.T, c fuzzTableConfig, spec tableSpec, probes [][]byte, got tableContents) {
	t.Helper()
	sameEntries(t, got.entries, spec.entries, "forward iteration")
	frags := rangedel.Fragment(spec.dels)
	sameRangeDels(t, got.dels, frags, "range deletions")
	for i, p := range probes {
		// The first entry at or after p, and the one before it.
		ge, _ := slices.BinarySearchFunc(spec.entries, p, func(e entry, p []byte) int {
			if bytes.Compare(e.key.UserKey, p) < 0 {
				return -1
			}
			return 1
		})
		geKey, ltKey := "-", "-"
		if ge < len(spec.entries) {
			geKey = keyString(&spec.entries[ge].key)
		}
		if ge > 0 {
			ltKey = keyString(&spec.entries[ge-1].key)
		}
		wantSeek := geKey + " " + ltKey
		if got.seeks[i] != wantSeek {
			t.Fatalf("SeekGE, SeekLT(%q): %s, want %s", p, got.seeks[i], wantSeek)
		}
		wantGet := lookupString(false, 0, nil)
		if e := newestBelow(spec.entries, ge, p, base.SeqNumMax); e != nil {
			wantGet = lookupString(true, e.key.Kind(), e.value)
		}
		if got.filter != nil && !got.filter[i] && ge < len(spec.entries) && bytes.Equal(spec.entries[ge].key.UserKey, p) {
			t.Fatalf("the table filter says %q is absent", p)
		}
		if got.gets[i] != wantGet {
			t.Fatalf("lookup(%q): %s, want %s", p, got.gets[i], wantGet)
		}
	}
	if (got.filter != nil) != (c.writer.BloomBitsPerKey > 0) {
		t.Fatalf("filter %v with %d bits per key", got.filter != nil, c.writer.BloomBitsPerKey)
	}
	if err := got.check.Err(); err != nil || !got.check.Complete || got.check.Entries != uint64(len(spec.entries)) {
		t.Fatalf("check of an undamaged table: %v; complete %v, %d entries of %d", err, got.check.Complete, got.check.Entries, len(spec.entries))
	}
	// Every version of every key, looked up at its own sequence number and
	// at the one after it, as the store reads at snapshots.
	rd := got.rd
	run := 0 // where the versions of the current user key start
	for i, e := range spec.entries {
		if !bytes.Equal(spec.entries[run].key.UserKey, e.key.UserKey) {
			run = i
		}
		for _, seq := range []base.SeqNum{e.key.SeqNum(), e.key.SeqNum() + 1} {
			want := newestBelow(spec.entries, run, e.key.UserKey, seq)
			v, kind, found, err := lookup(rd, e.key.UserKey, seq)
			if err != nil || found != (want != nil) || (found && (kind != want.key.Kind() || !bytes.Equal(v, want.value))) {
				t.Fatalf("lookup(%q, %d): found %v, %v %q, %v; want %v", e.key.UserKey, seq, found, kind, v, err, want)
			}
		}
	}
	dels := len(frags)
	if c.legacyRangeDels {
		dels = len(spec.dels) // stored as written, fragmented when read
	}
	p := rd.Properties()
	if p.NumEntries != uint64(len(spec.entries)+dels) || p.NumRangeDeletions != uint64(dels) {
		t.Fatalf("properties: %d entries, %d range deletions; want %d, %d", p.NumEntries, p.NumRangeDeletions, len(spec.entries)+dels, dels)
	}
}

// newestBelow returns the newest version of userKey below seq (which a read
// at seq sees) among entries, whose versions of userKey start at run when it
// has any; nil when there is none.
func newestBelow(entries []entry, run int, userKey []byte, seq base.SeqNum) *entry {
	for j := run; j < len(entries) && bytes.Equal(entries[j].key.UserKey, userKey); j++ {
		if entries[j].key.SeqNum() < seq {
			return &entries[j]
		}
	}
	return nil
}

// damageTable applies damage to a copy of data: records of four bytes, an
// op, an offset (two bytes, scaled to the table's length) and an argument.
// Op 0 XORs the byte at the offset with the argument, 1 sets it to the
// argument, 2 cuts the table there, 3 overwrites argument&15 bytes from
// there with the bytes that follow the record.
func damageTable(data, damage []byte) []byte {
	bad := bytes.Clone(data)
	for len(damage) >= 4 && len(bad) > 0 {
		op, off, arg := damage[0], (int(damage[1])<<8|int(damage[2]))*len(bad)>>16, damage[3]
		damage = damage[4:]
		switch op % 4 {
		case 0:
			bad[off] ^= arg
		case 1:
			bad[off] = arg
		case 2:
			bad = bad[:off]
		case 3:
			n := min(int(arg&15), len(damage))
			copy(bad[off:], damage[:n])
			damage = damage[n:]
		}
	}
	return bad
}

// refusal reports whether err is the reader refusing a table it does not
// support, which is not corruption: another comparer's table, or an index
// type or RocksDB index encoding it does not read.
func refusal(err error) bool {
	for _, s := range []string{"is not bloomkv's", "unsupported index type", "unsupported RocksDB index encoding"} {
		if strings.Contains(err.Error(), s) {
			return true
		}
	}
	return false
}
