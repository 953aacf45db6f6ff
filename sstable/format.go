package sstable

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/bits"

	"github.com/cespare/xxhash/v2"

	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/compress"
)

// ErrCorruption is wrapped by every error that reports a table failing a
// format check or a checksum. It is the same value as bloomkv.ErrCorruption.
var ErrCorruption = base.ErrCorruption

func corruptionf(format string, args ...any) error {
	return base.CorruptionErrorf("sstable: "+format, args...)
}

// ErrUnsupportedFormat is wrapped by every error that reports a table in a
// format this reader does not read: a footer of a known engine with a
// version or checksum type it does not support, or a magic number it does not
// know. It is the same value as bloomkv.ErrUnsupportedFormat, and never
// wraps ErrCorruption: a bit flipped in a table's magic number reads as an
// unknown format, as it does in RocksDB and Pebble (the store, which wrote
// its tables, reports it as corruption too).
var ErrUnsupportedFormat = base.ErrUnsupportedFormat

func unsupportedf(format string, args ...any) error {
	return base.UnsupportedErrorf("sstable: "+format, args...)
}

// TableFormat is the footer layout of a table.
type TableFormat uint8

const (
	// TableFormatLevelDB is LevelDB's 48-byte footer (no format version, no
	// checksum type: CRC32C).
	TableFormatLevelDB TableFormat = 1
	// TableFormatRocksDBv2 is RocksDB's 53-byte footer with format version 2
	// and a checksum-type byte; bloomkv writes it.
	TableFormatRocksDBv2 TableFormat = 2
	// TableFormatPebblev1 is Pebble's magic number with RocksDB's 53-byte
	// footer layout and version 1: row blocks, index entries carrying
	// block properties. The Writer writes it (with no block properties) for
	// tables to hand to Pebble's Ingest, which refuses RocksDBv2; the later
	// Pebble formats are read, not written.
	TableFormatPebblev1 TableFormat = 3
	// TableFormatPebblev2 adds range keys (the pebble.range_key block).
	TableFormatPebblev2 TableFormat = 4
	// TableFormatPebblev3 adds value blocks: a prefix byte before every SET
	// value in data blocks, which says whether the value follows or is in
	// a value block (older versions of a key), and restart points whose
	// high bit is Pebble's.
	TableFormatPebblev3 TableFormat = 5
	// TableFormatPebblev4 adds sized deletions and a bit in the kind of
	// keys that a newer key of the table makes obsolete.
	TableFormatPebblev4 TableFormat = 6
	// TableFormatPebblev5 stores data, index, range-deletion and range-key
	// blocks as columnar blocks (internal/colblk): keys in columns, data
	// blocks with a key schema that the properties name (this reader reads
	// Pebble's default schema only), index separators as user keys, and
	// the obsolete bit and whether a value is in a value block in columns
	// of their own. The reader turns each such block into the equivalent
	// row block as it reads it.
	TableFormatPebblev5 TableFormat = 7
	// TableFormatPebblev6 adds a checksum to the footer (57 bytes), values
	// in blob files (held by reference, see Iter.BlobHandle), a columnar
	// metaindex (a key-value block) and MinLZ compression.
	TableFormatPebblev6 TableFormat = 8
	// TableFormatPebblev7 stores the properties as a (compressible)
	// key-value block and adds a bitset of the table's features, its
	// attributes, to the footer (61 bytes).
	TableFormatPebblev7 TableFormat = 9
)

// pebbleVersions maps Pebble footer versions to the formats this reader
// reads.
var pebbleVersions = map[uint32]TableFormat{
	1: TableFormatPebblev1, 2: TableFormatPebblev2, 3: TableFormatPebblev3, 4: TableFormatPebblev4,
	5: TableFormatPebblev5, 6: TableFormatPebblev6, 7: TableFormatPebblev7,
}

// columnar reports whether f stores its blocks in columns.
func (f TableFormat) columnar() bool { return f >= TableFormatPebblev5 }

// maxRocksDBVersion is the newest RocksDB format version known; versions 6
// and up checksum the footer, which this reader does not read.
const maxRocksDBVersion = 7

