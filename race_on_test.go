//go:build race

package bloomkv

// raceBuild: the tests run under the race detector, which also turns on
// Pebble's invariant checks. Pebble v2.1.7 so built has answered Gets and
// iterator seeks of TestModel differently from the in-memory model, where
// bloomkv and the model agreed (and where the same seeds agree with Pebble
// in a normal build), so TestModel compares with Pebble in normal builds
// only.
const raceBuild = true
