package sstable

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	pebblebloom "github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/cockroachkvs"
	"github.com/cockroachdb/pebble/v2/objstorage/objstorageprovider"
	pebble "github.com/cockroachdb/pebble/v2/sstable"
	pebbleblob "github.com/cockroachdb/pebble/v2/sstable/blob"
	"github.com/cockroachdb/pebble/v2/sstable/block"
	"github.com/cockroachdb/pebble/v2/sstable/colblk"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/cache"
	"github.com/bloomkv/bloomkv/internal/rangedel"
)

// flatRangeKey is one suffix of a range key, as Pebble's iterator yields it.
type flatRangeKey struct {
	start, end, suffix, value string
	trailer                   base.Trailer
}

// flatten lists our range keys one suffix at a time.
func flatten(rks []RangeKey) []flatRangeKey {
	var out []flatRangeKey
	for _, rk := range rks {
		if len(rk.Suffixes) == 0 {
			out = append(out, flatRangeKey{start: string(rk.Start), end: string(rk.End), trailer: rk.Trailer})
		}
		for i, s := range rk.Suffixes {
			f := flatRangeKey{start: string(rk.Start), end: string(rk.End), suffix: string(s), trailer: rk.Trailer}
			if rk.Values != nil {
				f.value = string(rk.Values[i])
			}
			out = append(out, f)
		}
	}
	return out
}

// openPebble opens a table with Pebble's reader.
func openPebble(t testing.TB, data []byte) *pebble.Reader {
	t.Helper()
	return openPebbleWith(t, data, pebble.ReaderOptions{})
}

// openPebbleWith opens a table with Pebble's reader and options o.
func openPebbleWith(t testing.TB, data []byte, o pebble.ReaderOptions) *pebble.Reader {
	t.Helper()
	readable, err := pebble.NewSimpleReadable(memReadable(t, data))
	if err != nil {
		t.Fatal(err)
	}
	r, err := pebble.NewReader(context.Background(), readable, o)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// samePebbleProperties compares our reader's properties with Pebble's.
func samePebbleProperties(t *testing.T, rd *Reader, data []byte) {
	t.Helper()
	r := openPebble(t, data)
	defer r.Close()
	want, err := r.ReadPropertiesBlock(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	got := rd.Properties()
	uvarint := func(name string) uint64 {
		v, _ := binary.Uvarint(got.User[name])
		return v
	}
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"entries", got.NumEntries, want.NumEntries},
		{"deletions", got.NumDeletions, want.NumDeletions},
		{"range deletions", got.NumRangeDeletions, want.NumRangeDeletions},
		{"raw key size", got.RawKeySize, want.RawKeySize},
		{"raw value size", got.RawValueSize, want.RawValueSize},
		{"data blocks", got.NumDataBlocks, want.NumDataBlocks},
		{"data size", got.DataSize, want.DataSize},
		{"index size", got.IndexSize, want.IndexSize},
		{"filter size", got.FilterSize, want.FilterSize},
		{"index type", got.IndexType, want.IndexType},
		{"comparer", got.ComparerName, want.ComparerName},
		{"compression", got.CompressionName, want.CompressionName},
		{"filter policy", got.FilterPolicy, want.FilterPolicyName},
		{"range-key sets", uvarint("pebble.num.range-key-sets"), want.NumRangeKeySets},
		{"range-key unsets", uvarint("pebble.num.range-key-unsets"), want.NumRangeKeyUnsets},
		{"range-key deletions", uvarint("pebble.num.range-key-dels"), want.NumRangeKeyDels},
	} {
		if fmt.Sprint(c.got) != fmt.Sprint(c.want) {
			t.Errorf("property %s: %v, Pebble %v", c.name, c.got, c.want)
		}
	}
	if got.NumEntries == 0 || got.NumDataBlocks == 0 {
		t.Fatalf("properties: %+v", got)
	}
}

// pebbleRangeKeys reads a table's range keys with Pebble's reader.
func pebbleRangeKeys(t testing.TB, data []byte) []flatRangeKey {
	t.Helper()
	return pebbleRangeKeysWith(t, data, pebble.ReaderOptions{})
}

