//go:build !unix

package pebblestore

// checkUnlocked checks nothing where fcntl locks do not exist.
func checkUnlocked(dir string) error { return nil }
