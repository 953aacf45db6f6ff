package bloomkv

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/bloomkv/bloomkv/vfs"
)

// TestWritesStallOnLevel0: with compaction held back, writes stop once L0
// reaches L0StopWritesThreshold tables, tell the EventListener, and resume
// after compaction.
func TestWritesStallOnLevel0(t *testing.T) {
	var mu sync.Mutex
	var reasons []string
	o := memOpts(vfs.NewMem())
	o.L0CompactionThreshold, o.L0StopWritesThreshold = 2, 3
	o.EventListener.WriteStallBegin = func(r string) { mu.Lock(); reasons = append(reasons, r); mu.Unlock() }
	d := mustOpen(t, "/db", o)
	closeAtCleanup(t, d)
	release := holdCompactions(t, d)
	done := fillInBackground(d, 6000)
	// With compaction held back, L0 fills to the stop threshold and the
	// writer, which needs about eleven more memtables, can only wait. (A
	// stall may begin for a flush backlog and go on for L0: the listener
	// hears of it once, when it begins.)
	stalledOnL0 := func() bool {
		mu.Lock()
		stalled := len(reasons) > 0
		mu.Unlock()
		return stalled && d.Metrics().Levels[0].Files >= 3
	}
	for !stalledOnL0() {
		select {
		case err := <-done:
			t.Fatalf("writer finished with compaction held back: %v (L0 %d tables)", err, d.Metrics().Levels[0].Files)
		default:
			runtime.Gosched()
		}
	}
	release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	expect(t, d, "k05999", string(make([]byte, 100)))
	// The writer's keys ascend: its tables overlap nothing and move down.
	if m := d.Metrics(); m.Compactions+m.Moves == 0 {
		t.Fatal("the stall ended without a compaction")
	}
}

func TestWritesStallWhileFlushesBackUp(t *testing.T) {
	fs := newSlowFS(t)
	var mu sync.Mutex
	var began, ended int
	o := memOpts(fs)
	o.MaxImmutableMemTables = 1
	o.EventListener.WriteStallBegin = func(string) { mu.Lock(); began++; mu.Unlock() }
	o.EventListener.WriteStallEnd = func() { mu.Lock(); ended++; mu.Unlock() }
	d := mustOpen(t, "/db", o)
	closeAtCleanup(t, d)
	done := make(chan error)
	go func() {
		for i := range 3000 { // ~3 memtables of 64 KiB
			if err := d.Set([]byte(fmt.Sprintf("k%05d", i)), make([]byte, 100), NoSync); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	// The writer fills a memtable, freezes it (the flush blocks on the
	// gate), fills another, and must then stall.
	stalled := false
	for range 200 {
		mu.Lock()
		stalled = began > 0
		mu.Unlock()
		if stalled {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !stalled {
		t.Fatal("writes did not stall with a flush held")
	}
	select {
	case err := <-done:
		t.Fatalf("writer finished during the stall: %v", err)
	default:
	}
	fs.open() // let flushes through
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if ended != began || d.Metrics().WriteStalls == 0 {
		t.Fatalf("stall events: %d began, %d ended; metrics %d", began, ended, d.Metrics().WriteStalls)
	}
}
