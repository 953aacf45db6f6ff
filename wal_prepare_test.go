package bloomkv

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/bloomkv/bloomkv/internal/record"
	"github.com/bloomkv/bloomkv/vfs"
)

// walOffsets returns the offset of each record of WAL name, in order.
func walOffsets(t *testing.T, fs vfs.FS, name string) []int64 {
	t.Helper()
	return readWAL(t, readFile(t, fs, name), record.Options{Pebble: true}).offs
}

func fileSize(t *testing.T, fs vfs.FS, name string) int64 {
	t.Helper()
	return int64(len(readFile(t, fs, name)))
}

// TestWALWritesZerosAheadOnceSynced: a log that is never synced writes only
// its records; once synced it writes zeros ahead of them, which end it
// cleanly after a crash and after a clean close.
func TestWALWritesZerosAheadOnceSynced(t *testing.T) {
	fs := vfs.NewMem()
	o := memOpts(fs)
	o.MemTableSize = 4 << 20
	d := mustOpen(t, "/db", o)
	name := d.wal.name
	for i := range 50 {
		d.Set([]byte(fmt.Sprintf("a%03d", i)), []byte("v"), NoSync)
	}
	d.wal.Flush()
	if size, want := fileSize(t, fs, name), d.walW.Size(); size != want {
		t.Fatalf("a log never synced is %d bytes, its records %d", size, want)
	}
	for i := range 50 {
		d.Set([]byte(fmt.Sprintf("s%03d", i)), []byte("v"), Sync)
	}
	if size, recs := fileSize(t, fs, name), d.walW.Size(); size < recs+logPrepareSlack {
		t.Fatalf("a synced log is %d bytes, its records %d: no zeros written ahead", size, recs)
	}
	var logs bytes.Buffer
	quiet := func() *Options {
		o := memOpts(fs.CrashClone())
		logs.Reset()
		o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		return o
	}
	crashed := mustOpen(t, "/db", quiet())
	for i := range 50 {
		expect(t, crashed, fmt.Sprintf("s%03d", i), "v")
	}
	crashed.Close()
	if strings.Contains(logs.String(), "torn") {
		t.Fatalf("zeros written ahead read as a torn tail: %s", logs.String())
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	reopened := mustOpen(t, "/db", quiet())
	defer reopened.Close()
	expect(t, reopened, "a049", "v")
	expect(t, reopened, "s049", "v")
	if strings.Contains(logs.String(), "torn") {
		t.Fatalf("a cleanly closed log with zeros ahead read as torn: %s", logs.String())
	}
}

// TestWALPreparedCrashKeepsPrefixes: a crash that keeps any prefix of the
// unsynced writes into prepared zeros loses no synced write and leaves the
// unsynced ones as a prefix.
func TestWALPreparedCrashKeepsPrefixes(t *testing.T) {
	fs := vfs.NewMem()
	d := mustOpen(t, "/db", memOpts(fs))
	defer d.Close()
	rng := rand.New(rand.NewPCG(1, 7))
	synced := 0
	for i := range 600 {
		sync := NoSync
		if rng.IntN(4) == 0 {
			sync = Sync
		}
		if err := d.Set([]byte(fmt.Sprintf("k%04d", i)), bytes.Repeat([]byte{byte(i)}, 60), sync); err != nil {
			t.Fatal(err)
		}
		if sync == Sync {
			synced = i + 1
		}
		if i%50 != 49 {
			continue
		}
		d.wal.Flush()
		for range 3 {
			img := fs.CrashCloneKeeping(func(_ string, unsynced int) int { return rng.IntN(unsynced + 1) })
			c := mustOpen(t, "/db", memOpts(img))
			present := 0
			for present <= i {
				if _, err := c.Get([]byte(fmt.Sprintf("k%04d", present))); err != nil {
					break
				}
				present++
			}
			if present < synced {
				t.Fatalf("after write %d: k%04d, synced, is lost", i, present)
			}
			for j := present + 1; j <= i; j++ {
				if _, err := c.Get([]byte(fmt.Sprintf("k%04d", j))); err == nil {
					t.Fatalf("after write %d: k%04d survived without k%04d", i, j, present)
				}
			}
			c.Close()
		}
	}
}

// unsyncedTail returns a crash image of a store whose WAL holds 10 synced
// writes and then 10 unsynced ones, all on disk, with the WAL's name and
// its records' offsets.
func unsyncedTail(t *testing.T) (*vfs.MemFS, string, []int64) {
	fs := vfs.NewMem()
	d := mustOpen(t, "/db", memOpts(fs))
	for i := range 20 {
		sync := Sync
		if i >= 10 {
			sync = NoSync
		}
		d.Set([]byte(fmt.Sprintf("k%02d", i)), bytes.Repeat([]byte("v"), 100), sync)
	}
	d.wal.Flush()
	name := d.wal.name
	img := fs.CrashCloneKeeping(func(_ string, unsynced int) int { return unsynced })
	d.Close()
	offs := walOffsets(t, img, name)
	if len(offs) != 20 {
		t.Fatalf("%d records in the WAL, want 20", len(offs))
	}
	return img, name, offs
}

// zeroRecord rewrites WAL name with its i-th record's bytes zeroed, as if
// that write never reached the disk.
func zeroRecord(t *testing.T, fs *vfs.MemFS, name string, offs []int64, i int) {
	data := readFile(t, fs, name)
	clear(data[offs[i]:offs[i+1]])
	rewrite(t, fs, name, data)
}

// TestWALHoleAfterTheLastSync: in prepared space a crash may keep a later
// unsynced write and lose an earlier one. The log ends at the hole, torn;
// every synced write is there.
func TestWALHoleAfterTheLastSync(t *testing.T) {
	img, name, offs := unsyncedTail(t)
	zeroRecord(t, img, name, offs, 14)
	var logs bytes.Buffer
	o := memOpts(img)
	o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	d := mustOpen(t, "/db", o)
	defer d.Close()
	for i := range 14 {
		expect(t, d, fmt.Sprintf("k%02d", i), strings.Repeat("v", 100))
	}
	for i := 14; i < 20; i++ {
		expect(t, d, fmt.Sprintf("k%02d", i), "")
	}
	if !strings.Contains(logs.String(), "torn") {
		t.Fatalf("no log line tells of the dropped tail: %q", logs.String())
	}
}

// TestWALHoleBeforeASync: a synced write gone to zeros, with a later chunk
// saying the log was synced past it, is corruption, not a crash's tail.
func TestWALHoleBeforeASync(t *testing.T) {
	img, name, offs := unsyncedTail(t)
	zeroRecord(t, img, name, offs, 4)
	_, err := Open("/db", memOpts(img))
	if !errors.Is(err, ErrCorruption) || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "synced") {
		t.Fatalf("a synced record zeroed: %v, want ErrCorruption naming %s", err, name)
	}
}

