package bloomkv

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/batchrepr"
	"github.com/bloomkv/bloomkv/vfs"
)

func TestBatchEncoding(t *testing.T) {
	b := newBatch()
	b.Set([]byte("k1"), []byte("v1"))
	b.Delete([]byte("k2"))
	b.Set(nil, nil)
	b.setSeq(100)
	t.Run("entries decode in order with consecutive sequence numbers", func(t *testing.T) {
		var got []string
		seq, count, err := batchrepr.Decode(b.data, func(seq base.SeqNum, e batchrepr.Entry) {
			got = append(got, base.MakeInternalKey(e.Key, seq, e.Kind).String()+"="+string(e.Value))
		})
		want := []string{`"k1"#100,SET=v1`, `"k2"#101,DEL=`, `""#102,SET=`}
		if err != nil || seq != 100 || count != 3 || len(got) != 3 {
			t.Fatalf("decode: %v %d %d %v", err, seq, count, got)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("entry %d: %s, want %s", i, got[i], want[i])
			}
		}
	})
	t.Run("every truncation is corruption", func(t *testing.T) {
		for i := 0; i < len(b.data); i++ {
			if _, _, err := batchrepr.Decode(b.data[:i], nil); !errors.Is(err, base.ErrCorruption) {
				t.Fatalf("prefix %d: %v", i, err)
			}
		}
	})
	t.Run("a trailing byte is corruption", func(t *testing.T) {
		if _, _, err := batchrepr.Decode(append(bytes.Clone(b.data), 0), nil); !errors.Is(err, base.ErrCorruption) {
			t.Fatalf("trailing byte: %v", err)
		}
	})
	t.Run("an unknown kind is corruption", func(t *testing.T) {
		bad := bytes.Clone(b.data)
		bad[batchHeaderLen] = 9 // unknown kind
		if _, _, err := batchrepr.Decode(bad, nil); !errors.Is(err, base.ErrCorruption) {
			t.Fatalf("unknown kind: %v", err)
		}
	})
}

// TestBatchCountLenAndReset: a batch counts its writes and its bytes past
// the header; Reset empties it after it was applied.
func TestBatchCountLenAndReset(t *testing.T) {
	d := mustOpen(t, "/db", memOpts(vfs.NewMem()))
	defer d.Close()
	b := d.NewBatch()
	b.Set([]byte("d"), []byte("4"))
	b.Set([]byte("a"), []byte("1'"))
	b.Delete([]byte("c"))
	if b.Count() != 3 || b.Len() <= batchHeaderLen {
		t.Fatalf("batch count %d len %d", b.Count(), b.Len())
	}
	if err := d.Apply(b, Sync); err != nil {
		t.Fatal(err)
	}
	b.Reset()
	if b.Count() != 0 || b.Len() != batchHeaderLen {
		t.Fatal("Reset left writes")
	}
}

// TestZeroBatchIsUsable: a Batch needs no constructor.
func TestZeroBatchIsUsable(t *testing.T) {
	var zero Batch
	if err := zero.Set([]byte("a"), nil); err != nil || zero.Count() != 1 {
		t.Fatalf("zero batch: %v", err)
	}
}

