package pebblestore

// Blob values resolved against stores Pebble wrote with value separation
// (format major version 024). Until the sstable reader reads Pebble's
// columnar tables, the inline handles come from Pebble's own table reader.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/sstable/blob"
	"github.com/cockroachdb/pebble/v2/sstable/block"

	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/blobfile"
	"github.com/bloomkv/bloomkv/internal/manifest"
	"github.com/bloomkv/bloomkv/internal/pebbletest"
)

// blobValue is the value of key i written in round r: long enough to be
// separated unless i%10 == 0, compressible unless i%7 == 0.
func blobValue(i, r int) []byte {
	if i%10 == 0 {
		return fmt.Appendf(nil, "small %d %d", i, r)
	}
	v := bytes.Repeat(fmt.Appendf(nil, "key %d round %d; ", i, r), 4+i%30)
	if i%7 == 0 {
		for j := range v {
			v[j] ^= byte(j * 131 >> 3)
		}
	}
	return v
}

// writeBlobStore writes a store with Pebble at FormatValueSeparation, values
// over 64 bytes separated, in two flushes that overwrite part of the keys,
// then compacts them to the last level, so that a table references values
// in two blob files without rewriting them. It returns each key's value by
// Pebble's Get, and every value written.
func writeBlobStore(t *testing.T, dir string, c *block.CompressionProfile, depth int) (map[string][]byte, map[string]bool) {
	t.Helper()
	opts := &pebble.Options{FormatMajorVersion: pebble.FormatValueSeparation, DisableAutomaticCompactions: true, Logger: quiet{}}
	opts.Experimental.EnableColumnarBlocks = func() bool { return true }
	opts.Experimental.ValueSeparationPolicy = func() pebble.ValueSeparationPolicy {
		return pebble.ValueSeparationPolicy{Enabled: true, MinimumSize: 64, MaxBlobReferenceDepth: depth, TargetGarbageRatio: 1}
	}
	for l := range opts.Levels {
		opts.Levels[l].Compression = func() *block.CompressionProfile { return c }
		opts.Levels[l].BlockSize = 2048
	}
	d, err := pebble.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	written := map[string]bool{}
	key := func(i int) []byte { return fmt.Appendf(nil, "bk%05d", i) }
	for r := range 2 {
		b := d.NewBatch()
		for i := r; i < 600; i += 1 + r {
			v := blobValue(i, r)
			written[string(key(i))+"="+string(v)] = true
			if err := b.Set(key(i), v, nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Commit(pebble.Sync); err != nil {
			t.Fatal(err)
		}
		if err := d.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Compact(context.Background(), key(0), key(300), false); err != nil {
		t.Fatal(err)
	}
	want := map[string][]byte{}
	for i := range 600 {
		v, closer, err := d.Get(key(i))
		if err != nil {
			t.Fatal(err)
		}
		want[string(key(i))] = bytes.Clone(v)
		closer.Close()
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	return want, written
}

type quiet struct{}

func (quiet) Infof(string, ...any)  {}
func (quiet) Errorf(string, ...any) {}
func (quiet) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
}

// debugHandle is how Pebble's debug blob context prints an inline handle.
var debugHandle = regexp.MustCompile(`^blob-value:\(f(\d+),blk(\d+),id(\d+),len(\d+)\)$`)

// pebbleHandles reads a table with Pebble's reader and returns, for each
// key that the table holds in a blob file, its sequence number and the
// inline handle as the table stores it (a prefix byte, then Pebble's
// encoding of the handle).
func pebbleHandles(t *testing.T, path string) map[string][]any {
	t.Helper()
	r := pebbletest.OpenTable(t, path)
	it, err := r.NewIter(sstable.NoTransforms, nil, nil, sstable.DebugHandlesBlobContext)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	out := map[string][]any{}
	for kv := it.First(); kv != nil; kv = it.Next() {
		m := debugHandle.FindSubmatch(kv.V.InPlaceValue())
		if m == nil {
			continue
		}
		var n [4]uint32
		for i := range n {
			x, _ := strconv.ParseUint(string(m[i+1]), 10, 32)
			n[i] = uint32(x)
		}
		ih := blob.InlineHandle{InlineHandlePreface: blob.InlineHandlePreface{ReferenceID: blob.ReferenceID(n[0]), ValueLen: n[3]},
			HandleSuffix: blob.HandleSuffix{BlockID: blob.BlockID(n[1]), ValueID: blob.BlockValueID(n[2])}}
		enc := make([]byte, 1+blob.MaxInlineHandleLength)
		enc[0] = 0x40 // a blob value
		enc = enc[:1+ih.Encode(enc[1:])]
		out[string(kv.K.UserKey)] = append(out[string(kv.K.UserKey)], uint64(kv.K.SeqNum()), enc)
	}
	return out
}

// TestBlobValues resolves every inline handle of every table of stores
// Pebble wrote with value separation, in each compression: each value is
// one that was written for its key, and the newest of each key is what
// Pebble's Get returns. With a blob reference depth of 1 the compaction
// moves the values to a new blob file and the manifest deletes the others.
func TestBlobValues(t *testing.T) {
	for _, tc := range []struct {
		c            *block.CompressionProfile
		depth, blobs int // the depth, and the blob files the version holds
	}{
		{block.NoCompression, 10, 2}, {block.SnappyCompression, 10, 2}, {block.ZstdCompression, 10, 2}, {block.MinLZCompression, 10, 2},
		{block.SnappyCompression, 1, 1},
	} {
		t.Run(fmt.Sprintf("%s/depth%d", tc.c.Name, tc.depth), func(t *testing.T) {
			dir := t.TempDir()
			want, written := writeBlobStore(t, dir, tc.c, tc.depth)
			s, err := Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			blobs, _ := filepath.Glob(filepath.Join(dir, "*.blob"))
			if len(s.BlobFiles) != tc.blobs || len(blobs) != len(s.BlobFiles) {
				t.Fatalf("%d blob files in the version, %v on disk", len(s.BlobFiles), blobs)
			}
			type newest struct {
				seq uint64
				v   []byte
			}
			got := map[string]newest{}
			resolved, multiRef := 0, false
			for l := range s.Tables {
				for i := range s.Tables[l] {
					tb := &s.Tables[l][i]
					if len(tb.Pebble.BlobReferences) > 1 {
						multiRef = true
					}
					for k, hs := range pebbleHandles(t, tb.Path) {
						for j := 0; j < len(hs); j += 2 {
							seq, inline := hs[j].(uint64), hs[j+1].([]byte)
							v, err := s.BlobValue(tb, inline)
							if err != nil {
								t.Fatalf("%s: key %s: %v", tb.Path, k, err)
							}
							if !written[k+"="+string(v)] {
								t.Fatalf("%s: key %s resolves to %q, never written", tb.Path, k, v)
							}
							if cur, ok := got[k]; !ok || seq > cur.seq {
								got[k] = newest{seq, bytes.Clone(v)}
							}
							resolved++
						}
					}
				}
			}
			if multiRef != (tc.blobs > 1) {
				t.Fatalf("a table references more than one blob file: %v", multiRef)
			}
			separated := 0
			for k, v := range want {
				if len(v) < 64 {
					continue
				}
				separated++
				if !bytes.Equal(got[k].v, v) {
					t.Fatalf("key %s: newest blob value %q, Pebble's Get %q", k, got[k].v, v)
				}
			}
			if separated < 400 || resolved < separated {
				t.Fatalf("%d values resolved, %d separated", resolved, separated)
			}
			if err := s.checkBlobFilesOnly(); err != nil {
				t.Fatal(err)
			}
			checkScan(t, s, want)
		})
	}
}

// checkScan checks that a scan of s returns what Pebble's Get gives for
// every key, and a Get of one; or, while the sstable iterator does not tell
// blob references apart, that the tables holding them are refused.
func checkScan(t *testing.T, s *Store, want map[string][]byte) {
	t.Helper()
	if !resolvesBlobs() {
		if _, err := s.Get([]byte("bk00001")); !errors.Is(err, base.ErrUnsupportedFormat) {
			t.Fatalf("Get: %v", err)
		}
		return
	}
	n := 0
	err := s.Scan(nil, nil, func(k, v []byte) bool {
		if w, ok := want[string(k)]; !ok || !bytes.Equal(v, w) {
			t.Fatalf("scan: key %s: %q, Pebble's Get %q", k, v, w)
		}
		n++
		return true
	})
	if err != nil || n != len(want) {
		t.Fatalf("scan: %d keys of %d, %v", n, len(want), err)
	}
	if v, err := s.Get([]byte("bk00001")); err != nil || !bytes.Equal(v, want["bk00001"]) {
		t.Fatalf("Get: %q, %v", v, err)
	}
	if _, problems := s.Check(); len(problems) > 0 {
		t.Fatalf("Check: %v", problems)
	}
}

// checkBlobFilesOnly runs Check's blob-file part.
func (s *Store) checkBlobFilesOnly() error {
	var st CheckStats
	if p := s.checkBlobFiles(&st); len(p) > 0 || st.BlobFiles != len(s.BlobFiles) {
		return fmt.Errorf("%d blob files checked: %v", st.BlobFiles, p)
	}
	return nil
}

// TestBlobValueErrors damages handles and blob files: each is an error
// wrapping ErrCorruption that names the file.
func TestBlobValueErrors(t *testing.T) {
	dir := t.TempDir()
	writeBlobStore(t, dir, block.SnappyCompression, 10)
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var tb *Table
	var inline []byte
	for l := range s.Tables {
		for i := range s.Tables[l] {
			for _, hs := range pebbleHandles(t, s.Tables[l][i].Path) {
				tb, inline = &s.Tables[l][i], hs[1].([]byte)
			}
		}
	}
	if tb == nil {
		t.Fatal("no blob handle in any table")
	}
	h, err := blobfile.DecodeInlineHandle(inline)
	if err != nil {
		t.Fatal(err)
	}
	for name, bad := range map[string][]byte{
		"truncated":         inline[:len(inline)-1],
		"not a blob prefix": append([]byte{0x00}, inline[1:]...),
		"reference missing": blobfile.AppendInlineHandle(nil, blobfile.InlineHandle{Prefix: 0x40, ReferenceIndex: 99, Handle: h.Handle}),
		"block missing":     blobfile.AppendInlineHandle(nil, blobfile.InlineHandle{Prefix: 0x40, ReferenceIndex: h.ReferenceIndex, Handle: blobfile.Handle{BlockID: 1 << 20, ValueLen: h.ValueLen}}),
		"wrong length":      blobfile.AppendInlineHandle(nil, blobfile.InlineHandle{Prefix: 0x40, ReferenceIndex: h.ReferenceIndex, Handle: blobfile.Handle{BlockID: h.BlockID, ValueID: h.ValueID, ValueLen: h.ValueLen + 1}}),
	} {
		if _, err := s.BlobValue(tb, bad); !errors.Is(err, base.ErrCorruption) || !bytes.Contains([]byte(err.Error()), []byte(tb.Path)) {
			t.Errorf("%s: %v", name, err)
		}
	}
	// A damaged blob file, opened afresh.
	ref := tb.Pebble.BlobReferences[h.ReferenceIndex]
	path := filepath.Join(dir, fmt.Sprintf("%06d.blob", s.BlobFiles[ref.FileID].FileNum))
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/3] ^= 0x10
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if st, problems := s2.Check(); st.BlobFiles != len(s2.BlobFiles) || len(problems) == 0 || !errors.Is(problems[0], base.ErrCorruption) {
		t.Fatalf("Check on a damaged blob file: %+v %v", st, problems)
	}
}

// TestApplyBlobFiles applies the edits of a blob file's life: added, then
// rewritten (the same ID in a new file, in one edit), then deleted; and
// refuses a deletion of a file not live and a second addition of an ID.
func TestApplyBlobFiles(t *testing.T) {
	s := &Store{BlobFiles: map[uint64]manifest.PebbleBlobFile{}}
	steps := []struct {
		ed   manifest.PebbleEdit
		want map[uint64]uint64 // ID to file number
		ok   bool
	}{
		{manifest.PebbleEdit{NewBlobFiles: []manifest.PebbleBlobFile{{ID: 7, FileNum: 7}, {ID: 8, FileNum: 8}}}, map[uint64]uint64{7: 7, 8: 8}, true},
		{manifest.PebbleEdit{DeletedBlobFiles: []manifest.PebbleBlobFile{{ID: 7, FileNum: 7}}, NewBlobFiles: []manifest.PebbleBlobFile{{ID: 7, FileNum: 12}}},
			map[uint64]uint64{7: 12, 8: 8}, true},
		{manifest.PebbleEdit{DeletedBlobFiles: []manifest.PebbleBlobFile{{ID: 8, FileNum: 8}}}, map[uint64]uint64{7: 12}, true},
		{manifest.PebbleEdit{DeletedBlobFiles: []manifest.PebbleBlobFile{{ID: 7, FileNum: 7}}}, nil, false},
		{manifest.PebbleEdit{NewBlobFiles: []manifest.PebbleBlobFile{{ID: 7, FileNum: 13}}}, nil, false},
	}
	for i, st := range steps {
		err := s.applyBlobFiles(&st.ed)
		if !st.ok {
			if !errors.Is(err, base.ErrCorruption) {
				t.Fatalf("step %d: %v", i, err)
			}
			continue
		}
		got := map[uint64]uint64{}
		for id, b := range s.BlobFiles {
			got[id] = b.FileNum
		}
		if err != nil || fmt.Sprint(got) != fmt.Sprint(st.want) {
			t.Fatalf("step %d: %v, %v; want %v", i, got, err, st.want)
		}
	}
}
