package sstable

// Tables CockroachDB writes through Pebble: its comparer over engine keys
// and, in the columnar formats, its key schema crdb1. Pebble's reader,
// given cockroachkvs, is the oracle.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	pebblebloom "github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/cockroachkvs"
	"github.com/cockroachdb/pebble/v2/objstorage/objstorageprovider"
	pebble "github.com/cockroachdb/pebble/v2/sstable"

	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/pebbletest"
	"github.com/bloomkv/bloomkv/internal/rangedel"
)

// crdbPebbleOptions are Pebble's reader options for CockroachDB's tables.
func crdbPebbleOptions() pebble.ReaderOptions {
	return pebble.ReaderOptions{Comparer: &cockroachkvs.Comparer, KeySchemas: pebble.MakeKeySchemas(&cockroachkvs.KeySchema)}
}

// crdbReaderOptions are our reader's options for CockroachDB's tables.
var crdbReaderOptions = ReaderOptions{FileName: "crdb.sst", ForeignComparers: true}

// roachKey returns the roachpb key of engine key k.
func roachKey(k []byte) []byte { return k[:crdbSplit(k)-1] }

func crdbSplit(k []byte) int { return cockroachkvs.Split(k) }

// crdbSpec returns a table of about n of CockroachDB's keys (see
// pebbletest.CRDBKeys): a SET each, a DEL every ninth, at descending
// sequence numbers, and range deletions over whole roachpb keys.
func crdbSpec(n int, seed uint64) tableSpec {
	keys := pebbletest.CRDBKeys(n, seed)
	var spec tableSpec
	for i, k := range keys {
		kind, v := base.KindSet, fmt.Appendf(nil, "value %d of %x", i, k)
		if i%9 == 4 {
			kind, v = base.KindDelete, nil
		}
		if i%13 == 0 {
			v = bytes.Repeat(v, 5)
		}
		spec.entries = append(spec.entries, entry{base.MakeInternalKey(k, base.SeqNum(2*len(keys)-i), kind), v})
	}
	unversioned := func(i int) []byte { return cockroachkvs.EncodeKey(nil, roachKey(keys[i*len(keys)/10]), nil) }
	spec.dels = []rangedel.Tombstone{
		tomb(unversioned(1), unversioned(2), 5),
		tomb(unversioned(1), unversioned(3), 3),
		tomb(unversioned(6), unversioned(7), 9),
	}
	return spec
}

