package sstable

import (
	"encoding/binary"
	"fmt"
	"sort"
)

// A block is the LevelDB/RocksDB block format: a run of entries, then the
// restart offsets (uint32 LE each), then their count (uint32 LE). Each entry is
//
//	varint shared | varint unshared | varint value length | key[shared:] | value
//
// where shared is the length of the prefix the key has in common with the
// previous key, always 0 at a restart point, which begins every
// restartInterval entries so that a reader can binary-search the restarts.

// blockWriter builds one block.
type blockWriter struct {
	restartInterval int
	buf             []byte
	restarts        []uint32
	sinceRestart    int
	prevKey         []byte
	entries         int
}

func (w *blockWriter) add(key, value []byte) {
	shared := 0
	if w.sinceRestart == w.restartInterval || w.entries == 0 {
		w.restarts = append(w.restarts, uint32(len(w.buf)))
		w.sinceRestart = 0
	} else {
		n := min(len(key), len(w.prevKey))
		for shared < n && key[shared] == w.prevKey[shared] {
			shared++
		}
	}
	w.buf = binary.AppendUvarint(w.buf, uint64(shared))
	w.buf = binary.AppendUvarint(w.buf, uint64(len(key)-shared))
	w.buf = binary.AppendUvarint(w.buf, uint64(len(value)))
	w.buf = append(w.buf, key[shared:]...)
	w.buf = append(w.buf, value...)
	w.prevKey = append(w.prevKey[:0], key...)
	w.sinceRestart++
	w.entries++
}

// estimatedSize returns the size finish would return.
func (w *blockWriter) estimatedSize() int {
	return len(w.buf) + 4*len(w.restarts) + 4
}

// finish returns the encoded block; it stays valid until the next reset.
func (w *blockWriter) finish() []byte {
	if w.entries == 0 {
		w.restarts = append(w.restarts, 0) // an empty block still has one restart
	}
	for _, r := range w.restarts {
		w.buf = binary.LittleEndian.AppendUint32(w.buf, r)
	}
	w.buf = binary.LittleEndian.AppendUint32(w.buf, uint32(len(w.restarts)))
	return w.buf
}

func (w *blockWriter) reset() {
	w.buf = w.buf[:0]
	w.restarts = w.restarts[:0]
	w.sinceRestart = 0
	w.prevKey = w.prevKey[:0]
	w.entries = 0
}

// blockWhere names a block in error messages.
type blockWhere struct {
	file string
	kind string
	bh   BlockHandle
}

// blockIter iterates over a decoded (uncompressed) block. Keys are
// materialised into an owned buffer; values alias the block.
type blockIter struct {
	cmp         func(a, b []byte) int
	data        []byte // the entries, without the restart array
	restarts    []byte // numRestarts uint32s
	numRestarts int
	where       blockWhere // names the block for errors

	offset     int // of the current entry; len(data) when exhausted forward
	nextOffset int
	key        []byte
	value      []byte
	valid      bool
	err        error
}

// init prepares it to iterate over block, checking the restart array.
func (it *blockIter) init(block []byte, cmp func(a, b []byte) int, where blockWhere) error {
	*it = blockIter{cmp: cmp, where: where, key: it.key[:0]}
	if len(block) < 4 {
		return it.corrupt(0, fmt.Sprintf("block of %d bytes is too short for its restart count", len(block)))
	}
	n := binary.LittleEndian.Uint32(block[len(block)-4:])
	if n == 0 || uint64(n)*4+4 > uint64(len(block)) {
		return it.corrupt(len(block)-4, fmt.Sprintf("restart count %d does not fit a block of %d bytes", n, len(block)))
	}
	end := len(block) - 4 - int(n)*4
	it.data = block[:end]
	it.restarts = block[end : len(block)-4]
	it.numRestarts = int(n)
	prev := -1
	for i := 0; i < it.numRestarts; i++ {
		r := it.restart(i)
		if r <= prev || r > end || (r == end && end != 0) {
			return it.corrupt(end+4*i, fmt.Sprintf("restart %d at offset %d is out of order or past the entries (%d bytes)", i, r, end))
		}
		prev = r
	}
	if it.restart(0) != 0 {
		return it.corrupt(end, "first restart is not at offset 0")
	}
	it.offset, it.nextOffset = end, end
	return nil
}

func (it *blockIter) restart(i int) int {
	return int(binary.LittleEndian.Uint32(it.restarts[4*i:]))
}

