package colblk

// The block schemas.
//
// Data block (default key schema): a custom header of the longest user
// key's length (uint32), then columns: the key prefixes (prefix bytes), the
// key suffixes (bytes; a user key is its prefix followed by its suffix),
// the trailers (uint), whether a key's prefix differs from the previous
// key's (bool), the values (bytes), whether a value is stored elsewhere
// (bool; such a value starts with a value-prefix byte and a handle, an
// in-place value has no prefix byte), and whether a newer key of the table
// makes the key obsolete (bool).
//
// Index block: no custom header; columns: separators (bytes; user keys),
// the blocks' offsets and lengths (uint) and their properties (bytes).
//
// Keyspan block: a custom header of the count of boundary keys (uint32);
// columns: the boundary user keys (bytes) and, for each, the index of the
// first key of the span it starts (uint), one row per boundary; then the
// keys' trailers (uint), suffixes and values (bytes), one row per key. The
// span between boundaries j and j+1 holds the keys from index j to index
// j+1; none when they are equal (a gap).
//
// Key-value block: no custom header; columns: keys and values (bytes).

import (
	"bytes"
	"encoding/binary"
)

// KeySchema names the key schema of a data block: the columns that hold
// its user keys, before the columns every data block has.
type KeySchema uint8

// The key schemas bloomkv reads.
const (
	// KeySchemaDefault is Pebble's default schema: a custom header of no
	// bytes; columns of the keys' prefixes (prefix bytes) and suffixes
	// (bytes), a user key being its prefix followed by its suffix.
	KeySchemaDefault KeySchema = iota
	// KeySchemaCRDB1 is CockroachDB's schema "crdb1", over its engine keys
	// (see internal/crdbkey): a custom header of one byte (which kinds of
	// version the block holds, a hint bloomkv does not need); columns of
	// the roachpb keys without their sentinel (prefix bytes), the MVCC
	// wall times (uint), the logical times (uint) and the versions that
	// are not MVCC timestamps (bytes, without the length byte). A row
	// whose wall and logical times are both zero has its untyped version,
	// or none when that is empty; any other row has a timestamp version of
	// 8 bytes (wall time, big-endian), or 12 when the logical time is not
	// zero (then the logical time, big-endian). A timestamp's synthetic
	// byte is not stored: the 13-byte versions read back as 12.
	KeySchemaCRDB1
)

// keyColumns returns how many key columns schema s has, and the length of
// its own part of the custom header.
func (s KeySchema) keyColumns() (columns, header int) {
	if s == KeySchemaCRDB1 {
		return 4, 1
	}
	return 2, 0
}

// The versions of CockroachDB's engine keys, as crdb1 stores them.
const (
	crdbWallLen       = 8
	crdbLogicalLen    = 4
	crdbMaxUntypedLen = 254 // the length byte holds the length plus one
)

// DataBlock is a decoded data block.
type DataBlock struct {
	rows               int
	schema             KeySchema
	prefixes           PrefixBytes
	suffixes           RawBytes // the default schema's suffixes; crdb1's untyped versions
	wall, logical      Uints    // crdb1's timestamps
	trailers           Uints
	values             RawBytes
	external, obsolete Bitmap
}

// DecodeDataBlock decodes a data block written with Pebble's default key
// schema.
func DecodeDataBlock(data []byte) (DataBlock, error) {
	return DecodeDataBlockSchema(data, KeySchemaDefault)
}

// DecodeDataBlockSchema decodes a data block written with key schema s.
// It checks every row's key can be built (in crdb1, that an untyped
// version fits its length byte and a logical time 32 bits), so that
// AppendUserKey needs no error.
func DecodeDataBlockSchema(data []byte, s KeySchema) (DataBlock, error) {
	kc, hdr := s.keyColumns()
	b, err := DecodeBlock(data, 4+hdr)
	if err != nil {
		return DataBlock{}, err
	}
	if want := kc + 5; b.columns != want {
		return DataBlock{}, corrupt(4+hdr+1, "data block of %d columns, want %d", b.columns, want)
	}
	d := DataBlock{rows: b.rows, schema: s}
	n := b.rows
	if n == 0 {
		return d, nil
	}
	if d.prefixes, err = b.PrefixBytes(0, n); err != nil {
		return DataBlock{}, err
	}
	if s == KeySchemaCRDB1 {
		if err = d.decodeCRDB1(b); err != nil {
			return DataBlock{}, err
		}
	} else if d.suffixes, err = b.RawBytes(1, n); err != nil {
		return DataBlock{}, err
	}
	if d.trailers, err = b.Uints(kc, n); err != nil {
		return DataBlock{}, err
	}
	if _, err = b.Bitmap(kc+1, n); err != nil { // whether the key's prefix changed
		return DataBlock{}, err
	}
	if d.values, err = b.RawBytes(kc+2, n); err != nil {
		return DataBlock{}, err
	}
	if d.external, err = b.Bitmap(kc+3, n); err != nil {
		return DataBlock{}, err
	}
	if d.obsolete, err = b.Bitmap(kc+4, n); err != nil {
		return DataBlock{}, err
	}
	return d, nil
}

