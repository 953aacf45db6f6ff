package sstable

// Reading a table's blocks: file reads and mmap, decoding and checksums,
// the block cache, and readahead.

import (
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"sync"
	"unsafe"

	"github.com/bloomkv/bloomkv/filterblock"
	"github.com/bloomkv/bloomkv/internal/cache"
	"github.com/bloomkv/bloomkv/internal/compress"
)

func (t *Reader) where(kind string, bh BlockHandle) blockWhere {
	return blockWhere{file: t.opts.FileName, kind: kind, bh: bh}
}

func (t *Reader) readAt(buf []byte, off uint64) error {
	n, err := t.r.ReadAt(buf, int64(off))
	if n == len(buf) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		return corruptionf("%s: short read of %d bytes at offset %d: got %d", t.opts.FileName, len(buf), off, n)
	}
	return fmt.Errorf("sstable: %s: read of %d bytes at offset %d: %w", t.opts.FileName, len(buf), off, err)
}

// readBlock reads, verifies and decompresses the block at bh into new memory.
func (t *Reader) readBlock(bh BlockHandle, kind string) ([]byte, error) {
	return t.readBlockInto(bh, kind, nil)
}

// blockBufs are an iterator's buffers for blocks it reads without a cache;
// a block read into them lasts until the next read.
type blockBufs struct{ raw, dec []byte }

// grow returns b resized to n bytes, reusing its memory when it can.
func grow(b []byte, n int) []byte {
	if cap(b) >= n {
		return b[:n]
	}
	return make([]byte, n)
}

// maxPooledRaw bounds the buffers kept in Buffers.raw.
const maxPooledRaw = 256 << 10

// readBlockInto reads, verifies and decompresses the block at bh, into bufs
// when given (reused) or into new memory.
func (t *Reader) readBlockInto(bh BlockHandle, kind string, bufs *blockBufs) ([]byte, error) {
	if bh.Length > maxBlockLen || bh.Offset > t.size || bh.Length+blockTrailerLen > t.size-bh.Offset {
		return nil, corruptionf("%s: %s block %s lies outside the file of %d bytes", t.opts.FileName, kind, bh, t.size)
	}
	n := int(bh.Length + blockTrailerLen)
	switch {
	case bufs != nil:
		if out, ok, err := t.readMapped(bh, kind, bufs, nil); ok {
			return out, err
		}
		bufs.raw = grow(bufs.raw, n)
		return t.decodeBlock(bh, kind, bufs.raw, bufs, nil)
	case kind == "filter":
		return t.decodeBlock(bh, kind, alignedBytes(n), nil, newBytes) // probes touch one cache line
	}
	return t.readBlockAlloc(bh, kind, newBytes)
}

func newBytes(n int) []byte { return make([]byte, n) }

// readBlockAlloc reads, verifies and decompresses the block at bh into memory
// from alloc.
func (t *Reader) readBlockAlloc(bh BlockHandle, kind string, alloc func(int) []byte) ([]byte, error) {
	if bh.Length > maxBlockLen || bh.Offset > t.size || bh.Length+blockTrailerLen > t.size-bh.Offset {
		return nil, corruptionf("%s: %s block %s lies outside the file of %d bytes", t.opts.FileName, kind, bh, t.size)
	}
	if out, ok, err := t.readMapped(bh, kind, nil, alloc); ok {
		return out, err
	}
	pooled := getBuf(&t.opts.Buffers.raw)
	*pooled = grow(*pooled, int(bh.Length+blockTrailerLen))
	out, err := t.decodeBlock(bh, kind, *pooled, nil, alloc)
	if err == nil && len(out) > 0 && &out[0] == &(*pooled)[0] {
		// Stored uncompressed: the block is the buffer itself.
		b := alloc(len(out))
		copy(b, out)
		out = b
	}
	if cap(*pooled) <= maxPooledRaw {
		t.opts.Buffers.raw.Put(pooled)
	}
	return out, err
}

// mappedFile is a file whose bytes are mapped into memory (a
// vfs.MappedFile): MappedBytes returns them (ok false once the file is
// closed), to use until ReleaseMapped.
type mappedFile interface {
	MappedBytes() (data []byte, ok bool)
	ReleaseMapped()
}

