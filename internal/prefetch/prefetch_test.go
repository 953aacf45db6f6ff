package prefetch

import (
	"bytes"
	"testing"
	"unsafe"
)

// TestRangeLeavesMemory asks for ranges of many lengths at every alignment
// within a line, and for single lines: a prefetch never writes, so the
// buffer is unchanged.
func TestRangeLeavesMemory(t *testing.T) {
	buf := make([]byte, 512)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	want := bytes.Clone(buf)
	for off := 0; off < 70; off++ {
		for n := 0; off+n <= len(buf); n += 1 + n/8 {
			Range(buf[off : off+n])
			Ptr(unsafe.Pointer(&buf[off]))
		}
	}
	Range(nil)
	if !bytes.Equal(buf, want) {
		t.Fatal("prefetching changed the memory")
	}
}
