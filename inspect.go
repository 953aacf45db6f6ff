package bloomkv

// Inspection: the store's tables as SSTables lists them.

import (
	"bytes"

	"github.com/bloomkv/bloomkv/internal/manifest"
)

// TableInfo describes one table of the store.
type TableInfo struct {
	Level   int
	FileNum uint64
	// Name is the table's file name within the store's directory.
	Name string
	Size uint64
	// Smallest and Largest bound the user keys of the table's entries and
	// range deletions. LargestExclusive is true when Largest is the end of
	// a range deletion, which the table does not hold.
	Smallest, Largest []byte
	LargestExclusive  bool
	// SmallestSeq and LargestSeq bound its sequence numbers.
	SmallestSeq, LargestSeq uint64
	// Ingested is true for a table DB.Ingest added: its file stores its
	// keys at sequence number 0, and they read at SmallestSeq, the number
	// the ingestion assigned.
	Ingested bool
}

// SSTables returns the store's tables level by level: level 0 newest first,
// the other levels in key order.
func (d *DB) SSTables() ([][]TableInfo, error) {
	if d.closedFlag.Load() {
		return nil, ErrClosed
	}
	s := d.acquire()
	defer d.release(s)
	out := make([][]TableInfo, manifest.NumLevels)
	for l, f := range s.version.All() {
		out[l] = append(out[l], TableInfo{
			Level: l, FileNum: f.FileNum, Name: tableName(f.FileNum), Size: f.Size,
			Smallest: bytes.Clone(f.Smallest.UserKey), Largest: bytes.Clone(f.Largest.UserKey),
			LargestExclusive: f.Largest.IsExclusiveSentinel(),
			SmallestSeq:      uint64(f.SmallestSeq), LargestSeq: uint64(f.LargestSeq),
			Ingested: f.SeqNumOverride != 0,
		})
	}
	return out, nil
}
