package base

import (
	"errors"
	"io"
	"testing"
)

func TestCorruptionErrorf(t *testing.T) {
	err := CorruptionErrorf("table %s: block at offset %d: %w", "000001.sst", 4096, io.ErrUnexpectedEOF)
	if !errors.Is(err, ErrCorruption) {
		t.Fatalf("%v does not wrap ErrCorruption", err)
	}
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("%v does not wrap its cause", err)
	}
	const want = "table 000001.sst: block at offset 4096: unexpected EOF: bloomkv: corruption"
	if err.Error() != want {
		t.Fatalf("got %q, want %q", err.Error(), want)
	}
}
