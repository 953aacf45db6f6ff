// Package semijoin finds the records two stores have in common, or the ones
// they disagree on, moving little data between them: the database uses of
// Bloom filters in Broder and Mitzenmacher's survey (§2.4, §3.2).
//
// A side is a Store: Local for a store in this process (a *bloomkv.DB or a
// *bloomkv.Snapshot), or Dial for one that another process serves over
// HTTP with Handler. Each call streams in key order.
//
//   - Join calls back for each key both sides hold, exactly and in key
//     order, by one of several strategies (Strategy): ship A's keys, ship a
//     Bloom filter of them (B returns the records that pass, A drops the
//     false positives by merging with its own records), ship a compressed
//     sparse filter, or two-way filters. Auto picks the strategy with the
//     fewest expected bytes (Mullin's cost model: filter bytes plus false
//     positives times record bytes). A ⋉ B is Join with Options.SemiJoin.
//   - Estimate estimates |A ∩ B| before any record moves: A's filter goes
//     to B, which counts its keys that pass it.
//   - Diff finds the keys only A holds, only B holds, or both hold with
//     different values, at a cost in bytes that grows with the number of
//     differences, not with the stores: B sends the coded symbols of a
//     rateless invertible Bloom lookup table of its records until A has
//     decoded the difference against its own.
package semijoin
