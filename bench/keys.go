package main

import (
	"math"
	"math/bits"
	"math/rand/v2"
)

// keyLen is the length of every key: the key id as zero-padded decimal.
const keyLen = 16

// The loaded keys have even ids 0, 2, ..., 2(n-1); odd ids are absent keys
// that sort between them, so a read of one has to ask every table whose
// range covers it. Keys inserted by YCSB D, E and F take ids from 2n on.

// presentID is the id of the i-th loaded key.
func presentID(i uint64) uint64 { return 2 * i }

// absentID is the id of an absent key next to the i-th loaded key.
func absentID(i uint64) uint64 { return 2*i + 1 }

// makeKey writes the key with the given id into dst, which has keyLen bytes.
func makeKey(dst []byte, id uint64) []byte {
	dst = dst[:keyLen]
	for i := keyLen - 1; i >= 0; i-- {
		dst[i] = byte('0' + id%10)
		id /= 10
	}
	return dst
}

// valueSource hands out values that compress to about half their size, as
// LevelDB's db_bench values do: each value is a window into a buffer whose
// every stretch is half random bytes and half a repeat of them.
type valueSource struct {
	buf  []byte
	size int
}

func newValueSource(size int, seed uint64) *valueSource {
	rng := rand.New(rand.NewPCG(seed, 0x76616c7565))
	const poolLen = 1 << 20
	buf := make([]byte, poolLen+size)
	for off := 0; off < len(buf); off += 64 {
		end := min(off+64, len(buf))
		half := off + (end-off)/2
		for i := off; i < half; i++ {
			buf[i] = byte(' ' + rng.IntN(95))
		}
		copy(buf[half:end], buf[off:half])
	}
	return &valueSource{buf: buf, size: size}
}

// next returns a value; it is valid until the buffer is garbage.
func (v *valueSource) next(rng *rand.Rand) []byte {
	off := rng.IntN(len(v.buf) - v.size + 1)
	return v.buf[off : off+v.size : off+v.size]
}

// permutation maps 0..n-1 one to one onto 0..n-1 in a scattered order,
// without a table: i -> (a*i + b) mod n with a coprime to n.
type permutation struct{ a, b, n uint64 }

func newPermutation(n uint64, rng *rand.Rand) permutation {
	if n <= 1 {
		return permutation{a: 1, n: max(n, 1)}
	}
	a := rng.Uint64N(n-1) + 1
	for gcd(a, n) != 1 {
		a = rng.Uint64N(n-1) + 1
	}
	return permutation{a: a, b: rng.Uint64N(n), n: n}
}

func (p permutation) at(i uint64) uint64 {
	hi, lo := bits.Mul64(p.a, i%p.n)
	lo, carry := bits.Add64(lo, p.b, 0)
	return bits.Rem64(hi+carry, lo, p.n)
}

func gcd(a, b uint64) uint64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// zipf draws ranks 0..n-1 with probability proportional to 1/(rank+1)^theta,
// by the method of Gray et al., "Quickly Generating Billion-Record Synthetic
// Databases" (SIGMOD 1994), which YCSB uses; theta 0.99 as in YCSB.
type zipf struct {
	n                        uint64
	theta, alpha, zetan, eta float64
	halfPowTheta             float64
}

func newZipf(n uint64, theta float64) *zipf {
	zeta2 := 1 + math.Pow(0.5, theta)
	var zetan float64
	for i := uint64(1); i <= n; i++ {
		zetan += 1 / math.Pow(float64(i), theta)
	}
	return &zipf{
		n:            n,
		theta:        theta,
		alpha:        1 / (1 - theta),
		zetan:        zetan,
		eta:          (1 - math.Pow(2/float64(n), 1-theta)) / (1 - zeta2/zetan),
		halfPowTheta: math.Pow(0.5, theta),
	}
}

func (z *zipf) next(rng *rand.Rand) uint64 {
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

// scatter maps a zipf rank to a key index so that the hot keys spread over
// the key space instead of bunching at its start (YCSB's scrambled zipfian).
func scatter(rank, n uint64) uint64 {
	x := rank + 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	x ^= x >> 31
	return x % n
}