// decodeCRDB1 decodes the version columns of a crdb1 data block and checks
// each row's version.
func (d *DataBlock) decodeCRDB1(b Block) error {
	var err error
	n := b.rows
	if d.wall, err = b.Uints(1, n); err != nil {
		return err
	}
	if d.logical, err = b.Uints(2, n); err != nil {
		return err
	}
	if d.suffixes, err = b.RawBytes(3, n); err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		if l := d.logical.At(i); l > 1<<32-1 {
			return corrupt(b.start(2), "row %d: logical time %d exceeds 32 bits", i, l)
		}
		if v := d.suffixes.At(i); len(v) > crdbMaxUntypedLen {
			return corrupt(b.start(3), "row %d: a version of %d bytes, more than its length byte can state", i, len(v))
		}
	}
	return nil
}

// Rows returns the number of keys.
func (d DataBlock) Rows() int { return d.rows }

// AppendUserKey appends row i's user key to dst: in crdb1, the engine key
// (roachpb key, sentinel, version and its length byte).
func (d DataBlock) AppendUserKey(dst []byte, i int) []byte {
	dst = d.prefixes.AppendKey(dst, i)
	if d.schema != KeySchemaCRDB1 {
		return append(dst, d.suffixes.At(i)...)
	}
	dst = append(dst, 0) // the sentinel
	wall, logical := d.wall.At(i), d.logical.At(i)
	if wall == 0 && logical == 0 {
		if v := d.suffixes.At(i); len(v) > 0 {
			dst = append(dst, v...)
			dst = append(dst, byte(len(v)+1))
		}
		return dst
	}
	dst = binary.BigEndian.AppendUint64(dst, wall)
	if logical == 0 {
		return append(dst, crdbWallLen+1)
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(logical))
	return append(dst, crdbWallLen+crdbLogicalLen+1)
}

// Trailer returns row i's trailer (sequence number and kind).
func (d DataBlock) Trailer(i int) uint64 { return d.trailers.At(i) }

// Value returns row i's value as stored: when External, a value-prefix
// byte and a handle.
func (d DataBlock) Value(i int) []byte { return d.values.At(i) }

// External reports whether row i's value is stored elsewhere (a value
// block or a blob file).
func (d DataBlock) External(i int) bool { return d.external.At(i) }

// Obsolete reports whether a newer key of the table makes row i's obsolete.
func (d DataBlock) Obsolete(i int) bool { return d.obsolete.At(i) }

// IndexBlock is a decoded index block: one row per block it indexes.
type IndexBlock struct {
	rows            int
	separators      RawBytes
	offsets, length Uints
	props           RawBytes
}

// DecodeIndexBlock decodes an index block (either level of a two-level
// index).
func DecodeIndexBlock(data []byte) (IndexBlock, error) {
	b, err := DecodeBlock(data, 0)
	if err != nil {
		return IndexBlock{}, err
	}
	if b.columns != 4 {
		return IndexBlock{}, corrupt(1, "index block of %d columns, want 4", b.columns)
	}
	x := IndexBlock{rows: b.rows}
	if x.separators, err = b.RawBytes(0, b.rows); err != nil {
		return IndexBlock{}, err
	}
	if x.offsets, err = b.Uints(1, b.rows); err != nil {
		return IndexBlock{}, err
	}
	if x.length, err = b.Uints(2, b.rows); err != nil {
		return IndexBlock{}, err
	}
	if x.props, err = b.RawBytes(3, b.rows); err != nil {
		return IndexBlock{}, err
	}
	return x, nil
}

// Rows returns the number of entries.
func (x IndexBlock) Rows() int { return x.rows }

// Separator returns entry i's separator, a user key ≥ every user key of
// its block and ≤ every user key of the next.
func (x IndexBlock) Separator(i int) []byte { return x.separators.At(i) }

// Handle returns the offset and length of entry i's block.
func (x IndexBlock) Handle(i int) (offset, length uint64) {
	return x.offsets.At(i), x.length.At(i)
}

// Props returns entry i's encoded block properties.
func (x IndexBlock) Props(i int) []byte { return x.props.At(i) }

// KeyspanBlock is a decoded keyspan block (range deletions or range keys).
type KeyspanBlock struct {
	bounds    int
	keys      int
	boundKeys RawBytes
	boundIdx  Uints
	trailers  Uints
	suffixes  RawBytes
	values    RawBytes
}

// DecodeKeyspanBlock decodes a keyspan block, checking that its boundary
// keys increase (bytewise) and that the spans' key ranges are in order and
// cover its keys.
func DecodeKeyspanBlock(data []byte) (KeyspanBlock, error) {
	return DecodeKeyspanBlockOrder(data, bytes.Compare)
}

