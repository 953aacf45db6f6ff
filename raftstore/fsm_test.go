package raftstore

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/bloomkv/bloomkv"
	"github.com/hashicorp/raft"
)

// bufSink is a raft.SnapshotSink in memory.
type bufSink struct {
	bytes.Buffer
	closed, cancelled bool
}

func (s *bufSink) ID() string        { return "test" }
func (s *bufSink) Close() error      { s.closed = true; return nil }
func (s *bufSink) Cancel() error     { s.cancelled = true; return nil }
func (s *bufSink) Reader() io.Reader { return bytes.NewReader(s.Bytes()) }

func openTestFSM(t *testing.T, dir string) *FSM {
	t.Helper()
	f, err := OpenFSM(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func cmdLog(index uint64, b *Batch) *raft.Log {
	return &raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: b.Bytes()}
}

func setBatch(kv ...string) *Batch {
	var b Batch
	for i := 0; i+1 < len(kv); i += 2 {
		b.Set([]byte(kv[i]), []byte(kv[i+1]))
	}
	return &b
}

func wantValue(t *testing.T, f *FSM, key, want string) {
	t.Helper()
	v, err := f.Get([]byte(key))
	if want == "" {
		if !errors.Is(err, bloomkv.ErrNotFound) {
			t.Fatalf("Get(%q) = %q, %v; want not found", key, v, err)
		}
		return
	}
	if err != nil || string(v) != want {
		t.Fatalf("Get(%q) = %q, %v; want %q", key, v, err, want)
	}
}

func TestFSMApplyOnceAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	f := openTestFSM(t, dir)
	var b Batch
	b.Set([]byte("a"), []byte("1"))
	b.Set([]byte("b"), []byte("2"))
	b.Set([]byte("c"), []byte("3"))
	b.Set([]byte("d"), []byte("4"))
	var del Batch
	del.Delete([]byte("a"))
	del.DeleteRange([]byte("c"), []byte("d"))
	resp := f.ApplyBatch([]*raft.Log{
		cmdLog(1, &b),
		{Index: 2, Term: 1, Type: raft.LogConfiguration},
		cmdLog(3, &del),
	})
	for i, r := range resp {
		if r != nil {
			t.Fatalf("entry %d: %v", i, r)
		}
	}
	if f.Applied() != 3 {
		t.Fatalf("applied %d, want 3", f.Applied())
	}
	wantValue(t, f, "a", "")
	wantValue(t, f, "b", "2")
	wantValue(t, f, "c", "")
	wantValue(t, f, "d", "4")
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	f = openTestFSM(t, dir)
	defer f.Close()
	if f.Applied() != 3 {
		t.Fatalf("applied %d after restart, want 3", f.Applied())
	}
	// raft replays from its last snapshot: entries at or below the
	// applied index are skipped, the next one applies.
	if r := f.Apply(cmdLog(3, setBatch("b", "replayed"))); r != nil {
		t.Fatal(r)
	}
	wantValue(t, f, "b", "2")
	if r := f.Apply(cmdLog(4, setBatch("b", "new"))); r != nil {
		t.Fatal(r)
	}
	wantValue(t, f, "b", "new")
	// An open range deletion reaches every key above its start.
	var open Batch
	open.DeleteRange([]byte("a"), nil)
	if r := f.Apply(cmdLog(5, &open)); r != nil {
		t.Fatal(r)
	}
	wantValue(t, f, "b", "")
	wantValue(t, f, "d", "")
	if f.Applied() != 5 {
		t.Fatalf("applied %d, want 5", f.Applied())
	}
}

