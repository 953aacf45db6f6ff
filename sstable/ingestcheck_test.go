package sstable

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/cache"
	pebble "github.com/cockroachdb/pebble/v2/sstable"
)

// ingestSpec is a table as written for ingestion: 400 keys at sequence
// number 0, every seventh a deletion, values of a few bytes.
func ingestSpec() tableSpec {
	var spec tableSpec
	for i := range 400 {
		k := base.MakeInternalKey(fmt.Appendf(nil, "k%04d", i), 0, base.KindSet)
		v := fmt.Appendf(nil, "v%d", i)
		if i%7 == 3 {
			k, v = base.MakeInternalKey(k.UserKey, 0, base.KindDelete), nil
		}
		spec.entries = append(spec.entries, entry{k, v})
	}
	return spec
}

var testIngestChecks = &IngestChecks{MaxKeySize: 16, MaxValueSize: 64}

// readEvery reads data with opts in each way a store reads a table (point
// lookups, a forward and a backward walk through the cache or without it,
// a compaction's walk) and returns the errors, by way.
func readEvery(t *testing.T, data []byte, keys [][]byte, opts ReaderOptions) map[string]error {
	t.Helper()
	errs := map[string]error{}
	for _, withCache := range []bool{false, true} {
		o := opts
		o.FileName = "t.sst"
		if withCache {
			o.Cache, o.FileNum = cache.New(1<<20, cache.Options{}), 1
		}
		r, err := NewReader(bytes.NewReader(data), int64(len(data)), o)
		if err != nil {
			t.Fatal(err)
		}
		ways := map[string]func() error{
			"lookups": func() error {
				for _, k := range keys {
					if _, _, _, err := r.LookupCopy(k, base.SeqNumMax); err != nil {
						return err
					}
				}
				return nil
			},
			"forward": func() error {
				it := r.NewIter()
				for ok := it.First(); ok; ok = it.Next() {
				}
				return it.Close()
			},
			"backward": func() error {
				it := r.NewIter()
				for ok := it.Last(); ok; ok = it.Prev() {
				}
				return it.Close()
			},
			"compaction": func() error {
				it := r.NewCompactionIter()
				for ok := it.First(); ok; ok = it.Next() {
				}
				return it.Close()
			},
		}
		for name, read := range ways {
			// Twice: a block that failed must not have been cached.
			for i := range 2 {
				errs[fmt.Sprintf("%s/cache=%v/%d", name, withCache, i)] = read()
			}
		}
	}
	return errs
}