func (f TableFormat) String() string {
	switch f {
	case TableFormatLevelDB:
		return "leveldb"
	case TableFormatRocksDBv2:
		return "rocksdb.v2"
	}
	for v, pf := range pebbleVersions {
		if pf == f {
			return fmt.Sprintf("Pebblev%d", v)
		}
	}
	return fmt.Sprintf("TableFormat(%d)", uint8(f))
}

// footerLen returns the length of f's footer.
func (f TableFormat) footerLen() uint64 {
	switch {
	case f == TableFormatLevelDB:
		return levelDBFooterLen
	case f >= TableFormatPebblev7:
		return pebblev7FooterLen
	case f >= TableFormatPebblev6:
		return checkedFooterLen
	}
	return rocksDBFooterLen
}

const (
	levelDBFooterLen = 48
	rocksDBFooterLen = 53
	// Pebblev6 adds the footer's masked CRC32C (of its other bytes) before
	// the version, Pebblev7 the attributes (uint32) before that.
	checkedFooterLen  = rocksDBFooterLen + 4
	pebblev7FooterLen = checkedFooterLen + 4
	maxFooterLen      = pebblev7FooterLen
	levelDBMagic      = 0xdb4775248b80fb57
	rocksDBMagic      = 0x88e241b785f4cff7
	pebbleMagic       = 0xb3aa9ff0b3aa9ff0 // the bytes f0 9f aa b3 twice: two cockroaches in UTF-8
	rocksDBVersion    = 2

	// blockTrailerLen is the compression-type byte and masked CRC32C that
	// follow every block.
	blockTrailerLen = 5

	checksumCRC32C   = 1
	checksumXXHash64 = 3 // the low 32 bits of XXH64 (seed 0)
)

// checksumNames names the checksum types RocksDB defines that this reader
// does not verify.
var checksumNames = map[byte]string{0: "none", 2: "xxHash32", 4: "XXH3"}

// Compression is a block compression algorithm. Its zero value,
// DefaultCompression, means the default: Snappy.
type Compression uint16

const (
	// DefaultCompression asks for the default, SnappyCompression.
	DefaultCompression Compression = iota
	// NoCompression stores blocks as they are.
	NoCompression
	// SnappyCompression compresses blocks with Snappy when that saves at
	// least 12.5%.
	SnappyCompression
	// ZstdCompression is a zstd frame after the uvarint length of the
	// block it holds (Pebble's; read, not written).
	ZstdCompression
	// MinLZCompression is a MinLZ block (Pebble from Pebblev6; read, not
	// written).
	MinLZCompression
)

// unknownCompression marks a block trailer's compression code that no
// Compression names: the code is in the low byte.
const unknownCompression Compression = 0x100

// code returns the block trailer's indicator byte of a known compression
// (RocksDB's codes, as internal/compress reads them).
func (c Compression) code() compress.Type {
	switch c {
	case SnappyCompression:
		return compress.Snappy
	case ZstdCompression:
		return compress.Zstd
	case MinLZCompression:
		return compress.MinLZ
	}
	return compress.None
}

// compressionOf returns the compression a trailer's indicator byte names
// (unknownCompression with the code, for one that names none). It runs on
// every block read: a switch, not a search.
func compressionOf(code byte) Compression {
	switch compress.Type(code) {
	case compress.None:
		return NoCompression
	case compress.Snappy:
		return SnappyCompression
	case compress.Zstd:
		return ZstdCompression
	case compress.MinLZ:
		return MinLZCompression
	}
	return unknownCompression | Compression(code)
}

// String names the compression as RocksDB's properties do ("Snappy").
func (c Compression) String() string {
	switch c {
	case DefaultCompression:
		return "Default"
	case NoCompression:
		return "NoCompression"
	case SnappyCompression:
		return "Snappy"
	case ZstdCompression:
		return "ZSTD"
	case MinLZCompression:
		return "MinLZ"
	}
	if c&unknownCompression != 0 {
		return fmt.Sprintf("Compression(code %d)", uint8(c))
	}
	return fmt.Sprintf("Compression(%d)", uint16(c))
}

