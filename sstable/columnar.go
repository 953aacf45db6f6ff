package sstable

// Pebble's columnar tables (TableFormatPebblev5 and up). Each columnar
// block is decoded (internal/colblk) and turned into the row block that
// holds the same entries as the block comes off the disk, before it goes
// into the cache: iterators, the cache and the inspection code above see
// row blocks only, and the row-block path of bloomkv's own tables is left
// as it is. The equivalents:
//
//   - data block: entries keyed by internal keys (user key and trailer,
//     Pebble's obsolete bit set in the kind as in Pebblev4) whose values,
//     unless empty, start with a value-prefix byte, as SET values do from
//     Pebblev3: 0 before a value stored in place, or the stored prefix byte
//     and handle of a value stored elsewhere (a value block, or a blob file
//     from Pebblev6), whatever the key's kind. An empty value (a deletion's,
//     or an empty SET value) stays empty.
//   - index block: separators are user keys; each becomes the internal key
//     with trailer 0, which sorts after every key of that user key, with
//     the block handle (and its properties) as the value.
//   - range-deletion block: one entry per fragment and sequence number,
//     as RocksDB stores them.
//   - range-key block: one entry per span and trailer, its suffixes (and
//     values) together, as Pebblev2 stores them.
//   - metaindex (Pebblev6) and properties (Pebblev7): key-value blocks,
//     one entry per pair.
//   - blob reference index (Pebblev6): one entry per blob reference, keyed
//     by its number (uint32, big-endian), the value as stored.

import (
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/colblk"
	"github.com/bloomkv/bloomkv/internal/crdbkey"
)

// colKind says how the reader turns a block of a columnar table into a row
// block.
type colKind uint8

const (
	colNone     colKind = iota // not a columnar block (filters, value blocks), or not a columnar table
	colRaw                     // a meta block bloomkv does not interpret: bytes
	colData                    // data block
	colIndex                   // index block or partition
	colKV                      // key-value block
	colRangeDel                // keyspan block of range deletions
	colRangeKey                // keyspan block of range keys
	colBlobRefs                // blob reference index
)

// The metaindex name of Pebble's blob reference index, and the columnar
// block property naming the data blocks' key schema.
const (
	metaBlobRefIndexName = "pebble.blob_ref_index"
	propKeySchema        = "pebble.colblk.schema"
)

// isDefaultKeySchema reports whether name is that of Pebble's default key
// schema over comparer, whatever its bundle size (which its blocks record).
func isDefaultKeySchema(name, comparer string) bool {
	rest, ok := strings.CutPrefix(name, "DefaultKeySchema("+comparer+",")
	bundle, closed := strings.CutSuffix(rest, ")")
	return ok && closed && bundle != "" && strings.Trim(bundle, "0123456789") == ""
}

// columnarKind returns how the block of kind (as readBlock names it) of t
// is turned into a row block.
func (t *Reader) columnarKind(kind string) colKind {
	if !t.columnar {
		return colNone
	}
	switch kind {
	case "data":
		return colData
	case "index", "index partition", BlockIndexPartition.String():
		return colIndex
	case "metaindex":
		if t.footer.format >= TableFormatPebblev6 {
			return colKV
		}
	case "properties":
		if t.footer.format >= TableFormatPebblev7 {
			return colKV
		}
	case "range deletion", BlockRangeDel.String():
		return colRangeDel
	case BlockRangeKey.String():
		return colRangeKey
	case BlockBlobRefIndex.String():
		return colBlobRefs
	case BlockMeta.String():
		return colRaw
	}
	return colNone
}

