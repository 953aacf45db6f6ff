// Package benchutil holds what bloomkv's benchmarks share: the keys and
// values they write, the skewed key choices they read by, and the CPU time
// they report. The end-to-end benchmark (./bench) and the package benchmarks
// use it so that their workloads are the same and stay the same.
package benchutil

import (
	"math"
	"math/rand/v2"
	"time"
)

// KeyLen is the length of every key MakeKey writes.
const KeyLen = 16

// MakeKey writes the key with the given id into dst, which has at least
// KeyLen bytes, and returns it: the id as KeyLen zero-padded decimal digits,
// so that keys sort as their ids do.
func MakeKey(dst []byte, id uint64) []byte {
	dst = dst[:KeyLen]
	for i := KeyLen - 1; i >= 0; i-- {
		dst[i] = byte('0' + id%10)
		id /= 10
	}
	return dst
}

// Zipf draws ranks 0..n-1 with probability proportional to 1/(rank+1)^theta,
// by the method of Gray et al., "Quickly Generating Billion-Record Synthetic
// Databases" (SIGMOD 1994), which YCSB uses (with theta 0.99).
type Zipf struct {
	n                        uint64
	theta, alpha, zetan, eta float64
	halfPowTheta             float64
}

// NewZipf returns a Zipf over n ranks (n at least 2) with exponent theta in
// (0, 1). It takes time proportional to n.
func NewZipf(n uint64, theta float64) *Zipf {
	zeta2 := 1 + math.Pow(0.5, theta)
	var zetan float64
	for i := uint64(1); i <= n; i++ {
		zetan += 1 / math.Pow(float64(i), theta)
	}
	return &Zipf{
		n:            n,
		theta:        theta,
		alpha:        1 / (1 - theta),
		zetan:        zetan,
		eta:          (1 - math.Pow(2/float64(n), 1-theta)) / (1 - zeta2/zetan),
		halfPowTheta: math.Pow(0.5, theta),
	}
}

// Next returns a rank, drawing one number from rng.
func (z *Zipf) Next(rng *rand.Rand) uint64 {
	u := rng.Float64()
	uz := u * z.zetan
	switch {
	case uz < 1:
		return 0
	case uz < 1+z.halfPowTheta:
		return 1
	}
	r := uint64(float64(z.n) * math.Pow(z.eta*u-z.eta+1, z.alpha))
	return min(r, z.n-1)
}

// Scatter maps a Zipf rank to an index in [0, n) so that the popular ranks
// spread over the key space instead of bunching at its start (YCSB's
// scrambled zipfian).
func Scatter(rank, n uint64) uint64 {
	x := rank + 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	x ^= x >> 31
	return x % n
}

// ValueSource hands out values that compress to about half their size, as
// LevelDB's db_bench values do: each value is a window into a buffer whose
// every 64-byte stretch is half random bytes and half a repeat of them. A
// window cuts the stretches at its ends, so short values compress less: with
// Snappy, 1000-byte values to about 58% of their size, 100-byte ones to
// about 75%, a block of them to about 71%.
type ValueSource struct {
	buf  []byte
	size int
}

// valuePoolLen is the length of a ValueSource's buffer beyond one value.
const valuePoolLen = 1 << 20

// NewValueSource returns a source of values of size bytes, filling its
// buffer with bytes drawn from rng.
func NewValueSource(size int, rng *rand.Rand) *ValueSource {
	buf := make([]byte, valuePoolLen+size)
	for off := 0; off < len(buf); off += 64 {
		end := min(off+64, len(buf))
		half := off + (end-off)/2
		for i := off; i < half; i++ {
			buf[i] = byte(' ' + rng.IntN(95))
		}
		copy(buf[half:end], buf[off:half])
	}
	return &ValueSource{buf: buf, size: size}
}

// Next returns a value, drawing its place in the buffer from rng. The value
// shares the source's memory and must not be modified.
func (v *ValueSource) Next(rng *rand.Rand) []byte {
	off := rng.IntN(len(v.buf) - v.size + 1)
	return v.buf[off : off+v.size : off+v.size]
}

// ReportCPU reports to b (a *testing.B) the metric cpu-ns/op: the process's
// CPU time since start (a CPUTime reading where b's timed part began) over
// its ops, which other processes on the machine disturb less than wall
// time. It reports nothing where CPU time cannot be measured.
func ReportCPU(b interface{ ReportMetric(float64, string) }, ops int, start time.Duration) {
	if start != 0 {
		b.ReportMetric(float64(CPUTime()-start)/float64(ops), "cpu-ns/op")
	}
}

// ManyTables is the number of tables in the hand-built versions of the
// benchmarks of level metadata (internal/manifest's, and the root package's
// Gets and seeks through such a version).
const ManyTables = 100_000

// TablesPerLevel spreads n tables over the seven levels as a grown store
// holds them: nine tenths in the last level, a tenth of that in the one
// above, four in level 0 and the rest in level 4.
func TablesPerLevel(n int) [7]int {
	var c [7]int
	c[6], c[5], c[0] = n*9/10, n*9/100, 4
	c[4] = n - c[6] - c[5] - c[0]
	return c
}
