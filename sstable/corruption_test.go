package sstable

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/bloomkv/bloomkv/internal/base"
)

// tableContents is everything a reader can say about a table, for comparing a
// damaged table with the original.
type tableContents struct {
	entries  []entry
	dels     []RangeDeletion
	gets     []string // per probe: the lookup at SeqNumMax
	seeks    []string // per probe: where SeekGE and then SeekLT land
	filter   []bool   // per probe: the table filter's answer; nil without one
	props    string
	keyRange string
	// check is not compared: a damaged table may read back right and still
	// fail the check (a flipped bit in the footer's padding).
	check *CheckReport
	rd    *Reader // the reader that read it
}

// errReadsDisagree is wrapped by readAll's errors for two ways of reading a
// table that disagree.
var errReadsDisagree = errors.New("read paths disagree")

// readAll opens data with opts and reads everything from it through every
// entry point of the Reader; the error is the first any step returned.
func readAll(data []byte, probes [][]byte, opts ReaderOptions) (tableContents, error) {
	var c tableContents
	opts.FileName = "fuzz.sst"
	rd, err := NewReader(bytes.NewReader(data), int64(len(data)), opts)
	if err != nil {
		return c, err
	}
	c.rd = rd
	it := rd.NewIter()
	for ok := it.First(); ok; ok = it.Next() {
		c.entries = append(c.entries, entry{it.Key().Clone(), bytes.Clone(it.Value())})
	}
	if err := it.Close(); err != nil {
		return c, err
	}
	// Backward and a compaction's pass read the same entries.
	if err := walkMatches(rd.NewIter(), c.entries, true, "backward iteration"); err != nil {
		return c, err
	}
	if err := walkMatches(rd.NewCompactionIter(), c.entries, false, "compaction iteration"); err != nil {
		return c, err
	}
	it = rd.NewIter()
	for _, p := range probes {
		ge := positionString(it, it.SeekGE(p))
		c.seeks = append(c.seeks, ge+" "+positionString(it, it.SeekLT(p)))
	}
	if err := it.Close(); err != nil {
		return c, err
	}
	c.dels = rd.RangeDeletions()
	for _, p := range probes {
		v, kind, found, err := lookup(rd, p, base.SeqNumMax)
		if err != nil {
			return c, err
		}
		c.gets = append(c.gets, lookupString(found, kind, v))
	}
	c.props = fmt.Sprintf("%+v", *rd.Properties())
	lo, hi, err := rd.KeyRange()
	if err != nil {
		return c, err
	}
	c.keyRange = keyString(lo) + " " + keyString(hi)
	// The inspection paths read every block their own way: no panics, and
	// a table that read back cleanly above has sound blocks.
	layout, blocks := rd.Layout(), rd.Blocks()
	if len(layout.Blocks) != len(blocks.Blocks) {
		return c, fmt.Errorf("%w: Layout lists %d blocks, Blocks %d", errReadsDisagree, len(layout.Blocks), len(blocks.Blocks))
	}
	for i, b := range layout.Blocks {
		if b.Handle != blocks.Blocks[i].Handle || b.Kind != blocks.Blocks[i].Kind {
			return c, fmt.Errorf("%w: block %d: Layout has %s %s, Blocks %s %s", errReadsDisagree, i, b.Kind, b.Handle, blocks.Blocks[i].Kind, blocks.Blocks[i].Handle)
		}
		if b.Err == nil && b.Kind != BlockFilter {
			if err := rd.BlockRecords(b, func(k, v []byte) bool { return true }); err != nil {
				return c, fmt.Errorf("block records of a sound block: %w", err)
			}
		}
	}
	c.check = rd.Check()
	if _, _, err := rd.Filter(); err != nil {
		return c, err
	}
	f, err := rd.TableFilter()
	if err != nil {
		return c, err
	}
	if f != nil {
		c.filter = []bool{}
		for _, p := range probes {
			c.filter = append(c.filter, f.MayContain(p))
		}
	}
	return c, nil
}

// walkMatches walks it over the whole table, backward or forward, and
// closes it: an error wrapping errReadsDisagree unless it yields want (in
// forward order), or else its own error.
func walkMatches(it *Iter, want []entry, backward bool, what string) error {
	start, move := it.First, it.Next
	if backward {
		start, move = it.Last, it.Prev
	}
	n := 0
	for ok := start(); ok; ok = move() {
		i := n
		if backward {
			i = len(want) - 1 - n
		}
		if i < 0 || i >= len(want) || !sameEntry(entry{it.Key(), it.Value()}, want[i]) {
			it.Close()
			return fmt.Errorf("%w: %s: entry %d is %s, not as forward iteration read it", errReadsDisagree, what, n, it.Key())
		}
		n++
	}
	if err := it.Close(); err != nil {
		return err
	}
	if n != len(want) {
		return fmt.Errorf("%w: %s saw %d entries, forward iteration %d", errReadsDisagree, what, n, len(want))
	}
	return nil
}

