package sstable

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"

	"github.com/bloomkv/bloomkv/internal/base"
)

// Properties are a table's statistics, stored in its properties block under
// RocksDB's names so that Pebble and RocksDB tools read them too.
type Properties struct {
	NumEntries        uint64 // point entries and range-deletion fragments
	NumDeletions      uint64 // point deletions and range-deletion fragments
	NumRangeDeletions uint64 // range-deletion fragments
	RawKeySize        uint64 // encoded point keys, before prefix compression
	RawValueSize      uint64
	NumDataBlocks     uint64
	DataSize          uint64 // data blocks as stored, with trailers
	IndexSize         uint64
	FilterSize        uint64
	ComparerName      string
	FilterPolicy      string // empty when the table has no filter
	CompressionName   string
	// IndexType is RocksDB's index type: 0 for one index block, 2 for a
	// two-level index (Pebble writes one when the index outgrows a block).
	IndexType uint32
	// SmallestSeqNum and LargestSeqNum bound the sequence numbers of the
	// table's keys and range deletions (bloomkv's own properties).
	SmallestSeqNum base.SeqNum
	LargestSeqNum  base.SeqNum
	// HasSeqNums reports whether the table states SmallestSeqNum and
	// LargestSeqNum; tables other writers made leave them to the reader.
	HasSeqNums bool
	// Format is the table format, from the footer.
	Format TableFormat
	// User holds the properties bloomkv does not interpret, as stored.
	User map[string][]byte
}

const (
	propIndexType     = "rocksdb.block.based.table.index.type"
	propComparer      = "rocksdb.comparator"
	propCompression   = "rocksdb.compression"
	propDataSize      = "rocksdb.data.size"
	propDeletions     = "rocksdb.deleted.keys"
	propFilterPolicy  = "rocksdb.filter.policy"
	propFilterSize    = "rocksdb.filter.size"
	propIndexSize     = "rocksdb.index.size"
	propNumDataBlocks = "rocksdb.num.data.blocks"
	propNumEntries    = "rocksdb.num.entries"
	propRangeDels     = "rocksdb.num.range-deletions"
	propRawKeySize    = "rocksdb.raw.key.size"
	propRawValueSize  = "rocksdb.raw.value.size"
	propSmallestSeq   = "bloomkv.seqnum.smallest"
	propLargestSeq    = "bloomkv.seqnum.largest"
)

func (p *Properties) uints() map[string]*uint64 {
	return map[string]*uint64{
		propDataSize:      &p.DataSize,
		propDeletions:     &p.NumDeletions,
		propFilterSize:    &p.FilterSize,
		propIndexSize:     &p.IndexSize,
		propNumDataBlocks: &p.NumDataBlocks,
		propNumEntries:    &p.NumEntries,
		propRangeDels:     &p.NumRangeDeletions,
		propRawKeySize:    &p.RawKeySize,
		propRawValueSize:  &p.RawValueSize,
		propSmallestSeq:   (*uint64)(&p.SmallestSeqNum),
		propLargestSeq:    (*uint64)(&p.LargestSeqNum),
	}
}

func (p *Properties) strings() map[string]*string {
	return map[string]*string{
		propComparer:     &p.ComparerName,
		propCompression:  &p.CompressionName,
		propFilterPolicy: &p.FilterPolicy,
	}
}

// encode returns the properties block: names in order, numbers as uvarints,
// strings as they are.
func (p *Properties) encode() []byte {
	kv := map[string][]byte{propIndexType: binary.LittleEndian.AppendUint32(nil, p.IndexType)}
	for name, v := range p.User {
		kv[name] = v
	}
	for name, v := range p.uints() {
		kv[name] = binary.AppendUvarint(nil, *v)
	}
	for name, v := range p.strings() {
		if *v != "" {
			kv[name] = []byte(*v)
		}
	}
	names := make([]string, 0, len(kv))
	for name := range kv {
		names = append(names, name)
	}
	slices.Sort(names)
	var b blockWriter
	b.restartInterval = 1
	for _, name := range names {
		b.add([]byte(name), kv[name])
	}
	return b.finish()
}

// decode fills p from the entries of a properties block.
func (p *Properties) decode(it *blockIter) error {
	uints, strs := p.uints(), p.strings()
	for ok := it.first(); ok; ok = it.next() {
		name := string(it.key)
		if name == propIndexType {
			if len(it.value) != 4 {
				return it.corrupt(it.offset, fmt.Sprintf("property %s: %d bytes, want 4", name, len(it.value)))
			}
			p.IndexType = binary.LittleEndian.Uint32(it.value)
		} else if v, ok := uints[name]; ok {
			n, l := binary.Uvarint(it.value)
			if l <= 0 || l != len(it.value) {
				return it.corrupt(it.offset, fmt.Sprintf("property %s: bad varint", name))
			}
			*v = n
			if name == propLargestSeq {
				p.HasSeqNums = true
			}
		} else if v, ok := strs[name]; ok {
			*v = string(it.value)
		} else {
			if p.User == nil {
				p.User = make(map[string][]byte)
			}
			p.User[name] = append([]byte(nil), it.value...)
		}
	}
	return it.err
}

// rocksDBNumeric are RocksDB's numeric properties that bloomkv stores under
// User, uvarint-encoded like the others.
var rocksDBNumeric = map[string]bool{
	"rocksdb.column.family.id": true, "rocksdb.creation.time": true, "rocksdb.file.creation.time": true,
	"rocksdb.fixed.key.length": true, "rocksdb.format.version": true, "rocksdb.index.key.is.user.key": true,
	"rocksdb.index.value.is.delta.encoded": true, "rocksdb.merge.operands": true, "rocksdb.oldest.key.time": true,
	"rocksdb.num.filter_entries": true, "rocksdb.top-level.index.size": true, "rocksdb.index.partitions": true,
	"rocksdb.external_sst_file.version": true, "rocksdb.external_sst_file.global_seqno": true,
	// Pebble's.
	"pebble.raw.point-tombstone.key.size": true, "pebble.raw.point-tombstone.value.size": true,
	"pebble.num.deletions.sized": true, "pebble.num.range-key-dels": true, "pebble.num.range-key-sets": true,
	"pebble.num.range-key-unsets": true, "pebble.value-blocks.size": true, "pebble.num.tombstone-dense-blocks": true,
	"pebble.num.value-blocks": true, "pebble.num.values.in.value-blocks": true, "pebble.num.values.in.blob-files": true,
	"pebble.raw.range-key.key.size": true, "pebble.raw.range-key.value.size": true, "pebble.num.snapshot-pinned-keys": true,
	"pebble.raw.snapshot-pinned-keys.size": true, "pebble.raw.snapshot-pinned-values.size": true,
}

// DescribeProperty returns a property's stored value for display: the
// numbers bloomkv interprets in decimal, printable strings quoted, anything
// else in hex.
func DescribeProperty(name string, value []byte) string {
	var p Properties
	if _, ok := p.uints()[name]; ok || rocksDBNumeric[name] {
		if n, l := binary.Uvarint(value); l > 0 && l == len(value) {
			return strconv.FormatUint(n, 10)
		}
	}
	if name == propIndexType && len(value) == 4 {
		return strconv.FormatUint(uint64(binary.LittleEndian.Uint32(value)), 10)
	}
	printable := true
	for _, c := range value {
		if c < 0x20 || c >= 0x7f {
			printable = false
			break
		}
	}
	if printable {
		return strconv.Quote(string(value))
	}
	return "0x" + hex.EncodeToString(value)
}
