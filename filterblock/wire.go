package filterblock

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"math/bits"

	"github.com/bloomkv/bloomkv/internal/base"
)

// The wire encoding of a standard Bloom filter (compressed Bloom filters,
// Mitzenmacher; survey §2.6). A sparse filter, one with few bits set, is sent
// as the Golomb-coded gaps between its set bits, which approaches the entropy
// bound m·H(fill) bits; a dense one as the gaps between its zero bits, and a
// half-full one as raw bits, whichever is smallest.
//
// Layout:
//
//	magic "bkw", wire version (1), hash version (1), k
//	uvarint m, uvarint X (bits set), coding
//	coding 0 (raw):        ⌈m/8⌉ bytes, bit i in bit i%8 of byte i/8
//	coding 1 (ones) or 2 (zeros): uvarint Golomb parameter M, then for each
//	                       marked bit in increasing position the gap (marked
//	                       positions skipped since the last one) as Golomb(M):
//	                       the quotient in unary (ones, then a zero), the
//	                       remainder in truncated binary, bits written most
//	                       significant first, zero padding to a byte.
//	CRC32C (Castagnoli) of everything before it, uint32 LE.
//
// The checksum matters: a flipped remainder bit would otherwise decode to a
// different filter of the same size, and a receiver would drop matches.
//
// Every field is checked on decode, the payload must be consumed exactly, and
// the bits it sets must number X.

const (
	wireVersion = 1

	codingRaw   = 0
	codingOnes  = 1
	codingZeros = 2
)

var wireMagic = [3]byte{'b', 'k', 'w'}