func sameEntry(a, b entry) bool {
	return bytes.Equal(a.key.UserKey, b.key.UserKey) && a.key.Trailer == b.key.Trailer && bytes.Equal(a.value, b.value)
}

// positionString describes where an iterator move landed.
func positionString(it *Iter, ok bool) string {
	if !ok {
		return "-"
	}
	k := it.Key()
	return keyString(&k)
}

// keyString describes an internal key, or its absence.
func keyString(k *base.InternalKey) string {
	if k == nil {
		return "-"
	}
	return fmt.Sprintf("%q#%d", k.UserKey, k.Trailer)
}

// lookupString describes the result of a lookup.
func lookupString(found bool, kind base.Kind, v []byte) string {
	if !found {
		return "absent"
	}
	return fmt.Sprintf("%v/%q", kind, v)
}

func sameContents(a, b tableContents) bool {
	if len(a.entries) != len(b.entries) || len(a.dels) != len(b.dels) {
		return false
	}
	for i := range a.entries {
		if !sameEntry(a.entries[i], b.entries[i]) {
			return false
		}
	}
	for i := range a.dels {
		if !bytes.Equal(a.dels[i].Start, b.dels[i].Start) || !bytes.Equal(a.dels[i].End, b.dels[i].End) || a.dels[i].SeqNum != b.dels[i].SeqNum {
			return false
		}
	}
	return slices.Equal(a.gets, b.gets) && slices.Equal(a.seeks, b.seeks) && slices.Equal(a.filter, b.filter) &&
		a.props == b.props && a.keyRange == b.keyRange
}

// corruptionCorpus returns a few real tables and keys to probe them with.
func corruptionCorpus(t testing.TB) ([][]byte, [][]byte) {
	return corpusOf(t, 150)
}

// fuzzCorpus is corruptionCorpus with small tables (a few KiB): Go's fuzzer
// spends its time minimising large inputs and barely executes them.
func fuzzCorpus(t testing.TB) ([][]byte, [][]byte) {
	return corpusOf(t, 12)
}

func corpusOf(t testing.TB, n int) ([][]byte, [][]byte) {
	var tables [][]byte
	for i, opts := range []WriterOptions{
		{BlockSize: 512},
		{BlockSize: 512, Compression: NoCompression, BlockRestartInterval: 4},
		{BlockSize: 2048, TableFormat: TableFormatLevelDB, BloomBitsPerKey: 16},
	} {
		r := rand.New(rand.NewPCG(uint64(i), 99))
		spec := randomSpec(r, n)
		if n < 50 { // short values keep fuzz inputs small
			for j := range spec.entries {
				spec.entries[j].value = spec.entries[j].value[:min(len(spec.entries[j].value), 20)]
			}
		}
		if opts.TableFormat == TableFormatLevelDB {
			spec.dels = nil
		}
		tables = append(tables, writeSpec(t, spec, opts))
	}
	var probes [][]byte
	for i := 0; i < n; i += max(n/20, 1) {
		probes = append(probes, []byte(fmt.Sprintf("key%05d", i)))
	}
	return tables, probes
}

// TestBitFlipsNeverSilent flips one bit at every byte of real tables: each
// damaged table must be refused (refused), or read back exactly as
// the original (a flip in a byte nothing reads, such as footer padding).
func TestBitFlipsNeverSilent(t *testing.T) {
	tables, probes := corruptionCorpus(t)
	flipEachByte(t, tables, probes)
}

// flipEachByte flips a bit of each byte of tables (of every 7th in short
// mode): each damaged table must be refused, or read back exactly as the
// original.
func flipEachByte(t *testing.T, tables, probes [][]byte) {
	t.Helper()
	flipEachByteWith(t, tables, probes, ReaderOptions{})
}