// TestIngestChecks damages tables written for ingestion in one middle data
// block each, in the ways IngestChecks looks for, with the block's checksum
// right: every way of reading the block then fails with an error wrapping
// ErrCorruption that names the table, the block and the problem, and reads
// without the checks do not fail. Clean tables, ours and Pebble's, with one-
// and two-level indexes, read whole with the checks.
func TestIngestChecks(t *testing.T) {
	spec := ingestSpec()
	var keys [][]byte
	for _, e := range spec.entries {
		keys = append(keys, e.key.UserKey)
	}
	opts := WriterOptions{BlockSize: 256, BlockRestartInterval: 1, Compression: NoCompression}
	type damage struct {
		name, want string
		// change damages the table in place: at is the offset of the
		// user key of the entry that the damage is about, in the
		// middle data block, whose handle it is given with its
		// entries' key offsets.
		change func(data []byte, at []int)
	}
	trailer := func(data []byte, at int, tr base.Trailer) {
		binary.LittleEndian.PutUint64(data[at+5:], uint64(tr))
	}
	damages := []damage{
		{"order in a block", "out of order", func(data []byte, at []int) {
			data[at[2]+4] = ':' // k0xy2 becomes k0xy: (after k0xy3)
		}},
		{"sequence number", "sequence number 7", func(data []byte, at []int) {
			trailer(data, at[2], base.MakeTrailer(7, base.KindSet))
		}},
		{"kind", "kind", func(data []byte, at []int) {
			trailer(data, at[2], base.MakeTrailer(0, base.Kind(2))) // a merge operand
		}},
		{"repeated user key", "repeats", func(data []byte, at []int) {
			copy(data[at[2]:at[2]+5], data[at[1]:at[1]+5])
			trailer(data, at[2], base.MakeTrailer(0, base.KindDelete))
			trailer(data, at[1], base.MakeTrailer(0, base.KindSet))
		}},
		{"before the previous separator", "not past the separator", func(data []byte, at []int) {
			data[at[0]+3] -= 2 // k0xy0 becomes k0x(y-2)0: in the block before's range
		}},
		{"past its separator", "past the block's separator", func(data []byte, at []int) {
			data[at[len(at)-1]+3] += 2
		}},
	}
	for _, twoLevel := range []bool{false, true} {
		var setup func(*Writer)
		if twoLevel {
			setup = func(w *Writer) { w.indexPartitionEntries = 4 }
		}
		clean := writeSpecWith(t, spec, opts, setup)
		l := openTable(t, clean).Layout()
		var data []BlockInfo
		for _, b := range l.Blocks {
			if b.Kind == BlockData {
				data = append(data, b)
			}
		}
		if len(data) < 10 {
			t.Fatalf("%d data blocks", len(data))
		}
		// A block in the middle, and in a two-level index the first of
		// its partition, whose previous separator is in the partition
		// before.
		mid := data[len(data)/2&^3].Handle
		// The key offsets of the middle block's entries: restart interval
		// 1, no compression, so each key lies whole where written.
		var at []int
		for off := int(mid.Offset); off < int(mid.Offset+mid.Length); {
			i := bytes.Index(clean[off:mid.Offset+mid.Length], []byte("k0"))
			if i < 0 {
				break
			}
			at = append(at, off+i)
			off += i + 5
		}
		if len(at) < 4 {
			t.Fatalf("%d entries in the middle block", len(at))
		}
		for _, d := range damages {
			t.Run(fmt.Sprintf("twoLevel=%v/%s", twoLevel, d.name), func(t *testing.T) {
				b := bytes.Clone(clean)
				d.change(b, at)
				reseal(b, mid)
				for way, err := range readEvery(t, b, keys, ReaderOptions{IngestChecks: testIngestChecks}) {
					if !errors.Is(err, ErrCorruption) || !strings.Contains(err.Error(), "t.sst") ||
						!strings.Contains(err.Error(), mid.String()) || !strings.Contains(err.Error(), d.want) {
						t.Errorf("%s: %v; want ErrCorruption naming t.sst, block %s and %q", way, err, mid, d.want)
					}
				}
				for way, err := range readEvery(t, b, keys, ReaderOptions{}) {
					if err != nil {
						t.Errorf("%s, without the checks: %v", way, err)
					}
				}
			})
		}
	}

	t.Run("sizes", func(t *testing.T) {
		big := ingestSpec()
		big.entries[200].value = bytes.Repeat([]byte("v"), 65)
		for way, err := range readEvery(t, writeSpec(t, big, opts), keys, ReaderOptions{IngestChecks: testIngestChecks}) {
			if !errors.Is(err, ErrCorruption) || !strings.Contains(err.Error(), "value of 65 bytes") {
				t.Errorf("%s: %v", way, err)
			}
		}
	})

	t.Run("repeat across blocks", func(t *testing.T) {
		// k#0,SET ends a block and k#0,DEL begins the next: in order as
		// internal keys, but one user key twice.
		var rep tableSpec
		for _, e := range []struct {
			k    string
			kind base.Kind
		}{{"a", base.KindSet}, {"k", base.KindSet}, {"k", base.KindDelete}, {"z", base.KindSet}} {
			var v []byte
			if e.kind == base.KindSet {
				v = []byte("v")
			}
			rep.entries = append(rep.entries, entry{base.MakeInternalKey([]byte(e.k), 0, e.kind), v})
		}
		data := writeSpec(t, rep, WriterOptions{BlockSize: 1})
		for way, err := range readEvery(t, data, [][]byte{[]byte("a"), []byte("z")}, ReaderOptions{IngestChecks: testIngestChecks}) {
			if strings.HasPrefix(way, "lookups") {
				continue // they read the blocks of a and z alone
			}
			if !errors.Is(err, ErrCorruption) || !strings.Contains(err.Error(), "repeat") {
				t.Errorf("%s: %v", way, err)
			}
		}
	})

	t.Run("index", func(t *testing.T) {
		// The second index entry names the first block: a cache hit on
		// it would serve a block checked under another entry's bounds.
		clean := writeSpec(t, spec, opts)
		keys, values := indexEntries(t, clean)
		values[1] = values[0]
		data := withIndex(t, clean, keys, values)
		if _, err := NewReader(bytes.NewReader(data), int64(len(data)), ReaderOptions{FileName: "t.sst"}); err != nil {
			t.Fatalf("without the checks: %v", err)
		}
		_, err := NewReader(bytes.NewReader(data), int64(len(data)), ReaderOptions{FileName: "t.sst", IngestChecks: testIngestChecks})
		if !errors.Is(err, ErrCorruption) || !strings.Contains(err.Error(), "overlaps the block before") {
			t.Fatalf("with the checks: %v", err)
		}
	})

	t.Run("top-level index", func(t *testing.T) {
		// A two-level index whose second top-level separator is its
		// partition's first separator, not its last: a lookup of a key in
		// that partition's later blocks goes to the next partition and
		// misses it.
		clean := writeSpecWith(t, spec, opts, func(w *Writer) { w.indexPartitionEntries = 4 })
		keys, values := indexEntries(t, clean)
		ph, _ := decodeHandle(values[1])
		part, err := openTable(t, clean).readBlock(ph, "index partition")
		if err != nil {
			t.Fatal(err)
		}
		var pi blockIter
		if err := pi.init(part, false, blockWhere{}); err != nil || !pi.first() {
			t.Fatalf("partition: %v", err)
		}
		keys[1] = bytes.Clone(pi.key)
		data := withIndex(t, clean, keys, values)
		unchecked, err := NewReader(bytes.NewReader(data), int64(len(data)), ReaderOptions{FileName: "t.sst"})
		if err != nil {
			t.Fatalf("without the checks: %v", err)
		}
		missed := 0
		for _, e := range spec.entries {
			if _, _, found, err := unchecked.LookupCopy(e.key.UserKey, base.SeqNumMax); !found && err == nil {
				missed++
			}
		}
		if missed == 0 {
			t.Fatal("the damaged top-level index hides no key without the checks: the test damages nothing")
		}
		// The partitions are checked as they are read.
		var userKeys [][]byte
		for _, e := range spec.entries {
			userKeys = append(userKeys, e.key.UserKey)
		}
		for way, err := range readEvery(t, data, userKeys, ReaderOptions{IngestChecks: testIngestChecks}) {
			if !errors.Is(err, ErrCorruption) || !strings.Contains(err.Error(), "before its partition's last") || !strings.Contains(err.Error(), ph.String()) {
				t.Errorf("%s, with the checks: %v; want ErrCorruption naming partition %s", way, err, ph)
			}
		}
	})

	t.Run("value size in Pebble's prefixed values", func(t *testing.T) {
		big := ingestSpec()
		big.entries[200].value = bytes.Repeat([]byte("v"), 65)
		data := writePebbleTableWith(t, big, pebble.WriterOptions{TableFormat: pebble.TableFormatPebblev4, BlockSize: 256})
		for way, err := range readEvery(t, data, keys, ReaderOptions{IngestChecks: testIngestChecks}) {
			if !errors.Is(err, ErrCorruption) || !strings.Contains(err.Error(), "value of 65 bytes") {
				t.Errorf("%s: %v", way, err)
			}
		}
	})

	t.Run("clean", func(t *testing.T) {
		tables := map[string][]byte{
			"ours":           writeSpec(t, spec, opts),
			"ours/snappy":    writeSpec(t, spec, WriterOptions{BlockSize: 256}),
			"ours/two-level": writeSpecWith(t, spec, opts, func(w *Writer) { w.indexPartitionEntries = 3 }),
			"pebble":         pebbleIngestTable(t, spec),
		}
		for _, f := range []pebble.TableFormat{pebble.TableFormatRocksDBv2, pebble.TableFormatPebblev1, pebble.TableFormatPebblev3, pebble.TableFormatPebblev4, pebble.TableFormatPebblev5, pebble.TableFormatPebblev7} {
			for _, ib := range []int{0, 128} {
				tables[fmt.Sprintf("pebble/%v/index-block-size=%d", f, ib)] = writePebbleTableWith(t, spec, pebble.WriterOptions{TableFormat: f, BlockSize: 128, IndexBlockSize: ib})
			}
		}
		for name, data := range tables {
			for way, err := range readEvery(t, data, keys, ReaderOptions{IngestChecks: testIngestChecks}) {
				if err != nil {
					t.Errorf("%s: %s: %v", name, way, err)
				}
			}
		}
	})
}

