// Package filterblock holds bloomkv's Bloom filters, all derived from one
// 64-bit hash of the key (Hash; the scheme is documented in hash.go and is part
// of the on-disk and wire formats).
//
//   - Builder, Decode and Filter: the cache-line-blocked Bloom filter every
//     sstable carries (after Putze, Sanders and Singler). Each key sets k
//     distinct bits in one 64-byte line, so a probe reads one cache line; k is
//     chosen per bits/key to minimise the false-positive rate (ExpectedFPRate).
//     At 10 bits/key it answers "maybe" for about 0.955% of absent keys,
//     against the 0.957% of the textbook 512-bit blocked filter and Pebble's
//     1.17%.
//   - Bloom: a standard Bloom filter with union, intersection, size and
//     intersection-size estimates, and halving (Broder and Mitzenmacher §2.4).
//   - Counting: a counting Bloom filter of 4-bit saturating counters for sets
//     that shrink (§2.5).
//   - AppendWire, DecodeWire and PickWireParams: a compressed encoding for
//     sending a standard filter over a network, within about 1% of the entropy
//     bound for sparse filters (§2.6).
//
// Decoders never panic: malformed input yields an error wrapping ErrCorruption.
package filterblock
