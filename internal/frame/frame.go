// Package frame cuts a byte stream into checksummed, Snappy-compressed frames
// and reads it back, telling a complete stream from a truncated or damaged
// one. Request and response bodies of the semi-join protocol use it.
//
// # Layout
//
// A stream is zero or more data frames, then exactly one end frame, then
// nothing. Every frame is a 9-byte header and a payload:
//
//	offset  size  field
//	0       1     type: 0x01 data, 0x81 data stored Snappy-compressed, 0x02 end
//	1       4     stored length L: the number of bytes after the header,
//	              uint32 little-endian
//	5       4     masked CRC-32C (Castagnoli) of the uncompressed payload,
//	              uint32 little-endian
//	9       L     payload: raw, or a Snappy block when type has bit 0x80 set
//
// A data frame carries 1 to frame-size bytes of uncompressed payload (64 KiB
// unless the writer is told otherwise); the concatenated payloads are the
// stream's content. It is stored compressed only when Snappy saves at least
// an eighth of it (LevelDB's rule: a smaller saving isn't worth the
// decompression). The end frame's payload is 16 raw bytes: the total number
// of uncompressed payload bytes in the data frames, then the number of data
// frames, each a uint64 little-endian. Every other type byte, an empty data
// frame, an end frame of another length, and any byte after the end frame
// are corruption.
//
// The length is fixed-width rather than a uvarint so that the header has one
// size: the reader gets it with one read and checks the length against its
// limit before reading or allocating anything else, and every bit pattern is
// a distinct, canonical length (no overlong or overflowing encodings to
// reject). The cost, one to three bytes a frame, is nothing next to a frame's
// payload. Four bytes bound a frame at 4 GiB, far beyond any sensible limit.
//
// The CRC is masked as in LevelDB and the Snappy framing format: rotated
// right by 15 bits, plus 0xa282ead8. The CRC of bytes followed by their own
// CRC is a constant, so checksums computed over data that holds unmasked
// CRCs (a framed stream sent inside another, or stored in a checksummed
// block) would be weakened; masking breaks that relation. It also keeps a
// run of zero bytes from looking like valid frames: the masked CRC of an
// empty payload is 0xa282ead8, not 0 (and type 0 is invalid anyway).
//
// The checksum covers the uncompressed payload, so it checks decompression
// as well as transfer; a damaged header is caught by the checks above or,
// failing those, by a checksum that no longer matches.
//
// # Records
//
// RecordWriter and RecordReader carry a sequence of records, each a list of
// byte strings (a key and a value, say), in the payload: a record is its
// number of fields as one byte (so at most MaxFields), then each field as a
// uvarint length in its shortest encoding and that many bytes. Records run
// across frame boundaries freely.
package frame

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"

	"github.com/golang/snappy"
)

const (
	// DefaultSize is the default number of uncompressed payload bytes in a
	// data frame, and the default limit of a Reader.
	DefaultSize = 64 << 10
	// MaxSize is the largest frame size a Writer uses.
	MaxSize = 1 << 30

	headerLen  = 9
	endLen     = 16
	typeData   = 0x01
	typeEnd    = 0x02
	flagSnappy = 0x80
)

// Errors returned by readers, wrapped with the stream offset and the reason.
var (
	// ErrTruncated means the stream ended before its end frame.
	ErrTruncated = errors.New("frame: truncated")
	// ErrCorrupt means the stream is damaged or is not a frame stream.
	ErrCorrupt = errors.New("frame: corrupt")
	// ErrTooLarge means a frame, message or record field exceeds the
	// reader's limit.
	ErrTooLarge = errors.New("frame: too large")
)

// checksum is the masked CRC-32C of p.
func checksum(p []byte) uint32 {
	c := crc32.Checksum(p, crc32.MakeTable(crc32.Castagnoli))
	return (c>>15 | c<<17) + 0xa282ead8
}

// appendData appends a data frame holding payload (1 to MaxSize bytes) to dst.
func appendData(dst, payload []byte) []byte {
	start := len(dst)
	need := headerLen + snappy.MaxEncodedLen(len(payload))
	dst = slices.Grow(dst, need)[:start+need]
	body := dst[start+headerLen:]
	typ, stored := byte(typeData), len(payload)
	if enc := snappy.Encode(body, payload); len(enc) < len(payload)-len(payload)/8 {
		typ, stored = typeData|flagSnappy, len(enc)
	} else {
		copy(body, payload)
	}
	putHeader(dst[start:], typ, stored, checksum(payload))
	return dst[:start+headerLen+stored]
}

// appendEnd appends an end frame for a stream of n payload bytes in frames
// data frames.
func appendEnd(dst []byte, n, frames uint64) []byte {
	start := len(dst)
	dst = slices.Grow(dst, headerLen+endLen)[:start+headerLen+endLen]
	body := dst[start+headerLen:]
	binary.LittleEndian.PutUint64(body, n)
	binary.LittleEndian.PutUint64(body[8:], frames)
	putHeader(dst[start:], typeEnd, endLen, checksum(body))
	return dst
}

func putHeader(h []byte, typ byte, stored int, sum uint32) {
	h[0] = typ
	binary.LittleEndian.PutUint32(h[1:5], uint32(stored))
	binary.LittleEndian.PutUint32(h[5:9], sum)
}

// AppendMessage appends payload to dst as a complete stream: data frames of
// DefaultSize and an end frame.
func AppendMessage(dst, payload []byte) []byte {
	var frames uint64
	for p := payload; len(p) > 0; frames++ {
		n := min(len(p), DefaultSize)
		dst = appendData(dst, p[:n])
		p = p[n:]
	}
	return appendEnd(dst, uint64(len(payload)), frames)
}

func corruptf(what string, off int64, format string, args ...any) error {
	return fmt.Errorf("%w: %s at offset %d: %s", ErrCorrupt, what, off, fmt.Sprintf(format, args...))
}