func TestFSMMalformedCommand(t *testing.T) {
	f := openTestFSM(t, t.TempDir())
	defer f.Close()
	good := setBatch("k", "v").Bytes()
	bad := map[string][]byte{
		"empty":          {},
		"version":        append([]byte{7}, good[1:]...),
		"unknown op":     {commandVersion, 99, 1, 'k'},
		"truncated":      good[:len(good)-1],
		"huge length":    {commandVersion, opSet, 0xff, 0xff, 0xff, 0xff, 0x0f},
		"inverted range": (&Batch{}).withRange("z", "a"),
		"partly good":    append(append([]byte(nil), setBatch("x", "1").Bytes()...), opDelete),
	}
	index := uint64(0)
	for name, cmd := range bad {
		index++
		r := f.Apply(&raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: cmd})
		err, ok := r.(error)
		if !ok || !errors.Is(err, ErrCorruption) {
			t.Errorf("%s: response %v, want an error wrapping ErrCorruption", name, r)
		}
		if f.Applied() != index {
			t.Errorf("%s: applied %d, want %d", name, f.Applied(), index)
		}
	}
	wantValue(t, f, "x", "")
	// Bad and good entries in one batch: the good ones apply.
	resp := f.ApplyBatch([]*raft.Log{
		cmdLog(index+1, setBatch("g1", "1")),
		{Index: index + 2, Term: 1, Type: raft.LogCommand, Data: []byte{1, 2, 3}},
		cmdLog(index+3, setBatch("g2", "2")),
	})
	if resp[0] != nil || resp[2] != nil {
		t.Fatalf("good entries: %v", resp)
	}
	if _, ok := resp[1].(error); !ok {
		t.Fatalf("bad entry's response %v", resp[1])
	}
	wantValue(t, f, "g1", "1")
	wantValue(t, f, "g2", "2")
	if _, err := DecodeBatch([]byte{1, 2, 3}); !errors.Is(err, ErrCorruption) {
		t.Fatalf("DecodeBatch: %v", err)
	}
}

func (b *Batch) withRange(start, end string) []byte {
	b.DeleteRange([]byte(start), []byte(end))
	return b.Bytes()
}

// fillFSM applies n keys in entries of 100 from index 1.
// filledValue is the value fillFSM gives key k.
func filledValue(k int) string {
	return fmt.Sprintf("value%06d-%s", k, bytes.Repeat([]byte{'v'}, 50))
}

func fillFSM(t *testing.T, f *FSM, n int) {
	t.Helper()
	var logs []*raft.Log
	for i := 0; i < n; i += 100 {
		var b Batch
		for j := i; j < min(i+100, n); j++ {
			b.Set([]byte(fmt.Sprintf("key%06d", j)), []byte(filledValue(j)))
		}
		logs = append(logs, cmdLog(uint64(len(logs)+1), &b))
	}
	for _, r := range f.ApplyBatch(logs) {
		if r != nil {
			t.Fatal(r)
		}
	}
}

func snapshotOf(t *testing.T, f *FSM) *bufSink {
	t.Helper()
	s, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release()
	var sink bufSink
	if err := s.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	if !sink.closed || sink.cancelled {
		t.Fatalf("sink closed %v, cancelled %v", sink.closed, sink.cancelled)
	}
	return &sink
}

