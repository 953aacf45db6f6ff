package manifest

import (
	"errors"
	"reflect"
	"testing"

	"github.com/bloomkv/bloomkv/internal/base"
)

func meta(num uint64, a, b string, seq base.SeqNum) *FileMetadata {
	return &FileMetadata{FileNum: num, Size: 1000 + num,
		Smallest: base.MakeInternalKey([]byte(a), seq, base.KindSet), Largest: base.MakeInternalKey([]byte(b), seq, base.KindSet),
		SmallestSeq: seq, LargestSeq: seq + 5}
}

func sampleEdit() *VersionEdit {
	return &VersionEdit{ComparerName: base.ComparerName, LogNumber: 7, NextFileNum: 12, LastSeq: 999,
		NewFiles:     []NewFile{{0, meta(8, "a", "m", 10)}, {1, meta(9, "n", "z", 3)}},
		DeletedFiles: []DeletedFile{{0, 4}, {2, 5}}, ClosedLog: ClosedLog{Num: 6, Size: 4096}}
}

func TestEncodeDecode(t *testing.T) {
	e := sampleEdit()
	got, err := Decode(e.Encode())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, e) {
		t.Fatalf("round trip:\n%+v\nwant\n%+v", got, e)
	}
	empty, err := Decode(nil)
	if err != nil || !reflect.DeepEqual(empty, &VersionEdit{}) {
		t.Fatalf("empty edit: %+v, %v", empty, err)
	}
}

func TestDecodeRejectsMalformed(t *testing.T) {
	enc := sampleEdit().Encode()
	for i := 1; i < len(enc); i++ {
		if _, err := Decode(enc[:i]); err == nil {
			// A prefix that ends exactly between fields is a valid shorter
			// edit; anything else must fail.
			continue
		} else if !errors.Is(err, base.ErrCorruption) {
			t.Fatalf("prefix %d: %v does not wrap ErrCorruption", i, err)
		}
	}
	for name, data := range map[string][]byte{
		"unknown tag":    {99, 1},
		"level too high": {tagDeletedFile, 7, 1},
		"bad varint":     {tagLogNumber, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
		"short key":      {tagNewFile, 0, 1, 1, 3, 'a', 'b', 'c', 0, 0, 0},
		"long bytes":     {tagComparer, 50, 'x'},
	} {
		if _, err := Decode(data); !errors.Is(err, base.ErrCorruption) {
			t.Errorf("%s: %v, want ErrCorruption", name, err)
		}
	}
	inverted := &VersionEdit{NewFiles: []NewFile{{1, meta(3, "z", "a", 1)}}}
	if _, err := Decode(inverted.Encode()); !errors.Is(err, base.ErrCorruption) {
		t.Errorf("inverted key range: %v", err)
	}
}

func TestApply(t *testing.T) {
	v := &Version{}
	v, err := v.Apply(&VersionEdit{NewFiles: []NewFile{{0, meta(1, "a", "c", 5)}, {0, meta(2, "b", "d", 9)}, {1, meta(3, "a", "f", 1)}, {1, meta(4, "g", "k", 1)}}})
	if err != nil {
		t.Fatal(err)
	}
	if v.Levels[0][0].FileNum != 2 || v.Levels[0][1].FileNum != 1 {
		t.Fatalf("L0 not newest first: %v", v.Levels[0])
	}
	if v.NumFiles(1) != 2 || v.LevelSize(1) != 1003+1004 || len(v.AllFiles()) != 4 {
		t.Fatalf("version %+v", v.Levels)
	}
	if _, err := v.Apply(&VersionEdit{DeletedFiles: []DeletedFile{{1, 99}}}); !errors.Is(err, base.ErrCorruption) {
		t.Fatalf("deleting a missing table: %v", err)
	}
	if _, err := v.Apply(&VersionEdit{NewFiles: []NewFile{{1, meta(5, "e", "h", 1)}}}); !errors.Is(err, base.ErrCorruption) {
		t.Fatalf("overlapping L1 tables: %v", err)
	}
	v2, err := v.Apply(&VersionEdit{DeletedFiles: []DeletedFile{{0, 1}}})
	if err != nil || v2.NumFiles(0) != 1 || v.NumFiles(0) != 2 {
		t.Fatalf("delete: %v; the old version must not change", err)
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(sampleEdit().Encode())
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := Decode(data)
		if err != nil {
			if !errors.Is(err, base.ErrCorruption) {
				t.Fatalf("%v does not wrap ErrCorruption", err)
			}
			return
		}
		again, err := Decode(e.Encode())
		if err != nil || !reflect.DeepEqual(again, e) {
			t.Fatalf("re-encoded edit differs: %v", err)
		}
	})
}