// readMapped verifies and decompresses the block at bh where it lies in the
// table's mapped bytes, as checkDecode does, copying a block stored
// uncompressed out of them. ok is false, and the block must be read instead,
// when the table is not mapped (or no longer: its file was closed) or the
// block lies past the mapping. A fault while touching the bytes (the file was
// cut short under the mapping) is an error wrapping ErrCorruption, as a
// short read is.
func (t *Reader) readMapped(bh BlockHandle, kind string, bufs *blockBufs, alloc func(int) []byte) (out []byte, ok bool, err error) {
	if t.mapped == nil {
		return nil, false, nil
	}
	data, ok := t.mapped.MappedBytes()
	if !ok {
		return nil, false, nil
	}
	defer t.mapped.ReleaseMapped()
	end := bh.Offset + bh.Length + blockTrailerLen
	if end > uint64(len(data)) || end < bh.Offset {
		return nil, false, nil
	}
	defer func() {
		if r := recover(); r != nil {
			fault, isFault := r.(interface{ Addr() uintptr })
			if start := uintptr(unsafe.Pointer(unsafe.SliceData(data))); !isFault || fault.Addr() < start || fault.Addr()-start >= uintptr(len(data)) {
				panic(r) // not a fault on the mapping: a bug, not the file
			}
			out, err = nil, corruptionf("%s: %s block %s: fault reading the mapped file at offset %d (cut short since it was opened?): %v", t.opts.FileName, kind, bh, bh.Offset, fault)
		}
	}()
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	raw := data[bh.Offset:end:end]
	out, err = t.checkDecode(bh, kind, raw, bufs, alloc)
	if err == nil && len(out) > 0 && &out[0] == &raw[0] {
		// Stored uncompressed: copy the block out of the mapping.
		var b []byte
		if bufs != nil {
			bufs.dec = grow(bufs.dec, len(out))
			b = bufs.dec
		} else {
			b = alloc(len(out))
		}
		copy(b, out)
		out = b
	}
	return out, true, err
}

// decodeBlock reads the block at bh into buf (its stored length plus the
// trailer), verifies it and decompresses it, into bufs.dec when bufs is given
// or else into memory from alloc. A block stored uncompressed is returned in
// buf.
func (t *Reader) decodeBlock(bh BlockHandle, kind string, buf []byte, bufs *blockBufs, alloc func(int) []byte) ([]byte, error) {
	if err := t.readAt(buf, bh.Offset); err != nil {
		return nil, fmt.Errorf("%s block %s: %w", kind, bh, err)
	}
	return t.checkDecode(bh, kind, buf, bufs, alloc)
}