// flipEachByteWith is flipEachByte, reading with options opts.
func flipEachByteWith(t *testing.T, tables, probes [][]byte, opts ReaderOptions) {
	t.Helper()
	stride := 1
	if testing.Short() {
		stride = 7 // every 7th byte: the race-detector run in CI
	}
	var trials, detected, harmless int
	for ti, orig := range tables {
		want, err := readAll(orig, probes, opts)
		if err != nil {
			t.Fatal(err)
		}
		r := rand.New(rand.NewPCG(uint64(ti), 5))
		for off := 0; off < len(orig); off += stride {
			bad := append([]byte(nil), orig...)
			bad[off] ^= 1 << r.IntN(8)
			got, err := readAll(bad, probes, opts)
			trials++
			switch {
			case err != nil && refused(err):
				detected++
			case err != nil:
				t.Fatalf("table %d, flip at offset %d: error %v does not wrap ErrCorruption", ti, off, err)
			case sameContents(got, want):
				harmless++
			default:
				t.Fatalf("table %d, flip at offset %d: silently read different contents", ti, off)
			}
		}
	}
	t.Logf("%d bit flips: %d detected as corruption, %d harmless, 0 silent", trials, detected, harmless)
	if harmless > trials/20 {
		t.Fatalf("%d of %d flips went unnoticed: more than padding can explain", harmless, trials)
	}
}

// TestTruncationsDetected cuts real tables at every length: each prefix is
// refused (refused).
func TestTruncationsDetected(t *testing.T) {
	tables, probes := corruptionCorpus(t)
	cutEachLength(t, tables, probes)
}

// cutEachLength cuts tables at every length: each prefix must be refused.
func cutEachLength(t *testing.T, tables, probes [][]byte) {
	t.Helper()
	cutEachLengthWith(t, tables, probes, ReaderOptions{})
}

// cutEachLengthWith is cutEachLength, reading with options opts.
func cutEachLengthWith(t *testing.T, tables, probes [][]byte, opts ReaderOptions) {
	t.Helper()
	for ti, orig := range tables {
		for n := 0; n < len(orig); n++ {
			if _, err := readAll(orig[:n], probes, opts); !refused(err) {
				t.Fatalf("table %d cut to %d of %d bytes: %v, want ErrCorruption", ti, n, len(orig), err)
			}
		}
	}
}

func FuzzFooter(f *testing.F) {
	tables, _ := fuzzCorpus(f)
	for _, tb := range tables {
		f.Add(tb[len(tb)-maxFooterLen:])
		f.Add(tb[len(tb)-levelDBFooterLen:])
	}
	f.Fuzz(func(t *testing.T, tail []byte) {
		ft, err := decodeFooter(tail, uint64(len(tail))+1<<20, "fuzz.sst")
		if err != nil {
			if !refused(err) {
				t.Fatalf("error %v does not wrap ErrCorruption", err)
			}
			return
		}
		if ft.format != TableFormatLevelDB && ft.format != TableFormatRocksDBv2 {
			t.Fatalf("decoded unknown format %v", ft.format)
		}
	})
}

func FuzzBlock(f *testing.F) {
	var bw blockWriter
	bw.restartInterval = 3
	for i := range 7 { // few: see FuzzTable on the cost of large inputs
		bw.add(base.MakeInternalKey([]byte(fmt.Sprintf("k%d", i)), 5, base.KindSet).Append(nil), []byte("v"))
	}
	f.Add(append([]byte(nil), bw.finish()...))
	f.Add([]byte{0, 0, 0, 0})
	seek := base.MakeInternalKey([]byte("k4"), 5, base.KindSet).Append(nil)
	f.Fuzz(func(t *testing.T, block []byte) {
		var it blockIter
		err := checkBlock(block, blockWhere{file: "fuzz", kind: "data"})
		if err == nil {
			err = it.init(block, false, blockWhere{file: "fuzz", kind: "data"})
		}
		if err != nil {
			if !refused(err) {
				t.Fatalf("error %v does not wrap ErrCorruption", err)
			}
			return
		}
		n := 0
		for ok := it.first(); ok; ok = it.next() {
			n++
		}
		for ok := it.last(); ok && n >= 0; ok = it.prev() {
			n--
		}
		it.seekGE(seek)
		it.seekLT(seek)
		if it.err != nil && !errors.Is(it.err, ErrCorruption) {
			t.Fatalf("error %v does not wrap ErrCorruption", it.err)
		}
	})
}

