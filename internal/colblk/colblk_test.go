package colblk_test

// Pebble's own writer is the oracle: tests decode the blocks of tables it
// writes (uncompressed, so that the blocks lie in the file as they are)
// and compare what they hold with what Pebble's reader says. The fuzz
// targets, seeded from those blocks, check that no input panics.

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/cockroachkvs"
	"github.com/cockroachdb/pebble/v2/objstorage/objstorageprovider"
	pebble "github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/sstable/block"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/colblk"
	"github.com/bloomkv/bloomkv/internal/pebbletest"
)

// realBlocks are blocks of a Pebblev7 table Pebble wrote, by kind.
type realBlocks struct {
	data, index, topIndex, rangeDel, rangeKey, kv [][]byte
	// What Pebble's reader reads from the table.
	keys       []string // user key and trailer of every point entry
	values     []string
	dataBlocks []block.Handle
	rangeDels  []string // start, end and trailer of every range-deletion key
	rangeKeys  []string // start, end, trailer, suffix and value
}

// pebbleBlocks writes a table with Pebble's writer and returns its blocks.
var pebbleBlocks = onceBlocks(writeBlocks)

// crdbBlocks writes a table of CockroachDB's keys, comparer and key
// schema (crdb1) with Pebble's writer and returns its blocks.
var crdbBlocks = onceBlocks(writeCRDBBlocks)

// onceBlocks returns a function that returns the blocks write returns,
// calling it once.
func onceBlocks(write func() (realBlocks, error)) func(t testing.TB) *realBlocks {
	var (
		once sync.Once
		rb   realBlocks
		err  error
	)
	return func(t testing.TB) *realBlocks {
		t.Helper()
		once.Do(func() { rb, err = write() })
		if err != nil {
			t.Fatal(err)
		}
		return &rb
	}
}

type nopCloser struct{ *bytes.Buffer }

func (nopCloser) Close() error { return nil }

// smallBlocks are the writer options of the tests' tables: Pebblev7,
// uncompressed, small blocks and a two-level index.
func smallBlocks() pebble.WriterOptions {
	return pebble.WriterOptions{
		TableFormat:    pebble.TableFormatPebblev7,
		Compression:    pebble.NoCompression,
		BlockSize:      512,
		IndexBlockSize: 256,
	}
}

func writeBlocks() (realBlocks, error) {
	var buf bytes.Buffer
	w := pebble.NewWriter(objstorageprovider.NewRemoteWritable(nopCloser{&buf}), smallBlocks())
	// Versions of shared-prefix keys, so that bundles share prefixes and
	// keys repeat; deletions; range deletions and range keys.
	var keys [][]byte
	for i := 0; i < 300; i++ {
		keys = append(keys, []byte(fmt.Sprintf("table/%03d/key%04d", i/40, i)))
	}
	if err := addKeys(w, keys, 40); err != nil {
		return realBlocks{}, err
	}
	for _, err := range []error{
		w.DeleteRange([]byte("table/001"), []byte("table/002")),
		w.DeleteRange([]byte("table/004"), []byte("table/005/key0210")),
		w.RangeKeySet([]byte("a"), []byte("c"), []byte("@3"), []byte("x")),
		w.RangeKeySet([]byte("a"), []byte("c"), []byte("@5"), []byte("y")),
		w.RangeKeyUnset([]byte("b"), []byte("d"), []byte("@1")),
		w.RangeKeyDelete([]byte("m"), []byte("n")),
	} {
		if err != nil {
			return realBlocks{}, err
		}
	}
	if err := w.Close(); err != nil {
		return realBlocks{}, err
	}
	return readBlocks(buf.Bytes(), pebble.ReaderOptions{})
}