// BlockHandle locates a block in a table: its offset and its length without
// the trailer.
type BlockHandle struct {
	Offset, Length uint64
}

func (h BlockHandle) String() string { return fmt.Sprintf("(%d, %d)", h.Offset, h.Length) }

func (h BlockHandle) append(dst []byte) []byte {
	dst = binary.AppendUvarint(dst, h.Offset)
	return binary.AppendUvarint(dst, h.Length)
}

// decodeHandle decodes a handle at the start of b, returning it and its
// encoded length (0 when b does not start with a valid handle). Varints
// longer than needed are invalid: no writer makes them, and accepting them
// would let a flipped high bit in a footer's handle, which then swallows a
// padding byte, go unnoticed.
func decodeHandle(b []byte) (BlockHandle, int) {
	off, n := binary.Uvarint(b)
	if n <= 0 || n != uvarintLen(off) {
		return BlockHandle{}, 0
	}
	length, m := binary.Uvarint(b[n:])
	if m <= 0 || m != uvarintLen(length) {
		return BlockHandle{}, 0
	}
	return BlockHandle{off, length}, n + m
}

// uvarintLen returns the length of x's shortest uvarint encoding.
func uvarintLen(x uint64) int { return (bits.Len64(x|1) + 6) / 7 }

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// maskedCRC returns the masked CRC32C that LevelDB stores, of data followed by
// the compression-type byte.
func maskedCRC(data []byte, typ byte) uint32 {
	c := crc32.Update(0, crcTable, data)
	// Fold in the type byte by hand: a one-byte slice passed to crc32
	// escapes to the heap on every block.
	c = ^c
	c = crcTable[byte(c)^typ] ^ c>>8
	c = ^c
	return (c>>15 | c<<17) + 0xa282ead8
}

// blockChecksum returns the checksum of a stored block, stored (the block
// as stored followed by its compression-type byte), as the footer's checksum
// type computes it.
func blockChecksum(typ byte, stored []byte) uint32 {
	if typ == checksumXXHash64 {
		return uint32(xxhash.Sum64(stored))
	}
	return maskedCRC(stored[:len(stored)-1], stored[len(stored)-1])
}

// footerChecksum returns the checksum of a Pebblev6+ footer ft: the masked
// CRC32C of its bytes but the checksum's own four, which precede the
// version and the magic number.
func footerChecksum(ft []byte) uint32 {
	at := len(ft) - 16
	c := crc32.Update(crc32.Update(0, crcTable, ft[:at]), crcTable, ft[at+4:])
	return (c>>15 | c<<17) + 0xa282ead8
}

// footer is the decoded end of a table.
type footer struct {
	format    TableFormat
	version   uint32 // the footer's format version: RocksDB's or Pebble's (0 for LevelDB)
	checksum  byte   // the blocks' checksum type
	metaindex BlockHandle
	index     BlockHandle
	// attributes is Pebblev7's bitset of the table's features.
	attributes uint32
}

func (f footer) encode() []byte {
	switch f.format {
	case TableFormatLevelDB:
		buf := make([]byte, levelDBFooterLen)
		f.index.append(f.metaindex.append(buf[:0])) // in place: cap is 48
		binary.LittleEndian.PutUint64(buf[levelDBFooterLen-8:], levelDBMagic)
		return buf
	default:
		buf := make([]byte, rocksDBFooterLen)
		buf[0] = checksumCRC32C
		f.index.append(f.metaindex.append(buf[1:1]))
		version, magic := uint32(rocksDBVersion), uint64(rocksDBMagic)
		if f.format == TableFormatPebblev1 {
			version, magic = 1, pebbleMagic
		}
		binary.LittleEndian.PutUint32(buf[rocksDBFooterLen-12:], version)
		binary.LittleEndian.PutUint64(buf[rocksDBFooterLen-8:], magic)
		return buf
	}
}

