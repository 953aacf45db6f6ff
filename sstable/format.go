package sstable

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/bits"

	"github.com/bloomkv/bloomkv/internal/base"
)

// ErrCorruption is wrapped by every error that reports a table failing a
// format check or a checksum. It is the same value as bloomkv.ErrCorruption.
var ErrCorruption = base.ErrCorruption

func corruptionf(format string, args ...any) error {
	return base.CorruptionErrorf("sstable: "+format, args...)
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
)

func (f TableFormat) String() string {
	switch f {
	case TableFormatLevelDB:
		return "leveldb"
	case TableFormatRocksDBv2:
		return "rocksdb.v2"
	}
	return fmt.Sprintf("TableFormat(%d)", uint8(f))
}

const (
	levelDBFooterLen = 48
	rocksDBFooterLen = 53
	maxFooterLen     = rocksDBFooterLen
	levelDBMagic     = 0xdb4775248b80fb57
	rocksDBMagic     = 0x88e241b785f4cff7
	rocksDBVersion   = 2

	// blockTrailerLen is the compression-type byte and masked CRC32C that
	// follow every block.
	blockTrailerLen = 5

	checksumCRC32C = 1
)

// Compression is a block compression algorithm, by its RocksDB code.
type Compression uint8

const (
	// NoCompression stores blocks as they are.
	NoCompression Compression = 0
	// SnappyCompression compresses blocks with Snappy when that saves at
	// least 12.5%.
	SnappyCompression Compression = 1
)

func (c Compression) String() string {
	switch c {
	case NoCompression:
		return "NoCompression"
	case SnappyCompression:
		return "Snappy"
	}
	return fmt.Sprintf("Compression(%d)", uint8(c))
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

// footer is the decoded end of a table.
type footer struct {
	format    TableFormat
	version   uint32 // RocksDB format version (0 for LevelDB)
	metaindex BlockHandle
	index     BlockHandle
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
		binary.LittleEndian.PutUint32(buf[rocksDBFooterLen-12:], rocksDBVersion)
		binary.LittleEndian.PutUint64(buf[rocksDBFooterLen-8:], rocksDBMagic)
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
		f.format = TableFormatLevelDB
		handles = tail[len(tail)-levelDBFooterLen : len(tail)-8]
		footerOff = size - levelDBFooterLen
	case rocksDBMagic:
		if len(tail) < rocksDBFooterLen {
			return footer{}, corruptionf("%s: file of %d bytes (ending at offset %d) is too short for a RocksDB footer", name, size, size)
		}
		footerOff = size - rocksDBFooterLen
		ft := tail[len(tail)-rocksDBFooterLen:]
		if v := binary.LittleEndian.Uint32(ft[rocksDBFooterLen-12:]); v < 1 || v > 5 {
			return footer{}, corruptionf("%s: footer at offset %d: unsupported RocksDB format version %d", name, footerOff, v)
		}
		if ft[0] != checksumCRC32C {
			return footer{}, corruptionf("%s: footer at offset %d: unsupported checksum type %d", name, footerOff, ft[0])
		}
		f.format = TableFormatRocksDBv2
		f.version = binary.LittleEndian.Uint32(ft[rocksDBFooterLen-12:])
		handles = ft[1 : rocksDBFooterLen-12]
	default:
		return footer{}, corruptionf("%s: bad magic number %#x at offset %d", name, magic, size-8)
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
