package pebbletest

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/cockroachdb/pebble/v2/cockroachkvs"
)

// CRDBKeys returns about n distinct CockroachDB engine keys in the order of
// CockroachDB's comparer, drawn from seed: roachpb keys of shared prefixes,
// each with several versions: none, MVCC timestamps of wall time only, of
// wall and logical time, with the synthetic byte and with a zero logical
// time (which read back shorter), and lock-table keys of 17-byte versions.
// No two compare equal, and no wall time is zero (a zero timestamp reads
// back as no version).
func CRDBKeys(n int, seed uint64) [][]byte {
	r := rand.New(rand.NewPCG(seed, 0x6372))
	var keys [][]byte
	for i := 0; len(keys) < n; i++ {
		roach := fmt.Appendf(nil, "/Table/%d/%d/key%05d", 100+i/50, i%7, i)
		if i%11 == 10 {
			// The lock table: a locking strength and a transaction ID.
			roach = fmt.Appendf(nil, "\x01zlock/%05d", i)
			for range 1 + r.IntN(3) {
				v := make([]byte, 17)
				v[0] = byte(1 + r.IntN(3))
				for j := 1; j < 17; j++ {
					v[j] = byte(r.Uint32())
				}
				keys = append(keys, cockroachkvs.EncodeKey(nil, roach, v))
			}
			continue
		}
		if r.IntN(4) == 0 {
			keys = append(keys, cockroachkvs.EncodeKey(nil, roach, nil))
		}
		for range 1 + r.IntN(6) {
			wall := 1 + uint64(r.Int64N(1<<50))
			var v []byte
			switch r.IntN(5) {
			case 0, 1:
				v = binary.BigEndian.AppendUint64(nil, wall)
			case 2:
				v = binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint64(nil, wall), 1+r.Uint32N(100))
			case 3:
				v = binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint64(nil, wall), 1+r.Uint32N(100))
				v = append(v, 1) // synthetic
			case 4:
				v = binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint64(nil, wall), 0)
			}
			keys = append(keys, cockroachkvs.EncodeKey(nil, roach, v))
		}
	}
	slices.SortFunc(keys, cockroachkvs.Compare)
	return slices.CompactFunc(keys, func(a, b []byte) bool { return cockroachkvs.Compare(a, b) == 0 })
}