// writeCRDB writes spec with Pebble's writer in format, with CockroachDB's
// comparer and key schema, a Bloom filter and small blocks (a two-level
// index), a range deletion between two versions, and from Pebblev2 an MVCC
// range tombstone (a range key).
func writeCRDB(t testing.TB, spec tableSpec, format pebble.TableFormat) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := pebble.NewWriter(objstorageprovider.NewRemoteWritable(nopCloser{&buf}), pebble.WriterOptions{
		TableFormat:    format,
		Comparer:       &cockroachkvs.Comparer,
		KeySchema:      &cockroachkvs.KeySchema,
		FilterPolicy:   pebblebloom.FilterPolicy(10),
		BlockSize:      1024,
		IndexBlockSize: 1024,
		Compression:    pebble.SnappyCompression,
	})
	addSpec(t, w, spec, 0)
	// And a range deletion between two versions of a roachpb key, after
	// the others: newer first, its bounds are out of bytewise order.
	roach := roachKey(spec.entries[len(spec.entries)*8/10].key.UserKey)
	newer, older := cockroachkvs.EncodeMVCCKey(nil, roach, 2000, 0), cockroachkvs.EncodeMVCCKey(nil, roach, 1000, 0)
	if err := w.Raw().EncodeSpan(pebbleSpan(newer, older, []base.SeqNum{4})); err != nil {
		t.Fatal(err)
	}
	if format >= pebble.TableFormatPebblev2 {
		start := cockroachkvs.EncodeKey(nil, roachKey(spec.entries[len(spec.entries)/2].key.UserKey), nil)
		end := cockroachkvs.EncodeKey(nil, roachKey(spec.entries[len(spec.entries)*3/4].key.UserKey), nil)
		suffix := binary.BigEndian.AppendUint64(nil, 1<<40)
		if err := w.RangeKeySet(start, end, append(suffix, 9), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// crdbFormats are the formats the tests write CockroachDB's tables in: the
// columnar ones with crdb1, and row formats CockroachDB's stores keep from
// before.
var crdbFormats = []pebble.TableFormat{pebble.TableFormatPebblev2, pebble.TableFormatPebblev4, pebble.TableFormatPebblev5, pebble.TableFormatPebblev6, pebble.TableFormatPebblev7}

// crdbSeekKeys returns keys to seek to around the keys of spec: each
// present key, its roachpb key without a version and with versions just
// above and below its own, a logical time, a lock-table version, and a
// roachpb key between two.
func crdbSeekKeys(spec tableSpec) [][]byte {
	var out [][]byte
	for i := 0; i < len(spec.entries); i += 3 {
		k := spec.entries[i].key.UserKey
		roach := roachKey(k)
		out = append(out, bytes.Clone(k), cockroachkvs.EncodeKey(nil, roach, nil),
			cockroachkvs.EncodeKey(nil, append(bytes.Clone(roach), 0), nil),
			cockroachkvs.EncodeKey(nil, roach, make([]byte, 17)))
		if v := k[crdbSplit(k):]; len(v) == 9 || len(v) == 13 {
			wall := binary.BigEndian.Uint64(v)
			for _, w := range []uint64{wall - 1, wall + 1} {
				out = append(out, cockroachkvs.EncodeMVCCKey(nil, roach, w, 0), cockroachkvs.EncodeMVCCKey(nil, roach, w, 7))
			}
		}
	}
	return out
}

// TestWeReadCockroachTables reads tables of CockroachDB's keys that Pebble
// writes with CockroachDB's comparer (and, columnar, its crdb1 key schema):
// every entry as Pebble's reader returns it (engine key byte for byte,
// trailer, value), in order; range deletions and range keys; seeks between
// versions land where Pebble's do; lookups find every key; the check passes
// and the filter admits every key's prefix. Without ForeignComparers the
// table is refused, as the store refuses it.
func TestWeReadCockroachTables(t *testing.T) {
	spec := crdbSpec(2500, 1)
	seeks := crdbSeekKeys(spec)
	for _, format := range crdbFormats {
		t.Run(format.String(), func(t *testing.T) {
			data := writeCRDB(t, spec, format)
			if _, err := NewReader(bytes.NewReader(data), int64(len(data)), ReaderOptions{FileName: "crdb.sst"}); err == nil || !strings.Contains(err.Error(), `comparer "cockroach_comparator" is not bloomkv's`) {
				t.Fatalf("opened without ForeignComparers: %v", err)
			}
			rd, err := NewReader(bytes.NewReader(data), int64(len(data)), crdbReaderOptions)
			if err != nil {
				t.Fatal(err)
			}
			if !rd.ComparerIsForeign() || rd.columnar != (format >= pebble.TableFormatPebblev5) {
				t.Fatalf("foreign %v, columnar %v", rd.ComparerIsForeign(), rd.columnar)
			}
			theirs, theirDels := pebbleEntriesWith(t, data, crdbPebbleOptions())
			ours := readEntries(t, rd)
			sameEntries(t, ours, theirs, "bloomkv against Pebble's reader")
			// Pebble normalizes versions the crdb1 schema does not
			// store: a zero logical time, the synthetic byte.
			normalized := 0
			for j := range ours {
				if !bytes.Equal(ours[j].value, theirs[j].value) {
					t.Fatalf("entry %d %q: value %q, Pebble %q", j, ours[j].key.UserKey, ours[j].value, theirs[j].value)
				}
				if !bytes.Equal(ours[j].key.UserKey, spec.entries[j].key.UserKey) {
					normalized++
				}
				if cockroachkvs.Compare(ours[j].key.UserKey, spec.entries[j].key.UserKey) != 0 || ours[j].key.Trailer != spec.entries[j].key.Trailer {
					t.Fatalf("entry %d: %s, written %s", j, ours[j].key, spec.entries[j].key)
				}
			}
			if rd.columnar != (normalized > 0) {
				t.Fatalf("%d keys read back normalized (columnar %v)", normalized, rd.columnar)
			}
			sameRangeDels(t, rd.RangeDeletions(), theirDels, "bloomkv against Pebble's range deletions")
			if len(theirDels) < 4 {
				t.Fatalf("Pebble reads %d range deletions", len(theirDels))
			}
			rks, err := rd.RangeKeys()
			if err != nil {
				t.Fatal(err)
			}
			if ours, theirs := flatten(rks), pebbleRangeKeysWith(t, data, crdbPebbleOptions()); len(ours) != 1 || fmt.Sprint(ours) != fmt.Sprint(theirs) {
				t.Fatalf("range keys:\nours   %v\nPebble %v", ours, theirs)
			}
			sameSeeks(t, rd, data, seeks)
			for _, e := range ours {
				v, tr, found, err := rd.LookupCopy(e.key.UserKey, base.SeqNumMax)
				if err != nil || !found || tr != e.key.Trailer || (tr.Kind() == base.KindSet && !bytes.Equal(v, e.value)) {
					t.Fatalf("lookup of %q: %q, %d, %v, %v; want %s", e.key.UserKey, v, tr, found, err, e.key)
				}
			}
			rep := rd.Check()
			if rep.Err() != nil || !rep.Complete || rep.Entries != uint64(len(spec.entries)) || rep.RangeDeletions != len(theirDels) {
				t.Fatalf("check: %v (complete %v, %d entries, %d range deletions)", rep.Err(), rep.Complete, rep.Entries, rep.RangeDeletions)
			}
			f, err := rd.TableFilter()
			if err != nil || f == nil {
				t.Fatalf("filter %v, %v", f, err)
			}
			absent := 0
			for _, k := range seeks {
				if !f.MayContain(k) {
					absent++
					if rd.Split(k) != cockroachkvs.Split(k) {
						t.Fatalf("Split(%q) = %d, cockroachkvs %d", k, rd.Split(k), cockroachkvs.Split(k))
					}
				}
			}
			for _, e := range spec.entries {
				if !f.MayContain(e.key.UserKey) {
					t.Fatalf("filter lacks %q", e.key.UserKey)
				}
			}
			if absent == 0 {
				t.Fatal("the filter admits every key sought, the absent roachpb keys too")
			}
			l := rd.Layout()
			for _, b := range l.Blocks {
				if b.Err != nil {
					t.Fatalf("layout: %v", b.Err)
				}
				if err := rd.BlockRecords(b, func(k, v []byte) bool { return true }); err != nil && b.Kind != BlockFilter {
					t.Fatalf("records of %s block %s: %v", b.Kind, b.Handle, err)
				}
			}
			lo, hi, err := rd.KeyRange()
			if err != nil || lo == nil || !bytes.Equal(lo.UserKey, ours[0].key.UserKey) || !bytes.Equal(hi.UserKey, ours[len(ours)-1].key.UserKey) {
				t.Fatalf("key range %v-%v, %v", lo, hi, err)
			}
		})
	}
}

// sameSeeks seeks our iterator and Pebble's to each key, SeekGE and
// SeekLT, and compares where they land.
func sameSeeks(t *testing.T, rd *Reader, data []byte, keys [][]byte) {
	t.Helper()
	pr := openPebbleWith(t, data, crdbPebbleOptions())
	defer pr.Close()
	pit, err := pr.NewIter(pebble.NoTransforms, nil, nil, pebble.AssertNoBlobHandles)
	if err != nil {
		t.Fatal(err)
	}
	defer pit.Close()
	it := rd.NewIter()
	defer it.Close()
	at := func(ok bool) string {
		if !ok {
			return "end"
		}
		return fmt.Sprintf("%q#%d", it.Key().UserKey, it.Key().Trailer)
	}
	// Pebble's key-value type is in a package of Pebble's that cannot be
	// imported: its positions are described where they are read.
	pat := func(k pebble.InternalKey) string { return fmt.Sprintf("%q#%d", k.UserKey, uint64(k.Trailer)) }
	between := 0
	for _, k := range keys {
		got, want := at(it.SeekGE(k)), "end"
		if kv := pit.SeekGE(k, 0); kv != nil {
			want = pat(kv.K)
		}
		if got != want {
			t.Fatalf("SeekGE(%q): %s, Pebble %s", k, got, want)
		}
		if got != "end" && !bytes.Equal(it.Key().UserKey, k) && bytes.Equal(roachKey(it.Key().UserKey), roachKey(k)) {
			between++ // landed on a later version of the same roachpb key
		}
		got, want = at(it.SeekLT(k)), "end"
		if kv := pit.SeekLT(k, 0); kv != nil {
			want = pat(kv.K)
		}
		if got != want {
			t.Fatalf("SeekLT(%q): %s, Pebble %s", k, got, want)
		}
	}
	if between < 10 {
		t.Fatalf("only %d seeks landed between versions of a roachpb key", between)
	}
}

// TestCockroachTableOrderBroken: a table whose versions are oldest first,
// against CockroachDB's order, fails the check with keys out of order:
// in a row format, all of them, as Pebble writes them once told not to
// check the order; in crdb1, two versions swapped in a columnar block
// (Pebble's invariant checks, on under the race detector, refuse to write
// such a block).
func TestCockroachTableOrderBroken(t *testing.T) {
	for _, format := range []pebble.TableFormat{pebble.TableFormatPebblev4, pebble.TableFormatPebblev7} {
		columnar := format >= pebble.TableFormatPebblev5
		wo := pebble.WriterOptions{TableFormat: format, Comparer: &cockroachkvs.Comparer, KeySchema: &cockroachkvs.KeySchema, Compression: pebble.NoCompression}
		if !columnar {
			// A testing knob of Pebble's, in a field it does not export.
			knob := reflect.ValueOf(&wo).Elem().FieldByName("internal").FieldByName("DisableKeyOrderChecks")
			reflect.NewAt(knob.Type(), unsafe.Pointer(knob.UnsafeAddr())).Elem().SetBool(true)
		}
		var buf bytes.Buffer
		w := pebble.NewWriter(objstorageprovider.NewRemoteWritable(nopCloser{&buf}), wo)
		for i := range 50 {
			for j := range 3 {
				wall := uint64(1000 + j) // oldest first
				if columnar {
					wall = uint64(1002 - j)
				}
				if err := w.Set(cockroachkvs.EncodeMVCCKey(nil, fmt.Appendf(nil, "key%03d", i), wall, 0), []byte("v")); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		data, want := buf.Bytes(), 100
		if columnar {
			data, want = swapFirstWallTimes(t, data), 1
		}
		rd, err := NewReader(bytes.NewReader(data), int64(len(data)), crdbReaderOptions)
		if err != nil {
			t.Fatal(err)
		}
		rep := rd.Check()
		if n := len(rep.Problems) + rep.MoreProblems; !errors.Is(rep.Err(), ErrCorruption) || !strings.Contains(rep.Err().Error(), "out of order") || n < want {
			t.Fatalf("%v: check of a table in the wrong order: %v (%d problems)", format, rep.Err(), n)
		}
	}
}

// swapFirstWallTimes swaps the MVCC wall times of the first two rows of
// the first data block of an uncompressed crdb1 table, and reseals the
// block's checksum.
func swapFirstWallTimes(t *testing.T, data []byte) []byte {
	t.Helper()
	rd, err := NewReader(bytes.NewReader(data), int64(len(data)), crdbReaderOptions)
	if err != nil {
		t.Fatal(err)
	}
	out := bytes.Clone(data)
	for _, b := range rd.Blocks().Blocks {
		if b.Kind != BlockData {
			continue
		}
		blk := out[b.Handle.Offset : b.Handle.Offset+b.Handle.Length]
		// The wall times are column 1, after crdb1's 5-byte custom header
		// and the 7-byte generic one: a uint column, an encoding byte (the
		// width, and whether a base follows), then the values aligned.
		col := int(binary.LittleEndian.Uint32(blk[5+7+5+1:]))
		enc, p := blk[col], col+1
		if enc&0x80 != 0 {
			p += 8
		}
		width := int(enc & 0x7f)
		if width == 0 {
			t.Fatalf("wall-time column of constant values (encoding %#x)", enc)
		}
		p = (p + width - 1) &^ (width - 1)
		a, c := bytes.Clone(blk[p:p+width]), blk[p+width:p+2*width]
		copy(blk[p:], c)
		copy(blk[p+width:], a)
		end := b.Handle.Offset + b.Handle.Length
		binary.LittleEndian.PutUint32(out[end+1:], blockChecksum(rd.footer.checksum, out[b.Handle.Offset:end+1]))
		return out
	}
	t.Fatal("no data block")
	return nil
}

// TestCockroachTableDamageRefused flips a bit of every byte of small
// CockroachDB tables and cuts them at every length: each is refused or,
// for a flip nothing reads, read back as the original; never a panic.
func TestCockroachTableDamageRefused(t *testing.T) {
	n := 150
	if testing.Short() {
		n = 40
	}
	spec := crdbSpec(n, 2)
	var tables [][]byte
	for _, format := range []pebble.TableFormat{pebble.TableFormatPebblev4, pebble.TableFormatPebblev7} {
		tables = append(tables, writeCRDB(t, spec, format))
	}
	probes := crdbSeekKeys(spec)
	flipEachByteWith(t, tables, probes, crdbReaderOptions)
	cutEachLengthWith(t, tables, probes, crdbReaderOptions)
}
