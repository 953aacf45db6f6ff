// Package manifest holds the MANIFEST's version edits and the versions they
// build: which tables each level holds, the WAL that recovery starts from, the
// next file number and the last sequence number. Edits are stored one per
// record (internal/record), so a torn final edit is dropped like a torn WAL
// record.
package manifest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"sort"

	"github.com/bloomkv/bloomkv/internal/base"
)

// NumLevels is the number of LSM levels, L0 to L6.
const NumLevels = 7

// FileMetadata describes one table.
type FileMetadata struct {
	FileNum     uint64
	Size        uint64
	Smallest    base.InternalKey
	Largest     base.InternalKey
	SmallestSeq base.SeqNum
	LargestSeq  base.SeqNum
}

func (f *FileMetadata) String() string {
	return fmt.Sprintf("%06d:[%s-%s]", f.FileNum, f.Smallest, f.Largest)
}

// The tags of a version edit's fields.
const (
	tagComparer    = 1
	tagLogNumber   = 2
	tagNextFileNum = 3
	tagLastSeq     = 4
	tagNewFile     = 5
	tagDeletedFile = 6
	tagClosedLog   = 7
)

// ClosedLog records a WAL's size when the store closed cleanly, synced: a
// WAL found shorter at the next Open lost synced writes, which a log cut
// short at a record boundary would otherwise hide.
type ClosedLog struct {
	Num, Size uint64
}

// DeletedFile names a table removed from a level.
type DeletedFile struct {
	Level   int
	FileNum uint64
}

// NewFile is a table added to a level.
type NewFile struct {
	Level int
	Meta  *FileMetadata
}

// VersionEdit is one change to the version: fields set to zero are absent.
type VersionEdit struct {
	ComparerName string
	// LogNumber: the WALs numbered below it are wholly in tables.
	LogNumber    uint64
	NextFileNum  uint64
	LastSeq      base.SeqNum
	NewFiles     []NewFile
	DeletedFiles []DeletedFile
	ClosedLog    ClosedLog // Num 0: absent
}

func appendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

// Encode returns the edit's encoding: each present field as a tag and its
// value (varints, or varint-prefixed bytes).
func (e *VersionEdit) Encode() []byte {
	var b []byte
	if e.ComparerName != "" {
		b = binary.AppendUvarint(b, tagComparer)
		b = appendBytes(b, []byte(e.ComparerName))
	}
	if e.LogNumber != 0 {
		b = binary.AppendUvarint(binary.AppendUvarint(b, tagLogNumber), e.LogNumber)
	}
	if e.NextFileNum != 0 {
		b = binary.AppendUvarint(binary.AppendUvarint(b, tagNextFileNum), e.NextFileNum)
	}
	if e.LastSeq != 0 {
		b = binary.AppendUvarint(binary.AppendUvarint(b, tagLastSeq), uint64(e.LastSeq))
	}
	if e.ClosedLog.Num != 0 {
		b = binary.AppendUvarint(b, tagClosedLog)
		b = binary.AppendUvarint(b, e.ClosedLog.Num)
		b = binary.AppendUvarint(b, e.ClosedLog.Size)
	}
	for _, d := range e.DeletedFiles {
		b = binary.AppendUvarint(b, tagDeletedFile)
		b = binary.AppendUvarint(b, uint64(d.Level))
		b = binary.AppendUvarint(b, d.FileNum)
	}
	for _, n := range e.NewFiles {
		m := n.Meta
		b = binary.AppendUvarint(b, tagNewFile)
		b = binary.AppendUvarint(b, uint64(n.Level))
		b = binary.AppendUvarint(b, m.FileNum)
		b = binary.AppendUvarint(b, m.Size)
		b = appendBytes(b, m.Smallest.Append(nil))
		b = appendBytes(b, m.Largest.Append(nil))
		b = binary.AppendUvarint(b, uint64(m.SmallestSeq))
		b = binary.AppendUvarint(b, uint64(m.LargestSeq))
	}
	return b
}