// checkKeySchema picks the key schema of a columnar table's data blocks,
// refusing one the reader does not know: Pebble's default schema over the
// table's comparer, or CockroachDB's crdb1 over its own.
func (t *Reader) checkKeySchema() error {
	if !t.columnar {
		return nil
	}
	name, ok := t.props.User[propKeySchema]
	if !ok {
		return corruptionf("%s: %s table without a %s property", t.opts.FileName, t.footer.format, propKeySchema)
	}
	comparer := t.props.ComparerName
	if comparer == "" {
		comparer = base.ComparerName
	}
	switch {
	case string(name) == crdbkey.KeySchemaName && t.order == orderCRDB:
		t.keySchema = colblk.KeySchemaCRDB1
		return nil
	case isDefaultKeySchema(string(name), comparer):
		t.keySchema = colblk.KeySchemaDefault
		return nil
	}
	return unsupportedf("%s: unsupported key schema %q for comparer %q (bloomkv reads Pebble's default key schema, and CockroachDB's %q)", t.opts.FileName, name, comparer, crdbkey.KeySchemaName)
}

// checkAttributes compares a Pebblev7 footer's attributes with those the
// properties imply, as Pebble's reader does: bits for value blocks, range-key
// sets, unsets and deletions, range deletions, a two-level index, values in
// blob files and point keys (data blocks), in that order.
func (t *Reader) checkAttributes() error {
	if t.footer.format < TableFormatPebblev7 {
		return nil
	}
	p := &t.props
	user := func(name string) uint64 {
		n, _ := binary.Uvarint(p.User[name])
		return n
	}
	var want uint32
	for i, has := range []bool{
		user("pebble.num.value-blocks") > 0 || user("pebble.num.values.in.value-blocks") > 0,
		user("pebble.num.range-key-sets") > 0,
		user("pebble.num.range-key-unsets") > 0,
		user("pebble.num.range-key-dels") > 0,
		p.NumRangeDeletions > 0,
		p.IndexType == indexTypeTwoLevel,
		user("pebble.num.values.in.blob-files") > 0,
		p.NumDataBlocks > 0,
	} {
		if has {
			want |= 1 << i
		}
	}
	if got := t.footer.attributes; got != want {
		return corruptionf("%s: footer at offset %d: attributes %#x, the properties imply %#x", t.opts.FileName, t.size-pebblev7FooterLen, got, want)
	}
	return nil
}

// rowBlock turns the columnar block b, of kind ck, into the equivalent
// row block, in memory from dst.
func (t *Reader) rowBlock(ck colKind, where blockWhere, b []byte, dst func(int) []byte) ([]byte, error) {
	w := rowWriter{limit: t.rowBlockLimit}
	if w.limit == 0 {
		w.limit = maxBlockLen
	}
	w.restartInterval = 16
	var err error
	switch ck {
	case colData:
		err = rowData(&w, b, t.keySchema)
	case colIndex:
		err = rowIndex(&w, b)
	case colKV:
		w.restartInterval = 1
		err = rowKV(&w, b)
	case colRangeDel, colRangeKey:
		err = rowKeyspan(&w, b, ck == colRangeKey, t.order)
	case colBlobRefs:
		err = rowBlobRefs(&w, b)
	}
	if err != nil {
		return nil, fmt.Errorf("sstable: %s: %s block %s: %w", where.file, where.kind, where.bh, err)
	}
	rb := w.finish()
	out := dst(len(rb))
	copy(out, rb)
	return out, nil
}

// rowWriter builds the row block of a columnar block, up to limit bytes:
// a corrupt block can repeat a long key prefix in many rows.
type rowWriter struct {
	blockWriter
	limit int
}

// put adds an entry, failing once the block exceeds the limit.
func (w *rowWriter) put(key, value []byte) error {
	w.add(key, value)
	if w.estimatedSize() > w.limit {
		return base.CorruptionErrorf("colblk: the block's entries exceed %d bytes", w.limit)
	}
	return nil
}

