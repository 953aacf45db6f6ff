package bloomkv

// The arena chunks prepared ahead of the memtables' writes (chunkFeed).

import (
	"os"

	"github.com/bloomkv/bloomkv/memtable"
)

// chunkFeed prepares the memtables' arena chunks ahead of the writes that
// fill them: it allocates each and touches every page of it, so that the
// page faults of fresh memory fall on its goroutine rather than on writes.
// Without it, a write that first touches a page of its memtable's arena
// takes that page's fault, and those faults make the tail of write latency.
type chunkFeed struct {
	ready chan []byte
	stop  chan struct{}
	done  chan struct{}
}

// newChunkFeed starts a feed for memtables of memTableSize bytes, or
// returns nil for memtables too small to take chunks from it
// (memtable.NewSizedFrom). It keeps chunks for half a memtable ready (up
// to 16, and one more in hand while they wait: at most 4.25 MiB, 2.25 MiB
// for the default 4 MiB memtable): preparing one is quick, but its
// goroutine shares a core with flushes and compactions, so a shallow queue
// runs dry under a random load and leaves the faults to the writes.
func newChunkFeed(memTableSize int64) *chunkFeed {
	depth := min(memTableSize/memtable.ChunkSize/2, 16)
	if depth < 2 {
		return nil
	}
	f := &chunkFeed{ready: make(chan []byte, depth), stop: make(chan struct{}), done: make(chan struct{})}
	go f.loop()
	return f
}

func (f *chunkFeed) loop() {
	defer close(f.done)
	page := os.Getpagesize()
	for {
		b := make([]byte, memtable.ChunkSize)
		for i := 0; i < len(b); i += page {
			b[i] = 0 // a write: a read would map the shared zero page
		}
		select {
		case f.ready <- b:
		case <-f.stop:
			return
		}
	}
}

// take returns a prepared chunk, or nil when none is ready (or f is nil):
// the memtable then allocates its own.
func (f *chunkFeed) take() []byte {
	if f == nil {
		return nil
	}
	select {
	case b := <-f.ready:
		return b
	default:
		return nil
	}
}

// reserve returns the bytes of the chunks ready (0 for a nil feed).
func (f *chunkFeed) reserve() int64 {
	if f == nil {
		return 0
	}
	return int64(len(f.ready)) * memtable.ChunkSize
}

// close stops the feed's goroutine; take goes on returning what is ready.
func (f *chunkFeed) close() {
	if f != nil {
		close(f.stop)
		<-f.done
	}
}
