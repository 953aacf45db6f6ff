package manifest

// Pebble's MANIFEST: the same log of version edits, with Pebble's tags
// (LevelDB's, RocksDB's new-file tags, and Pebble's own for range keys,
// virtual tables' backings and blob files), which reuse some of bloomkv's
// numbers for other fields (5 is LevelDB's compaction pointer, 7 its new
// file). DecodePebble reads them for inspection; the store never does.

import (
	"bytes"
	"fmt"

	"github.com/bloomkv/bloomkv/internal/base"
)

// Pebble's tags.
const (
	pebbleTagComparer        = 1
	pebbleTagLogNumber       = 2
	pebbleTagNextFileNum     = 3
	pebbleTagLastSeq         = 4
	pebbleTagCompactPointer  = 5
	pebbleTagDeletedFile     = 6
	pebbleTagNewFile         = 7
	pebbleTagPrevLogNumber   = 9
	pebbleTagNewFile2        = 100
	pebbleTagNewFile3        = 102 // with a path ID
	pebbleTagNewFile4        = 103 // with custom fields
	pebbleTagNewFile5        = 104 // custom fields and range-key bounds
	pebbleTagCreatedBacking  = 105
	pebbleTagRemovedBacking  = 106
	pebbleTagNewBlobFile     = 107
	pebbleTagDeletedBlobFile = 108
	// RocksDB's column-family tags, which Pebble refuses too.
	pebbleTagColumnFamilyFirst = 200
	pebbleTagColumnFamilyLast  = 203

	// The custom fields of new-file tags 4 and 5: a tag, then (but for the
	// ones Pebble decodes itself) a length-prefixed value. Tags with bit 6
	// set must be understood; the others may be skipped.
	customTerminate       = 1
	customNeedsCompaction = 2
	customCreationTime    = 6
	customMustUnderstand  = 1 << 6
	customVirtual         = 66
	customSyntheticPrefix = 67
	customSyntheticSuffix = 68
	customBlobReferences  = 69
	boundsHasPointKeys    = 1 << 0 // new-file-5 bounds marker: the table has point keys,
	boundsSmallestIsPoint = 1 << 1 // its smallest bound is a point key's,
	boundsLargestIsPoint  = 1 << 2 // its largest bound is a point key's
	boundsMarkerKnownBits = boundsHasPointKeys | boundsSmallestIsPoint | boundsLargestIsPoint
)

// PebbleEdit is a version edit of a Pebble MANIFEST. Its VersionEdit holds
// the fields bloomkv's edits share: the comparer, the log number (Pebble's
// minimum unflushed log: WALs numbered below it are in tables), the next
// file number, the last sequence number, and the tables added (with their
// overall bounds, point and range keys together) and deleted.
type PebbleEdit struct {
	VersionEdit
	// PrevLogNumber is LevelDB's obsolete previous log number.
	PrevLogNumber uint64
	// Tables are Pebble's details of VersionEdit.NewFiles, in their order.
	Tables []PebbleTable
	// CreatedBackings and RemovedBackings are the files behind virtual
	// tables, added and removed.
	CreatedBackings []PebbleBacking
	RemovedBackings []uint64
	// NewBlobFiles and DeletedBlobFiles are the blob files (values stored
	// apart from their keys) added and removed.
	NewBlobFiles     []PebbleBlobFile
	DeletedBlobFiles []PebbleBlobFile
	// CompactPointers counts LevelDB's compaction pointers, which Pebble
	// skips.
	CompactPointers int
}

// PebbleTable is Pebble's metadata of a table a PebbleEdit adds, beyond
// FileMetadata.
type PebbleTable struct {
	// Tag is the new-file tag the table was recorded with.
	Tag uint64
	// HasPointKeys, PointSmallest and PointLargest bound its point keys
	// and range deletions; HasRangeKeys, RangeSmallest and RangeLargest its
	// range keys.
	HasPointKeys                bool
	PointSmallest, PointLargest base.InternalKey
	HasRangeKeys                bool
	RangeSmallest, RangeLargest base.InternalKey
	// CreationTime is when the table was written, in Unix seconds (0 when
	// not recorded).
	CreationTime        int64
	MarkedForCompaction bool
	// Virtual tables are parts of a backing file, BackingFileNum.
	Virtual         bool
	BackingFileNum  uint64
	SyntheticPrefix []byte
	SyntheticSuffix []byte
	// BlobReferences are the blob files holding the table's values.
	BlobReferences     []PebbleBlobReference
	BlobReferenceDepth uint64
}