func TestFSMSnapshotRestore(t *testing.T) {
	src := openTestFSM(t, t.TempDir())
	defer src.Close()
	fillFSM(t, src, 5000)
	if err := src.db.Flush(); err != nil { // a table and a log to ship
		t.Fatal(err)
	}
	if r := src.Apply(cmdLog(src.Applied()+1, setBatch("in-log", "yes"))); r != nil {
		t.Fatal(r)
	}
	sink := snapshotOf(t, src)
	// Writes after the snapshot are not in it.
	if r := src.Apply(cmdLog(src.Applied()+1, setBatch("late", "x"))); r != nil {
		t.Fatal(r)
	}
	fr, h, err := readStreamHeader(sink.Reader())
	if err != nil || h.version != streamFiles || h.applied != src.Applied()-1 {
		t.Fatalf("stream version %d at applied %d, %v; want version %d at %d", h.version, h.applied, err, streamFiles, src.Applied()-1)
	}
	files, err := fr.readFiles(t.TempDir())
	if err != nil || !slices.ContainsFunc(files, func(f snapFile) bool { return strings.HasSuffix(f.Name, ".sst") }) ||
		!slices.ContainsFunc(files, func(f snapFile) bool { return strings.HasSuffix(f.Name, ".log") }) {
		t.Fatalf("stream of files %v, %v; want tables and a log", files, err)
	}
	if got := int64(len(sink.Bytes())); got != streamSize(files) {
		t.Fatalf("stream of %d bytes, streamSize says %d", got, streamSize(files))
	}
	applied := h.applied

	dir := t.TempDir()
	dst := openTestFSM(t, dir)
	fillFSM(t, dst, 10) // replaced by the restore
	if r := dst.Apply(cmdLog(1000, setBatch("old-only", "x"))); r != nil {
		t.Fatal(r)
	}
	if err := dst.Restore(io.NopCloser(sink.Reader())); err != nil {
		t.Fatal(err)
	}
	if dst.Applied() != applied {
		t.Fatalf("applied %d after restore, want %d", dst.Applied(), applied)
	}
	wantValue(t, dst, "old-only", "")
	wantValue(t, dst, "late", "")
	wantValue(t, dst, "in-log", "yes")
	for _, k := range []int{0, 1234, 4999} {
		wantValue(t, dst, fmt.Sprintf("key%06d", k), filledValue(k))
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	// The restored state is the one a restart opens; the replaced one is gone.
	dst = openTestFSM(t, dir)
	defer dst.Close()
	if dst.Applied() != applied {
		t.Fatalf("applied %d after restart, want %d", dst.Applied(), applied)
	}
	wantValue(t, dst, "key004999", filledValue(4999))
	ents, _ := os.ReadDir(dir)
	if len(ents) != 2 {
		t.Fatalf("FSM directory holds %v, want STATE and one state directory", ents)
	}
}

func TestFSMRestoreBadStream(t *testing.T) {
	src := openTestFSM(t, t.TempDir())
	defer src.Close()
	fillFSM(t, src, 3000)
	stream := snapshotOf(t, src).Bytes()

	dir := t.TempDir()
	dst := openTestFSM(t, dir)
	defer dst.Close()
	if r := dst.Apply(cmdLog(7, setBatch("mine", "kept"))); r != nil {
		t.Fatal(r)
	}
	check := func(name string, data []byte, want error) {
		t.Helper()
		err := dst.Restore(io.NopCloser(bytes.NewReader(data)))
		if err == nil || !errors.Is(err, want) {
			t.Fatalf("%s: Restore = %v, want an error wrapping %v", name, err, want)
		}
		wantValue(t, dst, "mine", "kept")
		wantValue(t, dst, "key000001", "")
		if dst.Applied() != 7 {
			t.Fatalf("%s: applied %d, want 7", name, dst.Applied())
		}
		ents, _ := os.ReadDir(dir)
		if len(ents) != 2 {
			t.Fatalf("%s: FSM directory holds %v after the failed restore", name, ents)
		}
	}
	for _, cut := range []int{0, 5, len(snapshotMagic) + 3, len(stream) / 3, len(stream) - 1} {
		check(fmt.Sprintf("cut at %d", cut), stream[:cut], ErrSnapshotCut)
	}
	for _, at := range []int{3, len(snapshotMagic) + 6, len(stream) / 2, len(stream) - 3} {
		flipped := append([]byte(nil), stream...)
		flipped[at] ^= 0x10
		check(fmt.Sprintf("byte %d flipped", at), flipped, ErrCorruption)
	}
	check("trailing data", append(append([]byte(nil), stream...), 0), ErrCorruption)
	// The old state still takes writes, and a good stream still restores.
	if r := dst.Apply(cmdLog(8, setBatch("after", "ok"))); r != nil {
		t.Fatal(r)
	}
	wantValue(t, dst, "after", "ok")
	if err := dst.Restore(io.NopCloser(bytes.NewReader(stream))); err != nil {
		t.Fatal(err)
	}
	wantValue(t, dst, "key000001", filledValue(1))
	wantValue(t, dst, "mine", "")
}

func TestFSMEmptySnapshot(t *testing.T) {
	src := openTestFSM(t, t.TempDir())
	defer src.Close()
	sink := snapshotOf(t, src)
	dst := openTestFSM(t, filepath.Join(t.TempDir(), "fsm"))
	defer dst.Close()
	if r := dst.Apply(cmdLog(1, setBatch("k", "v"))); r != nil {
		t.Fatal(r)
	}
	if err := dst.Restore(io.NopCloser(sink.Reader())); err != nil {
		t.Fatal(err)
	}
	wantValue(t, dst, "k", "")
	if dst.Applied() != 0 {
		t.Fatalf("applied %d", dst.Applied())
	}
}
