package bloomkv

// Batches: writes applied together, atomically, and the checks of their keys
// and ranges.

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"runtime"
	"sync"

	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/batchrepr"
)

// The largest key, value and batch bloomkv accepts; larger ones are refused
// with an error wrapping ErrTooLarge.
const (
	MaxKeySize   = 1 << 20  // 1 MiB
	MaxValueSize = 64 << 20 // 64 MiB: a value must fit in one table block
	MaxBatchSize = 1 << 30  // 1 GiB of encoded batch
)

// batchHeaderLen is the encoded batch header: sequence number and count.
const batchHeaderLen = batchrepr.HeaderLen

// A Batch is a set of writes applied atomically by DB.Apply: after a crash
// either all of them are in the store or none is. Its encoding is LevelDB's
// write batch (the WAL record): an 8-byte sequence number, a 4-byte count,
// then each entry as a kind byte, a varint-prefixed key and, for a set, a
// varint-prefixed value. A Batch is not safe for concurrent use, and must
// not be copied.
type Batch struct {
	_     noCopy
	data  []byte
	count uint32
	// buf, for a batch from NewBatch, holds the encoding's memory for
	// reuse by a later NewBatch once the batch is unreachable.
	buf *batchBuf
	// waiter is the batch's place in the commit queue while Apply runs,
	// kept here so that a commit allocates nothing.
	waiter commitWaiter
}

// NewBatch returns an empty batch. Its memory is reused by a later
// NewBatch once the batch is no longer referenced, so an application that
// builds a batch for each Apply need not keep batches of its own.
func (d *DB) NewBatch() *Batch {
	bb, ok := d.batchBufs.Get().(*batchBuf)
	if !ok {
		bb = &batchBuf{data: make([]byte, batchHeaderLen, 1<<10), pool: d.batchBufs}
	}
	b := &Batch{data: bb.data[:batchHeaderLen], buf: bb}
	clear(b.data)
	// bb reaches neither b (else b would never be unreachable) nor d (else
	// a batch kept after Close would keep the whole store alive).
	runtime.AddCleanup(b, putBatchBuf, bb)
	return b
}

// batchBuf is the memory of a batch from NewBatch: the batch keeps data in
// it as it grows, and a cleanup puts it in pool, its DB's batchBufs, once
// the batch is unreachable, when nothing else refers to data (DB.Apply
// copies what it keeps of a batch).
type batchBuf struct {
	data []byte
	pool *sync.Pool
}

// maxPooledBatchBuf is the largest batchBuf kept for reuse; a bigger one
// goes to the collector.
const maxPooledBatchBuf = 1 << 20

// putBatchBuf keeps bb for a later NewBatch; its batch is unreachable.
func putBatchBuf(bb *batchBuf) {
	if cap(bb.data) <= maxPooledBatchBuf {
		bb.pool.Put(bb)
	}
}

// noCopy makes go vet report a copied Batch: a copy would share the memory
// that the original's cleanup hands to another batch.
type noCopy struct{}

func (*noCopy) Lock()   {}
func (*noCopy) Unlock() {}

func newBatch() *Batch {
	return &Batch{data: make([]byte, batchHeaderLen, 64)}
}

// maxPooledBatch is the largest batch encoding DB.Set and friends keep for
// reuse; a bigger one (a large value) goes to the collector.
const maxPooledBatch = 64 << 10

// getBatch returns an empty batch for a one-write commit.
func (d *DB) getBatch() *Batch {
	if b, ok := d.batches.Get().(*Batch); ok {
		return b
	}
	return newBatch()
}

// putBatch keeps b for reuse; its commit is over.
func (d *DB) putBatch(b *Batch) {
	if cap(b.data) > maxPooledBatch {
		return
	}
	b.Reset()
	d.batches.Put(b)
}

func (b *Batch) init() {
	if len(b.data) < batchHeaderLen {
		b.data = make([]byte, batchHeaderLen, 64)
	}
}

func checkKey(key []byte) error {
	if len(key) > MaxKeySize {
		return fmt.Errorf("%w: key of %d bytes exceeds MaxKeySize (%d)", ErrTooLarge, len(key), MaxKeySize)
	}
	return nil
}

func (b *Batch) add(kind base.Kind, key, value []byte) error {
	b.init()
	if err := checkKey(key); err != nil {
		return err
	}
	if len(value) > MaxValueSize {
		return fmt.Errorf("%w: value of %d bytes exceeds MaxValueSize (%d)", ErrTooLarge, len(value), MaxValueSize)
	}
	if len(b.data)+len(key)+len(value)+2*binary.MaxVarintLen32+1 > MaxBatchSize {
		return fmt.Errorf("%w: batch would exceed MaxBatchSize (%d)", ErrTooLarge, MaxBatchSize)
	}
	if need := len(b.data) + 1 + 2*binary.MaxVarintLen32 + len(key) + len(value); need > cap(b.data) {
		b.grow(need)
	}
	b.data = append(b.data, byte(kind))
	b.data = binary.AppendUvarint(b.data, uint64(len(key)))
	b.data = append(b.data, key...)
	if kind != base.KindDelete {
		b.data = binary.AppendUvarint(b.data, uint64(len(value)))
		b.data = append(b.data, value...)
	}
	b.count++
	binary.LittleEndian.PutUint32(b.data[8:], b.count)
	return nil
}

// grow makes room for an encoding of need bytes, at least doubling the
// buffer (up to MaxBatchSize, which no batch passes): append grows a large
// slice by a quarter at a time, which for a batch of many writes would
// copy its encoding over and over.
func (b *Batch) grow(need int) {
	data := make([]byte, len(b.data), max(need, min(2*cap(b.data), MaxBatchSize), 1<<10))
	copy(data, b.data)
	b.data = data
	if b.buf != nil {
		b.buf.data = data
	}
}

// Set adds a write of value under key. The batch copies both.
func (b *Batch) Set(key, value []byte) error { return b.add(base.KindSet, key, value) }

// Delete adds a deletion of key.
func (b *Batch) Delete(key []byte) error { return b.add(base.KindDelete, key, nil) }

// DeleteRange adds a deletion of every key in [start, end): those written
// before the batch, not those written after it. start must not sort after
// end; an empty range (start equal to end) adds nothing.
func (b *Batch) DeleteRange(start, end []byte) error {
	if err := checkRange(start, end); err != nil {
		return err
	}
	if bytes.Equal(start, end) {
		return nil
	}
	if err := checkKey(end); err != nil {
		return err
	}
	return b.add(base.KindRangeDelete, start, end)
}

// checkRange refuses a range whose start sorts after its end.
func checkRange(start, end []byte) error {
	if bytes.Compare(start, end) > 0 {
		return fmt.Errorf("bloomkv: range [%q, %q) has its start after its end", start, end)
	}
	return nil
}

// Count returns the number of writes in the batch.
func (b *Batch) Count() uint32 { return b.count }

// Len returns the size of the batch's encoding in bytes.
func (b *Batch) Len() int {
	b.init()
	return len(b.data)
}

// Empty reports whether the batch holds no writes.
func (b *Batch) Empty() bool { return b.count == 0 }

// Reset empties the batch, keeping its memory.
func (b *Batch) Reset() {
	b.init()
	b.data = b.data[:batchHeaderLen]
	clear(b.data)
	b.count = 0
}

// setSeq records the sequence number of the batch's first write.
func (b *Batch) setSeq(seq base.SeqNum) {
	binary.LittleEndian.PutUint64(b.data, uint64(seq))
}