// PebbleBacking is a file behind virtual tables.
type PebbleBacking struct {
	FileNum, Size uint64
}

// PebbleBlobFile is a blob file: its ID, the file holding it, and (when
// added) its size, the size of its values and its creation time.
type PebbleBlobFile struct {
	ID, FileNum                   uint64
	Size, ValueSize, CreationTime uint64
}

// PebbleBlobReference is a table's reference to a blob file's values.
type PebbleBlobReference struct {
	FileID, ValueSize uint64
}

// DecodePebble parses an encoded Pebble version edit. Damage is an error
// wrapping ErrCorruption; a tag or custom field Pebble's decoder (v2.1)
// does not know, or refuses, wraps base.ErrUnsupportedFormat. Both name the
// offset within the edit.
func DecodePebble(data []byte) (*PebbleEdit, error) {
	e := &PebbleEdit{}
	d := &decoder{data: data}
	var unsupported error
	for d.off < len(data) && d.err == nil && unsupported == nil {
		tagOff := d.off
		switch tag := d.uvarint("tag"); tag {
		case pebbleTagComparer:
			e.ComparerName = string(d.bytes("comparer name"))
		case pebbleTagLogNumber:
			e.LogNumber = d.uvarint("log number")
		case pebbleTagNextFileNum:
			e.NextFileNum = d.uvarint("next file number")
		case pebbleTagLastSeq:
			e.LastSeq = base.SeqNum(d.uvarint("last sequence number"))
		case pebbleTagPrevLogNumber:
			e.PrevLogNumber = d.uvarint("previous log number")
		case pebbleTagCompactPointer:
			d.level()
			d.bytes("compaction pointer")
			e.CompactPointers++
		case pebbleTagDeletedFile:
			l := d.level()
			e.DeletedFiles = append(e.DeletedFiles, DeletedFile{Level: l, FileNum: d.uvarint("file number")})
		case pebbleTagNewFile, pebbleTagNewFile2, pebbleTagNewFile3, pebbleTagNewFile4, pebbleTagNewFile5:
			var nf NewFile
			var pt PebbleTable
			nf, pt, unsupported = d.pebbleNewFile(tag)
			if d.err == nil && unsupported == nil {
				e.NewFiles = append(e.NewFiles, nf)
				e.Tables = append(e.Tables, pt)
			}
		case pebbleTagCreatedBacking:
			e.CreatedBackings = append(e.CreatedBackings, PebbleBacking{FileNum: d.uvarint("backing file number"), Size: d.uvarint("backing size")})
		case pebbleTagRemovedBacking:
			e.RemovedBackings = append(e.RemovedBackings, d.uvarint("backing file number"))
		case pebbleTagNewBlobFile:
			e.NewBlobFiles = append(e.NewBlobFiles, PebbleBlobFile{ID: d.uvarint("blob file ID"), FileNum: d.uvarint("blob file number"),
				Size: d.uvarint("blob file size"), ValueSize: d.uvarint("blob value size"), CreationTime: d.uvarint("blob creation time")})
		case pebbleTagDeletedBlobFile:
			e.DeletedBlobFiles = append(e.DeletedBlobFiles, PebbleBlobFile{ID: d.uvarint("blob file ID"), FileNum: d.uvarint("blob file number")})
		default:
			if d.err != nil {
				break
			}
			what := "unknown tag"
			if tag >= pebbleTagColumnFamilyFirst && tag <= pebbleTagColumnFamilyLast {
				what = "column-family tag"
			}
			unsupported = base.UnsupportedErrorf("manifest: Pebble version edit: %s %d at offset %d", what, tag, tagOff)
		}
	}
	if d.err != nil {
		return nil, base.CorruptionErrorf("manifest: Pebble version edit: %w", d.err)
	}
	if unsupported != nil {
		return nil, unsupported
	}
	return e, nil
}