// waitBatchBuf collects garbage until d's pool of NewBatch's memory holds
// a buffer of at least size bytes, and returns it: cleanups run after a
// collection, on a goroutine of their own. It drops smaller buffers, those
// of other batches. The caller runs with one P (oneP) from before the
// batch is dropped: a sync.Pool keeps what a goroutine puts in a slot of
// that goroutine's P, which a goroutine on another P never gets.
func waitBatchBuf(t *testing.T, d *DB, size int) *batchBuf {
	t.Helper()
	for range 1000 {
		runtime.GC()
		for {
			bb, ok := d.batchBufs.Get().(*batchBuf)
			if !ok {
				break
			}
			if cap(bb.data) >= size {
				return bb
			}
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("the memory of an unreachable batch never came back for reuse")
	return nil
}

// oneP runs the rest of the test with GOMAXPROCS 1.
func oneP(t *testing.T) {
	prev := runtime.GOMAXPROCS(1)
	t.Cleanup(func() { runtime.GOMAXPROCS(prev) })
}

// TestNewBatchReusesMemory: the memory of a batch from NewBatch that is no
// longer referenced goes to a later NewBatch, which starts empty and whose
// writes are applied as written.
func TestNewBatchReusesMemory(t *testing.T) {
	if raceBuild {
		t.Skip("under the race detector sync.Pool drops what it is given at random")
	}
	oneP(t)
	d := mustOpen(t, "/db", memOpts(vfs.NewMem()))
	defer d.Close()
	func() {
		b := d.NewBatch()
		for i := range 100 {
			b.Set(fmt.Appendf(nil, "old%03d", i), bytes.Repeat([]byte{'o'}, 100))
		}
		if err := d.Apply(b, NoSync); err != nil {
			t.Fatal(err)
		}
	}()
	bb := waitBatchBuf(t, d, 100*100)
	bb.data = append(bb.data[:0], bytes.Repeat([]byte{0xff}, cap(bb.data))...) // what a reuse must not show
	d.batchBufs.Put(bb)
	b := d.NewBatch()
	if b.buf != bb {
		t.Skip("the pool handed out other memory") // sync.Pool may drop what it holds
	}
	if b.Count() != 0 || b.Len() != batchHeaderLen || !bytes.Equal(b.data, make([]byte, batchHeaderLen)) {
		t.Fatalf("reused batch not empty: count %d, %x", b.Count(), b.data)
	}
	b.Set([]byte("new"), []byte("v"))
	if err := d.Apply(b, NoSync); err != nil {
		t.Fatal(err)
	}
	if v, err := d.Get([]byte("new")); err != nil || string(v) != "v" {
		t.Fatalf("Get(new) = %q, %v", v, err)
	}
	if v, err := d.Get([]byte("old099")); err != nil || !bytes.Equal(v, bytes.Repeat([]byte{'o'}, 100)) {
		t.Fatalf("Get(old099) = %q, %v", v, err)
	}
}

// TestNewBatchKeptIsNotReused: a batch from NewBatch that is still
// referenced keeps its memory, through collections and other batches'
// reuse, and may be applied again after more writes: its encoding is
// unchanged by the other batches, and applying it again writes its own
// entries only.
func TestNewBatchKeptIsNotReused(t *testing.T) {
	d := mustOpen(t, "/db", memOpts(vfs.NewMem()))
	defer d.Close()
	kept := d.NewBatch()
	for i := range 50 {
		kept.Set(fmt.Appendf(nil, "kept%03d", i), []byte("k"))
	}
	if err := d.Apply(kept, NoSync); err != nil {
		t.Fatal(err)
	}
	before := bytes.Clone(kept.data)
	const rounds = 20
	for round := range rounds {
		if round%2 == 1 {
			// The other rounds run no collection first: memory handed
			// back at once would come to them.
			runtime.GC()
		}
		b := d.NewBatch()
		for i := range 50 {
			b.Set(fmt.Appendf(nil, "other%03d", i), fmt.Appendf(nil, "round%d", round))
		}
		if err := d.Apply(b, NoSync); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(kept.data, before) {
		t.Fatal("another batch wrote over the memory of a batch still referenced")
	}
	kept.Set([]byte("kept050"), []byte("k"))
	if err := d.Apply(kept, NoSync); err != nil {
		t.Fatal(err)
	}
	for i := range 51 {
		if v, err := d.Get(fmt.Appendf(nil, "kept%03d", i)); err != nil || string(v) != "k" {
			t.Fatalf("Get(kept%03d) = %q, %v", i, v, err)
		}
	}
	for i := range 50 {
		want := fmt.Sprintf("round%d", rounds-1)
		if v, err := d.Get(fmt.Appendf(nil, "other%03d", i)); err != nil || string(v) != want {
			t.Fatalf("Get(other%03d) = %q, %v; want %q", i, v, err, want)
		}
	}
}

// TestKeptBatchLetsTheDBGo: a batch from NewBatch kept after its DB is
// closed does not keep the DB reachable (its cleanup refers to the DB's
// pool, not to the DB).
func TestKeptBatchLetsTheDBGo(t *testing.T) {
	d := mustOpen(t, "/db", memOpts(vfs.NewMem()))
	kept := d.NewBatch()
	kept.Set([]byte("k"), []byte("v"))
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	var collected atomic.Bool
	runtime.AddCleanup(d, func(b *atomic.Bool) { b.Store(true) }, &collected)
	d = nil
	for range 1000 {
		runtime.GC()
		if collected.Load() {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if !collected.Load() {
		t.Fatal("a closed DB stayed reachable while a batch of it was kept")
	}
	runtime.KeepAlive(kept)
}

// TestNewBatchReuseConcurrent: writers that build, apply and drop batches
// while collections hand their memory around lose or mix up no write.
func TestNewBatchReuseConcurrent(t *testing.T) {
	d := mustOpen(t, "/db", memOpts(vfs.NewMem()))
	defer d.Close()
	const writers, batches, size = 4, 50, 20
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			for n := range batches {
				b := d.NewBatch()
				for i := range size {
					b.Set(fmt.Appendf(nil, "w%d-%03d-%02d", w, n, i), fmt.Appendf(nil, "v%d-%03d-%02d", w, n, i))
				}
				if err := d.Apply(b, NoSync); err != nil {
					errs <- err
					return
				}
				if n%10 == 0 {
					runtime.GC()
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for w := range writers {
		for n := range batches {
			for i := range size {
				k := fmt.Sprintf("w%d-%03d-%02d", w, n, i)
				if v, err := d.Get([]byte(k)); err != nil || string(v) != "v"+k[1:] {
					t.Fatalf("Get(%s) = %q, %v", k, v, err)
				}
			}
		}
	}
}
