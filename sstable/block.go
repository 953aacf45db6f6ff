package sstable

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"sort"
	"sync"

	"github.com/bloomkv/bloomkv/internal/base"
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

// blockIter iterates over a decoded (uncompressed) block. In a row block
// keys are materialised into an owned buffer; in a flat block (flattenBlock)
// they alias the block. Values alias the block.
type blockIter struct {
	cmp         keyCmp   // how keys compare
	order       keyOrder // the user keys' order, with cmpForeign
	data        []byte   // the entries, without the restart array; a flat block's values
	restarts    []byte   // numRestarts uint32s
	numRestarts int
	where       blockWhere // names the block for errors

	// A flat block's entry table and keys (nil for a row block), its
	// number of entries, and the current one.
	tab  []byte
	keys []byte
	n    int
	i    int

	offset     int // of the current entry (a flat block's: its value); len(data) when exhausted forward
	nextOffset int
	key        []byte // in a row block, the buffer keys are decoded into
	own        []byte // in a flat block, that buffer, kept for the next block
	value      []byte
	valid      bool
	err        error
}

// checkBlock verifies a block's restart array: a count that fits, offsets in
// increasing order within the entries, the first at 0. Readers call it once
// when a block comes off the disk, so that iterators need not.
func checkBlock(block []byte, where blockWhere) error {
	var it blockIter
	if err := it.init(block, false, where); err != nil {
		return err
	}
	end := len(it.data)
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
	return nil
}

// init prepares it to iterate over block, whose restart array checkBlock has
// verified; init itself checks only that the array fits.
func (it *blockIter) init(block []byte, bytewise bool, where blockWhere) error {
	key := it.key[:0]
	if it.tab != nil {
		key = it.own[:0] // key aliases the flat block
	}
	*it = blockIter{where: where, key: key}
	if bytewise {
		it.cmp = cmpBytes
	}
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
	it.offset, it.nextOffset = end, end
	return nil
}

// initCached is init for a data block from bloomkv's cache, which may be
// flat (flattenBlock). Only the cache holds flat blocks: every block it
// holds otherwise passed checkBlock, whose restart count never reads as
// flatMagic. A flat block has no restarts and no entry headers to decode.
func (it *blockIter) initCached(block []byte, where blockWhere) error {
	f, ok := splitFlat(block)
	if !ok {
		return it.init(block, false, where)
	}
	own := it.key[:0]
	if it.tab != nil {
		own = it.own[:0]
	}
	*it = blockIter{where: where, data: f.values, tab: f.tab, keys: f.keys, n: f.n, own: own, offset: len(f.values), nextOffset: len(f.values)}
	return nil
}

// keyCmp says how a block's keys compare.
type keyCmp uint8

const (
	cmpInternal keyCmp = iota // internal keys whose user keys order bytewise
	cmpBytes                  // plain bytes (metaindex, properties)
	cmpForeign                // internal keys whose user keys order by blockIter.order
)

// useOrder has the internal keys of the block, once init has read it,
// compare in order o, the order of the table's user keys.
func (it *blockIter) useOrder(o keyOrder) {
	if o != orderBytewise && it.cmp == cmpInternal {
		it.cmp, it.order = cmpForeign, o
	}
}

// compare orders two keys of the block's kind. bloomkv's own tables take
// the first branch, as they did before foreign orders.
func (it *blockIter) compare(a, b []byte) int {
	if it.cmp == cmpInternal {
		return base.CompareEncoded(a, b)
	}
	if it.cmp == cmpBytes {
		return bytes.Compare(a, b)
	}
	return it.order.compareEncoded(a, b)
}

// uvarint is binary.Uvarint with the one-byte case, the common one, inline.
func uvarint(p []byte) (uint64, int) {
	if len(p) > 0 && p[0] < 0x80 {
		return uint64(p[0]), 1
	}
	return binary.Uvarint(p)
}

