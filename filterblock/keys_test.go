package filterblock

import (
	"encoding/binary"
	"math/rand/v2"
)

// randomKeys returns n random 16-byte keys from seed. The last byte is tag, so
// key sets made with different tags are disjoint whatever the seeds.
func randomKeys(seed uint64, n int, tag byte) [][]byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	buf := make([]byte, 16*n)
	keys := make([][]byte, n)
	for i := range keys {
		k := buf[16*i : 16*i+16 : 16*i+16]
		binary.LittleEndian.PutUint64(k, r.Uint64())
		binary.LittleEndian.PutUint64(k[8:], r.Uint64())
		k[15] = tag
		keys[i] = k
	}
	return keys
}

// encodeKeys returns the encoded blocked filter of keys at bitsPerKey.
func encodeKeys(bitsPerKey int, keys [][]byte) []byte {
	b := NewBuilder(bitsPerKey)
	for _, k := range keys {
		b.Add(k)
	}
	return b.Finish()
}