// TestCleanlyClosedWALZeroedIsRefused: zeros where a cleanly closed log had
// records are lost writes, though zeros are how a prepared log ends.
func TestCleanlyClosedWALZeroedIsRefused(t *testing.T) {
	fs := vfs.NewMem()
	d := mustOpen(t, "/db", memOpts(fs))
	for i := range 10 {
		d.Set([]byte(fmt.Sprintf("k%d", i)), []byte("v"), Sync)
	}
	name := d.wal.name
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	offs := walOffsets(t, fs, name)
	img := fs.CrashClone()
	data := readFile(t, img, name)
	clear(data[offs[9]:]) // the last record, which no later chunk vouches for
	rewrite(t, img, name, data)
	_, err := Open("/db", memOpts(img))
	if !errors.Is(err, ErrCorruption) || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "closed cleanly") {
		t.Fatalf("a cleanly closed log's last record zeroed: %v, want ErrCorruption naming %s", err, name)
	}
}

// TestOlderFormatWALs: a store below FormatWALSyncOffsets writes its logs
// as before (LevelDB's chunks, no zeros ahead); raised, its next log is
// written in WAL-sync chunks, and both read back.
func TestOlderFormatWALs(t *testing.T) {
	fs := vfs.NewMem()
	o := memOpts(fs)
	o.FormatVersion = FormatIngest
	d := mustOpen(t, "/db", o)
	for i := range 20 {
		d.Set([]byte(fmt.Sprintf("old%02d", i)), []byte("v"), Sync)
	}
	old := d.wal.name
	if size, recs := fileSize(t, fs, old), d.walW.Size(); size != recs {
		t.Fatalf("a FormatIngest log is %d bytes, its records %d", size, recs)
	}
	if l := readWAL(t, readFile(t, fs, old), record.Options{}); len(l.recs) != 20 {
		t.Fatalf("the FormatIngest log as LevelDB's format: %d records", len(l.recs))
	}
	if err := d.RatchetFormatVersion(FormatWALSyncOffsets); err != nil {
		t.Fatal(err)
	}
	if err := d.Flush(); err != nil { // a new log, at the raised version
		t.Fatal(err)
	}
	if d.wal.name == old {
		t.Fatal("Flush started no new log")
	}
	for i := range 20 {
		d.Set([]byte(fmt.Sprintf("new%02d", i)), []byte("v"), Sync)
	}
	if size, recs := fileSize(t, fs, d.wal.name), d.walW.Size(); size <= recs {
		t.Fatalf("the raised store's log is %d bytes, its records %d: no zeros ahead", size, recs)
	}
	c := mustOpen(t, "/db", memOpts(fs.CrashClone()))
	defer c.Close()
	expect(t, c, "old19", "v")
	expect(t, c, "new19", "v")
	d.Close()
}