type decoder struct {
	data []byte
	off  int
	err  error
}

func (d *decoder) uvarint(what string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.data[d.off:])
	if n <= 0 {
		d.err = fmt.Errorf("bad varint for %s at offset %d", what, d.off)
		return 0
	}
	d.off += n
	return v
}

func (d *decoder) bytes(what string) []byte {
	n := d.uvarint(what + " length")
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.data)-d.off) {
		d.err = fmt.Errorf("%s of %d bytes at offset %d overruns the edit", what, n, d.off)
		return nil
	}
	b := append([]byte(nil), d.data[d.off:d.off+int(n)]...)
	d.off += int(n)
	return b
}

func (d *decoder) level() int {
	l := d.uvarint("level")
	if d.err == nil && l >= NumLevels {
		d.err = fmt.Errorf("level %d out of range at offset %d", l, d.off)
	}
	return int(l)
}

func (d *decoder) key(what string) base.InternalKey {
	b := d.bytes(what)
	if d.err != nil {
		return base.InternalKey{}
	}
	k, ok := base.DecodeInternalKey(b)
	if !ok {
		d.err = fmt.Errorf("%s of %d bytes is shorter than a trailer", what, len(b))
	}
	return k
}

// Decode parses an encoded edit; errors wrap ErrCorruption and name the
// offset within the edit.
func Decode(data []byte) (*VersionEdit, error) {
	e := &VersionEdit{}
	d := &decoder{data: data}
	for d.off < len(data) && d.err == nil {
		tagOff := d.off
		switch tag := d.uvarint("tag"); tag {
		case tagComparer:
			e.ComparerName = string(d.bytes("comparer name"))
		case tagLogNumber:
			e.LogNumber = d.uvarint("log number")
		case tagNextFileNum:
			e.NextFileNum = d.uvarint("next file number")
		case tagLastSeq:
			e.LastSeq = base.SeqNum(d.uvarint("last sequence number"))
		case tagClosedLog:
			e.ClosedLog = ClosedLog{Num: d.uvarint("closed log number"), Size: d.uvarint("closed log size")}
			if d.err == nil && e.ClosedLog.Num == 0 {
				d.err = fmt.Errorf("closed log number 0 at offset %d", tagOff)
			}
		case tagDeletedFile:
			l := d.level()
			e.DeletedFiles = append(e.DeletedFiles, DeletedFile{Level: l, FileNum: d.uvarint("file number")})
		case tagNewFile:
			l := d.level()
			m := &FileMetadata{FileNum: d.uvarint("file number"), Size: d.uvarint("size")}
			m.Smallest = d.key("smallest key")
			m.Largest = d.key("largest key")
			m.SmallestSeq = base.SeqNum(d.uvarint("smallest sequence number"))
			m.LargestSeq = base.SeqNum(d.uvarint("largest sequence number"))
			if d.err == nil && base.CompareInternal(m.Smallest, m.Largest) > 0 {
				d.err = fmt.Errorf("table %d: smallest key %s above largest %s", m.FileNum, m.Smallest, m.Largest)
			}
			e.NewFiles = append(e.NewFiles, NewFile{Level: l, Meta: m})
		default:
			if d.err == nil {
				d.err = fmt.Errorf("unknown tag %d at offset %d", tag, tagOff)
			}
		}
	}
	if d.err != nil {
		return nil, base.CorruptionErrorf("manifest: version edit: %w", d.err)
	}
	return e, nil
}

// Version is an immutable view of the tables in each level. L0 is ordered
// newest first (by largest sequence number, then file number); other levels
// by key, without overlap.
type Version struct {
	Levels [NumLevels][]*FileMetadata
}