// DecodeKeyspanBlockOrder is DecodeKeyspanBlock for a table whose user keys
// compare tells the order of.
func DecodeKeyspanBlockOrder(data []byte, compare func(a, b []byte) int) (KeyspanBlock, error) {
	b, err := DecodeBlock(data, 4)
	if err != nil {
		return KeyspanBlock{}, err
	}
	if b.columns != 5 {
		return KeyspanBlock{}, corrupt(5, "keyspan block of %d columns, want 5", b.columns)
	}
	k := KeyspanBlock{bounds: int(binary.LittleEndian.Uint32(data)), keys: b.rows}
	if k.bounds > len(data) {
		return KeyspanBlock{}, corrupt(0, "%d boundary keys in a block of %d bytes", k.bounds, len(data))
	}
	if k.boundKeys, err = b.RawBytes(0, k.bounds); err != nil {
		return KeyspanBlock{}, err
	}
	if k.boundIdx, err = b.Uints(1, k.bounds); err != nil {
		return KeyspanBlock{}, err
	}
	if k.trailers, err = b.Uints(2, k.keys); err != nil {
		return KeyspanBlock{}, err
	}
	if k.suffixes, err = b.RawBytes(3, k.keys); err != nil {
		return KeyspanBlock{}, err
	}
	if k.values, err = b.RawBytes(4, k.keys); err != nil {
		return KeyspanBlock{}, err
	}
	if k.bounds == 1 || (k.bounds == 0 && k.keys != 0) {
		return KeyspanBlock{}, corrupt(0, "%d boundary keys for %d keys", k.bounds, k.keys)
	}
	for j := 0; j < k.bounds; j++ {
		idx := k.boundIdx.At(j)
		if (j == 0 && idx != 0) || (j > 0 && idx < k.boundIdx.At(j-1)) || idx > uint64(k.keys) || (j == k.bounds-1 && idx != uint64(k.keys)) {
			return KeyspanBlock{}, corrupt(b.start(1), "boundary %d's key index %d is out of order or outside [0, %d]", j, idx, k.keys)
		}
		if j > 0 && compare(k.boundKeys.At(j-1), k.boundKeys.At(j)) >= 0 {
			return KeyspanBlock{}, corrupt(b.start(0), "boundary key %d does not sort after the one before it", j)
		}
	}
	return k, nil
}

// Spans returns the number of spans, gaps included: one less than the
// boundary keys.
func (k KeyspanBlock) Spans() int { return max(k.bounds-1, 0) }

// Span returns span j's bounds and the range [lo, hi) of its keys (empty
// for a gap between spans).
func (k KeyspanBlock) Span(j int) (start, end []byte, lo, hi int) {
	return k.boundKeys.At(j), k.boundKeys.At(j + 1), int(k.boundIdx.At(j)), int(k.boundIdx.At(j + 1))
}

// Keys returns the number of keys.
func (k KeyspanBlock) Keys() int { return k.keys }

// Key returns key i's trailer, suffix and value.
func (k KeyspanBlock) Key(i int) (trailer uint64, suffix, value []byte) {
	return k.trailers.At(i), k.suffixes.At(i), k.values.At(i)
}

// KeyValueBlock is a decoded key-value block (Pebble's metaindex from
// Pebblev6, its properties from Pebblev7).
type KeyValueBlock struct {
	rows         int
	keys, values RawBytes
}

// DecodeKeyValueBlock decodes a key-value block.
func DecodeKeyValueBlock(data []byte) (KeyValueBlock, error) {
	b, err := DecodeBlock(data, 0)
	if err != nil {
		return KeyValueBlock{}, err
	}
	if b.columns != 2 {
		return KeyValueBlock{}, corrupt(1, "key-value block of %d columns, want 2", b.columns)
	}
	kv := KeyValueBlock{rows: b.rows}
	if kv.keys, err = b.RawBytes(0, b.rows); err != nil {
		return KeyValueBlock{}, err
	}
	if kv.values, err = b.RawBytes(1, b.rows); err != nil {
		return KeyValueBlock{}, err
	}
	return kv, nil
}

// Rows returns the number of pairs.
func (kv KeyValueBlock) Rows() int { return kv.rows }

// Key returns pair i's key.
func (kv KeyValueBlock) Key(i int) []byte { return kv.keys.At(i) }

// Value returns pair i's value.
func (kv KeyValueBlock) Value(i int) []byte { return kv.values.At(i) }

// DecodeBytesBlock decodes a block of one bytes column, returning its rows:
// Pebble's blob reference liveness index (one row per blob reference) and
// the value blocks of its blob files (one row per value).
func DecodeBytesBlock(data []byte) (RawBytes, error) {
	b, err := DecodeBlock(data, 0)
	if err != nil {
		return RawBytes{}, err
	}
	if b.columns != 1 {
		return RawBytes{}, corrupt(1, "bytes block of %d columns, want 1", b.columns)
	}
	return b.RawBytes(0, b.rows)
}