// indexEntries returns the entries of the table's index block (the
// top-level one of a two-level index).
func indexEntries(t *testing.T, data []byte) (keys, values [][]byte) {
	t.Helper()
	var ii blockIter
	if err := ii.init(openTable(t, data).index, false, blockWhere{}); err != nil {
		t.Fatal(err)
	}
	for ok := ii.first(); ok; ok = ii.next() {
		keys, values = append(keys, bytes.Clone(ii.key)), append(values, bytes.Clone(ii.value))
	}
	return keys, values
}

// withIndex returns the table data with its index block (the top-level
// one of a two-level index) replaced by one of the entries given.
func withIndex(t *testing.T, data []byte, keys, values [][]byte) []byte {
	t.Helper()
	r := openTable(t, data)
	var bw blockWriter
	bw.restartInterval = 1
	for i := range keys {
		bw.add(keys[i], values[i])
	}
	idx := bw.finish()
	out := bytes.Clone(data[:r.footer.index.Offset])
	bh := BlockHandle{Offset: uint64(len(out)), Length: uint64(len(idx))}
	out = append(append(out, idx...), 0, 0, 0, 0, 0)
	reseal(out, bh)
	f := r.footer
	f.index = bh
	return append(out, f.encode()...)
}

// pebbleIngestTable writes spec with Pebble's writer in RocksDBv2, small
// index blocks making its index two-level, as Pebble writes tables for
// ingestion.
func pebbleIngestTable(t *testing.T, spec tableSpec) []byte {
	t.Helper()
	data := writePebbleTableWith(t, spec, pebble.WriterOptions{TableFormat: pebble.TableFormatRocksDBv2, BlockSize: 256, IndexBlockSize: 128})
	if r := openTable(t, data); r.props.IndexType != indexTypeTwoLevel {
		t.Fatalf("Pebble's table has index type %d, want two-level", r.props.IndexType)
	}
	return data
}

