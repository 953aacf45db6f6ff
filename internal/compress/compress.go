// Package compress decompresses the blocks of RocksDB's and Pebble's files
// (tables and blob files), by the compression indicator byte that follows
// every block in its trailer.
//
// Pebble writes four of RocksDB's indicators: none (0), Snappy (1), zstd (7),
// a zstd frame preceded by the uvarint length of the block it holds, and,
// from table format Pebblev6, MinLZ (8). The values between Snappy and zstd
// are RocksDB's other algorithms, which Pebble never writes and this
// package does not read.
//
// Decompression is two steps, so that the caller chooses the memory the
// block goes into once it knows its length: DecodedLen, then Decode. Both
// are pure functions but for zstd, whose decoder (a ZstdDecoder, one per reader)
// is made on the first zstd block and kept.
package compress

import (
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/golang/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/minio/minlz"

	"github.com/bloomkv/bloomkv/internal/base"
)

// Type is a block's compression indicator, by its RocksDB code.
type Type uint8

// The compression indicators, 0 to 8. Zlib to XPRESS are RocksDB's, which
// Pebble never writes and this package does not decompress.
const (
	None Type = iota
	Snappy
	Zlib
	BZip2
	LZ4
	LZ4HC
	XPRESS
	Zstd
	MinLZ
)

// names names the indicators, as Pebble does.
var names = [...]string{"none", "snappy", "zlib", "bzip2", "lz4", "lz4hc", "xpress", "zstd", "minlz"}

// String names the compression in lower case, as Pebble does ("zstd");
// an unknown one as compression(n).
func (t Type) String() string {
	if int(t) < len(names) {
		return names[t]
	}
	return fmt.Sprintf("compression(%d)", uint8(t))
}

// MaxLen is the largest decompressed block the zstd decoder accepts; a
// caller's limit (DecodedLen's) is at most this.
const MaxLen = 1 << 30

// DecodedLen returns the length of src, a block stored with compression t,
// decompressed, from its header: len(src) for None. A length above limit
// is an error wrapping base.ErrUnsupportedFormat, as is one of RocksDB's
// compressions Pebble does not write; a bad header or an unknown
// indicator, base.ErrCorruption.
func DecodedLen(t Type, src []byte, limit int) (int, error) {
	var n int
	switch t {
	case None:
		n = len(src)
	case Snappy:
		var err error
		if n, err = snappy.DecodedLen(src); err != nil {
			return 0, base.CorruptionErrorf("bad Snappy header: %v", err)
		}
	case Zstd:
		x, k := binary.Uvarint(src)
		if k <= 0 {
			return 0, base.CorruptionErrorf("bad zstd length prefix %x", src[:min(len(src), binary.MaxVarintLen64)])
		}
		if x > uint64(limit) {
			return 0, base.UnsupportedErrorf("zstd block of %d bytes decompressed, over this reader's limit of %d", x, limit)
		}
		n = int(x)
	case MinLZ:
		var err error
		if n, err = minlz.DecodedLen(src); err != nil {
			return 0, base.CorruptionErrorf("bad MinLZ header: %v", err)
		}
	case Zlib, BZip2, LZ4, LZ4HC, XPRESS:
		return 0, base.UnsupportedErrorf("compression %s", t)
	default:
		return 0, base.CorruptionErrorf("unknown compression %d", uint8(t))
	}
	if n < 0 || n > limit {
		return 0, base.UnsupportedErrorf("%s block of %d bytes decompressed, over this reader's limit of %d", t, n, limit)
	}
	return n, nil
}

// Decode decompresses src, a block stored with compression t whose
// DecodedLen is len(dst), into dst and returns it; for None it returns src
// itself. z decodes zstd blocks and must not be nil for them; for the
// other compressions it may be.
// Bad data, or data that decompresses to another length than len(dst), is
// an error wrapping base.ErrCorruption.
func Decode(t Type, dst, src []byte, z *ZstdDecoder) ([]byte, error) {
	var out []byte
	var err error
	switch t {
	case None:
		return src, nil
	case Snappy:
		out, err = snappy.Decode(dst, src)
	case MinLZ:
		out, err = minlz.Decode(dst, src)
	case Zstd:
		_, k := binary.Uvarint(src)
		if k <= 0 {
			return nil, base.CorruptionErrorf("bad zstd length prefix %x", src[:min(len(src), binary.MaxVarintLen64)])
		}
		var d *zstd.Decoder
		if d, err = z.decoder(); err == nil {
			out, err = d.DecodeAll(src[k:], dst[:0:len(dst)])
		}
	default:
		_, err := DecodedLen(t, src, 0)
		return nil, err
	}
	if err != nil {
		return nil, base.CorruptionErrorf("bad %s data: %v", t, err)
	}
	if len(out) != len(dst) {
		return nil, base.CorruptionErrorf("%s data decompressed to %d bytes, its header says %d", t, len(out), len(dst))
	}
	return out, nil
}

// ZstdDecoder is a reader's zstd decoder, made on the first zstd block it decodes.
// The zero ZstdDecoder is ready to use; it is safe for concurrent use.
type ZstdDecoder struct {
	mu sync.Mutex
	d  *zstd.Decoder
}

// decoder returns z's decoder, made on first use.
func (z *ZstdDecoder) decoder() (*zstd.Decoder, error) {
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.d == nil {
		// The cap limit keeps DecodeAll within dst, whose length the
		// block's length prefix gives, instead of growing it.
		d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
			zstd.WithDecodeAllCapLimit(true), zstd.WithDecoderMaxMemory(MaxLen))
		if err != nil {
			return nil, err
		}
		z.d = d
	}
	return z.d, nil
}

// Close releases z's decoder; a later zstd block makes a new one.
func (z *ZstdDecoder) Close() {
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.d != nil {
		z.d.Close()
		z.d = nil
	}
}
