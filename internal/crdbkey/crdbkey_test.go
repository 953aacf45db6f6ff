package crdbkey

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2/cockroachkvs"
)

// randomKey returns a well-formed engine key: a short roachpb key over a
// small alphabet (so that prefixes collide) and a version of each kind.
func randomKey(r *rand.Rand) []byte {
	roach := make([]byte, r.IntN(4))
	for i := range roach {
		roach[i] = "\x00\x01ab"[r.IntN(4)]
	}
	key := append(roach, 0)
	var v []byte
	switch r.IntN(6) {
	case 0: // no version
	case 1:
		v = binary.BigEndian.AppendUint64(nil, uint64(r.IntN(4)))
	case 2, 3:
		v = binary.BigEndian.AppendUint64(nil, uint64(r.IntN(4)))
		v = binary.BigEndian.AppendUint32(v, uint32(r.IntN(3)))
		if r.IntN(2) == 0 {
			v = append(v, 1) // the synthetic byte
		}
	case 4:
		v = make([]byte, 17)
		v[r.IntN(17)] = byte(r.IntN(3))
	case 5:
		v = binary.BigEndian.AppendUint64(nil, uint64(r.IntN(4))<<56)
	}
	if len(v) > 0 {
		key = append(append(key, v...), byte(len(v)+1))
	}
	return key
}

func sign(c int) int {
	switch {
	case c < 0:
		return -1
	case c > 0:
		return 1
	}
	return 0
}

// TestAgainstCockroachKVs: Split and Compare agree with Pebble's
// cockroachkvs on well-formed keys of every version kind.
func TestAgainstCockroachKVs(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	equal := 0
	for range 200000 {
		a, b := randomKey(r), randomKey(r)
		if got, want := Split(a), cockroachkvs.Split(a); got != want {
			t.Fatalf("Split(%x) = %d, cockroachkvs %d", a, got, want)
		}
		got, want := sign(Compare(a, b)), sign(cockroachkvs.Compare(a, b))
		if got != want {
			t.Fatalf("Compare(%x, %x) = %d, cockroachkvs %d", a, b, got, want)
		}
		if got == 0 {
			equal++
		}
	}
	if equal == 0 {
		t.Fatal("no two keys compared equal: the test does not cover normalization")
	}
	if ComparerName != cockroachkvs.Comparer.Name || KeySchemaName != cockroachkvs.KeySchema.Name {
		t.Fatalf("names %q, %q; cockroachkvs %q, %q", ComparerName, KeySchemaName, cockroachkvs.Comparer.Name, cockroachkvs.KeySchema.Name)
	}
}

// FuzzMalformed: any bytes, well formed or not, split and compare without
// a panic, and Compare is antisymmetric.
func FuzzMalformed(f *testing.F) {
	f.Add([]byte("a\x00"), []byte("a\x00\x00\x00\x00\x00\x00\x00\x00\x01\x09"))
	f.Add([]byte{0xff}, []byte{})
	f.Fuzz(func(t *testing.T, a, b []byte) {
		if n := Split(a); n < 0 || n > len(a) {
			t.Fatalf("Split(%x) = %d", a, n)
		}
		if sign(Compare(a, b)) != -sign(Compare(b, a)) {
			t.Fatalf("Compare(%x, %x) is not antisymmetric", a, b)
		}
	})
}
