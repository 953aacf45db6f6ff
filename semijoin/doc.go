// Package semijoin will let two stores find their matching records by
// shipping a compressed Bloom filter of join keys instead of the keys.
package semijoin