// pebbleRangeKeysWith is pebbleRangeKeys with Pebble's reader options o.
func pebbleRangeKeysWith(t testing.TB, data []byte, o pebble.ReaderOptions) []flatRangeKey {
	t.Helper()
	r := openPebbleWith(t, data, o)
	defer r.Close()
	it, err := r.NewRawRangeKeyIter(context.Background(), pebble.NoFragmentTransforms, pebble.NoReadEnv)
	if err != nil || it == nil {
		t.Fatalf("Pebble's range-key iterator: %v", err)
	}
	defer it.Close()
	var out []flatRangeKey
	span, err := it.First()
	for ; span != nil; span, err = it.Next() {
		for _, k := range span.Keys {
			out = append(out, flatRangeKey{start: string(span.Start), end: string(span.End), suffix: string(k.Suffix), value: string(k.Value), trailer: base.Trailer(k.Trailer)})
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// memReadable returns data as a file of a memory file system.
func memReadable(t testing.TB, data []byte) vfs.File {
	t.Helper()
	fs := vfs.NewMem()
	f, err := fs.Create("t.sst", vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(bytes.Clone(data)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if f, err = fs.Open("t.sst"); err != nil {
		t.Fatal(err)
	}
	return f
}

// writePebbleFormat writes spec, and in Pebblev2 some range keys, with
// Pebble's writer in format with checksum type sum.
func writePebbleFormat(t testing.TB, spec tableSpec, format pebble.TableFormat, sum block.ChecksumType) []byte {
	return writePebbleWith(t, spec, pebbleOpts{format: format, sum: sum})
}

// pebbleOpts are the options of a table written by Pebble's writer.
type pebbleOpts struct {
	format pebble.TableFormat
	sum    block.ChecksumType
	// compression is Snappy when nil.
	compression *pebble.CompressionProfile
	// oneLevel keeps the index in one block; otherwise a 1 KiB index
	// block size makes it two-level.
	oneLevel bool
	// blobEvery, when not 0, writes every blobEvery-th entry's SET as a
	// blob value handle (blobHandle), Pebblev6 on.
	blobEvery int
	// keySchema, when not nil, is the columnar formats' key schema.
	keySchema *colblk.KeySchema
	// blockSize is the data blocks' target size; 1 KiB when 0.
	blockSize int
}

// writePebbleWith writes spec, and from Pebblev2 some range keys, with
// Pebble's writer and options o.
func writePebbleWith(t testing.TB, spec tableSpec, o pebbleOpts) []byte {
	t.Helper()
	var buf bytes.Buffer
	wo := pebble.WriterOptions{
		TableFormat:  o.format,
		Compression:  o.compression,
		FilterPolicy: pebblebloom.FilterPolicy(10),
		BlockSize:    1024,
		Checksum:     o.sum,
		KeySchema:    o.keySchema,
	}
	if wo.Compression == nil {
		wo.Compression = pebble.SnappyCompression
	}
	if o.blockSize != 0 {
		wo.BlockSize = o.blockSize
	}
	if o.oneLevel {
		wo.IndexBlockSize = 1 << 30
	}
	w := pebble.NewWriter(objstorageprovider.NewRemoteWritable(nopCloser{&buf}), wo)
	addSpec(t, w, spec, o.blobEvery)
	if o.format >= pebble.TableFormatPebblev2 {
		errs := []error{
			w.RangeKeySet([]byte("key00100"), []byte("key00300"), nil, []byte("rk-value")),
			w.RangeKeyUnset([]byte("key00200"), []byte("key00400"), nil),
			w.RangeKeyDelete([]byte("key00500"), []byte("key00600")),
		}
		if o.format >= pebble.TableFormatPebblev5 {
			// Several suffixes of one trailer, and a span of its own.
			errs = append(errs,
				w.RangeKeySet([]byte("key00700"), []byte("key00800"), []byte("@5"), []byte("v5")),
				w.RangeKeySet([]byte("key00700"), []byte("key00800"), []byte("@7"), []byte("v7")),
				w.RangeKeyUnset([]byte("key00750"), []byte("key00900"), []byte("@3")),
				w.RangeKeyUnset([]byte("key00750"), []byte("key00900"), []byte("@4")))
		}
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// blobHandle is the blob value handle addSpec writes for the n-th blob
// value, of length vlen.
func blobHandle(n, vlen int) pebbleblob.InlineHandle {
	var h pebbleblob.InlineHandle
	h.ValueLen = uint32(vlen)
	h.BlockID = pebbleblob.BlockID(n / 16)
	h.ValueID = pebbleblob.BlockValueID(n % 16)
	return h
}

// blobMarker starts the value readEntries and pebbleEntries give an entry
// held in a blob file, before its encoded inline handle.
const blobMarker = "blob-handle:"

// readEntries reads every point entry of a table with our iterator; a value
// in a blob file reads as blobMarker and its handle.
func readEntries(t *testing.T, rd *Reader) []entry {
	t.Helper()
	var got []entry
	it := rd.NewIter()
	for ok := it.First(); ok; ok = it.Next() {
		v := append([]byte(nil), it.Value()...)
		if h, ok := it.BlobHandle(); ok {
			if !it.IsBlobReference() || v[0]&0xc0 != 0x40 || !bytes.Equal(v[1:], h) {
				t.Fatalf("%s: blob value %x, handle %x", it.Key(), v, h)
			}
			v = append([]byte(blobMarker), h...)
		}
		got = append(got, entry{it.Key().Clone(), v})
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	return got
}

// addSpec adds spec's entries and range deletions to Pebble's writer w;
// with blobEvery, every blobEvery-th SET as a blob value handle.
func addSpec(t testing.TB, w *pebble.Writer, spec tableSpec, blobEvery int) {
	t.Helper()
	blobs := 0
	for i, e := range spec.entries {
		var k pebble.InternalKey
		k.UserKey = e.key.UserKey
		setPebbleTrailer(&k, e.key.Trailer)
		var err error
		if blobEvery > 0 && i%blobEvery == 0 && e.key.Kind() == base.KindSet {
			err = w.Raw().AddWithBlobHandle(k, blobHandle(blobs, len(e.value)), 0, false)
			blobs++
		} else {
			err = w.Raw().Add(k, e.value, false)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	frags := rangedel.Fragment(spec.dels)
	for i := 0; i < len(frags); {
		j := i
		var seqs []base.SeqNum
		for ; j < len(frags) && bytes.Equal(frags[j].Start, frags[i].Start); j++ {
			seqs = append(seqs, frags[j].SeqNum)
		}
		if err := w.Raw().EncodeSpan(pebbleSpan(frags[i].Start, frags[i].End, seqs)); err != nil {
			t.Fatal(err)
		}
		i = j
	}
}

type nopCloser struct{ *bytes.Buffer }

func (nopCloser) Close() error { return nil }

// TestWeReadPebbleRowFormats reads tables Pebble writes in the formats
// Pebblev1 and v2, with both checksum types, with our reader: the same
// entries, range deletions and range keys, and everything else the reader
// offers.
func TestWeReadPebbleRowFormats(t *testing.T) {
	formats := []pebble.TableFormat{pebble.TableFormatPebblev1, pebble.TableFormatPebblev2, pebble.TableFormatPebblev3, pebble.TableFormatPebblev4}
	for i, format := range formats {
		for _, sum := range []block.ChecksumType{block.ChecksumTypeCRC32c, block.ChecksumTypeXXHash64} {
			r := rand.New(rand.NewPCG(uint64(i), 17))
			spec := randomSpec(r, 3000)
			t.Run(fmt.Sprintf("%v/%v", format, sum), func(t *testing.T) {
				data := writePebbleFormat(t, spec, format, sum)
				rd := openTable(t, data)
				if got, want := rd.Properties().Format.String(), fmt.Sprintf("Pebblev%d", i+1); got != want {
					t.Fatalf("format %s, want %s", got, want)
				}
				sameEntries(t, readEntries(t, rd), spec.entries, "bloomkv reading Pebble's table")
				sameRangeDels(t, rd.RangeDeletions(), rangedel.Fragment(spec.dels), "bloomkv reading Pebble's range deletions")
				checkTable(t, rd, spec, r)
				samePebbleProperties(t, rd, data)

				rks, err := rd.RangeKeys()
				if err != nil {
					t.Fatal(err)
				}
				if format < pebble.TableFormatPebblev2 {
					if rks != nil {
						t.Fatalf("range keys in a Pebblev1 table: %v", rks)
					}
				} else {
					ours, theirs := flatten(rks), pebbleRangeKeys(t, data)
					if len(ours) < 4 || fmt.Sprint(ours) != fmt.Sprint(theirs) {
						t.Fatalf("range keys:\nours   %v\nPebble %v", ours, theirs)
					}
				}
				if rep := rd.Check(); rep.Err() != nil {
					t.Fatal(rep.Err())
				}
				kinds := map[BlockKind]int{}
				for _, b := range rd.Layout().Blocks {
					if b.Err != nil {
						t.Fatalf("layout: %v", b.Err)
					}
					kinds[b.Kind]++
				}
				dels := min(len(spec.dels), 1)
				if v3 := format >= pebble.TableFormatPebblev3; v3 != (kinds[BlockValue] > 0) || v3 != (kinds[BlockValueIndex] == 1) {
					t.Fatalf("layout: %d value blocks, %d value indexes", kinds[BlockValue], kinds[BlockValueIndex])
				}
				if want := min(int(format-pebble.TableFormatPebblev1), 1); kinds[BlockRangeKey] != want || kinds[BlockFilter] != 1 || kinds[BlockRangeDel] != dels {
					t.Fatalf("layout: kinds %v", kinds)
				}
			})
		}
	}
}

// withSizedDeletes returns spec with every other deletion a sized one
// (DELSIZED, its value the uvarint size of what it deletes).
func withSizedDeletes(spec tableSpec) tableSpec {
	out := tableSpec{dels: spec.dels}
	n := 0
	for _, e := range spec.entries {
		if e.key.Kind() == base.KindDelete {
			if n++; n%2 == 0 {
				e = entry{base.MakeInternalKey(e.key.UserKey, e.key.SeqNum(), kindDeleteSized), binary.AppendUvarint(nil, uint64(100+n))}
			}
		}
		out.entries = append(out.entries, e)
	}
	return out
}

// TestWeReadPebbleColumnarFormats reads tables Pebble writes in the
// columnar formats (Pebblev5 to v7) with each compression, one- and
// two-level indexes, sized deletions, value blocks and blob value handles:
// our reader agrees with Pebble's on every entry, range deletion, range key
// and property, and its checks and inspection find every block sound.
func TestWeReadPebbleColumnarFormats(t *testing.T) {
	compressions := []struct {
		name    string
		profile *pebble.CompressionProfile
		c       Compression
	}{
		{"none", pebble.NoCompression, NoCompression},
		{"snappy", pebble.SnappyCompression, SnappyCompression},
		{"zstd", pebble.ZstdCompression, ZstdCompression},
		{"minlz", pebble.MinLZCompression, MinLZCompression},
	}
	i := 0
	for _, format := range []pebble.TableFormat{pebble.TableFormatPebblev5, pebble.TableFormatPebblev6, pebble.TableFormatPebblev7} {
		for _, comp := range compressions {
			if comp.c == MinLZCompression && format < pebble.TableFormatPebblev6 {
				continue // Pebble writes MinLZ from Pebblev6
			}
			i++
			o := pebbleOpts{format: format, sum: block.ChecksumTypeCRC32c, compression: comp.profile, oneLevel: i%2 == 1}
			if i%3 == 0 {
				o.sum = block.ChecksumTypeXXHash64
			}
			extras := i%3 == 1 // sized deletions and, from Pebblev6, blob values
			if extras && format >= pebble.TableFormatPebblev6 {
				o.blobEvery = 5
			}
			r := rand.New(rand.NewPCG(uint64(i), 23))
			spec := randomSpec(r, 3000)
			if extras {
				spec = withSizedDeletes(spec)
			}
			name := fmt.Sprintf("Pebblev%d/%s/oneLevel=%v/extras=%v", format-pebble.TableFormatPebblev1+1, comp.name, o.oneLevel, extras)
			t.Run(name, func(t *testing.T) {
				data := writePebbleWith(t, spec, o)
				rd := openTable(t, data)
				if got, want := rd.Properties().Format.String(), fmt.Sprintf("Pebblev%d", format-pebble.TableFormatPebblev1+1); got != want {
					t.Fatalf("format %s, want %s", got, want)
				}
				ours := readEntries(t, rd)
				theirs, theirDels := pebbleEntries(t, data)
				sameEntries(t, ours, theirs, "bloomkv against Pebble's reader")
				for j := range ours {
					if !bytes.Equal(ours[j].value, theirs[j].value) {
						t.Fatalf("entry %d %s: value %q, Pebble %q", j, ours[j].key, ours[j].value, theirs[j].value)
					}
				}
				// Through bloomkv's cache, index and filter blocks in it too.
				cached, err := NewReader(bytes.NewReader(data), int64(len(data)), ReaderOptions{
					FileName: "cached.sst", Cache: cache.New(1<<20, cache.Options{}), FileNum: 7, CacheIndexAndFilterBlocks: true,
				})
				if err != nil {
					t.Fatal(err)
				}
				for pass := range 2 { // cold, then warm
					got := readEntries(t, cached)
					sameEntries(t, got, ours, fmt.Sprintf("bloomkv through its cache, pass %d", pass))
					for j := range got {
						if !bytes.Equal(got[j].value, ours[j].value) {
							t.Fatalf("cached pass %d: entry %d %s: value differs", pass, j, got[j].key)
						}
					}
				}
				sameRangeDels(t, rd.RangeDeletions(), theirDels, "bloomkv against Pebble's range deletions")
				sameRangeDels(t, rd.RangeDeletions(), rangedel.Fragment(spec.dels), "bloomkv reading Pebble's range deletions")
				blobs := 0
				for _, e := range ours {
					if bytes.HasPrefix(e.value, []byte(blobMarker)) {
						blobs++
					}
				}
				if (o.blobEvery > 0) != (blobs > 0) {
					t.Fatalf("%d blob values, writing every %d-th", blobs, o.blobEvery)
				}
				if !extras {
					sameEntries(t, ours, spec.entries, "bloomkv reading Pebble's table")
					checkTable(t, rd, spec, r)
				}
				samePebbleProperties(t, rd, data)
				rks, err := rd.RangeKeys()
				if err != nil {
					t.Fatal(err)
				}
				if ours, theirs := flatten(rks), pebbleRangeKeys(t, data); len(ours) < 8 || fmt.Sprint(ours) != fmt.Sprint(theirs) {
					t.Fatalf("range keys:\nours   %v\nPebble %v", ours, theirs)
				}
				if rep := rd.Check(); rep.Err() != nil || !rep.Complete || rep.Entries != uint64(len(spec.entries)) {
					t.Fatalf("check: %v (complete %v, %d entries)", rep.Err(), rep.Complete, rep.Entries)
				}
				refs, err := rd.BlobReferences()
				if err != nil || (blobs > 0) != (len(refs) == 1 && len(refs[0]) > 0) {
					t.Fatalf("blob references %x, %v (%d blob values)", refs, err, blobs)
				}
				l := rd.Layout()
				kinds := map[BlockKind]int{}
				comps := map[Compression]int{}
				for _, b := range l.Blocks {
					if b.Err != nil {
						t.Fatalf("layout: %v", b.Err)
					}
					kinds[b.Kind]++
					comps[b.Compression]++
					if err := rd.BlockRecords(b, func(k, v []byte) bool { return true }); err != nil && b.Kind != BlockFilter {
						t.Fatalf("records of %s block %s: %v", b.Kind, b.Handle, err)
					}
				}
				if kinds[BlockData] < 10 || kinds[BlockValue] == 0 || kinds[BlockRangeKey] != 1 || kinds[BlockFilter] != 1 ||
					kinds[BlockRangeDel] != min(len(spec.dels), 1) || (kinds[BlockIndexPartition] > 0) == o.oneLevel ||
					kinds[BlockBlobRefIndex] != min(blobs, 1) {
					t.Fatalf("layout: kinds %v", kinds)
				}
				if comps[comp.c] == 0 || (comp.c == NoCompression && len(comps) != 1) {
					t.Fatalf("layout: compressions %v, want %v", comps, comp.c)
				}
				pr := openPebble(t, data)
				defer pr.Close()
				if format >= pebble.TableFormatPebblev7 && (l.Attributes == 0 || l.Attributes != uint32(pr.Attributes)) {
					t.Fatalf("footer attributes %#x, Pebble %#x", l.Attributes, uint32(pr.Attributes))
				}
				if got, want := l.FooterLength, map[pebble.TableFormat]uint64{pebble.TableFormatPebblev5: 53, pebble.TableFormatPebblev6: 57, pebble.TableFormatPebblev7: 61}[format]; got != want {
					t.Fatalf("footer of %d bytes, want %d", got, want)
				}
				f, err := rd.TableFilter()
				if err != nil || f == nil {
					t.Fatalf("filter %v, %v", f, err)
				}
				for _, e := range spec.entries {
					if !f.MayContain(e.key.UserKey) {
						t.Fatalf("filter lacks %q", e.key.UserKey)
					}
				}
			})
		}
	}
}

// TestUnsupportedFormats: a columnar table of a key schema bloomkv does not
// read (an unknown one, or CockroachDB's crdb1 over another comparer) is
// an error wrapping ErrUnsupportedFormat that names the schema, never
// ErrCorruption; a table CockroachDB writes (its comparer and crdb1) is
// read, when the reader accepts foreign comparers, and refused otherwise;
// a known magic number with a bad version or checksum type is corruption.
func TestUnsupportedFormats(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	spec := randomSpec(r, 200)
	for _, name := range []string{"crdb1", "crdb2", "DefaultKeySchema(leveldb.BytewiseComparator,x)"} {
		ks := colblk.DefaultKeySchema(pebble.DefaultComparer, 16)
		ks.Name = name
		for _, format := range []pebble.TableFormat{pebble.TableFormatPebblev5, pebble.TableFormatPebblev6, pebble.TableFormatPebblev7} {
			data := writePebbleWith(t, spec, pebbleOpts{format: format, sum: block.ChecksumTypeCRC32c, keySchema: &ks})
			_, err := NewReader(bytes.NewReader(data), int64(len(data)), ReaderOptions{FileName: "t.sst", ForeignComparers: true})
			want := fmt.Sprintf("unsupported key schema %q", name)
			if !errors.Is(err, ErrUnsupportedFormat) || errors.Is(err, ErrCorruption) || !bytes.Contains([]byte(fmt.Sprint(err)), []byte(want)) {
				t.Fatalf("%v: %v, want %q", format, err, want)
			}
		}
	}
	// A table CockroachDB would write: its key schema and comparer.
	var buf bytes.Buffer
	w := pebble.NewWriter(objstorageprovider.NewRemoteWritable(nopCloser{&buf}), pebble.WriterOptions{
		TableFormat: pebble.TableFormatPebblev7, Comparer: &cockroachkvs.Comparer, KeySchema: &cockroachkvs.KeySchema,
	})
	for i := range 100 {
		if err := w.Set(fmt.Appendf(nil, "key%05d\x00", i), fmt.Appendf(nil, "v%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	_, err := NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()), ReaderOptions{FileName: "crdb.sst"})
	if err == nil || !strings.Contains(fmt.Sprint(err), `comparer "cockroach_comparator" is not bloomkv's`) || !strings.Contains(fmt.Sprint(err), "crdb.sst") {
		t.Fatalf("CockroachDB's table without ForeignComparers: %v", err)
	}
	rd, err := NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()), ReaderOptions{FileName: "crdb.sst", ForeignComparers: true})
	if err != nil {
		t.Fatalf("CockroachDB's table: %v", err)
	}
	got := readEntries(t, rd)
	for i, e := range got {
		if string(e.key.UserKey) != fmt.Sprintf("key%05d\x00", i) || e.key.Kind() != base.KindSet || string(e.value) != fmt.Sprintf("v%d", i) {
			t.Fatalf("CockroachDB's table: entry %d is %s = %q", i, e.key, e.value)
		}
	}
	if len(got) != 100 {
		t.Fatalf("CockroachDB's table: %d entries, want 100", len(got))
	}

	data := writePebbleFormat(t, spec, pebble.TableFormatPebblev2, block.ChecksumTypeCRC32c)
	mutate := func(off int, b byte) []byte {
		d := bytes.Clone(data)
		d[len(d)-off] = b
		return d
	}
	for _, c := range []struct {
		name        string
		data        []byte
		unsupported bool
		msg         string
	}{
		{"magic", mutate(1, 0x12), true, "unknown magic number 0x12aa9ff0b3aa9ff0 at offset"},
		{"version 0", mutate(12, 0), false, "bad Pebble table format version 0"},
		{"version 9", mutate(12, 9), false, "bad Pebble table format version 9"},
		{"version 5", mutate(12, 5), false, "without a pebble.colblk.schema property"},
		{"version 6", mutate(12, 6), false, "footer at offset"},
		{"checksum xxHash32", mutate(rocksDBFooterLen, 2), true, "unsupported checksum type 2 (xxHash32)"},
		{"checksum 9", mutate(rocksDBFooterLen, 9), false, "unknown checksum type 9"},
		{"xxhash64 for crc", mutate(rocksDBFooterLen, checksumXXHash64), false, "checksum mismatch"},
	} {
		_, err := NewReader(bytes.NewReader(c.data), int64(len(c.data)), ReaderOptions{FileName: "t.sst"})
		if errors.Is(err, ErrUnsupportedFormat) != c.unsupported || errors.Is(err, ErrCorruption) == c.unsupported ||
			!bytes.Contains([]byte(fmt.Sprint(err)), []byte(c.msg)) || !bytes.Contains([]byte(fmt.Sprint(err)), []byte("t.sst")) {
			t.Errorf("%s: %v, want %q (unsupported %v)", c.name, err, c.msg, c.unsupported)
		}
	}
}

// columnarCorpus returns small tables Pebble writes in the columnar
// formats: Pebblev5 with zstd, Pebblev6 with MinLZ and blob values, and
// Pebblev7 with Snappy and xxhash64 checksums; all with value blocks,
// range deletions, range keys and two-level indexes.
func columnarCorpus(t testing.TB, n int) [][]byte {
	var tables [][]byte
	for i, o := range []pebbleOpts{
		{format: pebble.TableFormatPebblev5, sum: block.ChecksumTypeCRC32c, compression: pebble.ZstdCompression},
		{format: pebble.TableFormatPebblev6, sum: block.ChecksumTypeCRC32c, compression: pebble.MinLZCompression, blobEvery: 4},
		{format: pebble.TableFormatPebblev7, sum: block.ChecksumTypeXXHash64},
	} {
		r := rand.New(rand.NewPCG(uint64(i), 41))
		spec := withSizedDeletes(randomSpec(r, n))
		tables = append(tables, writePebbleWith(t, spec, o))
	}
	return tables
}

// TestColumnarDamageRefused flips a bit of every byte of Pebble's columnar
// tables and cuts them at every length: each is refused or, for a flip
// nothing reads, read back as the original; never a panic.
func TestColumnarDamageRefused(t *testing.T) {
	n := 150
	if testing.Short() {
		n = 40 // every length of smaller tables
	}
	tables := columnarCorpus(t, n)
	_, probes := corruptionCorpus(t)
	flipEachByte(t, tables, probes)
	cutEachLength(t, tables, probes)
}

// refused reports whether err refuses a damaged table: as corruption, or as
// an unknown format when the damage hit the footer's magic number (or cut the
// table short, leaving other bytes where it was) or turned a format version
// into one this reader knows but does not read.
func refused(err error) bool {
	return errors.Is(err, ErrCorruption) || errors.Is(err, ErrUnsupportedFormat)
}

// FuzzPebbleTable damages Pebblev2 tables (CRC32C and xxhash64 checksums,
// range keys), a Pebblev4 table (value blocks), Pebblev5 to v7 tables
// (columnarCorpus) and CockroachDB's tables (Pebblev4, and Pebblev7 with
// crdb1) at the offsets the input names: the result is refused, or it
// reads back exactly as the original, range keys included, and its check
// passes only then.
func FuzzPebbleTable(f *testing.F) {
	r := rand.New(rand.NewPCG(3, 4))
	spec := randomSpec(r, 150)
	var tables [][]byte
	var wants []tableContents
	var wantRKs [][]flatRangeKey
	for i, sum := range []block.ChecksumType{block.ChecksumTypeCRC32c, block.ChecksumTypeXXHash64, block.ChecksumTypeCRC32c} {
		format := []pebble.TableFormat{pebble.TableFormatPebblev2, pebble.TableFormatPebblev2, pebble.TableFormatPebblev4}[i]
		tables = append(tables, writePebbleFormat(f, spec, format, sum))
	}
	tables = append(tables, columnarCorpus(f, 150)...)
	rkOpts := make([]pebble.ReaderOptions, len(tables))
	// And CockroachDB's tables, row and columnar (crdb1).
	for _, format := range []pebble.TableFormat{pebble.TableFormatPebblev4, pebble.TableFormatPebblev7} {
		tables, rkOpts = append(tables, writeCRDB(f, crdbSpec(100, 3), format)), append(rkOpts, crdbPebbleOptions())
	}
	opts := ReaderOptions{ForeignComparers: true}
	for i, tb := range tables {
		want, err := readAll(tb, nil, opts)
		if err != nil {
			f.Fatal(err)
		}
		wants, wantRKs = append(wants, want), append(wantRKs, pebbleRangeKeysWith(f, tb, rkOpts[i]))
	}
	f.Add(uint8(0), []byte{0, 10, 1})
	f.Add(uint8(1), []byte{0xff, 0xf0, 0x80})
	f.Add(uint8(1), []byte{0xf0, 0x00, 0x04})
	f.Add(uint8(2), []byte{0xe0, 0x00, 0x01})
	f.Add(uint8(3), []byte{0x80, 0x00, 0x01})
	f.Add(uint8(4), []byte{0xff, 0xe0, 0x10})
	f.Add(uint8(5), []byte{0x10, 0x00, 0x04})
	f.Add(uint8(7), []byte{0x40, 0x00, 0x02})
	f.Fuzz(func(t *testing.T, which uint8, flips []byte) {
		ti := int(which) % len(tables)
		bad := bytes.Clone(tables[ti])
		// Each 3 bytes name an offset (2 bytes, scaled) and an XOR mask.
		for i := 0; i+3 <= len(flips); i += 3 {
			off := (int(flips[i])<<8 | int(flips[i+1])) * len(bad) / 65536
			bad[off] ^= flips[i+2]
		}
		got, err := readAll(bad, nil, opts)
		if err != nil {
			if !refused(err) {
				t.Fatalf("error %v is neither corruption nor an unsupported format", err)
			}
			return
		}
		rd, err := NewReader(bytes.NewReader(bad), int64(len(bad)), ReaderOptions{FileName: "fuzz.sst", ForeignComparers: true})
		if err != nil {
			t.Fatal(err)
		}
		rks, rkErr := rd.RangeKeys()
		switch {
		case rkErr != nil && !refused(rkErr):
			t.Fatalf("range keys: error %v is not corruption", rkErr)
		case rkErr == nil && (!sameContents(got, wants[ti]) || fmt.Sprint(flatten(rks)) != fmt.Sprint(wantRKs[ti])):
			t.Fatal("damaged table read back different contents without an error")
		}
		if rep := rd.Check(); rep.Err() != nil && !refused(rep.Err()) {
			t.Fatalf("check: %v is not corruption", rep.Err())
		}
	})
}

// maxFuzzColumnar bounds FuzzColumnarBlocks' inputs. The fuzzer minimizes
// each input that finds new coverage by trying to drop every run of its
// bytes, a count of runs quadratic in its length, and fuzzes nothing
// meanwhile: with blocks of a kilobyte or more as seeds, a short run spends
// its time minimizing. Every path of the decoders is within reach of a block
// of a few rows.
const maxFuzzColumnar = 256

// FuzzColumnarBlocks turns damaged columnar blocks (seeded with the blocks
// of an uncompressed Pebblev7 table) into row blocks: an error is
// corruption, and a row block that comes out is sound and iterates to its
// end.
func FuzzColumnarBlocks(f *testing.F) {
	// Small blocks of a few rows, with value blocks, blob values, range
	// deletions and range keys: seeds under maxFuzzColumnar bytes of every
	// kind of block turned into a row block.
	r := rand.New(rand.NewPCG(2, 6))
	spec := withSizedDeletes(randomSpec(r, 40))
	for i, e := range spec.entries {
		spec.entries[i].value = e.value[:min(len(e.value), 6)]
	}
	data := writePebbleWith(f, spec, pebbleOpts{format: pebble.TableFormatPebblev7, sum: block.ChecksumTypeCRC32c, compression: pebble.NoCompression, blockSize: 128, blobEvery: 4})
	rd, err := NewReader(bytes.NewReader(data), int64(len(data)), ReaderOptions{})
	if err != nil {
		f.Fatal(err)
	}
	// A row-block limit that a block of at most maxFuzzColumnar bytes can
	// exceed, by repeating a long key prefix in many rows, and that the
	// seeds' row blocks stay far below.
	rd.rowBlockLimit = 1 << 13
	seeded := map[colKind]bool{}
	for _, b := range rd.Blocks().Blocks {
		// The properties block, a key-value block of a kilobyte, is left
		// out: the metaindex block is of the same kind.
		if ck := rd.columnarKind(b.Kind.String()); ck > colRaw && b.Handle.Length <= maxFuzzColumnar {
			f.Add(uint8(ck-colData), data[b.Handle.Offset:b.Handle.Offset+b.Handle.Length])
			seeded[ck] = true
		}
	}
	for ck := colData; ck <= colBlobRefs; ck++ {
		if !seeded[ck] {
			f.Fatalf("no seed of block kind %d", ck)
		}
	}
	f.Fuzz(func(t *testing.T, kind uint8, b []byte) {
		if len(b) > maxFuzzColumnar {
			return
		}
		ck := colData + colKind(kind)%(colBlobRefs-colData+1)
		out, err := rd.rowBlock(ck, rd.where("fuzzed", BlockHandle{}), b, newBytes)
		if err != nil {
			if !errors.Is(err, ErrCorruption) {
				t.Fatalf("error %v is not corruption", err)
			}
			return
		}
		if err := checkBlock(out, rd.where("fuzzed", BlockHandle{})); err != nil {
			t.Fatalf("row block of a columnar block: %v", err)
		}
		var it blockIter
		if err := it.init(out, true, rd.where("fuzzed", BlockHandle{})); err != nil {
			t.Fatal(err)
		}
		for ok := it.first(); ok; ok = it.next() {
		}
		if it.err != nil {
			t.Fatalf("row block of a columnar block: %v", it.err)
		}
	})
}

// TestFooterAttributesChecked: a Pebblev7 footer whose attributes disagree
// with the properties (its checksum recomputed, so that only the
// attributes are wrong) is corruption, as Pebble's reader has it.
func TestFooterAttributesChecked(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 9))
	data := writePebbleWith(t, randomSpec(r, 300), pebbleOpts{format: pebble.TableFormatPebblev7, sum: block.ChecksumTypeCRC32c})
	if _, err := NewReader(bytes.NewReader(data), int64(len(data)), ReaderOptions{}); err != nil {
		t.Fatal(err)
	}
	bad := bytes.Clone(data)
	ft := bad[len(bad)-pebblev7FooterLen:]
	at := len(ft) - 16 // the checksum, after the attributes
	ft[at-4] ^= 1 << 6 // the blob-values bit
	binary.LittleEndian.PutUint32(ft[at:], footerChecksum(ft))
	_, err := NewReader(bytes.NewReader(bad), int64(len(bad)), ReaderOptions{FileName: "t.sst"})
	if !errors.Is(err, ErrCorruption) || !strings.Contains(fmt.Sprint(err), "attributes") {
		t.Fatalf("attributes changed: %v", err)
	}
	ft[at] ^= 1 // and now the checksum is wrong too
	if _, err := NewReader(bytes.NewReader(bad), int64(len(bad)), ReaderOptions{FileName: "t.sst"}); !errors.Is(err, ErrCorruption) || !strings.Contains(fmt.Sprint(err), "checksum mismatch") {
		t.Fatalf("footer checksum: %v", err)
	}
}

// TestPebbleFooterVersionAgainstProperties: a Pebblev4 table whose footer
// (unchecksummed before Pebblev6) is changed to state an older Pebble format
// is refused as corrupt, since its properties name the collector Pebble
// writes from Pebblev4 on; read as Pebblev3, the kinds of the keys newer ones
// cover would keep the obsolete bit. A Pebblev2 table with range keys whose
// footer states Pebblev1 is refused too. The tables as written still open.
func TestPebbleFooterVersionAgainstProperties(t *testing.T) {
	r2 := rand.New(rand.NewPCG(3, 4))
	v2 := writePebbleFormat(t, randomSpec(r2, 150), pebble.TableFormatPebblev2, block.ChecksumTypeCRC32c)
	rd, err := NewReader(bytes.NewReader(v2), int64(len(v2)), ReaderOptions{FileName: "v2.sst", ForeignComparers: true})
	if err != nil {
		t.Fatalf("the Pebblev2 table as written: %v", err)
	}
	if rks, err := rd.RangeKeys(); err != nil || len(rks) == 0 {
		t.Fatalf("the Pebblev2 table holds %d range keys (%v), want some", len(rks), err)
	}
	if got := binary.LittleEndian.Uint32(v2[len(v2)-12:]); got != 2 {
		t.Fatalf("Pebblev2 footer version %d, want 2", got)
	}
	bad := bytes.Clone(v2)
	binary.LittleEndian.PutUint32(bad[len(bad)-12:], 1)
	_, err = NewReader(bytes.NewReader(bad), int64(len(bad)), ReaderOptions{FileName: "v2.sst", ForeignComparers: true})
	if !errors.Is(err, ErrCorruption) || !strings.Contains(err.Error(), "v2.sst") || !strings.Contains(err.Error(), "range-key") {
		t.Errorf("Pebblev2 footer stating version 1: error %v, want corruption naming the file and the range-key block", err)
	}

	r := rand.New(rand.NewPCG(3, 4))
	tb := writePebbleFormat(t, randomSpec(r, 150), pebble.TableFormatPebblev4, block.ChecksumTypeCRC32c)
	opts := ReaderOptions{FileName: "v4.sst", ForeignComparers: true}
	if _, err := readAll(tb, nil, opts); err != nil {
		t.Fatalf("the table as written: %v", err)
	}
	// The footer's version: four bytes, little-endian, before the magic
	// number that ends the table.
	at := len(tb) - 12
	if got := binary.LittleEndian.Uint32(tb[at:]); got != 4 {
		t.Fatalf("footer version %d at offset %d, want 4", got, at)
	}
	for _, v := range []uint32{1, 2, 3} {
		bad := bytes.Clone(tb)
		binary.LittleEndian.PutUint32(bad[at:], v)
		_, err := NewReader(bytes.NewReader(bad), int64(len(bad)), opts)
		// Versions 1 and 2 lack value blocks, which the metaindex names;
		// version 3 has them, and only the collector gives it away.
		if !errors.Is(err, ErrCorruption) || !strings.Contains(err.Error(), "v4.sst") || v == 3 && !strings.Contains(err.Error(), "obsolete-key") {
			t.Errorf("footer version %d: error %v, want corruption naming the file (and, for 3, the collector)", v, err)
		}
	}
}