func (it *blockIter) restart(i int) int {
	// The high bit is Pebble's (from Pebblev3: the key there has the
	// previous key's prefix); no block is that long.
	return int(binary.LittleEndian.Uint32(it.restarts[4*i:]) &^ (1 << 31))
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
	var shared, unshared, vlen uint64
	var h int
	if len(p) >= 3 && (p[0]|p[1]|p[2]) < 0x80 {
		// The common case: three one-byte varints.
		shared, unshared, vlen, h = uint64(p[0]), uint64(p[1]), uint64(p[2]), 3
	} else {
		var n1, n2, n3 int
		if shared, n1 = uvarint(p); n1 <= 0 {
			return it.corrupt(off, "bad shared-length varint") == nil
		}
		if unshared, n2 = uvarint(p[n1:]); n2 <= 0 {
			return it.corrupt(off, "bad key-length varint") == nil
		}
		if vlen, n3 = uvarint(p[n1+n2:]); n3 <= 0 {
			return it.corrupt(off, "bad value-length varint") == nil
		}
		h = n1 + n2 + n3
	}
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
	if it.tab != nil {
		return it.flatAt(0)
	}
	return it.seekRestart(0)
}

func (it *blockIter) next() bool {
	if it.err != nil || !it.valid {
		return false
	}
	if it.tab != nil {
		return it.flatAt(it.i + 1)
	}
	if it.nextOffset >= len(it.data) {
		it.valid = false
		it.offset = len(it.data)
		return false
	}
	return it.decodeAt(it.nextOffset)
}