// pebbleNewFile decodes a new-file field of tag, after the tag.
func (d *decoder) pebbleNewFile(tag uint64) (NewFile, PebbleTable, error) {
	start := d.off
	pt := PebbleTable{Tag: tag}
	l := d.level()
	m := &FileMetadata{FileNum: d.uvarint("file number")}
	if tag == pebbleTagNewFile3 {
		d.uvarint("path ID")
	}
	m.Size = d.uvarint("size")
	if tag != pebbleTagNewFile5 {
		pt.HasPointKeys = true
		pt.PointSmallest, pt.PointLargest = d.key("smallest key"), d.key("largest key")
	} else {
		marker := d.byte("bounds marker")
		if d.err == nil && marker&^boundsMarkerKnownBits != 0 {
			d.err = fmt.Errorf("table %d: bad bounds marker %#x at offset %d", m.FileNum, marker, d.off-1)
		}
		if marker&boundsHasPointKeys != 0 {
			pt.HasPointKeys = true
			pt.PointSmallest, pt.PointLargest = d.key("smallest point key"), d.key("largest point key")
		} else if d.err == nil && marker != 0 {
			d.err = fmt.Errorf("table %d without point keys has point bounds (marker %#x) at offset %d", m.FileNum, marker, d.off-1)
		}
		pt.HasRangeKeys = true
		pt.RangeSmallest, pt.RangeLargest = d.key("smallest range key"), d.key("largest range key")
		m.Smallest, m.Largest = pt.RangeSmallest, pt.RangeLargest
		if marker&boundsSmallestIsPoint != 0 {
			m.Smallest = pt.PointSmallest
		}
		if marker&boundsLargestIsPoint != 0 {
			m.Largest = pt.PointLargest
		}
	}
	if tag != pebbleTagNewFile5 {
		m.Smallest, m.Largest = pt.PointSmallest, pt.PointLargest
	}
	if tag != pebbleTagNewFile {
		m.SmallestSeq = base.SeqNum(d.uvarint("smallest sequence number"))
		m.LargestSeq = base.SeqNum(d.uvarint("largest sequence number"))
	}
	if tag == pebbleTagNewFile4 || tag == pebbleTagNewFile5 {
		if err := d.customFields(m.FileNum, &pt); err != nil {
			return NewFile{}, pt, err
		}
	}
	if d.err == nil {
		for _, b := range [][2]base.InternalKey{{m.Smallest, m.Largest}, {pt.PointSmallest, pt.PointLargest}, {pt.RangeSmallest, pt.RangeLargest}} {
			if bytes.Compare(b[0].UserKey, b[1].UserKey) > 0 {
				d.err = fmt.Errorf("table %d (at offset %d): smallest key %s above largest %s", m.FileNum, start, b[0], b[1])
			}
		}
	}
	return NewFile{Level: l, Meta: m}, pt, nil
}

// customFields decodes a new-file field's custom fields, up to the
// terminating tag.
func (d *decoder) customFields(num uint64, pt *PebbleTable) error {
	for d.err == nil {
		tagOff := d.off
		switch tag := d.uvarint("custom tag"); tag {
		case customTerminate:
			return nil
		case customNeedsCompaction:
			if v := d.bytes("needs-compaction field"); d.err == nil {
				if len(v) != 1 {
					d.err = fmt.Errorf("table %d: needs-compaction field of %d bytes at offset %d", num, len(v), tagOff)
				} else {
					pt.MarkedForCompaction = v[0] == 1
				}
			}
		case customCreationTime:
			v := d.bytes("creation time")
			if d.err == nil {
				sub := decoder{data: v}
				pt.CreationTime = int64(sub.uvarint("creation time"))
				if sub.err != nil || sub.off != len(v) {
					d.err = fmt.Errorf("table %d: bad creation time at offset %d", num, tagOff)
				}
			}
		case customVirtual:
			pt.Virtual, pt.BackingFileNum = true, d.uvarint("backing file number")
		case customSyntheticPrefix:
			pt.SyntheticPrefix = d.bytes("synthetic prefix")
		case customSyntheticSuffix:
			pt.SyntheticSuffix = d.bytes("synthetic suffix")
		case customBlobReferences:
			pt.BlobReferenceDepth = d.uvarint("blob reference depth")
			n := d.uvarint("blob references")
			for i := uint64(0); i < n && d.err == nil; i++ {
				if d.off >= len(d.data) {
					d.err = fmt.Errorf("table %d: %d blob references overrun the edit at offset %d", num, n, d.off)
					break
				}
				pt.BlobReferences = append(pt.BlobReferences, PebbleBlobReference{FileID: d.uvarint("blob file ID"), ValueSize: d.uvarint("blob value size")})
			}
		default:
			if d.err != nil {
				return nil
			}
			if tag&customMustUnderstand != 0 {
				return base.UnsupportedErrorf("manifest: Pebble version edit: table %d: custom field %d at offset %d must be understood", num, tag, tagOff)
			}
			d.bytes("custom field")
		}
	}
	return nil
}

// byte decodes one byte.
func (d *decoder) byte(what string) byte {
	if d.err != nil {
		return 0
	}
	if d.off >= len(d.data) {
		d.err = fmt.Errorf("%s missing at offset %d", what, d.off)
		return 0
	}
	d.off++
	return d.data[d.off-1]
}