// AppendWire appends the wire encoding of b to dst and returns the result.
func (b *Bloom) AppendWire(dst []byte) []byte {
	start := len(dst)
	dst = b.appendWireBody(dst)
	return binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

const wireCRCLen = 4

func (b *Bloom) appendWireBody(dst []byte) []byte {
	set := b.BitsSet()
	dst = append(dst, wireMagic[:]...)
	dst = append(dst, wireVersion, hashVersion1, byte(b.k))
	dst = binary.AppendUvarint(dst, b.m)
	dst = binary.AppendUvarint(dst, set)

	marked, coding := set, byte(codingOnes)
	if 2*set > b.m {
		marked, coding = b.m-set, codingZeros
	}
	// Try the Golomb parameter the gap distribution suggests and its
	// neighbours, by exact size; raw bits win when nothing is smaller.
	bestM, bestBits := uint64(0), (b.m+7)&^7
	m0 := golombParam(float64(marked) / float64(b.m))
	for _, M := range []uint64{m0 - 1, m0, m0 + 1} {
		if M < 1 {
			continue
		}
		if n := b.golombBits(M, coding == codingOnes) + 8*uint64(uvarintLen(M)); n < bestBits {
			bestM, bestBits = M, n
		}
	}
	if bestM == 0 {
		dst = append(dst, codingRaw)
		for i := uint64(0); i < (b.m+7)/8; i++ {
			dst = append(dst, byte(b.words[i/8]>>(8*(i%8))))
		}
		return dst
	}
	dst = append(dst, coding)
	dst = binary.AppendUvarint(dst, bestM)
	w := bitWriter{buf: dst}
	b.forEachGap(coding == codingOnes, func(g uint64) { w.golomb(g, bestM) })
	return w.finish()
}

// golombParam returns the Golomb parameter that is optimal for gaps whose
// marked-bit probability is q (Gallager and van Voorhis): the M with
// θ^M + θ^(M+1) ≤ 1 < θ^(M-1) + θ^M, θ = 1-q.
func golombParam(q float64) uint64 {
	if q <= 0 || q >= 0.5 {
		return 1
	}
	theta := 1 - q
	return uint64(max(math.Ceil(math.Log(1+theta)/-math.Log(theta)), 1))
}

// forEachGap calls fn with the gap before each marked bit (set bits when ones
// is true, zero bits otherwise) in increasing position.
func (b *Bloom) forEachGap(ones bool, fn func(gap uint64)) {
	last := uint64(0) // position after the previous marked bit
	for wi, w := range b.words {
		if !ones {
			w = ^w
			if rem := b.m - uint64(wi)*64; rem < 64 {
				w &= 1<<rem - 1
			}
		}
		for w != 0 {
			pos := uint64(wi)*64 + uint64(bits.TrailingZeros64(w))
			fn(pos - last)
			last = pos + 1
			w &= w - 1
		}
	}
}

// golombBits returns the payload size in bits of coding b's gaps with M.
func (b *Bloom) golombBits(M uint64, ones bool) uint64 {
	var total uint64
	b.forEachGap(ones, func(g uint64) { total += golombLen(g, M) })
	return (total + 7) &^ 7
}

func golombLen(g, M uint64) uint64 {
	q, r := g/M, g%M
	n := q + 1
	if M > 1 {
		nb := uint64(bits.Len64(M - 1))
		if u := uint64(1)<<nb - M; r < u {
			n += nb - 1
		} else {
			n += nb
		}
	}
	return n
}

func uvarintLen(x uint64) int {
	var buf [binary.MaxVarintLen64]byte
	return binary.PutUvarint(buf[:], x)
}

// ErrTooLarge is wrapped by the error DecodeWire returns for a filter larger
// than the caller's limit.
var ErrTooLarge = errors.New("filterblock: wire filter exceeds the size limit")

// DecodeWire decodes a filter written by AppendWire. It returns an error
// wrapping ErrCorruption for malformed input, and one wrapping ErrTooLarge for
// a filter of more than maxBits bits. A well-formed encoding of a few bytes
// may describe an empty filter of up to maxBits bits, which DecodeWire
// allocates, so maxBits is the caller's memory budget (maxBits/8 bytes). It
// never panics.
func DecodeWire(data []byte, maxBits uint64) (*Bloom, error) {
	if len(data) < wireCRCLen {
		return nil, base.CorruptionErrorf("filterblock: wire filter of %d bytes is shorter than its checksum", len(data))
	}
	body := data[:len(data)-wireCRCLen]
	if want, got := binary.LittleEndian.Uint32(data[len(body):]), crc32.Checksum(body, castagnoli); got != want {
		return nil, base.CorruptionErrorf("filterblock: wire filter checksum mismatch at offset %d: stored %#x, computed %#x", len(body), want, got)
	}
	data = body
	d := wireDecoder{data: data}
	if len(data) < 6 || [3]byte(data[:3]) != wireMagic {
		return nil, base.CorruptionErrorf("filterblock: wire filter: bad magic at offset 0")
	}
	if data[3] != wireVersion {
		return nil, base.CorruptionErrorf("filterblock: wire filter: unknown wire version %d at offset 3", data[3])
	}
	if data[4] != hashVersion1 {
		return nil, base.CorruptionErrorf("filterblock: wire filter: unknown hash version %d at offset 4", data[4])
	}
	k := int(data[5])
	d.off = 6
	m, err := d.uvarint("m")
	if err != nil {
		return nil, err
	}
	if err := checkStandardParams(m, k); err != nil {
		return nil, base.CorruptionErrorf("filterblock: wire filter at offset %d: %w", d.off, err)
	}
	if m > maxBits {
		return nil, fmt.Errorf("%w: %d bits, limit %d", ErrTooLarge, m, maxBits)
	}
	set, err := d.uvarint("bits set")
	if err != nil {
		return nil, err
	}
	if set > m {
		return nil, base.CorruptionErrorf("filterblock: wire filter states %d bits set of %d at offset %d", set, m, d.off)
	}
	if d.off >= len(data) {
		return nil, base.CorruptionErrorf("filterblock: wire filter truncated before its coding byte at offset %d", d.off)
	}
	coding := data[d.off]
	d.off++
	payloadOff := d.off
	if coding == codingRaw && uint64(len(data)-d.off) != (m+7)/8 {
		return nil, base.CorruptionErrorf("filterblock: raw wire filter at offset %d has %d payload bytes, want %d", d.off, len(data)-d.off, (m+7)/8)
	}
	b := &Bloom{words: make([]uint64, (m+63)/64), m: m, k: k}
	switch coding {
	case codingRaw:
		for i, c := range data[d.off:] {
			b.words[i/8] |= uint64(c) << (8 * (i % 8))
		}
		if m%64 != 0 && b.words[len(b.words)-1]>>(m%64) != 0 {
			return nil, base.CorruptionErrorf("filterblock: raw wire filter sets bits beyond m=%d in its last byte at offset %d", m, len(data)-1)
		}
	case codingOnes, codingZeros:
		if err := d.golombPayload(b, set, coding == codingOnes); err != nil {
			return nil, err
		}
	default:
		return nil, base.CorruptionErrorf("filterblock: wire filter: unknown coding %d at offset %d", coding, d.off-1)
	}
	if got := b.BitsSet(); got != set {
		return nil, base.CorruptionErrorf("filterblock: wire filter states %d bits set but its payload (offset %d) sets %d", set, payloadOff, got)
	}
	return b, nil
}

type wireDecoder struct {
	data []byte
	off  int
}

func (d *wireDecoder) uvarint(what string) (uint64, error) {
	v, n := binary.Uvarint(d.data[d.off:])
	if n <= 0 {
		return 0, base.CorruptionErrorf("filterblock: wire filter: bad varint for %s at offset %d", what, d.off)
	}
	d.off += n
	return v, nil
}

func (d *wireDecoder) golombPayload(b *Bloom, set uint64, ones bool) error {
	M, err := d.uvarint("Golomb parameter")
	if err != nil {
		return err
	}
	if M < 1 || M > b.m {
		return base.CorruptionErrorf("filterblock: wire filter: Golomb parameter %d out of range [1, %d] at offset %d", M, b.m, d.off)
	}
	marked := set
	if !ones {
		marked = b.m - set
		// Start from all ones and clear the marked zero bits.
		for i := range b.words {
			b.words[i] = ^uint64(0)
		}
		if r := b.m % 64; r != 0 {
			b.words[len(b.words)-1] = 1<<r - 1
		}
	}
	payloadStart := d.off
	r := bitReader{buf: d.data[d.off:]}
	nb := uint(bits.Len64(M - 1))
	u := uint64(1)<<nb - M
	pos := uint64(0)
	for i := uint64(0); i < marked; i++ {
		var q uint64
		for {
			bit, ok := r.bit()
			if !ok {
				return base.CorruptionErrorf("filterblock: wire filter truncated in gap %d of %d (payload at offset %d)", i, marked, payloadStart)
			}
			if bit == 0 {
				break
			}
			q++
			if q > b.m/M { // the gap would pass the end of the filter
				return base.CorruptionErrorf("filterblock: wire filter gap %d runs past m=%d at payload bit %d (payload at offset %d)", i, b.m, r.n, payloadStart)
			}
		}
		var rem uint64
		if M > 1 {
			x, ok := r.bits(nb - 1)
			if ok && x >= u {
				var lo uint64
				lo, ok = r.bits(1)
				x = (x<<1 | lo) - u
			}
			if !ok {
				return base.CorruptionErrorf("filterblock: wire filter truncated in gap %d of %d (payload at offset %d)", i, marked, payloadStart)
			}
			rem = x
		}
		g := q*M + rem
		if g >= b.m-pos {
			return base.CorruptionErrorf("filterblock: wire filter gap %d runs past m=%d (payload at offset %d)", i, b.m, payloadStart)
		}
		pos += g
		b.words[pos>>6] ^= 1 << (pos & 63)
		pos++
	}
	if err := r.checkEnd(); err != nil {
		return base.CorruptionErrorf("filterblock: wire filter payload at offset %d: %w", payloadStart, err)
	}
	return nil
}

// bitWriter appends bits most significant first.
type bitWriter struct {
	buf  []byte
	acc  uint64 // pending bits, right-aligned
	nacc uint   // number of pending bits, < 8 between calls
}

func (w *bitWriter) write(v uint64, n uint) {
	for n > 0 {
		take := min(n, 56-w.nacc)
		w.acc = w.acc<<take | (v>>(n-take))&(1<<take-1)
		w.nacc += take
		n -= take
		for w.nacc >= 8 {
			w.buf = append(w.buf, byte(w.acc>>(w.nacc-8)))
			w.nacc -= 8
		}
		w.acc &= 1<<w.nacc - 1
	}
}

func (w *bitWriter) golomb(g, M uint64) {
	for q := g / M; q > 0; {
		n := min(q, 32)
		w.write(1<<n-1, uint(n))
		q -= n
	}
	w.write(0, 1)
	if M > 1 {
		r := g % M
		nb := uint(bits.Len64(M - 1))
		if u := uint64(1)<<nb - M; r < u {
			w.write(r, nb-1)
		} else {
			w.write(r+u, nb)
		}
	}
}

func (w *bitWriter) finish() []byte {
	if w.nacc > 0 {
		w.buf = append(w.buf, byte(w.acc<<(8-w.nacc)))
		w.nacc, w.acc = 0, 0
	}
	return w.buf
}

// bitReader reads bits most significant first.
type bitReader struct {
	buf []byte
	n   uint64 // bits consumed
}

func (r *bitReader) bit() (uint64, bool) {
	if r.n >= uint64(len(r.buf))*8 {
		return 0, false
	}
	b := uint64(r.buf[r.n/8]>>(7-r.n%8)) & 1
	r.n++
	return b, true
}

func (r *bitReader) bits(n uint) (uint64, bool) {
	var v uint64
	for i := uint(0); i < n; i++ {
		b, ok := r.bit()
		if !ok {
			return 0, false
		}
		v = v<<1 | b
	}
	return v, true
}

// checkEnd verifies that only zero padding, less than a byte, remains.
func (r *bitReader) checkEnd() error {
	total := uint64(len(r.buf)) * 8
	if total-r.n >= 8 {
		return fmt.Errorf("%d bytes follow the last gap", (total-r.n)/8)
	}
	for r.n < total {
		if b, _ := r.bit(); b != 0 {
			return fmt.Errorf("non-zero padding bit")
		}
	}
	return nil
}

// WireParams are the parameters PickWireParams chooses.
type WireParams struct {
	M              uint64  // filter bits
	K              int     // probes per key
	ExpectedFPRate float64 // (1 - e^(-kn/m))^k
	ExpectedBytes  int     // expected size of the wire encoding
}

// PickWireParams chooses m and k for a standard filter of n keys whose wire
// encoding should take at most wireBytes bytes, minimising the expected
// false-positive rate; the filter in memory takes at most maxBits bits.
// Sparser filters compress better (the survey's Table 1), so the best m is
// usually far above 8·wireBytes, which maxBits bounds. The encoded size is an
// expectation; the actual size of a given set varies by a fraction of a
// percent.
func PickWireParams(n int, wireBytes int, maxBits uint64) (WireParams, error) {
	if n < 1 || wireBytes < 1 || maxBits < 1 {
		return WireParams{}, fmt.Errorf("filterblock: cannot pick wire parameters for %d keys in %d bytes with at most %d bits", n, wireBytes, maxBits)
	}
	maxBits = min(maxBits, 1<<40)
	best := WireParams{ExpectedFPRate: 2}
	for k := 1; k <= MaxStandardProbes; k++ {
		// The expected size grows with m at a fixed k; find the largest m
		// that fits.
		lo, hi := uint64(0), maxBits
		for lo < hi {
			mid := lo + (hi-lo+1)/2
			if ExpectedWireBytes(mid, k, n) <= wireBytes {
				lo = mid
			} else {
				hi = mid - 1
			}
		}
		if lo == 0 {
			continue
		}
		if fp := FPRate(lo, k, float64(n)); fp < best.ExpectedFPRate {
			best = WireParams{M: lo, K: k, ExpectedFPRate: fp, ExpectedBytes: ExpectedWireBytes(lo, k, n)}
		}
	}
	if best.M == 0 {
		return WireParams{}, fmt.Errorf("filterblock: %d bytes cannot hold a wire filter", wireBytes)
	}
	return best, nil
}

// ExpectedWireBytes returns the expected AppendWire size of a filter of m
// bits and k probes holding n keys.
func ExpectedWireBytes(m uint64, k int, n int) int {
	fill := -math.Expm1(float64(k) * float64(n) * math.Log1p(-1/float64(m)))
	set := uint64(math.Round(fill * float64(m)))
	header := 6 + uvarintLen(m) + uvarintLen(set) + 1 + wireCRCLen
	raw := header + int((m+7)/8)
	q := min(fill, 1-fill)
	if q <= 0 {
		return header + 1
	}
	M := golombParam(q)
	payload := int(math.Ceil(float64(m)*q*expectedGolombLen(q, M)/8)) + uvarintLen(M)
	return min(raw, header+payload)
}

// expectedGolombLen returns the expected Golomb(M) code length of a gap with
// P(gap = g) = (1-q)^g·q.
func expectedGolombLen(q float64, M uint64) float64 {
	theta := 1 - q
	tM := math.Pow(theta, float64(M))
	n := 1 + tM/(1-tM) // terminating zero plus E[quotient]
	if M > 1 {
		nb := float64(bits.Len64(M - 1))
		u := float64(uint64(1)<<uint(nb) - M)
		pShort := (1 - math.Pow(theta, u)) / (1 - tM)
		n += nb - pShort
	}
	return n
}

// EntropyBits returns m·H(fill), the entropy bound in bits for sending a
// filter of m bits of which a fraction fill is set.
func EntropyBits(m uint64, fill float64) float64 {
	if fill <= 0 || fill >= 1 {
		return 0
	}
	return float64(m) * (-fill*math.Log2(fill) - (1-fill)*math.Log2(1-fill))
}
