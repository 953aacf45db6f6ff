package main

import (
	"math/bits"
	"math/rand/v2"

	"github.com/bloomkv/bloomkv/internal/benchutil"
)

// Keys are written by benchutil.MakeKey: the key id as zero-padded decimal.
// The loaded keys have even ids 0, 2, ..., 2(n-1); odd ids are absent keys
// that sort between them, so a read of one has to ask every table whose
// range covers it. Keys inserted by YCSB D, E and F take ids from 2n on.

// presentID is the id of the i-th loaded key.
func presentID(i uint64) uint64 { return 2 * i }

// absentID is the id of an absent key next to the i-th loaded key.
func absentID(i uint64) uint64 { return 2*i + 1 }

// newValues returns the value source of a run with the given seed, which
// draws its buffer from a random stream of its own.
func newValues(size int, seed uint64) *benchutil.ValueSource {
	return benchutil.NewValueSource(size, rand.New(rand.NewPCG(seed, 0x76616c7565)))
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
