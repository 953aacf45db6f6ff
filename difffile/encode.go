package difffile

import (
	"encoding/binary"
	"hash/crc32"
	"math/bits"
	"slices"
	"sync/atomic"

	"github.com/bloomkv/bloomkv/internal/base"
)

// ErrCorruption is wrapped by every error Decode returns for malformed input.
// It is the same value as bloomkv.ErrCorruption.
var ErrCorruption = base.ErrCorruption

const (
	// formatVersion is the version of the encoding described on
	// AppendEncoded.
	formatVersion = 1
	headerLen     = 32
	checksumLen   = 4
)

// magic opens every encoded filter.
var magic = [4]byte{'b', 'k', 'd', 'f'}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// EncodedLen returns the length of f's encoding.
func (f *Filter) EncodedLen() int {
	return headerLen + f.SizeBytes() + checksumLen
}

// AppendEncoded appends the encoding of f to dst and returns the result.
//
// Layout, integers little-endian: the magic "bkdf"; the format version, k,
// the counters per key and a zero byte; the capacity, the line count and
// Count as 8-byte integers; the lines, each as 8 words of 16 counters
// (counter i of a word in its bits 4i..4i+3); and the CRC-32C (Castagnoli) of
// everything before it.
//
// Run concurrently with Add and Remove, it encodes a state in which every key
// added before it began and not removed while it ran passes MayContain.
func (f *Filter) AppendEncoded(dst []byte) []byte {
	start := len(dst)
	dst = slices.Grow(dst, f.EncodedLen())
	dst = append(dst, magic[:]...)
	dst = append(dst, formatVersion, f.k, f.countersPerKey, 0)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(f.capacity))
	dst = binary.LittleEndian.AppendUint64(dst, f.lines)
	// Count goes negative only when concurrent Removes of keys never added
	// race; Decode accepts no negative count.
	dst = binary.LittleEndian.AppendUint64(dst, uint64(max(f.count.Load(), 0)))
	for i := range f.words {
		dst = binary.LittleEndian.AppendUint64(dst, atomic.LoadUint64(&f.words[i]))
	}
	return binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

// Encode returns the encoding of f (see AppendEncoded).
func (f *Filter) Encode() []byte { return f.AppendEncoded(nil) }

// Decode parses an encoding produced by AppendEncoded. It returns an error
// wrapping ErrCorruption, naming the fault and its byte offset, for input
// that is truncated, has trailing bytes, fails its checksum, or states
// impossible parameters (an unknown version, k or counters per key out of
// range, no lines, a line count that does not fit the capacity, a negative
// count). It never panics, and allocates no more than len(data) bytes for
// the counters.
func Decode(data []byte) (*Filter, error) {
	if len(data) < headerLen+checksumLen {
		return nil, base.CorruptionErrorf("difffile: filter of %d bytes is shorter than its %d-byte header and checksum", len(data), headerLen+checksumLen)
	}
	if [4]byte(data[0:4]) != magic {
		return nil, base.CorruptionErrorf("difffile: bad magic %q at offset 0", data[0:4])
	}
	if data[4] != formatVersion {
		return nil, base.CorruptionErrorf("difffile: unknown format version %d at offset 4", data[4])
	}
	if data[7] != 0 {
		return nil, base.CorruptionErrorf("difffile: reserved byte %d is not zero at offset 7", data[7])
	}
	lines := binary.LittleEndian.Uint64(data[16:])
	body := len(data) - headerLen - checksumLen
	if lines == 0 || lines > maxLines || lines*LineBytes != uint64(body) {
		return nil, base.CorruptionErrorf("difffile: header states %d lines at offset 16, but %d bytes lie between the %d-byte header and the checksum", lines, body, headerLen)
	}
	sumOff := len(data) - checksumLen
	if stored, computed := binary.LittleEndian.Uint32(data[sumOff:]), crc32.Checksum(data[:sumOff], castagnoli); stored != computed {
		return nil, base.CorruptionErrorf("difffile: checksum %#08x at offset %d does not match %#08x computed over the bytes before it", stored, sumOff, computed)
	}
	k := data[5]
	if k < 1 || k > maxProbes {
		return nil, base.CorruptionErrorf("difffile: k %d out of range [1, %d] at offset 5", k, maxProbes)
	}
	cpk := data[6]
	if cpk < MinCountersPerKey || cpk > MaxCountersPerKey {
		return nil, base.CorruptionErrorf("difffile: counters per key %d out of range [%d, %d] at offset 6", cpk, MinCountersPerKey, MaxCountersPerKey)
	}
	capacity := binary.LittleEndian.Uint64(data[8:])
	if want, ok := linesFor(capacity, int(cpk)); !ok || want != lines {
		return nil, base.CorruptionErrorf("difffile: capacity %d at offset 8 at %d counters per key does not take the %d lines stated", capacity, cpk, lines)
	}
	count := int64(binary.LittleEndian.Uint64(data[24:]))
	if count < 0 {
		return nil, base.CorruptionErrorf("difffile: negative count %d at offset 24", count)
	}
	f := newFilter(lines, k, cpk, int(capacity))
	f.count.Store(count)
	var saturated int
	for i := range f.words {
		w := binary.LittleEndian.Uint64(data[headerLen+8*i:])
		f.words[i] = w
		saturated += bits.OnesCount64(fullCounters(w))
	}
	f.saturated.Store(uint64(saturated))
	return f, nil
}