// TestIndexCheckQuick checks that indexCheck.quick, the one-pass check of
// an index block, passes no block that the entry-by-entry check refuses,
// and leaves the same state where it passes one: over a real index, a
// two-level table's partitions, and random damage to them.
func TestIndexCheckQuick(t *testing.T) {
	var spec tableSpec
	for i := range 3000 {
		spec.entries = append(spec.entries, entry{base.MakeInternalKey(fmt.Appendf(nil, "key%06d", 3*i), 0, base.KindSet), bytes.Repeat([]byte{byte(i)}, 40)})
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, data := range [][]byte{writeSpec(t, spec, WriterOptions{BlockSize: 512}), pebbleIngestTable(t, spec)} {
		r, err := NewReader(bytes.NewReader(data), int64(len(data)), ReaderOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var blocks [][]byte // the index's data-entry blocks
		if r.props.IndexType != indexTypeTwoLevel {
			blocks = append(blocks, r.index)
		} else {
			err := r.walkIndexBlock(r.index, r.where("index", r.footer.index), func(off int, key, value []byte) error {
				ph, _ := decodeHandle(value)
				b, err := r.iterBlock(ph, "index partition", false, nil, nil)
				blocks = append(blocks, b)
				return err
			})
			if err != nil || len(blocks) < 3 {
				t.Fatalf("%d partitions: %v", len(blocks), err)
			}
		}
		passed, refused := 0, 0
		for trial := range 3000 {
			prefix := blocks[:rng.IntN(len(blocks))]
			b := slices.Clone(blocks[len(prefix)])
			switch {
			case trial%50 == 1: // whole entries, but no restarts, or more than fit
				nr := int(binary.LittleEndian.Uint32(b[len(b)-4:]))
				b = binary.LittleEndian.AppendUint32(b[:len(b)-4-4*nr], uint32(trial%100/50)*uint32(len(b)))
			case trial > 0:
				for range 1 + rng.IntN(3) {
					b[rng.IntN(len(b))] ^= byte(1 + rng.IntN(255))
				}
			}
			start := func() *indexCheck {
				c := &indexCheck{t: r, end: r.dataEnd, markFirst: true}
				for _, p := range prefix {
					if err := r.walkIndexBlock(p, blockWhere{}, c.data); err != nil {
						t.Fatal(err)
					}
				}
				c.markFirst = true
				return c
			}
			quick, slow := start(), start()
			before := *quick
			slowErr := r.walkIndexBlock(b, blockWhere{}, slow.data)
			if !quick.quick(b) {
				if !reflect.DeepEqual(*quick, before) {
					t.Fatalf("trial %d: quick refused the block but changed the state: %+v, was %+v", trial, *quick, before)
				}
				refused++
				continue
			}
			passed++
			if slowErr != nil {
				t.Fatalf("trial %d: quick passed a block the entry-by-entry check refuses: %v", trial, slowErr)
			}
			if quick.n != slow.n || quick.prevEnd != slow.prevEnd || !bytes.Equal(quick.prevSep, slow.prevSep) || !bytes.Equal(quick.firstSep, slow.firstSep) || quick.markFirst != slow.markFirst {
				t.Fatalf("trial %d: states differ: quick %+v, slow %+v", trial, *quick, *slow)
			}
		}
		if passed < 10 || refused < 1000 {
			t.Fatalf("%d blocks passed, %d refused: the trials test too little", passed, refused)
		}
	}
}

// BenchmarkOpenIngestChecks opens a 400k-key table as a store opens an
// ingested one (the index checked whole) and without the checks.
func BenchmarkOpenIngestChecks(b *testing.B) {
	var spec tableSpec
	for i := range 400_000 {
		spec.entries = append(spec.entries, entry{base.MakeInternalKey(fmt.Appendf(nil, "key%013d", 2*i), 0, base.KindSet), bytes.Repeat([]byte{byte(i)}, 100)})
	}
	data := writeSpec(b, spec, WriterOptions{})
	for _, checks := range []bool{false, true} {
		b.Run(fmt.Sprintf("checks=%v", checks), func(b *testing.B) {
			o := ReaderOptions{}
			if checks {
				o.IngestChecks = testIngestChecks
			}
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, err := NewReader(bytes.NewReader(data), int64(len(data)), o); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// ingestedBlocks writes a table for ingestion (3,000 keys of 9 to 16 bytes,
// sets and deletions, values of up to 70 bytes, a few of 200) in small blocks and
// returns its reader, with checks, and its data blocks with the index's
// separators around each (lo nil for the first).
func ingestedBlocks(t testing.TB, checks *IngestChecks) (r *Reader, blocks, los, his [][]byte) {
	rng := rand.New(rand.NewPCG(3, 4))
	var spec tableSpec
	for i := range 3000 {
		kind := base.KindSet
		if rng.IntN(5) == 0 {
			kind = base.KindDelete
		}
		v := bytes.Repeat([]byte{byte(i)}, rng.IntN(71))
		if rng.IntN(500) == 0 {
			v = make([]byte, 200) // a two-byte length: the one-pass check leaves the block to the other
		}
		if kind == base.KindDelete {
			v = nil
		}
		k := fmt.Appendf(nil, "key%06d%s", 3*i, strings.Repeat("x", rng.IntN(8)))
		spec.entries = append(spec.entries, entry{base.MakeInternalKey(k, 0, kind), v})
	}
	data := writeSpec(t, spec, WriterOptions{BlockSize: 512})
	r, err := NewReader(bytes.NewReader(data), int64(len(data)), ReaderOptions{IngestChecks: checks})
	if err != nil {
		t.Fatal(err)
	}
	var lo []byte
	err = r.walkIndexBlock(r.index, r.where("index", r.footer.index), func(off int, key, value []byte) error {
		bh, _ := decodeHandle(value)
		b, err := r.readBlock(bh, "data")
		blocks, los, his = append(blocks, b), append(los, lo), append(his, slices.Clone(key))
		lo = his[len(his)-1]
		return err
	})
	if err != nil || len(blocks) < 50 {
		t.Fatalf("%d blocks: %v", len(blocks), err)
	}
	return r, blocks, los, his
}

// TestCheckIngestedQuick: the one-pass check of a data block of an
// ingested table passes the blocks of a well-formed table (but those with
// a length of two bytes, which it leaves to the entry-by-entry check), and
// passes no block that the entry-by-entry check refuses: over random
// damage to the blocks, separators of other blocks, and tighter limits.
func TestCheckIngestedQuick(t *testing.T) {
	r, blocks, los, his := ingestedBlocks(t, &IngestChecks{MaxKeySize: 32, MaxValueSize: 250})
	var s ingestScratch
	left := 0
	for i, b := range blocks {
		if err := r.checkIngestedBlock(&s, b, blockWhere{}, los[i], his[i]); err != nil {
			t.Fatalf("block %d: %v", i, err)
		}
		if !r.quickIngested(&s, b, los[i], his[i]) {
			left++
		}
	}
	if left == 0 || left > len(blocks)/5 {
		t.Fatalf("the one-pass check left %d of %d well-formed blocks to the other", left, len(blocks))
	}
	rng := rand.New(rand.NewPCG(5, 6))
	passed, refused := 0, 0
	for trial := range 20000 {
		i := rng.IntN(len(blocks))
		b, lo, hi := slices.Clone(blocks[i]), los[i], his[i]
		r.opts.IngestChecks = &IngestChecks{MaxKeySize: 32, MaxValueSize: 250}
		switch trial % 5 {
		case 0:
			for range 1 + rng.IntN(3) {
				b[rng.IntN(len(b))] ^= byte(1 + rng.IntN(255))
			}
			if rng.IntN(8) == 0 {
				b[0] = byte(1 + rng.IntN(8)) // the first entry shares bytes with none
			}
		case 1:
			b = reencodeWrong(t, b, rng)
		case 2:
			lo, hi = los[rng.IntN(len(blocks))], his[rng.IntN(len(blocks))]
			switch rng.IntN(4) {
			case 0: // the block's own first user key, at another trailer
				k := firstKey(t, b)
				lo = append(k[:len(k)-base.TrailerLen:len(k)-base.TrailerLen], byte(rng.IntN(256)), 0, 0, 0, 0, 0, 0, byte(rng.IntN(256)))
			case 1: // separators shorter than a trailer
				lo, hi = lo[:min(len(lo), rng.IntN(base.TrailerLen))], hi[:min(len(hi), rng.IntN(base.TrailerLen))]
				if rng.IntN(2) == 0 {
					lo = []byte{} // not nil: a separator, empty
				}
			}
		case 3:
			r.opts.IngestChecks = &IngestChecks{MaxKeySize: 9 + rng.IntN(8), MaxValueSize: 60 + rng.IntN(20)}
		}
		if checkBlock(b, blockWhere{}) != nil {
			continue // refused as it comes off the disk (checkDecode), before these checks
		}
		slowErr := r.checkIngestedBlock(&s, b, blockWhere{}, lo, hi)
		if !r.quickIngested(&s, b, lo, hi) {
			refused++
			continue
		}
		passed++
		if slowErr != nil {
			t.Fatalf("trial %d (block %d): the one-pass check passed a block the entry-by-entry check refuses: %v", trial, i, slowErr)
		}
	}
	if passed < 1000 || refused < 5000 {
		t.Fatalf("%d blocks passed, %d refused: the trials test too little", passed, refused)
	}
}

// firstKey returns the first key of the data block b.
func firstKey(t *testing.T, b []byte) []byte {
	var bi blockIter
	if err := bi.init(b, false, blockWhere{}); err != nil || !bi.first() {
		t.Fatalf("no first key: %v", err)
	}
	return slices.Clone(bi.key)
}

// TestCheckIngestedQuickLeavesOthers: the one-pass check leaves to the
// entry-by-entry check the blocks of tables it does not read as written:
// keys in another order than bytewise, values behind Pebble's prefix byte
// (whose stored length the value block holds), obsolete bits in the kind.
func TestCheckIngestedQuickLeavesOthers(t *testing.T) {
	r, blocks, los, his := ingestedBlocks(t, &IngestChecks{MaxKeySize: 32, MaxValueSize: 250})
	var s ingestScratch
	if !r.quickIngested(&s, blocks[1], los[1], his[1]) {
		t.Fatal("the one-pass check refused a well-formed block")
	}
	for _, c := range []struct {
		what string
		set  func(on bool)
	}{
		{"keys in CockroachDB's order", func(on bool) { r.order = map[bool]keyOrder{true: orderCRDB, false: orderBytewise}[on] }},
		{"values behind a prefix byte", func(on bool) { r.valuePrefix = on }},
		{"obsolete bits", func(on bool) { r.obsoleteBits = on }},
	} {
		c.set(true)
		passed := r.quickIngested(&s, blocks[1], los[1], his[1])
		c.set(false)
		if passed {
			t.Fatalf("the one-pass check read a block of a table with %s", c.what)
		}
	}
}

// FuzzCheckIngestedQuick: on any block, separators and limits, the
// one-pass check passes nothing the entry-by-entry check refuses, and
// never panics, whatever its scratch holds.
func FuzzCheckIngestedQuick(f *testing.F) {
	_, blocks, los, his := ingestedBlocks(f, &IngestChecks{MaxKeySize: 32, MaxValueSize: 250})
	for i := 0; i < len(blocks); i += 10 {
		f.Add(blocks[i], los[i], his[i], uint8(32), uint8(250), []byte("leftover"), los[i] == nil)
	}
	var s ingestScratch
	f.Fuzz(func(t *testing.T, b, lo, hi []byte, maxKey, maxValue uint8, scratch []byte, loNil bool) {
		if loNil {
			lo = nil
		}
		r := &Reader{opts: ReaderOptions{IngestChecks: &IngestChecks{MaxKeySize: int(maxKey), MaxValueSize: int(maxValue)}}}
		s.prev = append(s.prev[:0], scratch...)
		if r.quickIngested(&s, b, lo, hi) {
			if err := r.checkIngestedBlock(&s, b, blockWhere{}, lo, hi); err != nil {
				t.Fatalf("the one-pass check passed a block the entry-by-entry check refuses: %v", err)
			}
		}
	})
}

// reencodeWrong returns the data block b re-encoded, well formed, with one
// entry wrong for ingestion: its user key repeated from the entry before or
// swapped with it, or its trailer at a sequence number above 0 or of a kind
// other than a set or a deletion.
func reencodeWrong(t *testing.T, b []byte, rng *rand.Rand) []byte {
	var bi blockIter
	if err := bi.init(b, false, blockWhere{}); err != nil {
		t.Fatal(err)
	}
	var keys, values [][]byte
	for ok := bi.first(); ok; ok = bi.next() {
		keys, values = append(keys, slices.Clone(bi.key)), append(values, bi.value)
	}
	if bi.err != nil || len(keys) < 2 {
		t.Fatalf("%d entries: %v", len(keys), bi.err)
	}
	i := 1 + rng.IntN(len(keys)-1)
	k := keys[i]
	tr := k[len(k)-base.TrailerLen:]
	switch rng.IntN(4) {
	case 0:
		k = append(slices.Clone(keys[i-1][:len(keys[i-1])-base.TrailerLen]), tr...)
	case 1:
		keys[i-1], k = k, keys[i-1]
	case 2:
		seq := []base.SeqNum{1, 2, 1 << 55}[rng.IntN(3)]
		binary.LittleEndian.PutUint64(tr, uint64(base.MakeTrailer(seq, base.KindSet)))
	case 3:
		binary.LittleEndian.PutUint64(tr, uint64(base.MakeTrailer(0, []base.Kind{2, 7, base.KindRangeDelete, 18}[rng.IntN(4)])))
	}
	keys[i] = k
	w := blockWriter{restartInterval: 16}
	for j := range keys {
		w.add(keys[j], values[j])
	}
	return slices.Clone(w.finish())
}

// BenchmarkCheckIngested checks every data block of a table for ingestion
// in one pass and entry by entry.
func BenchmarkCheckIngested(b *testing.B) {
	r, blocks, los, his := ingestedBlocks(b, &IngestChecks{MaxKeySize: 32, MaxValueSize: 250})
	var s ingestScratch
	b.Run("quick", func(b *testing.B) {
		for b.Loop() {
			for i, blk := range blocks {
				r.quickIngested(&s, blk, los[i], his[i])
			}
		}
	})
	b.Run("entries", func(b *testing.B) {
		for b.Loop() {
			for i, blk := range blocks {
				if err := r.checkIngestedBlock(&s, blk, blockWhere{}, los[i], his[i]); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}

// TestIngestChecksPartitions damages one partition of a two-level index,
// whose partitions the checks see only as they are read: each damage is
// found whichever partitions were read before, and reads that need only
// the others go on.
func TestIngestChecksPartitions(t *testing.T) {
	spec := ingestSpec()
	opts := WriterOptions{BlockSize: 256, BlockRestartInterval: 1, Compression: NoCompression}
	clean := writeSpecWith(t, spec, opts, func(w *Writer) { w.indexPartitionEntries = 4 })
	_, tops := indexEntries(t, clean)
	if len(tops) < 6 {
		t.Fatalf("%d partitions", len(tops))
	}
	// parts[i] lists partition i's entries: where each key and value lie
	// in the file (restart interval 1, uncompressed: each whole).
	type span struct{ at, n int }
	type pentry struct{ key, value span }
	handles := make([]BlockHandle, len(tops))
	parts := make([][]pentry, len(tops))
	for i, v := range tops {
		handles[i], _ = decodeHandle(v)
		bh := handles[i]
		nr := int(binary.LittleEndian.Uint32(clean[bh.Offset+bh.Length-4:]))
		for off := int(bh.Offset); off < int(bh.Offset+bh.Length)-4-4*nr; {
			b := clean[off:]
			if b[0] != 0 || b[1] >= 0x80 || b[2] >= 0x80 {
				t.Fatalf("partition %d: an entry at %d shares a prefix or has long lengths", i, off)
			}
			k, v := int(b[1]), int(b[2])
			parts[i] = append(parts[i], pentry{span{off + 3, k}, span{off + 3 + k, v}})
			off += 3 + k + v
		}
		if len(parts[i]) != 4 && i < len(tops)-1 {
			t.Fatalf("partition %d: %d entries", i, len(parts[i]))
		}
	}
	// A key of each data block, by partition.
	blockKeys := make([][][]byte, len(tops))
	r := openTable(t, clean)
	for i := range tops {
		for _, e := range parts[i] {
			bh, _ := decodeHandle(clean[e.value.at : e.value.at+e.value.n])
			b, err := r.readBlock(bh, "data")
			if err != nil {
				t.Fatal(err)
			}
			var bi blockIter
			if err := bi.init(b, false, blockWhere{}); err != nil || !bi.first() {
				t.Fatal(err)
			}
			blockKeys[i] = append(blockKeys[i], bytes.Clone(bi.key[:len(bi.key)-base.TrailerLen]))
		}
	}
	const victim = 3
	damages := []struct {
		name   string
		change func(data []byte) bool // false: not possible in place
		want   []string               // any of them
	}{
		{"a block of the partition before", func(data []byte) bool {
			// Its first entry names the block of the previous
			// partition's last.
			from, to := parts[victim-1][len(parts[victim-1])-1].value, parts[victim][0].value
			if from.n != to.n {
				return false
			}
			copy(data[to.at:to.at+to.n], data[from.at:from.at+from.n])
			return true
		}, []string{"do not follow", "do not precede", "overlaps the block before"}},
		{"a block of the partition after", func(data []byte) bool {
			from, to := parts[victim+1][0].value, parts[victim][len(parts[victim])-1].value
			if from.n != to.n {
				return false
			}
			copy(data[to.at:to.at+to.n], data[from.at:from.at+from.n])
			return true
		}, []string{"do not follow", "do not precede"}},
		{"first separator before the top-level one before", func(data []byte) bool {
			k := parts[victim][0].key
			data[k.at+2], data[k.at+3] = '0', '0' // k0123 becomes k0003: below the partitions before
			return true
		}, []string{"not past the top-level separator before"}},
		{"last separator past its top-level one", func(data []byte) bool {
			k := parts[victim][len(parts[victim])-1].key
			data[k.at+1] = '9'
			return true
		}, []string{"before its partition's last"}},
		{"a block among the partitions", func(data []byte) bool {
			// Its last entry names a block where the first partition
			// begins.
			to := parts[victim][len(parts[victim])-1].value
			old, _ := decodeHandle(data[to.at : to.at+to.n])
			enc := BlockHandle{Offset: handles[0].Offset, Length: old.Length}.append(nil)
			if len(enc) != to.n {
				return false
			}
			copy(data[to.at:], enc)
			return true
		}, []string{"lies past the data blocks"}},
	}
	ro := ReaderOptions{FileName: "t.sst", IngestChecks: testIngestChecks}
	for _, d := range damages {
		t.Run(d.name, func(t *testing.T) {
			data := bytes.Clone(clean)
			if !d.change(data) {
				t.Fatal("the handles' encodings differ in length: no damage in place")
			}
			reseal(data, handles[victim])
			if _, err := NewReader(bytes.NewReader(data), int64(len(data)), ReaderOptions{FileName: "t.sst"}); err != nil {
				t.Fatalf("without the checks: %v", err)
			}
			found := func(err error) bool {
				if !errors.Is(err, ErrCorruption) || !strings.Contains(err.Error(), "t.sst") {
					return false
				}
				for _, w := range d.want {
					if strings.Contains(err.Error(), w) {
						return true
					}
				}
				return false
			}
			// The neighbours read first, then the victim; and the
			// victim first, then its neighbours.
			for trial, order := range [][]int{{victim - 1, victim + 1, victim}, {victim, victim - 1, victim + 1}, {victim - 1, victim + 1, victim}, {victim, victim - 1, victim + 1}} {
				o := ro
				if trial >= 2 { // with a block cache, which a block read under two entries would be served from
					o.Cache, o.FileNum = cache.New(1<<20, cache.Options{}), 1
				}
				r, err := NewReader(bytes.NewReader(data), int64(len(data)), o)
				if err != nil {
					t.Fatalf("open: %v", err)
				}
				// Each read of a partition or block the damage reaches
				// fails. The victim read after its neighbours fails
				// for the damage; read first, it may pass, but then the
				// blocks it names, or the neighbours, do not.
				var errs []error
				for _, p := range order {
					for _, k := range blockKeys[p] {
						if _, _, _, err := r.LookupCopy(k, base.SeqNumMax); err != nil {
							errs = append(errs, err)
							break
						}
					}
				}
				ok := len(errs) > 0 && (order[0] == victim || found(errs[0]))
				for _, err := range errs {
					ok = ok && errors.Is(err, ErrCorruption) && strings.Contains(err.Error(), "t.sst")
				}
				if !ok {
					t.Errorf("partitions read in order %v: %v; want errors wrapping ErrCorruption naming t.sst, the first one of %q", order, errs, d.want)
				}
				// A partition far from the damage reads on.
				for _, k := range blockKeys[0] {
					if _, _, found, err := r.LookupCopy(k, base.SeqNumMax); err != nil || !found {
						t.Errorf("a key of the first partition: found %v, %v", found, err)
					}
				}
			}
			// A whole scan fails, for the damage or for a block the
			// damaged partition names out of its place.
			for way, err := range readEvery(t, data, nil, ro) {
				if !strings.HasPrefix(way, "lookups") && (!errors.Is(err, ErrCorruption) || !strings.Contains(err.Error(), "t.sst")) {
					t.Errorf("%s: %v; want an error wrapping ErrCorruption naming t.sst", way, err)
				}
			}
		})
	}
}

// TestIngestChecksTopLevel damages the top level of a two-level index:
// with IngestChecks the table is refused when it opens.
func TestIngestChecksTopLevel(t *testing.T) {
	opts := WriterOptions{BlockSize: 256, BlockRestartInterval: 1, Compression: NoCompression}
	clean := writeSpecWith(t, ingestSpec(), opts, func(w *Writer) { w.indexPartitionEntries = 4 })
	r := openTable(t, clean)
	if r.parts == nil || len(r.parts.slots) < 5 {
		t.Fatal("the clean table's partitions are not kept")
	}
	for _, c := range []struct {
		name   string
		change func(keys, values [][]byte)
	}{
		{"separators out of order", func(keys, values [][]byte) { keys[2], keys[3] = keys[3], keys[2] }},
		{"a partition twice", func(keys, values [][]byte) { values[3] = values[2] }},
		{"partitions out of order", func(keys, values [][]byte) { values[2], values[3] = values[3], values[2] }},
		{"the last partition past the partitions' end", func(keys, values [][]byte) {
			values[len(values)-1] = BlockHandle{Offset: r.dataEnd - 50, Length: 100}.append(nil)
		}},
		{"a partition wrapping past 2^64", func(keys, values [][]byte) {
			values[0] = BlockHandle{Offset: math.MaxUint64 - 100, Length: 200}.append(nil)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			keys, values := indexEntries(t, clean)
			c.change(keys, values)
			data := withIndex(t, clean, keys, values)
			_, err := NewReader(bytes.NewReader(data), int64(len(data)), ReaderOptions{FileName: "t.sst", IngestChecks: testIngestChecks})
			if !errors.Is(err, ErrCorruption) || !strings.Contains(err.Error(), "t.sst") {
				t.Fatalf("with the checks: %v; want ErrCorruption naming t.sst", err)
			}
			if r, err := NewReader(bytes.NewReader(data), int64(len(data)), ReaderOptions{FileName: "t.sst"}); err == nil && r.parts != nil {
				t.Fatal("the damaged top level's partitions are kept: they would be checked only as read")
			}
		})
	}
}