// addKeys adds keys to w: a deletion every fifth, the others SETs of
// values of varied length, below maxValue.
func addKeys(w *pebble.Writer, keys [][]byte, maxValue int) error {
	for i, k := range keys {
		var err error
		if i%5 == 2 {
			err = w.Delete(k)
		} else {
			err = w.Set(k, bytes.Repeat([]byte{byte('a' + i%26)}, i%maxValue))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// writeCRDBBlocks writes CockroachDB's keys, a deletion every fifth, with
// its comparer and key schema.
func writeCRDBBlocks() (realBlocks, error) {
	o, ro := crdbOptions()
	return writeKeys(o, ro, pebbletest.CRDBKeys(400, 1), 40)
}

// crdbOptions are the writer and reader options of a table of CockroachDB's
// keys: smallBlocks with its comparer and key schema.
func crdbOptions() (pebble.WriterOptions, pebble.ReaderOptions) {
	o := smallBlocks()
	o.Comparer, o.KeySchema = &cockroachkvs.Comparer, &cockroachkvs.KeySchema
	// Values in place, as the test compares them; the sstable package's
	// tests read value blocks.
	o.DisableValueBlocks = true
	return o, pebble.ReaderOptions{
		Comparer: &cockroachkvs.Comparer, KeySchemas: pebble.MakeKeySchemas(&cockroachkvs.KeySchema),
	}
}

// writeKeys writes a table of keys, added by addKeys, with Pebble's writer
// and options o, and returns its blocks, read with options ro.
func writeKeys(o pebble.WriterOptions, ro pebble.ReaderOptions, keys [][]byte, maxValue int) (realBlocks, error) {
	var buf bytes.Buffer
	w := pebble.NewWriter(objstorageprovider.NewRemoteWritable(nopCloser{&buf}), o)
	if err := addKeys(w, keys, maxValue); err != nil {
		return realBlocks{}, err
	}
	if err := w.Close(); err != nil {
		return realBlocks{}, err
	}
	return readBlocks(buf.Bytes(), ro)
}

// readBlocks cuts the table data into its blocks and reads it with
// Pebble's reader, with options o.
func readBlocks(data []byte, o pebble.ReaderOptions) (realBlocks, error) {
	fs := vfs.NewMem()
	f, err := fs.Create("t.sst", vfs.WriteCategoryUnspecified)
	if err != nil {
		return realBlocks{}, err
	}
	// A copy: Pebble built with invariants (as under -race) mangles the
	// buffers handed to it, and the blocks are cut from data.
	if _, err := f.Write(bytes.Clone(data)); err != nil {
		return realBlocks{}, err
	}
	f.Close()
	if f, err = fs.Open("t.sst"); err != nil {
		return realBlocks{}, err
	}
	readable, err := pebble.NewSimpleReadable(f)
	if err != nil {
		return realBlocks{}, err
	}
	r, err := pebble.NewReader(context.Background(), readable, o)
	if err != nil {
		return realBlocks{}, err
	}
	defer r.Close()
	l, err := r.Layout()
	if err != nil {
		return realBlocks{}, err
	}
	at := func(h block.Handle) []byte { return data[h.Offset : h.Offset+h.Length] }
	var rb realBlocks
	for _, h := range l.Data {
		rb.data = append(rb.data, at(h.Handle))
		rb.dataBlocks = append(rb.dataBlocks, h.Handle)
	}
	for _, h := range l.Index {
		rb.index = append(rb.index, at(h))
	}
	rb.topIndex = [][]byte{at(l.TopIndex)}
	if l.RangeDel.Length > 0 {
		rb.rangeDel = [][]byte{at(l.RangeDel)}
	}
	if l.RangeKey.Length > 0 {
		rb.rangeKey = [][]byte{at(l.RangeKey)}
	}
	rb.kv = [][]byte{at(l.MetaIndex), at(l.Properties)}

	it, err := r.NewIter(pebble.NoTransforms, nil, nil, pebble.AssertNoBlobHandles)
	if err != nil {
		return realBlocks{}, err
	}
	for kv := it.First(); kv != nil; kv = it.Next() {
		v, _, err := kv.Value(nil)
		if err != nil {
			return realBlocks{}, err
		}
		rb.keys = append(rb.keys, fmt.Sprintf("%q#%d", kv.K.UserKey, uint64(kv.K.Trailer)))
		rb.values = append(rb.values, string(v))
	}
	if err := it.Close(); err != nil {
		return realBlocks{}, err
	}
	ctx := context.Background()
	rit, err := r.NewRawRangeDelIter(ctx, pebble.NoFragmentTransforms, pebble.NoReadEnv)
	if err != nil {
		return realBlocks{}, err
	}
	if rb.rangeDels, err = spanLines(rit, rangeDelLine); err != nil {
		return realBlocks{}, err
	}
	kit, err := r.NewRawRangeKeyIter(ctx, pebble.NoFragmentTransforms, pebble.NoReadEnv)
	if err != nil {
		return realBlocks{}, err
	}
	if rb.rangeKeys, err = spanLines(kit, rangeKeyLine); err != nil {
		return realBlocks{}, err
	}
	return rb, nil
}

// spanIter is Pebble's keyspan iterator, whose type is in a package of
// Pebble's that cannot be imported.
type spanIter interface {
	First() (*pebble.Span, error)
	Next() (*pebble.Span, error)
	Close()
}

// spanLines lists the keys of it's spans, a line each, and closes it.
func spanLines(it spanIter, line func(start, end []byte, tr uint64, suffix, value []byte) string) ([]string, error) {
	if it == nil {
		return nil, nil // the table has none
	}
	defer it.Close()
	var out []string
	s, err := it.First()
	for ; s != nil; s, err = it.Next() {
		for _, k := range s.Keys {
			out = append(out, line(s.Start, s.End, uint64(k.Trailer), k.Suffix, k.Value))
		}
	}
	return out, err
}

func rangeDelLine(start, end []byte, tr uint64, _, _ []byte) string {
	return fmt.Sprintf("%s-%s#%d", start, end, tr)
}

func rangeKeyLine(start, end []byte, tr uint64, suffix, value []byte) string {
	return fmt.Sprintf("%s-%s#%d %s=%s", start, end, tr, suffix, value)
}

// TestDecodersAgreeWithPebble decodes every block of a Pebble table and
// compares what the blocks hold with what Pebble's reader reads.
func TestDecodersAgreeWithPebble(t *testing.T) {
	rb := pebbleBlocks(t)
	var keys, values []string
	for _, b := range rb.data {
		d, err := colblk.DecodeDataBlock(b)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < d.Rows(); i++ {
			if d.External(i) {
				t.Fatalf("row %d: an external value in a table without value blocks", i)
			}
			tr := d.Trailer(i)
			keys = append(keys, fmt.Sprintf("%q#%d", d.AppendUserKey(nil, i), tr))
			values = append(values, string(d.Value(i)))
		}
	}
	if len(keys) < 100 || !slices.Equal(keys, rb.keys) || !slices.Equal(values, rb.values) {
		t.Fatalf("data blocks: %d keys %v\nPebble: %d keys %v", len(keys), keys, len(rb.keys), rb.keys)
	}

	// The top-level index lists the partitions, which list the data blocks.
	top, err := colblk.DecodeIndexBlock(rb.topIndex[0])
	if err != nil || top.Rows() != len(rb.index) || len(rb.index) < 2 {
		t.Fatalf("top-level index: %d rows, %v; %d partitions", top.Rows(), err, len(rb.index))
	}
	var handles []block.Handle
	var prevSep []byte
	for _, b := range rb.index {
		x, err := colblk.DecodeIndexBlock(b)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < x.Rows(); i++ {
			off, length := x.Handle(i)
			handles = append(handles, block.Handle{Offset: off, Length: length})
			if bytes.Compare(prevSep, x.Separator(i)) > 0 {
				t.Fatalf("separator %q after %q", x.Separator(i), prevSep)
			}
			prevSep = x.Separator(i)
		}
	}
	if !slices.Equal(handles, rb.dataBlocks) {
		t.Fatalf("index handles %v, Pebble's data blocks %v", handles, rb.dataBlocks)
	}

	dels := keyspanKeys(t, rb.rangeDel[0], rangeDelLine)
	rks := keyspanKeys(t, rb.rangeKey[0], rangeKeyLine)
	if len(dels) < 2 || !slices.Equal(dels, rb.rangeDels) || len(rks) < 4 || !slices.Equal(rks, rb.rangeKeys) {
		t.Fatalf("range deletions %v, Pebble %v\nrange keys %v, Pebble %v", dels, rb.rangeDels, rks, rb.rangeKeys)
	}

	meta, err := colblk.DecodeKeyValueBlock(rb.kv[0])
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for i := 0; i < meta.Rows(); i++ {
		names = append(names, string(meta.Key(i)))
	}
	props, err := colblk.DecodeKeyValueBlock(rb.kv[1])
	if err != nil {
		t.Fatal(err)
	}
	entries := ""
	for i := 0; i < props.Rows(); i++ {
		if string(props.Key(i)) == "rocksdb.num.entries" {
			n, _ := binary.Uvarint(props.Value(i))
			entries = fmt.Sprint(n)
		}
	}
	if !slices.Contains(names, "rocksdb.properties") || !slices.Contains(names, "rocksdb.range_del2") || entries != fmt.Sprint(len(rb.keys)+len(rb.rangeDels)) {
		t.Fatalf("metaindex names %v; properties state %s entries", names, entries)
	}
}

// keyspanKeys decodes a keyspan block into a line per key.
func keyspanKeys(t *testing.T, b []byte, line func(start, end []byte, tr uint64, suffix, value []byte) string) []string {
	t.Helper()
	k, err := colblk.DecodeKeyspanBlock(b)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for j := 0; j < k.Spans(); j++ {
		start, end, lo, hi := k.Span(j)
		for i := lo; i < hi; i++ {
			tr, suffix, value := k.Key(i)
			out = append(out, line(start, end, tr, suffix, value))
		}
	}
	return out
}

// decoders decode a block of each kind and read everything it holds,
// returning the decoder's error.
var decoders = map[string]func(b []byte) error{
	"data":  dataDecoder(colblk.KeySchemaDefault),
	"crdb1": dataDecoder(colblk.KeySchemaCRDB1),
	"index": func(b []byte) error {
		x, err := colblk.DecodeIndexBlock(b)
		for i := 0; err == nil && i < x.Rows(); i++ {
			_, _ = x.Handle(i)
			_, _ = x.Separator(i), x.Props(i)
		}
		return err
	},
	"keyspan": func(b []byte) error {
		k, err := colblk.DecodeKeyspanBlock(b)
		for j := 0; err == nil && j < k.Spans(); j++ {
			_, _, lo, hi := k.Span(j)
			for i := lo; i < hi; i++ {
				_, _, _ = k.Key(i)
			}
		}
		return err
	},
	"kv": func(b []byte) error {
		kv, err := colblk.DecodeKeyValueBlock(b)
		for i := 0; err == nil && i < kv.Rows(); i++ {
			_, _ = kv.Key(i), kv.Value(i)
		}
		return err
	},
}

// dataDecoder decodes a data block of key schema s and reads every row.
func dataDecoder(s colblk.KeySchema) func(b []byte) error {
	return func(b []byte) error {
		d, err := colblk.DecodeDataBlockSchema(b, s)
		for i := 0; err == nil && i < d.Rows(); i++ {
			_, _, _, _, _ = d.AppendUserKey(nil, i), d.Trailer(i), d.Value(i), d.External(i), d.Obsolete(i)
		}
		return err
	}
}

// checkDecode decodes b as a block of kind: an error must be corruption.
func checkDecode(t *testing.T, kind string, b []byte) {
	if err := decoders[kind](b); err != nil && !errors.Is(err, base.ErrCorruption) {
		t.Fatalf("%s block %x: error %v is not corruption", kind, b, err)
	}
}

// TestDamagedBlocks truncates every real block at every length and flips
// every bit of it: decoding refuses it as corruption or reads it, without
// a panic.
func TestDamagedBlocks(t *testing.T) {
	rb := pebbleBlocks(t)
	sets := map[string][][]byte{"data": rb.data[:3], "crdb1": crdbBlocks(t).data[:3], "index": append(rb.index[:2:2], rb.topIndex...), "keyspan": append(rb.rangeDel[:1:1], rb.rangeKey...), "kv": rb.kv}
	refused := 0
	for kind, bs := range sets {
		for _, b := range bs {
			if err := decoders[kind](b); err != nil {
				t.Fatalf("sound %s block: %v", kind, err)
			}
			for n := range len(b) {
				if err := decoders[kind](b[:n]); !errors.Is(err, base.ErrCorruption) {
					t.Fatalf("%s block cut to %d of %d bytes: %v, want corruption", kind, n, len(b), err)
				}
			}
			for i := range len(b) * 8 {
				bad := bytes.Clone(b)
				bad[i/8] ^= 1 << (i % 8)
				if err := decoders[kind](bad); err != nil {
					if !errors.Is(err, base.ErrCorruption) {
						t.Fatalf("%s block, bit %d flipped: %v", kind, i, err)
					}
					refused++
				}
			}
		}
	}
	if refused == 0 {
		t.Fatal("no bit flip was refused")
	}
}

func fuzzBlocks(f *testing.F, kind string, seeds [][]byte) {
	for _, b := range seeds {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkDecode(t, kind, b) })
}

// maxFuzzBlock bounds the inputs of the data-block fuzz targets. The fuzzer
// minimizes each input that finds new coverage by trying to drop every run
// of its bytes, a count of runs quadratic in its length, and fuzzes nothing
// meanwhile: with blocks the size of the tables' above as seeds, a short run
// spends its time minimizing. Every path of the decoders is within reach of
// a block of a few rows.
const maxFuzzBlock = 256

// The data-block fuzz targets' seeds: tables of fewer keys than
// pebbleBlocks' and crdbBlocks', with values of at most 3 bytes, in blocks
// well under maxFuzzBlock. The default schema's blocks hold 13 to 19 rows
// (up to two bundles); crdb1's 2 to 4, with every kind of version among
// them.
var (
	dataSeeds = onceBlocks(func() (realBlocks, error) {
		var keys [][]byte
		for i := range 60 {
			keys = append(keys, fmt.Appendf(nil, "t/%d/%02d", i/20, i))
		}
		o := smallBlocks()
		o.BlockSize = 200
		return writeKeys(o, pebble.ReaderOptions{}, keys, 4)
	})
	crdbSeeds = onceBlocks(func() (realBlocks, error) {
		o, ro := crdbOptions()
		o.BlockSize = 160
		return writeKeys(o, ro, pebbletest.CRDBKeys(60, 1), 4)
	})
)

// fuzzSmallBlocks is fuzzBlocks over inputs of at most maxFuzzBlock bytes,
// which every seed must fit.
func fuzzSmallBlocks(f *testing.F, kind string, seeds [][]byte) {
	for _, b := range seeds {
		if len(b) > maxFuzzBlock {
			f.Fatalf("a %s seed of %d bytes, over the %d the target reads", kind, len(b), maxFuzzBlock)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > maxFuzzBlock {
			return
		}
		checkDecode(t, kind, b)
	})
}

func FuzzDataBlock(f *testing.F) { fuzzSmallBlocks(f, "data", dataSeeds(f).data) }

func FuzzCRDB1DataBlock(f *testing.F) { fuzzSmallBlocks(f, "crdb1", crdbSeeds(f).data) }

func FuzzIndexBlock(f *testing.F) {
	rb := pebbleBlocks(f)
	fuzzBlocks(f, "index", append(slices.Clone(rb.index), rb.topIndex...))
}

func FuzzKeyspanBlock(f *testing.F) {
	rb := pebbleBlocks(f)
	fuzzBlocks(f, "keyspan", append(slices.Clone(rb.rangeDel), rb.rangeKey...))
}

func FuzzKeyValueBlock(f *testing.F) { fuzzBlocks(f, "kv", pebbleBlocks(f).kv) }

// TestDataTypeNames names the column types and no others.
func TestDataTypeNames(t *testing.T) {
	got := fmt.Sprint(colblk.DataTypeBool, colblk.DataTypeUint, colblk.DataTypeBytes, colblk.DataTypePrefixBytes, colblk.DataType(0), colblk.DataType(9))
	if want := "bool uint bytes prefixbytes DataType(0) DataType(9)"; got != want {
		t.Fatalf("%s, want %s", got, want)
	}
}

// TestCRDB1AgreesWithPebble decodes the data blocks of a table of
// CockroachDB's key schema: every row's engine key (byte for byte, as
// Pebble's reader returns it), trailer and value, in order; a key schema's
// data block read as another's is refused.
func TestCRDB1AgreesWithPebble(t *testing.T) {
	rb := crdbBlocks(t)
	var keys, values []string
	versions := map[int]int{} // by suffix length, the length byte included
	for _, b := range rb.data {
		if _, err := colblk.DecodeDataBlock(b); !errors.Is(err, base.ErrCorruption) {
			t.Fatalf("a crdb1 block read with the default schema: %v", err)
		}
		d, err := colblk.DecodeDataBlockSchema(b, colblk.KeySchemaCRDB1)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < d.Rows(); i++ {
			if d.External(i) || d.Obsolete(i) {
				t.Fatalf("row %d: external %v, obsolete %v", i, d.External(i), d.Obsolete(i))
			}
			k := d.AppendUserKey([]byte("junk"), i)[4:]
			versions[int(k[len(k)-1])]++
			keys = append(keys, fmt.Sprintf("%q#%d", k, d.Trailer(i)))
			values = append(values, string(d.Value(i)))
		}
	}
	if len(keys) < 300 || !slices.Equal(keys, rb.keys) || !slices.Equal(values, rb.values) {
		t.Fatalf("data blocks: %d keys %v\nPebble: %d keys %v", len(keys), keys, len(rb.keys), rb.keys)
	}
	// No version, wall time, wall and logical time, the lock table.
	for _, n := range []int{0, 9, 13, 18} {
		if versions[n] == 0 {
			t.Fatalf("no key of a %d-byte suffix among %v", n, versions)
		}
	}
	if _, err := colblk.DecodeDataBlockSchema(pebbleBlocks(t).data[0], colblk.KeySchemaCRDB1); !errors.Is(err, base.ErrCorruption) {
		t.Fatalf("a default-schema block read as crdb1: %v", err)
	}
}