// Apply returns the version after e, checking that it deletes only tables
// present and that no level but L0 overlaps.
func (v *Version) Apply(e *VersionEdit) (*Version, error) {
	nv := &Version{}
	deleted := map[DeletedFile]bool{}
	for _, d := range e.DeletedFiles {
		deleted[d] = true
	}
	for l := range NumLevels {
		for _, f := range v.Levels[l] {
			if deleted[DeletedFile{l, f.FileNum}] {
				delete(deleted, DeletedFile{l, f.FileNum})
				continue
			}
			nv.Levels[l] = append(nv.Levels[l], f)
		}
	}
	if len(deleted) > 0 {
		for d := range deleted {
			return nil, base.CorruptionErrorf("manifest: edit deletes table %d from L%d, which does not hold it", d.FileNum, d.Level)
		}
	}
	for _, n := range e.NewFiles {
		nv.Levels[n.Level] = append(nv.Levels[n.Level], n.Meta)
	}
	sort.SliceStable(nv.Levels[0], func(i, j int) bool {
		a, b := nv.Levels[0][i], nv.Levels[0][j]
		if a.LargestSeq != b.LargestSeq {
			return a.LargestSeq > b.LargestSeq
		}
		return a.FileNum > b.FileNum
	})
	for l := 1; l < NumLevels; l++ {
		files := nv.Levels[l]
		slices.SortFunc(files, func(a, b *FileMetadata) int { return base.CompareInternal(a.Smallest, b.Smallest) })
		for i := 1; i < len(files); i++ {
			if !files[i-1].Before(files[i].Smallest.UserKey) {
				return nil, base.CorruptionErrorf("manifest: L%d tables %s and %s overlap", l, files[i-1], files[i])
			}
		}
	}
	return nv, nil
}

// Before reports whether every key of f (and of its range deletions) sorts
// before userKey.
func (f *FileMetadata) Before(userKey []byte) bool {
	c := bytes.Compare(f.Largest.UserKey, userKey)
	return c < 0 || (c == 0 && f.Largest.IsExclusiveSentinel())
}

// Overlaps reports whether f's key range meets the user keys in [lo, hi]
// (inclusive); a nil lo or hi leaves that side open.
func (f *FileMetadata) Overlaps(lo, hi []byte) bool {
	if lo != nil && f.Before(lo) {
		return false
	}
	return hi == nil || bytes.Compare(f.Smallest.UserKey, hi) <= 0
}

// Overlapping returns the tables of level l whose key ranges meet [lo, hi]
// (inclusive; nil for an open side), in the level's order.
func (v *Version) Overlapping(l int, lo, hi []byte) []*FileMetadata {
	var out []*FileMetadata
	files := v.Levels[l]
	i := 0
	if l > 0 && lo != nil {
		i, _ = slices.BinarySearchFunc(files, lo, func(f *FileMetadata, k []byte) int {
			if f.Before(k) {
				return -1
			}
			return 1
		})
	}
	for ; i < len(files); i++ {
		if files[i].Overlaps(lo, hi) {
			out = append(out, files[i])
		} else if l > 0 && hi != nil && bytes.Compare(files[i].Smallest.UserKey, hi) > 0 {
			break
		}
	}
	return out
}

// Find returns the table of level l ≥ 1 whose key range holds userKey.
func (v *Version) Find(l int, userKey []byte) *FileMetadata {
	files := v.Levels[l]
	i, _ := slices.BinarySearchFunc(files, userKey, func(f *FileMetadata, k []byte) int {
		if f.Before(k) {
			return -1
		}
		return 1
	})
	if i < len(files) && bytes.Compare(files[i].Smallest.UserKey, userKey) <= 0 {
		return files[i]
	}
	return nil
}

// NumFiles returns the number of tables in level l.
func (v *Version) NumFiles(l int) int { return len(v.Levels[l]) }

// LevelSize returns the bytes of the tables in level l.
func (v *Version) LevelSize(l int) uint64 {
	var n uint64
	for _, f := range v.Levels[l] {
		n += f.Size
	}
	return n
}

// AllFiles returns every table of the version.
func (v *Version) AllFiles() []*FileMetadata {
	var out []*FileMetadata
	for _, files := range v.Levels {
		out = append(out, files...)
	}
	return out
}