// FuzzIndexBlock decodes arbitrary bytes as an index block: separators
// mapping to block handles, as the reader walks them. Never a panic; every
// error wraps ErrCorruption; a handle that decodes re-encodes to the same
// bytes (only the shortest encodings decode).
func FuzzIndexBlock(f *testing.F) {
	var bw blockWriter
	bw.restartInterval = 1
	for i := range 10 {
		h := BlockHandle{Offset: uint64(i) * 4096, Length: 4000 + uint64(i)}
		bw.add(base.MakeInternalKey([]byte(fmt.Sprintf("sep%03d", i)), base.SeqNumMax, base.KindSeparator).Append(nil), h.append(nil))
	}
	f.Add(append([]byte(nil), bw.finish()...))
	f.Add([]byte{0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, block []byte) {
		var it blockIter
		where := blockWhere{file: "fuzz", kind: "index"}
		err := checkBlock(block, where)
		if err == nil {
			err = it.init(block, false, where)
		}
		for ok := err == nil && it.first(); ok; ok = it.next() {
			h, n := decodeHandle(it.value)
			if n == 0 {
				continue // the reader reports this as corruption
			}
			if got := h.append(nil); !bytes.Equal(got, it.value[:n]) {
				t.Fatalf("handle %v from %x re-encodes as %x", h, it.value[:n], got)
			}
		}
		if err == nil {
			it.seekGE(base.MakeInternalKey([]byte("sep005"), base.SeqNumMax, base.KindSeparator).Append(nil))
			err = it.err
		}
		if err != nil && !errors.Is(err, ErrCorruption) {
			t.Fatalf("error %v does not wrap ErrCorruption", err)
		}
	})
}

// FuzzProperties decodes arbitrary bytes as a properties block.
func FuzzProperties(f *testing.F) {
	p := Properties{NumEntries: 10, NumDataBlocks: 2, CompressionName: "Snappy", ComparerName: "leveldb.BytewiseComparator"}
	f.Add(p.encode())
	f.Fuzz(func(t *testing.T, block []byte) {
		var it blockIter
		var q Properties
		where := blockWhere{file: "fuzz", kind: "properties"}
		err := it.init(block, false, where)
		if err == nil {
			err = q.decode(&it)
		}
		if err == nil {
			err = it.err
		}
		if err != nil && !errors.Is(err, ErrCorruption) {
			t.Fatalf("error %v does not wrap ErrCorruption", err)
		}
	})
}

// TestFooterFlipsDetected: the two footer flips a review of the corruption
// trials found read back as the same table: the high bit of a handle's last
// byte (the varint then swallows a zero padding byte) and format version 2
// turned 3. Both are refused.
func TestFooterFlipsDetected(t *testing.T) {
	tables, probes := corruptionCorpus(t)
	for i, tb := range tables {
		ft, err := decodeFooter(tb[len(tb)-min(len(tb), maxFooterLen):], uint64(len(tb)), "t.sst")
		if err != nil {
			t.Fatal(err)
		}
		flips := map[string]int{} // what -> offset of the byte whose bit 7 or 0 flips
		var footerLen int
		if ft.format == TableFormatLevelDB {
			footerLen = levelDBFooterLen
		} else {
			footerLen = rocksDBFooterLen
			flips["version 2 to 3"] = len(tb) - 12
		}
		start := len(tb) - footerLen
		if ft.format != TableFormatLevelDB {
			start++ // the checksum type
		}
		hl := len(ft.metaindex.append(ft.index.append(nil)))
		flips["high bit of the handles' last byte"] = start + hl - 1
		for what, off := range flips {
			bad := bytes.Clone(tb)
			if what == "version 2 to 3" {
				bad[off] ^= 1
			} else {
				bad[off] ^= 0x80
			}
			if _, err := readAll(bad, probes, ReaderOptions{}); !errors.Is(err, ErrCorruption) {
				t.Errorf("table %d (%v): %s: %v, want ErrCorruption", i, ft.format, what, err)
			}
		}
	}
}

// TestShortReadNamesTheBlock checks that a file that ends short of a data
// block is corruption naming that block.
func TestShortReadNamesTheBlock(t *testing.T) {
	data := tableOfKeys(t, 2000)
	// Serve the footer and metadata, then let data-block reads come up short.
	sr := &shortReader{data: data, limit: int64(len(data))}
	rd, err := NewReader(sr, int64(len(data)), ReaderOptions{FileName: "short.sst"})
	if err != nil {
		t.Fatal(err)
	}
	sr.limit = 100
	_, _, _, err = lookup(rd, []byte("key001000"), base.SeqNumMax)
	if !errors.Is(err, ErrCorruption) || !strings.Contains(err.Error(), "data block (") {
		t.Fatalf("short read: %v, want corruption naming the data block", err)
	}
}

// shortReader serves data up to limit and reads nothing past it, without an
// error.
type shortReader struct {
	data  []byte
	limit int64
}

func (s *shortReader) ReadAt(p []byte, off int64) (int, error) {
	end := min(int64(len(s.data)), s.limit)
	if off >= end {
		return 0, nil
	}
	n := copy(p, s.data[off:end])
	return n, nil
}