// checkDecode checks the stored block at bh, in buf (its stored length plus
// the trailer), and decompresses it as decodeBlock does.
func (t *Reader) checkDecode(bh BlockHandle, kind string, buf []byte, bufs *blockBufs, alloc func(int) []byte) ([]byte, error) {
	body, typ := buf[:bh.Length], buf[bh.Length]
	stored := uint32(buf[bh.Length+1]) | uint32(buf[bh.Length+2])<<8 | uint32(buf[bh.Length+3])<<16 | uint32(buf[bh.Length+4])<<24
	if got := blockChecksum(t.footer.checksum, buf[:bh.Length+1]); got != stored {
		return nil, corruptionf("%s: %s block %s: checksum mismatch at offset %d: stored %#x, computed %#x", t.opts.FileName, kind, bh, bh.Offset+bh.Length+1, stored, got)
	}
	dst := func(n int) []byte {
		if bufs != nil {
			bufs.dec = grow(bufs.dec, n)
			return bufs.dec
		}
		return alloc(n)
	}
	ck := t.columnarKind(kind)
	dec := dst
	if ck > colRaw {
		dec = newBytes // the columnar block is dead once turned into a row block in dst
	}
	var out []byte
	switch c := compressionOf(typ); c {
	case NoCompression:
		out = body
	case SnappyCompression, ZstdCompression, MinLZCompression:
		n, err := compress.DecodedLen(c.code(), body, maxBlockLen)
		if err == nil {
			out, err = compress.Decode(c.code(), dec(n), body, &t.zstd)
		}
		if err != nil {
			return nil, corruptionf("%s: %s block %s: %v data at offset %d: %v", t.opts.FileName, kind, bh, c, bh.Offset, err)
		}
	default:
		return nil, corruptionf("%s: %s block %s: unknown compression type %d at offset %d", t.opts.FileName, kind, bh, typ, bh.Offset+bh.Length)
	}
	switch ck {
	case colNone:
	case colRaw:
		return out, nil // bytes bloomkv does not interpret
	default:
		return t.rowBlock(ck, t.where(kind, bh), out, dst)
	}
	if kind != "filter" && kind != kindValue && kind != kindValueIndex {
		if err := checkBlock(out, t.where(kind, bh)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// cachedBlock returns the block at bh (a data block or an index partition),
// through the cache when there is one. A block read from the file is
// checked by chk, when not nil (IngestChecks), before it is returned or
// cached.
func (t *Reader) cachedBlock(bh BlockHandle, kind string, chk *Iter) ([]byte, error) {
	if t.opts.Cache == nil {
		return t.readChecked(bh, kind, chk)
	}
	if b, ok := t.opts.Cache.Get(t.opts.FileNum, bh.Offset); ok {
		return b, nil
	}
	return t.opts.Cache.Load(t.opts.FileNum, bh.Offset, func() ([]byte, error) {
		return t.readChecked(bh, kind, chk)
	})
}

// readChecked is readBlock, the block then checked by chk when not nil.
func (t *Reader) readChecked(bh BlockHandle, kind string, chk *Iter) ([]byte, error) {
	b, err := t.readBlock(bh, kind)
	if err == nil && chk != nil {
		err = chk.checkIngested(bh, b)
	}
	return b, err
}

// countedBlock returns the data block at bh through bloomkv's cache, with a
// reference the caller must release; a block read on a miss goes into memory
// from the cache's Alloc, and is checked by chk when not nil (IngestChecks)
// before it is cached. ra, when given, is the caller's read-ahead: misses of
// a sequential walk are served from file bytes read ahead in one go. A
// block read for an iterator (flat) is cached flat (flattenBlock) when it
// can be and the cache has never evicted a block (it holds the data), as
// iterators walk and seek a flat block faster; in a cache that evicts, a
// block is walked a few times at most before it goes, which flattening
// costs more than it saves. One read for a point lookup, or into a cache
// that evicts, is cached as stored, the smaller form. The block is found
// through hint (cache.GetRefHinted), which notes the block found or loaded:
// the block's index entry's when not nil, otherwise the one prev, the
// caller's reference to the block before bh's in the file, keeps for the
// block after it (cache.Handle.Follow), when prev is not the zero Handle.
func (t *Reader) countedBlock(bh BlockHandle, ra *readahead, chk *Iter, flat bool, prev cache.Handle, hint *cache.Hint) ([]byte, cache.Handle, error) {
	if ra != nil {
		ra.saw(bh)
	}
	if hint == nil {
		hint = prev.Follow()
	}
	if h, ok := t.cc.GetRefHinted(hint, t.opts.FileNum, bh.Offset); ok {
		if flat && ra != nil && ra.seq >= flattenAfterBlocks {
			if f := t.flattenCached(h, bh); f != h {
				h = f
				hint.Note(h) // the flat form took the block's place
			}
		}
		return h.Value(), h, nil
	}
	h, err := t.cc.LoadRef(t.opts.FileNum, bh.Offset, func() ([]byte, error) {
		return t.cacheBlock(bh, ra, chk, flat)
	})
	if err == nil {
		hint.Note(h)
	}
	return h.Value(), h, err
}

// cacheBlock reads the data block at bh into memory from the cache's Alloc,
// flat (flattenBlock) when flat is set, the cache has never evicted a block
// and the block can be; ra and chk are countedBlock's.
func (t *Reader) cacheBlock(bh BlockHandle, ra *readahead, chk *Iter, flat bool) (b []byte, err error) {
	alloc := t.cc.Alloc
	var sc *[]byte
	if flat && !t.cc.Evicted() {
		// Read into scratch memory; the flat copy goes to the cache.
		sc = getBuf(&t.opts.Buffers.row)
		defer t.opts.Buffers.row.Put(sc)
		alloc = func(n int) []byte {
			*sc = grow(*sc, n)
			return *sc
		}
	}
	var raw []byte
	if ra != nil {
		raw = ra.stored(t, bh)
	}
	if raw != nil {
		b, err = t.verifyAlloc(bh, "data", raw, alloc)
	} else {
		b, err = t.readBlockAlloc(bh, "data", alloc)
	}
	if err == nil && chk != nil {
		err = chk.checkIngested(bh, b)
	}
	if err == nil && sc != nil {
		if f, ok := flattenBlock(b, t.cc.Alloc, &t.opts.Buffers.flat); ok {
			return f, nil
		}
		b = append(t.cc.Alloc(len(b))[:0], b...)
	}
	return b, err
}

// flattenCached returns h, a reference to the data block at bh as the cache
// holds it, or, when the block is cached as stored and the cache takes its
// flat form in its place (Cache.Swap: it has room to spare and has never
// evicted), a reference to the flat form, releasing h. An iterator then
// steps through the block as through one it loaded itself. Flattening
// costs about what a walk through the stored block does, so it is done for
// a walk that has gone through whole blocks (flattenAfterBlocks), a scan,
// which pays it back on its next pass, and not for a seek and a few steps.
func (t *Reader) flattenCached(h cache.Handle, bh BlockHandle) cache.Handle {
	b := h.Value()
	if _, ok := splitFlat(b); ok || !t.cc.MaySwap(h, t.opts.FileNum, bh.Offset) {
		return h
	}
	f, ok := flattenBlock(b, t.cc.Alloc, &t.opts.Buffers.flat)
	if !ok {
		t.cc.KeepForm(h)
		return h
	}
	nh, ok := t.cc.Swap(h, t.opts.FileNum, bh.Offset, f)
	if !ok {
		return h
	}
	h.Release()
	return nh
}

// flattenAfterBlocks is the blocks an iterator loads in file order, one
// after the other, before it flattens the cached blocks it walks into.
const flattenAfterBlocks = 2

// verifyAlloc verifies and decompresses the stored block raw (read into
// memory the caller reuses) into memory from alloc.
func (t *Reader) verifyAlloc(bh BlockHandle, kind string, raw []byte, alloc func(int) []byte) ([]byte, error) {
	out, err := t.checkDecode(bh, kind, raw, nil, alloc)
	if err == nil && len(out) > 0 && &out[0] == &raw[0] {
		// Stored uncompressed: the block is in raw itself.
		b := alloc(len(out))
		copy(b, out)
		out = b
	}
	return out, err
}

// Read-ahead: once an iterator has loaded blocks that follow one another in
// the file raStart times in a row, a miss reads raMin bytes from the block on
// in one read, and each further read-ahead twice as many, up to raMax; the
// misses that follow are decoded from those bytes instead of a read each.
const (
	raStart = 2
	raMin   = 16 << 10
	raMax   = 256 << 10
)

// readahead is an iterator's read-ahead state for one table.
type readahead struct {
	buf  *[]byte    // up to raMax bytes; nil until the first read-ahead
	pool *sync.Pool // where buf came from and goes back
	off  uint64     // file offset of (*buf)[0]
	n    int        // bytes of buf read
	next uint64     // where the last block loaded ends
	seq  int        // blocks loaded in a row that each followed the last
	size int        // the next read-ahead's size
}

// saw records a block the iterator loads, hit or miss.
func (ra *readahead) saw(bh BlockHandle) {
	if bh.Offset == ra.next {
		ra.seq++
	} else {
		ra.seq, ra.size = 0, 0
	}
	ra.next = bh.Offset + bh.Length + blockTrailerLen
}

// stored returns the stored bytes (with the trailer) of the block at bh from
// the read-ahead, reading ahead first when the walk is sequential and bh lies
// past what was read; nil when the block should be read on its own (as it is
// when the read-ahead fails: its error is the block's own read's to report).
func (ra *readahead) stored(t *Reader, bh BlockHandle) []byte {
	raw, err := ra.read(t, bh)
	if err != nil {
		// Let the block's own read succeed or fail as it would have,
		// and start over.
		ra.n, ra.seq, ra.size = 0, 0, 0
		return nil
	}
	return raw
}

// read is stored, but for a read-ahead that fails, whose error it returns.
func (ra *readahead) read(t *Reader, bh BlockHandle) ([]byte, error) {
	n := bh.Length + blockTrailerLen
	if bh.Length > maxBlockLen || bh.Offset > t.size || n > t.size-bh.Offset {
		return nil, nil // the block's own read reports it
	}
	if ra.buf != nil && bh.Offset >= ra.off && bh.Offset+n <= ra.off+uint64(ra.n) {
		return (*ra.buf)[bh.Offset-ra.off:][:n], nil
	}
	if ra.seq < raStart {
		return nil, nil
	}
	ra.size = min(max(2*ra.size, raMin), raMax)
	end := min(bh.Offset+uint64(ra.size), max(t.dataEnd, bh.Offset+n), t.size)
	if end-bh.Offset <= n {
		return nil, nil // nothing to read beyond the block
	}
	if ra.buf == nil {
		ra.pool = &t.opts.Buffers.readahead
		ra.buf = getBuf(ra.pool)
	}
	if cap(*ra.buf) < ra.size {
		*ra.buf = make([]byte, ra.size)
	}
	ra.off, ra.n = bh.Offset, int(end-bh.Offset)
	if err := t.readAt((*ra.buf)[:ra.n], ra.off); err != nil {
		ra.n = 0
		return nil, err
	}
	return (*ra.buf)[:n], nil
}

// reset forgets the read-ahead, keeping its buffer, for another table.
func (ra *readahead) reset() {
	buf, pool := ra.buf, ra.pool
	*ra = readahead{buf: buf, pool: pool, next: noBlock}
}

// noBlock is readahead.next before any block is loaded: no block follows it,
// so the first block loaded is not counted as following another.
const noBlock = ^uint64(0)

// release forgets the read-ahead and returns its buffer.
func (ra *readahead) release() {
	if ra.buf != nil {
		ra.pool.Put(ra.buf)
	}
	*ra = readahead{}
}

// alignedBytes returns n bytes starting at a 64-byte boundary.
func alignedBytes(n int) []byte {
	b := make([]byte, n+filterblock.LineBytes)
	off := 0
	if r := uintptr(unsafe.Pointer(&b[0])) % filterblock.LineBytes; r != 0 {
		off = int(filterblock.LineBytes - r)
	}
	return b[off : off+n : off+n]
}
