package filterblock

import (
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"

	"github.com/bloomkv/bloomkv/internal/base"
)

// ErrCorruption is wrapped by every error Decode and DecodeWire return for
// malformed input. It is the same value as bloomkv.ErrCorruption.
var ErrCorruption = base.ErrCorruption

const (
	// LineBytes is the size of one filter line: one CPU cache line.
	LineBytes = 64
	lineBits  = LineBytes * 8

	// MinBitsPerKey and MaxBitsPerKey bound the bits/key a Builder accepts.
	MinBitsPerKey = 1
	MaxBitsPerKey = 32

	// maxProbes bounds k in an encoded filter; the k table never exceeds 14,
	// the limit leaves room for future tuning without a format change.
	maxProbes = 32

	// trailerLen is the size of the metadata that ends an encoded filter.
	trailerLen = 16
	// formatVersion is the version of the encoded layout described on Finish.
	formatVersion = 1
	// hashVersion1 names the hash and probe scheme documented in hash.go.
	hashVersion1 = 1
)

// trailerMagic ends every encoded blocked filter.
var trailerMagic = [3]byte{'b', 'k', 'f'}

// probesForBitsPerKey[b] is the k that minimises ExpectedFPRate at b
// bits/key; a test recomputes it.
var probesForBitsPerKey = [MaxBitsPerKey + 1]uint8{
	0, 1, 1, 2, 3, 3, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11,
	11, 12, 12, 12, 13, 13, 13, 13, 14, 14, 14, 14,
}

// ProbesFor returns the number of probe bits k a Builder uses at bitsPerKey
// (clamped to MinBitsPerKey..MaxBitsPerKey).
func ProbesFor(bitsPerKey int) int {
	return int(probesForBitsPerKey[clampBitsPerKey(bitsPerKey)])
}

// ValidateBitsPerKey returns an error unless bitsPerKey is within
// MinBitsPerKey..MaxBitsPerKey. Options validation calls it so that a bad
// setting is reported rather than clamped.
func ValidateBitsPerKey(bitsPerKey int) error {
	if bitsPerKey < MinBitsPerKey || bitsPerKey > MaxBitsPerKey {
		return fmt.Errorf("filterblock: bits per key %d out of range [%d, %d]", bitsPerKey, MinBitsPerKey, MaxBitsPerKey)
	}
	return nil
}

func clampBitsPerKey(b int) int {
	return min(max(b, MinBitsPerKey), MaxBitsPerKey)
}

// minRateBitsPerKey is the smallest bits/key the rate functions evaluate;
// their cost grows as 512/bitsPerKey.
const minRateBitsPerKey = 0.25

// TheoreticalFPRate returns the textbook false-positive rate of a 512-bit
// blocked Bloom filter with the given bits/key and k probe bits per key: the
// number of keys in a line is Poisson with mean 512/bitsPerKey, and a line
// holding i keys answers "maybe" for an absent key with probability
// (1-(1-1/512)^(k·i))^k.
//
// Below minRateBitsPerKey bits/key (or for k < 1) it returns 1: such a filter
// passes nearly everything.
func TheoreticalFPRate(bitsPerKey float64, k int) float64 {
	if !(bitsPerKey >= minRateBitsPerKey) || k < 1 || k > lineBits {
		return 1
	}
	lambda := lineBits / bitsPerKey
	q := 1 - 1.0/lineBits
	// Sum the Poisson terms around the mean, far enough that the tail is
	// below float64 resolution.
	hi := int(lambda + 12*math.Sqrt(lambda) + 20)
	var sum float64
	logP := -lambda // log of Poisson(0)
	for i := 0; i <= hi; i++ {
		if i > 0 {
			logP += math.Log(lambda) - math.Log(float64(i))
		}
		sum += math.Exp(logP) * math.Pow(1-math.Pow(q, float64(k*i)), float64(k))
	}
	return sum
}

