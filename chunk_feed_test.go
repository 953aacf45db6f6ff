package bloomkv

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/bloomkv/bloomkv/memtable"
	"github.com/bloomkv/bloomkv/vfs"
)

// TestChunkFeed: a feed hands out zeroed chunks of the memtable's size
// (the memory a memtable may take without clearing it), stops with close
// or with the store's Close, and none is started for memtables too small
// to use it or for a read-only store.
func TestChunkFeed(t *testing.T) {
	if f := newChunkFeed(memtable.ChunkSize); f != nil {
		t.Fatal("a feed for memtables of one chunk")
	}
	f := newChunkFeed(4 << 20)
	if cap(f.ready) != 8 {
		t.Fatalf("ready for %d chunks, want 8 (half a memtable)", cap(f.ready))
	}
	deadline := time.Now().Add(time.Minute)
	for got := 0; got < 20; {
		b := f.take()
		if b == nil {
			if time.Now().After(deadline) {
				t.Fatalf("the feed gave %d chunks in a minute", got)
			}
			time.Sleep(time.Millisecond)
			continue
		}
		if len(b) != memtable.ChunkSize {
			t.Fatalf("a chunk of %d bytes", len(b))
		}
		for i, c := range b {
			if c != 0 {
				t.Fatalf("byte %d of a chunk is %d", i, c)
			}
		}
		b[0], b[len(b)-1] = 1, 1 // the taker's to write
		got++
	}
	f.close()
	for f.take() != nil { // what was ready stays so, and nothing blocks
	}
	var none *chunkFeed
	if none.take() != nil {
		t.Fatal("a nil feed gave a chunk")
	}
	none.close()

	mem := vfs.NewMem()
	o := memOpts(mem)
	o.MemTableSize = 4 << 20
	d := mustOpen(t, "/db", o)
	if d.chunks == nil {
		t.Fatal("no feed for 4 MiB memtables")
	}
	for d.Metrics().MemTableReserve < 8*memtable.ChunkSize {
		if time.Now().After(deadline) {
			t.Fatalf("Metrics says %d bytes ready after a minute, want 8 chunks", d.Metrics().MemTableReserve)
		}
		time.Sleep(time.Millisecond)
	}
	if r := d.Metrics().MemTableReserve; r != 8*memtable.ChunkSize {
		t.Fatalf("Metrics says %d bytes ready, want 8 chunks' (2 MiB)", r)
	}
	// 6 MiB of writes: memtables built of the feed's chunks, one flushed.
	value := func(i int) []byte { return bytes.Repeat([]byte{byte(i), byte(i >> 8)}, 50+i%30) }
	const n = 40000
	for i := range n {
		if err := d.Set(fmt.Appendf(nil, "key%06d", i), value(i), NoSync); err != nil {
			t.Fatal(err)
		}
	}
	check := func(when string) {
		t.Helper()
		for i := range n {
			if v, err := d.Get(fmt.Appendf(nil, "key%06d", i)); err != nil || !bytes.Equal(v, value(i)) {
				t.Fatalf("%s: key %d: %q, %v", when, i, v, err)
			}
		}
	}
	check("in the memtables")
	if err := d.Flush(); err != nil {
		t.Fatal(err)
	}
	check("flushed")
	feed := d.chunks
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-feed.done:
	default:
		t.Fatal("Close left the feed running")
	}
	o.ReadOnly = true
	d = mustOpen(t, "/db", o)
	defer d.Close()
	if d.chunks != nil || d.Metrics().MemTableReserve != 0 {
		t.Fatal("a read-only store started a feed")
	}
}