func (it *blockIter) last() bool {
	if it.tab != nil && it.err == nil {
		return it.flatAt(it.n - 1)
	}
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
	if it.tab != nil {
		return it.flatAt(it.i - 1)
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

// restartKey returns the key of the entry at restart i, in place: a restart
// entry shares no prefix, so its key lies whole in the block.
func (it *blockIter) restartKey(i int) ([]byte, bool) {
	off := it.restart(i)
	if off >= len(it.data) {
		return nil, false
	}
	p := it.data[off:]
	if len(p) >= 3 && (p[0]|p[1]|p[2]) < 0x80 {
		// The common case: three one-byte varints.
		if p[0] != 0 || int(p[1]) > len(p)-3 {
			return nil, false
		}
		return p[3 : 3+int(p[1])], true
	}
	shared, n1 := uvarint(p)
	unshared, n2 := uvarint(p[max(n1, 0):])
	_, n3 := uvarint(p[max(n1, 0)+max(n2, 0):])
	if n1 <= 0 || n2 <= 0 || n3 <= 0 || shared != 0 {
		return nil, false
	}
	h := n1 + n2 + n3
	if unshared > uint64(len(p)-h) {
		return nil, false
	}
	return p[h : h+int(unshared)], true
}

// seekGE positions at the first entry whose key is ≥ key.
func (it *blockIter) seekGE(key []byte) bool {
	if it.err != nil {
		return false
	}
	if it.tab != nil { // never empty; its values may be
		lo, hi := 0, it.n
		for lo < hi {
			mid := int(uint(lo+hi) >> 1)
			if it.compare(it.flatKey(mid), key) < 0 {
				lo = mid + 1
			} else {
				hi = mid
			}
		}
		return it.flatAt(lo)
	}
	if len(it.data) == 0 { // an empty block (a table of range deletions only)
		it.valid = false
		return false
	}
	// Binary search for the first restart whose key is ≥ key; the answer is
	// at or after the restart before it.
	lo, hi := 0, it.numRestarts
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		rk, ok := it.restartKey(mid)
		if !ok {
			return it.corrupt(it.restart(mid), "bad restart entry") == nil
		}
		if it.compare(rk, key) < 0 {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo > 0 {
		lo--
	}
	if !it.seekRestart(lo) {
		return false
	}
	for it.compare(it.key, key) < 0 {
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

// A flat block is a data block of internal keys laid out for iteration from
// the cache: every entry's value, one after another, then every entry's key
// whole, one after another, then a table of n+1 pairs of uint32s LE (where
// entry i's key and value start among the keys and the values; pair n holds
// where they end), then a footer of uint32s LE: the values' length, the
// keys' length, the number of entries n and flatMagic. Moving to an entry
// reads 16 bytes of the table, with no varint or prefix to decode, a seek
// searches every key in place, and a walk reads values and keys as two
// sequential streams. A row block never ends in flatMagic: as a restart
// count it overruns any block.
const (
	flatMagic   = 0xf1a7b10c
	flatFooter  = 16
	flatPairLen = 8
)

// flatParts are the parts of a flat block.
type flatParts struct {
	values, tab, keys []byte // the values, the table, the keys
	n                 int    // entries
}

// splitFlat returns the parts of a flat block; ok is false when block is not
// one.
func splitFlat(block []byte) (f flatParts, ok bool) {
	end := len(block) - flatFooter
	if end < 0 || binary.LittleEndian.Uint32(block[len(block)-4:]) != flatMagic {
		return f, false
	}
	h := block[end:]
	v, k := uint64(binary.LittleEndian.Uint32(h)), uint64(binary.LittleEndian.Uint32(h[4:]))
	c := uint64(binary.LittleEndian.Uint32(h[8:]))
	if c == 0 || v+k+(c+1)*flatPairLen != uint64(end) {
		return f, false
	}
	return flatParts{values: block[:v], keys: block[v : v+k], tab: block[v+k : end], n: int(c)}, true
}

// flatAt positions at entry i of a flat block; false, and no entry, when
// there is no such entry.
func (it *blockIter) flatAt(i int) bool {
	if uint(i) >= uint(it.n) {
		it.valid = false
		it.offset = len(it.data)
		return false
	}
	e := it.tab[flatPairLen*i : flatPairLen*i+2*flatPairLen]
	ks, vs := binary.LittleEndian.Uint32(e), binary.LittleEndian.Uint32(e[4:])
	ke, ve := binary.LittleEndian.Uint32(e[8:]), binary.LittleEndian.Uint32(e[12:])
	it.key = it.keys[ks:ke:ke]
	it.value = it.data[vs:ve:ve]
	it.i, it.offset, it.valid = i, int(vs), true
	return true
}

// flatKey returns the key of entry i of a flat block.
func (it *blockIter) flatKey(i int) []byte {
	e := it.tab[flatPairLen*i : flatPairLen*i+2*flatPairLen]
	ks, ke := binary.LittleEndian.Uint32(e), binary.LittleEndian.Uint32(e[8:])
	return it.keys[ks:ke:ke]
}

// flatScratch holds the values, keys and table of a block being flattened.
type flatScratch struct{ values, keys, tab []byte }

// flattenBlock returns the flat form of b, a checked data block of internal
// keys, in memory from alloc. ok is false, and nothing allocated, when b
// does not decode whole (its iterators report how), holds a key shorter
// than a trailer, or holds no entry: such a block stays a row block.
// scratch pools its working memory (*flatScratch).
func flattenBlock(b []byte, alloc func(int) []byte, scratch *sync.Pool) (out []byte, ok bool) {
	if len(b) > math.MaxUint32/2 {
		return nil, false
	}
	var it blockIter
	if it.init(b, false, blockWhere{}) != nil {
		return nil, false
	}
	sc, _ := scratch.Get().(*flatScratch)
	if sc == nil {
		sc = new(flatScratch)
	}
	defer scratch.Put(sc)
	values, keys, tab := sc.values[:0], sc.keys[:0], sc.tab[:0]
	n := 0
	for ok := it.first(); ok; ok = it.next() {
		if len(it.key) < base.TrailerLen {
			return nil, false
		}
		tab = binary.LittleEndian.AppendUint32(tab, uint32(len(keys)))
		tab = binary.LittleEndian.AppendUint32(tab, uint32(len(values)))
		keys = append(keys, it.key...)
		values = append(values, it.value...)
		n++
	}
	tab = binary.LittleEndian.AppendUint32(tab, uint32(len(keys)))
	tab = binary.LittleEndian.AppendUint32(tab, uint32(len(values)))
	sc.values, sc.keys, sc.tab = values, keys, tab
	if it.err != nil || n == 0 || len(keys)+len(values) > math.MaxUint32/2 {
		return nil, false
	}
	out = alloc(len(values) + len(keys) + len(tab) + flatFooter)
	w := copy(out, values)
	w += copy(out[w:], keys)
	w += copy(out[w:], tab)
	f := out[w:]
	binary.LittleEndian.PutUint32(f, uint32(len(values)))
	binary.LittleEndian.PutUint32(f[4:], uint32(len(keys)))
	binary.LittleEndian.PutUint32(f[8:], uint32(n))
	binary.LittleEndian.PutUint32(f[12:], flatMagic)
	return out, true
}