// ExpectedFPRate returns the expected false-positive rate of this package's
// blocked filter at bitsPerKey with k distinct probe bits per key, for an
// ideal hash: a line's load is Poisson with mean 512/bitsPerKey, each key sets
// k distinct bits, and an absent key passes when all k of its distinct bits
// are set. It is exact where TheoreticalFPRate is the textbook approximation;
// the k table minimises it.
//
// Like TheoreticalFPRate it returns 1 below minRateBitsPerKey.
func ExpectedFPRate(bitsPerKey float64, k int) float64 {
	if !(bitsPerKey >= minRateBitsPerKey) || k < 1 || k > lineBits {
		return 1
	}
	lambda := lineBits / bitsPerKey
	hi := int(lambda + 12*math.Sqrt(lambda) + 20)
	logC := func(a, b int) float64 {
		if b < 0 || b > a {
			return math.Inf(-1)
		}
		x, _ := math.Lgamma(float64(a) + 1)
		y, _ := math.Lgamma(float64(b) + 1)
		z, _ := math.Lgamma(float64(a-b) + 1)
		return x - y - z
	}
	logAll := logC(lineBits, k)
	// trans[x*(k+1)+j]: a key sets j new bits in a line with x set.
	trans := make([]float64, (lineBits+1)*(k+1))
	pass := make([]float64, lineBits+1) // an absent key passes a line with x set
	for x := 0; x <= lineBits; x++ {
		for j := 0; j <= k; j++ {
			trans[x*(k+1)+j] = math.Exp(logC(lineBits-x, j) + logC(x, k-j) - logAll)
		}
		pass[x] = math.Exp(logC(x, k) - logAll)
	}
	dist := make([]float64, lineBits+1) // distribution of bits set
	next := make([]float64, lineBits+1)
	dist[0] = 1
	var sum float64
	logP := -lambda
	for i := 0; i <= hi; i++ {
		if i > 0 {
			logP += math.Log(lambda) - math.Log(float64(i))
			clear(next)
			for x, px := range dist {
				if px < 1e-300 {
					continue
				}
				for j := 0; j <= k && x+j <= lineBits; j++ {
					next[x+j] += px * trans[x*(k+1)+j]
				}
			}
			dist, next = next, dist
		}
		var e float64
		for x, px := range dist {
			e += px * pass[x]
		}
		sum += math.Exp(logP) * e
	}
	return sum
}

// Builder accumulates the keys of one blocked filter. The zero value is not
// usable; call NewBuilder. A Builder is not safe for concurrent use.
type Builder struct {
	bitsPerKey int
	hashes     []uint64
}

// NewBuilder returns a Builder for a filter of bitsPerKey bits per key,
// clamped to MinBitsPerKey..MaxBitsPerKey (see ValidateBitsPerKey).
func NewBuilder(bitsPerKey int) *Builder {
	return &Builder{bitsPerKey: clampBitsPerKey(bitsPerKey)}
}

// Add adds key to the filter. A key equal to the one added just before counts
// once, so a table's successive versions of one user key cost one key's bits.
func (b *Builder) Add(key []byte) {
	b.AddHash(Hash(key))
}

// AddHash adds a key by its Hash. A hash equal to the previous one counts once
// (equal hashes set the same bits, so nothing is lost).
func (b *Builder) AddHash(h uint64) {
	if n := len(b.hashes); n > 0 && b.hashes[n-1] == h {
		return
	}
	b.hashes = append(b.hashes, h)
}

// Len returns the number of keys added so far, consecutive duplicates counted
// once.
func (b *Builder) Len() int { return len(b.hashes) }

// Reset discards the keys added so far, keeping the memory for reuse.
func (b *Builder) Reset() { b.hashes = b.hashes[:0] }

