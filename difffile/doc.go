// Package difffile holds the differential-file filter: a counting Bloom
// filter over the keys that have changed since they were last merged into a
// base, so that a read of an unchanged key can go straight to the base.
//
// The idea is Gremillion's (1982; Broder and Mitzenmacher's survey §3.2): a
// store that keeps recent changes in a differential file beside a large base
// would have to consult the differential on every read. A Bloom filter of the
// changed records answers "certainly unchanged" for most unchanged keys at
// the cost of one probe; a false positive only costs a needless look at the
// differential. Records leave the differential when they are merged into the
// base, so the filter must forget keys: it is a counting Bloom filter (Fan et
// al.; survey §2.5) whose counters Add increments and Remove decrements.
//
// Filter lays its counters out like filterblock's table filter: lines of one
// 64-byte cache line, each of 128 four-bit counters. A key's k counters are
// distinct counters of one line, the line chosen by the high half of its
// filterblock.Hash and the counters by the low half, so that a probe reads
// one cache line and a caller that already hashed the key for the table
// filters probes this one with the same hash (MayContainHash).
//
// Guarantees:
//
//   - No false negatives: a key added more often than it was removed always
//     passes MayContain. Counters saturate at 15 and a saturated counter is
//     never decremented, so overflow cannot lose a key; Remove refuses (and
//     changes nothing) when a counter of the key is zero.
//   - All methods are safe for concurrent use: counters are updated by atomic
//     compare-and-swap, 16 to a 64-bit word, and read by atomic loads.
//   - At its design capacity and the default 8 counters (4 bytes) a key, a
//     filter answers "maybe" for about 2.74% of absent keys (k = 5);
//     NeedsGrowth says when the rate has drifted to 1.5 times that.
//   - Decode rejects damaged input with an error wrapping ErrCorruption and
//     never panics.
//
// The package keeps no state of its own beyond its filters: an application
// with a base and a differential of its own can use it directly.
package difffile