// TestWALRecordAcrossThePreparedEnd: a record longer than the zeros left
// ahead writes past their end.
func TestWALRecordAcrossThePreparedEnd(t *testing.T) {
	fs := vfs.NewMem()
	o := memOpts(fs)
	o.MemTableSize = 16 << 20
	d := mustOpen(t, "/db", o)
	defer d.Close()
	big := bytes.Repeat([]byte("x"), 3*logPrepareBytes/2)
	for i := range 3 {
		if err := d.Set([]byte(fmt.Sprintf("big%d", i)), big, Sync); err != nil {
			t.Fatal(err)
		}
	}
	c := mustOpen(t, "/db", memOpts(fs.CrashClone()))
	defer c.Close()
	for i := range 3 {
		if v, err := c.Get([]byte(fmt.Sprintf("big%d", i))); err != nil || !bytes.Equal(v, big) {
			t.Fatalf("big%d after a crash: %d bytes, %v", i, len(v), err)
		}
	}
}

// TestReplacedWALWithoutItsMark: a WAL-sync log followed by a log holding
// records must end with the mark a replaced log gets; ending in zeros
// instead, its end may hide lost writes.
func TestReplacedWALWithoutItsMark(t *testing.T) {
	fs := vfs.NewMem()
	d := mustOpen(t, "/db", memOpts(fs))
	for i := range 10 {
		d.Set([]byte(fmt.Sprintf("k%d", i)), []byte("v"), Sync)
	}
	name, num := d.wal.name, d.mu.mem.logNum
	img := fs.CrashClone()
	d.Close()
	recs := readWAL(t, readFile(t, img, name), record.Options{Pebble: true}).recs
	// logData writes recs as WAL-sync log n, with the mark if marked,
	// followed by zeros.
	logData := func(n uint64, recs [][]byte, marked bool) []byte {
		var buf bytes.Buffer
		w := record.NewWriterOptions(&buf, 0, record.WriterOptions{SyncOffsets: true, LogNum: n})
		for _, rec := range recs {
			w.Write(rec)
		}
		if marked {
			w.WriteEOFTrailer()
		}
		w.Flush()
		return append(buf.Bytes(), make([]byte, 64<<10)...)
	}
	for _, marked := range []bool{true, false} {
		c := img.CrashClone()
		rewrite(t, c, name, logData(num, recs[:5], marked))
		rewrite(t, c, d.path(logName(num+1)), logData(num+1, recs[5:], false))
		got, err := Open("/db", memOpts(c))
		if !marked {
			if !errors.Is(err, ErrCorruption) || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "mark") {
				t.Fatalf("an unmarked log before one with records: %v, want ErrCorruption naming %s", err, name)
			}
			continue
		}
		if err != nil {
			t.Fatalf("a marked log before one with records: %v", err)
		}
		for i := range 10 {
			expect(t, got, fmt.Sprintf("k%d", i), "v")
		}
		got.Close()
	}
}

// TestRotatedWALsEndMarked: a log the store replaced ends with its mark.
func TestRotatedWALsEndMarked(t *testing.T) {
	fs := vfs.NewMem()
	o := memOpts(fs)
	hold := make(chan struct{}) // the flush, which would remove the old log, waits
	o.EventListener.FlushBegin = func(FlushInfo) { <-hold }
	d := mustOpen(t, "/db", o)
	defer d.Close()
	defer close(hold)
	for i := range 5 {
		d.Set([]byte(fmt.Sprintf("k%d", i)), []byte("v"), Sync)
	}
	old := d.wal.name
	d.mu.Lock()
	err := d.rotateLocked()
	d.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	d.Set([]byte("after"), []byte("v"), Sync) // the new log syncs and closes the old first
	l := readWAL(t, readFile(t, fs, old), record.Options{Pebble: true})
	if len(l.recs) != 5 || !l.r.EOFTrailer() {
		t.Fatalf("the replaced log: %d records, mark %v", len(l.recs), l.r.EOFTrailer())
	}
}