// Finish returns the encoded filter of the keys added since NewBuilder or the
// last Finish, and resets the Builder.
//
// Layout: numLines lines of 64 bytes (bit i of a line is bit i%8 of its byte
// i/8), then a 16-byte trailer: numLines (uint32 LE), key count (uint32 LE,
// saturating), k, hash version, bits/key requested, a zero byte, the format
// version and the magic "bkf". A filter of no keys has no lines and answers
// "no" to every probe.
func (b *Builder) Finish() []byte {
	n := len(b.hashes)
	numLines := linesFor(uint64(n), b.bitsPerKey)
	k := probesForBitsPerKey[b.bitsPerKey]
	out := make([]byte, numLines*LineBytes+trailerLen)
	if numLines > 0 {
		lines := out[:numLines*LineBytes]
		nl := numLines
		for _, h := range b.hashes {
			line := (*[LineBytes]byte)(lines[lineIndex(h, nl)*LineBytes:])
			p := uint32(h)
			var seen [lineBits / 64]uint64
			for j := k; j > 0; j-- {
				var bit uint32
				bit, p = nextProbe(p, &seen)
				line[bit>>3] |= 1 << (bit & 7)
			}
		}
	}
	t := out[numLines*LineBytes:]
	binary.LittleEndian.PutUint32(t[0:], uint32(numLines))
	binary.LittleEndian.PutUint32(t[4:], uint32(min(uint64(n), math.MaxUint32)))
	t[8] = k
	t[9] = hashVersion1
	t[10] = uint8(b.bitsPerKey)
	t[11] = 0
	t[12] = formatVersion
	copy(t[13:], trailerMagic[:])
	b.Reset()
	return out
}

// maxLines bounds the line count: lineIndex needs it below 2^32, and the
// encoding must fit in an int on 32-bit platforms.
const maxLines = min(math.MaxUint32, (math.MaxInt-trailerLen)/LineBytes)

// linesFor returns the number of lines for n keys at bitsPerKey:
// ⌈n·bitsPerKey/512⌉, at most maxLines. A filter capped at maxLines (2^32
// lines is 256 GiB) is denser than asked for, never wrong.
func linesFor(n uint64, bitsPerKey int) uint64 {
	if n > maxLines*lineBits { // n·bitsPerKey could overflow; the cap applies anyway
		return maxLines
	}
	return min((n*uint64(bitsPerKey)+lineBits-1)/lineBits, maxLines)
}

// Filter is a decoded blocked Bloom filter. It is a small value that refers to
// the filter's bytes; it is safe for concurrent use by readers.
type Filter struct {
	lines    []byte // numLines*LineBytes bytes, 64-byte aligned
	numLines uint64
	k        uint8
	trailer  [trailerLen]byte
}

// Info describes an encoded filter, as its trailer states it.
type Info struct {
	Lines          int    // number of 64-byte lines
	Keys           uint32 // keys added (saturating at 2^32-1)
	Probes         int    // k: bits set per key, all in one line
	HashVersion    int    // hash and probe scheme
	BitsPerKey     int    // bits/key the builder was asked for
	FormatVersion  int    // layout version
	EncodedLength  int    // bytes of the encoded filter
	BitsSetInLines uint64 // filled in by Filter.Stats, zero from Decode
}

// Decode parses an encoded filter produced by Builder.Finish. It checks every
// field of the trailer (magic, versions, the reserved byte, k and bits/key in
// range, and a line count that matches the key count, bits/key and the bytes
// present) and returns an error wrapping ErrCorruption for any malformed
// input; it never panics. The lines themselves carry no checksum: the sstable
// block that holds a filter does. The Filter refers to data without copying
// when data is 64-byte aligned, so that each probe touches one cache line;
// otherwise it copies the lines into an aligned buffer.
func Decode(data []byte) (Filter, error) {
	if len(data) < trailerLen {
		return Filter{}, base.CorruptionErrorf("filterblock: filter of %d bytes is shorter than its %d-byte trailer", len(data), trailerLen)
	}
	t := data[len(data)-trailerLen:]
	toff := len(data) - trailerLen
	if [3]byte(t[13:16]) != trailerMagic {
		return Filter{}, base.CorruptionErrorf("filterblock: bad magic %q at offset %d", t[13:16], toff+13)
	}
	if t[12] != formatVersion {
		return Filter{}, base.CorruptionErrorf("filterblock: unknown format version %d at offset %d", t[12], toff+12)
	}
	if t[9] != hashVersion1 {
		return Filter{}, base.CorruptionErrorf("filterblock: unknown hash version %d at offset %d", t[9], toff+9)
	}
	if t[11] != 0 {
		return Filter{}, base.CorruptionErrorf("filterblock: reserved byte %d is not zero at offset %d", t[11], toff+11)
	}
	k := t[8]
	if k < 1 || k > maxProbes {
		return Filter{}, base.CorruptionErrorf("filterblock: probe count %d out of range [1, %d] at offset %d", k, maxProbes, toff+8)
	}
	numLines := uint64(binary.LittleEndian.Uint32(t[0:]))
	if numLines*LineBytes != uint64(toff) {
		return Filter{}, base.CorruptionErrorf("filterblock: trailer at offset %d states %d lines (%d bytes) but %d bytes precede it", toff, numLines, numLines*LineBytes, toff)
	}
	bpk := int(t[10])
	if bpk < MinBitsPerKey || bpk > MaxBitsPerKey {
		return Filter{}, base.CorruptionErrorf("filterblock: bits per key %d out of range [%d, %d] at offset %d", bpk, MinBitsPerKey, MaxBitsPerKey, toff+10)
	}
	// The builder sizes the filter from the key count; a saturated count
	// (2^32-1) only bounds it from below.
	keys := binary.LittleEndian.Uint32(t[4:])
	if want := linesFor(uint64(keys), bpk); numLines != want && !(keys == math.MaxUint32 && numLines >= want) {
		return Filter{}, base.CorruptionErrorf("filterblock: trailer at offset %d states %d lines for %d keys at %d bits/key, want %d", toff, numLines, keys, bpk, want)
	}
	lines := data[:toff:toff]
	if len(lines) > 0 && uintptr(unsafe.Pointer(&lines[0]))%LineBytes != 0 {
		lines = alignedCopy(lines)
	}
	return Filter{lines: lines, numLines: numLines, k: k, trailer: [trailerLen]byte(t)}, nil
}