func rowData(w *rowWriter, b []byte, s colblk.KeySchema) error {
	d, err := colblk.DecodeDataBlockSchema(b, s)
	if err != nil {
		return err
	}
	var key, val []byte
	for i := 0; i < d.Rows(); i++ {
		key = d.AppendUserKey(key[:0], i)
		tr := d.Trailer(i)
		if d.Obsolete(i) {
			tr |= obsoleteBit
		}
		key = binary.LittleEndian.AppendUint64(key, tr)
		v := d.Value(i)
		if !d.External(i) && len(v) > 0 {
			val = append(append(val[:0], 0), v...)
			v = val
		} else if d.External(i) && len(v) == 0 {
			return base.CorruptionErrorf("colblk: data block row %d: an external value without its prefix byte", i)
		}
		if err := w.put(key, v); err != nil {
			return err
		}
	}
	return nil
}

func rowIndex(w *rowWriter, b []byte) error {
	x, err := colblk.DecodeIndexBlock(b)
	if err != nil {
		return err
	}
	var key, val []byte
	for i := 0; i < x.Rows(); i++ {
		key = append(append(key[:0], x.Separator(i)...), 0, 0, 0, 0, 0, 0, 0, 0)
		off, length := x.Handle(i)
		val = BlockHandle{off, length}.append(val[:0])
		val = append(val, x.Props(i)...)
		if err := w.put(key, val); err != nil {
			return err
		}
	}
	return nil
}

func rowKV(w *rowWriter, b []byte) error {
	kv, err := colblk.DecodeKeyValueBlock(b)
	if err != nil {
		return err
	}
	for i := 0; i < kv.Rows(); i++ {
		w.add(kv.Key(i), kv.Value(i))
	}
	return nil
}

func rowKeyspan(w *rowWriter, b []byte, rangeKeys bool, o keyOrder) error {
	k, err := colblk.DecodeKeyspanBlockOrder(b, o.compare)
	if err != nil {
		return err
	}
	var key, val []byte
	for j := 0; j < k.Spans(); j++ {
		start, end, lo, hi := k.Span(j)
		for i := lo; i < hi; {
			tr, _, _ := k.Key(i)
			key = binary.LittleEndian.AppendUint64(append(key[:0], start...), tr)
			kind := base.Kind(tr)
			if !rangeKeys || (kind != KindRangeKeySet && kind != KindRangeKeyUnset) {
				if err := w.put(key, end); err != nil {
					return err
				}
				i++
				continue
			}
			// A range key's suffixes (and values) of one trailer go in one
			// entry.
			val = appendVarstring(val[:0], end)
			for ; i < hi; i++ {
				t, suffix, value := k.Key(i)
				if t != tr {
					break
				}
				val = appendVarstring(val, suffix)
				if kind == KindRangeKeySet {
					val = appendVarstring(val, value)
				}
			}
			if err := w.put(key, val); err != nil {
				return err
			}
		}
	}
	return nil
}

func appendVarstring(dst, s []byte) []byte {
	return append(binary.AppendUvarint(dst, uint64(len(s))), s...)
}

func rowBlobRefs(w *rowWriter, b []byte) error {
	refs, err := colblk.DecodeBytesBlock(b)
	if err != nil {
		return err
	}
	for i := 0; i < refs.Len(); i++ {
		w.add(binary.BigEndian.AppendUint32(nil, uint32(i)), refs.At(i))
	}
	return nil
}

// BlobReferences returns the blob-reference liveness index of a Pebblev6+
// table that holds values in blob files: for each blob reference the table
// uses (the index is the reference's number, as in the values' blob
// handles), Pebble's encoding of which of the blob file's values the table
// refers to. It is nil when the table has none. The blob files each
// reference names are in the store's manifest, not in the table.
func (t *Reader) BlobReferences() ([][]byte, error) {
	bh, ok := t.meta[metaBlobRefIndexName]
	if !ok || !t.columnar {
		return nil, nil
	}
	b, err := t.readBlock(bh, BlockBlobRefIndex.String())
	if err != nil {
		return nil, err
	}
	var it blockIter
	if err := it.init(b, true, t.where(BlockBlobRefIndex.String(), bh)); err != nil {
		return nil, err
	}
	var out [][]byte
	for ok := it.first(); ok; ok = it.next() {
		out = append(out, append([]byte(nil), it.value...))
	}
	return out, it.err
}