// decodeFooter parses the footer at the end of tail, which ends at the end of
// a table of size bytes.
func decodeFooter(tail []byte, size uint64, name string) (footer, error) {
	if len(tail) < levelDBFooterLen {
		return footer{}, corruptionf("%s: file of %d bytes (ending at offset %d) is too short for a footer", name, size, size)
	}
	var f footer
	var handles []byte
	var footerOff uint64
	switch magic := binary.LittleEndian.Uint64(tail[len(tail)-8:]); magic {
	case levelDBMagic:
		f.format, f.checksum = TableFormatLevelDB, checksumCRC32C
		handles = tail[len(tail)-levelDBFooterLen : len(tail)-8]
		footerOff = size - levelDBFooterLen
	case rocksDBMagic, pebbleMagic:
		engine := "RocksDB"
		if magic == pebbleMagic {
			engine = "Pebble"
		}
		if len(tail) < rocksDBFooterLen {
			return footer{}, corruptionf("%s: file of %d bytes (ending at offset %d) is too short for a %s footer", name, size, size, engine)
		}
		f.version = binary.LittleEndian.Uint32(tail[len(tail)-12:])
		flen := uint64(rocksDBFooterLen)
		if magic == rocksDBMagic {
			switch {
			case f.version < 1 || f.version > maxRocksDBVersion:
				return footer{}, corruptionf("%s: footer at offset %d: bad RocksDB format version %d", name, size-flen, f.version)
			case f.version > 5:
				return footer{}, unsupportedf("%s: footer at offset %d: unsupported RocksDB format version %d (footer checksum)", name, size-flen, f.version)
			}
			f.format = TableFormatRocksDBv2
		} else {
			var ok bool
			if f.format, ok = pebbleVersions[f.version]; !ok {
				return footer{}, corruptionf("%s: footer at offset %d: bad Pebble table format version %d", name, size-flen, f.version)
			}
			flen = f.format.footerLen()
			if uint64(len(tail)) < flen {
				return footer{}, corruptionf("%s: file of %d bytes (ending at offset %d) is too short for a %s footer", name, size, size, f.format)
			}
		}
		footerOff = size - flen
		ft := tail[uint64(len(tail))-flen:]
		if f.format >= TableFormatPebblev6 {
			// The checksum precedes the version and the magic number.
			at := len(ft) - 16
			stored := binary.LittleEndian.Uint32(ft[at:])
			if got := footerChecksum(ft); got != stored {
				return footer{}, corruptionf("%s: footer at offset %d: checksum mismatch at offset %d: stored %#x, computed %#x", name, footerOff, footerOff+uint64(at), stored, got)
			}
			if f.format >= TableFormatPebblev7 {
				f.attributes = binary.LittleEndian.Uint32(ft[at-4:])
			}
		}
		switch f.checksum = ft[0]; f.checksum {
		case checksumCRC32C, checksumXXHash64:
		default:
			if c, ok := checksumNames[f.checksum]; ok {
				return footer{}, unsupportedf("%s: footer at offset %d: unsupported checksum type %d (%s)", name, footerOff, f.checksum, c)
			}
			return footer{}, corruptionf("%s: footer at offset %d: unknown checksum type %d", name, footerOff, f.checksum)
		}
		handles = ft[1 : 1+40]
	default:
		// A table cut short ends mid-block, where no magic number is: the
		// likelier cause than another format, so the error says both.
		return footer{}, unsupportedf("%s: truncated or not an sstable: unknown magic number %#x at offset %d, the last 8 of %d bytes", name, magic, size-8, size)
	}
	var n int
	if f.metaindex, n = decodeHandle(handles); n == 0 {
		return footer{}, corruptionf("%s: footer at offset %d: bad metaindex handle", name, footerOff)
	}
	if f.index, n = decodeHandle(handles[n:]); n == 0 {
		return footer{}, corruptionf("%s: footer at offset %d: bad index handle", name, footerOff)
	}
	for _, h := range []BlockHandle{f.metaindex, f.index} {
		if h.Offset > footerOff || h.Length > footerOff-h.Offset || footerOff-h.Offset-h.Length < blockTrailerLen {
			return footer{}, corruptionf("%s: footer at offset %d: block handle %s runs past the footer", name, footerOff, h)
		}
	}
	return f, nil
}