// alignedCopy returns a copy of b whose first byte is 64-byte aligned.
func alignedCopy(b []byte) []byte {
	buf := make([]byte, len(b)+LineBytes)
	off := 0
	if r := uintptr(unsafe.Pointer(&buf[0])) % LineBytes; r != 0 {
		off = int(LineBytes - r)
	}
	out := buf[off : off+len(b) : off+len(b)]
	copy(out, b)
	return out
}

// MayContain reports whether key may have been added to the filter. A false
// answer is certain; a true answer is wrong with the filter's false-positive
// rate. It reads one 64-byte line and does not allocate.
func (f *Filter) MayContain(key []byte) bool {
	return f.MayContainHash(Hash(key))
}

// MayContainHash is MayContain for a key given by its Hash, for callers that
// probe several filters with one key.
func (f *Filter) MayContainHash(h uint64) bool {
	if f.numLines == 0 {
		return false
	}
	return f.mayContainLine((*[LineBytes]byte)(f.lines[lineIndex(h, f.numLines)*LineBytes:]), h)
}

// mayContainLine tests the probe bits of the key whose hash is h in line,
// the filter's line for it.
func (f *Filter) mayContainLine(line *[LineBytes]byte, h uint64) bool {
	// Fast path: while each candidate falls in a byte that holds none of the
	// key's earlier bits, it is certainly distinct from them, so nextProbe's
	// bookkeeping reduces to one register of taken bytes. A candidate in a
	// taken byte may repeat an earlier bit; the key is then checked again by
	// the exact sequence (a few percent of absent keys).
	p, takenBytes := uint32(h), uint64(0)
	for j := f.k; j > 0; j-- {
		p *= probeMultiplier
		bit := p >> (32 - 9)
		m := uint64(1) << (bit >> 3 & 63)
		if takenBytes&m != 0 {
			return mayContainExact(line, uint32(h), f.k)
		}
		takenBytes |= m
		if line[bit>>3]&(1<<(bit&7)) == 0 {
			return false
		}
	}
	return true
}

// mayContainExact tests a key's probe bits in line by the exact sequence of
// nextProbe, the one Builder.Finish sets.
func mayContainExact(line *[LineBytes]byte, p uint32, k uint8) bool {
	var seen [lineBits / 64]uint64
	for j := k; j > 0; j-- {
		var bit uint32
		bit, p = nextProbe(p, &seen)
		if line[bit>>3]&(1<<(bit&7)) == 0 {
			return false
		}
	}
	return true
}

// Info returns the filter's parameters as its trailer states them.
func (f *Filter) Info() Info {
	t := f.trailer[:]
	return Info{
		Lines:         int(f.numLines),
		Keys:          binary.LittleEndian.Uint32(t[4:]),
		Probes:        int(f.k),
		HashVersion:   int(t[9]),
		BitsPerKey:    int(t[10]),
		FormatVersion: int(t[12]),
		EncodedLength: len(f.lines) + trailerLen,
	}
}