func (it *blockIter) corrupt(off int, msg string) error {
	err := corruptionf("%s: %s block %s: offset %d in block: %s", it.where.file, it.where.kind, it.where.bh, off, msg)
	it.err, it.valid = err, false
	return err
}

// decodeAt decodes the entry at off, whose predecessor's key is in it.key
// (ignored when the entry is a restart). It sets key, value, offset and
// nextOffset, or the error.
func (it *blockIter) decodeAt(off int) bool {
	p := it.data[off:]
	shared, n1 := binary.Uvarint(p)
	if n1 <= 0 {
		return it.corrupt(off, "bad shared-length varint") == nil
	}
	unshared, n2 := binary.Uvarint(p[n1:])
	if n2 <= 0 {
		return it.corrupt(off, "bad key-length varint") == nil
	}
	vlen, n3 := binary.Uvarint(p[n1+n2:])
	if n3 <= 0 {
		return it.corrupt(off, "bad value-length varint") == nil
	}
	h := n1 + n2 + n3
	rest := uint64(len(p) - h)
	if shared > uint64(len(it.key)) || unshared > rest || vlen > rest-unshared {
		return it.corrupt(off, fmt.Sprintf("entry (shared %d, key %d, value %d) overruns the block or the previous key (%d)", shared, unshared, vlen, len(it.key))) == nil
	}
	it.key = append(it.key[:shared], p[h:h+int(unshared)]...)
	vstart := h + int(unshared)
	it.value = p[vstart : vstart+int(vlen) : vstart+int(vlen)]
	it.offset = off
	it.nextOffset = off + vstart + int(vlen)
	it.valid = true
	return true
}

// seekRestart positions at restart point i (its key has no shared prefix).
func (it *blockIter) seekRestart(i int) bool {
	it.key = it.key[:0]
	off := it.restart(i)
	if off >= len(it.data) {
		it.valid = false
		return false
	}
	if !it.decodeAt(off) {
		return false
	}
	if len(it.data) > 0 && it.data[off] != 0 { // shared must be 0 at a restart
		return it.corrupt(off, "restart entry shares a prefix") == nil
	}
	return true
}

func (it *blockIter) first() bool {
	if it.err != nil {
		return false
	}
	return it.seekRestart(0)
}

func (it *blockIter) next() bool {
	if it.err != nil || !it.valid {
		return false
	}
	if it.nextOffset >= len(it.data) {
		it.valid = false
		it.offset = len(it.data)
		return false
	}
	return it.decodeAt(it.nextOffset)
}

func (it *blockIter) last() bool {
	if it.err != nil || !it.seekRestart(it.numRestarts-1) {
		return false
	}
	for it.nextOffset < len(it.data) {
		if !it.decodeAt(it.nextOffset) {
			return false
		}
	}
	return it.valid
}

// prev moves to the entry before the current one: from the last restart
// before it, scan forward.
func (it *blockIter) prev() bool {
	if it.err != nil || !it.valid {
		return false
	}
	target := it.offset
	if target == 0 {
		it.valid = false
		return false
	}
	i := sort.Search(it.numRestarts, func(i int) bool { return it.restart(i) >= target }) - 1
	if !it.seekRestart(i) {
		return false
	}
	for it.nextOffset < target {
		if !it.decodeAt(it.nextOffset) {
			return false
		}
	}
	if it.nextOffset != target {
		return it.corrupt(it.offset, "entries do not line up with the previous position") == nil
	}
	return true
}

// seekGE positions at the first entry whose key is ≥ key.
func (it *blockIter) seekGE(key []byte) bool {
	if it.err != nil {
		return false
	}
	// The last restart whose key is < key; the answer is at or after it.
	var bad bool
	i := sort.Search(it.numRestarts, func(i int) bool {
		if bad || !it.seekRestart(i) {
			bad = true
			return true
		}
		return it.cmp(it.key, key) >= 0
	})
	if bad {
		return false
	}
	if i > 0 {
		i--
	}
	if !it.seekRestart(i) {
		return false
	}
	for it.cmp(it.key, key) < 0 {
		if !it.next() {
			return false
		}
	}
	return true
}

// seekLT positions at the last entry whose key is < key.
func (it *blockIter) seekLT(key []byte) bool {
	if !it.seekGE(key) {
		if it.err != nil {
			return false
		}
		return it.last()
	}
	return it.prev()
}