// Stats returns Info with BitsSetInLines filled in by counting the set bits,
// for inspection tools.
func (f *Filter) Stats() Info {
	info := f.Info()
	info.BitsSetInLines = popcountBytes(f.lines)
	return info
}

// EstimateKeys estimates how many distinct keys the filter holds from the
// bits set, line by line: each key sets k distinct bits of its 512-bit line,
// so a line that x keys hit has about 512·(1-(1-k/512)^x) bits set, and
// x ≈ ln(1 - set/512) / ln(1 - k/512). A line with every bit set counts as
// if one bit were clear. Inspection tools compare it with the stated count.
func (f *Filter) EstimateKeys() float64 {
	if f.numLines == 0 || f.k == 0 {
		return 0
	}
	per := math.Log1p(-float64(f.k) / lineBits)
	var total float64
	for l := uint64(0); l < f.numLines; l++ {
		set := popcountBytes(f.lines[l*LineBytes : (l+1)*LineBytes])
		total += math.Log1p(-min(float64(set), lineBits-1)/lineBits) / per
	}
	return total
}

// probeGroup is how many keys MayContainHashes loads lines for before it
// tests any: each load is independent of the others, so their cache misses
// overlap.
const probeGroup = 16

// MayContainHashes sets may[i] to MayContainHash(hs[i]) for every i (may is
// at least as long as hs) and returns how many answered true. It loads the
// lines of a group of keys before testing them, so that the memory reads of
// one group are in flight together. It does not allocate.
func (f *Filter) MayContainHashes(hs []uint64, may []bool) int {
	may = may[:len(hs)]
	if f.numLines == 0 {
		clear(may)
		return 0
	}
	n := 0
	var lines [probeGroup]*[LineBytes]byte
	var first [probeGroup]byte
	for len(hs) > 0 {
		g := min(len(hs), probeGroup)
		// Load: the line of each key and the byte of its first probe bit.
		for j, h := range hs[:g] {
			line := (*[LineBytes]byte)(f.lines[lineIndex(h, f.numLines)*LineBytes:])
			lines[j] = line
			first[j] = line[(uint32(h)*probeMultiplier)>>(32-9)>>3]
		}
		// Test, with the lines now in cache.
		for j, h := range hs[:g] {
			bit := (uint32(h) * probeMultiplier) >> (32 - 9)
			ok := first[j]&(1<<(bit&7)) != 0 && f.mayContainLine(lines[j], h)
			may[j] = ok
			if ok {
				n++
			}
		}
		hs, may = hs[g:], may[g:]
	}
	return n
}

// MayContainEach sets may[i] to fs[i].MayContainHash(hs[i]) for every i (fs
// and may at least as long as hs): each key probes a filter of its own, as
// the keys of several tables do. It returns how many answered true, and
// loads the lines of a group of keys before testing them, as
// MayContainHashes does. An empty filter answers false. It does not
// allocate.
func MayContainEach(fs []*Filter, hs []uint64, may []bool) int {
	fs, may = fs[:len(hs)], may[:len(hs)]
	n := 0
	var lines [probeGroup]*[LineBytes]byte
	var first [probeGroup]byte
	for len(hs) > 0 {
		g := min(len(hs), probeGroup)
		for j, h := range hs[:g] {
			if f := fs[j]; f.numLines > 0 {
				line := (*[LineBytes]byte)(f.lines[lineIndex(h, f.numLines)*LineBytes:])
				lines[j] = line
				first[j] = line[(uint32(h)*probeMultiplier)>>(32-9)>>3]
			} else {
				first[j] = 0
			}
		}
		for j, h := range hs[:g] {
			bit := (uint32(h) * probeMultiplier) >> (32 - 9)
			ok := first[j]&(1<<(bit&7)) != 0 && fs[j].mayContainLine(lines[j], h)
			may[j] = ok
			if ok {
				n++
			}
		}
		fs, hs, may = fs[g:], hs[g:], may[g:]
	}
	return n
}
