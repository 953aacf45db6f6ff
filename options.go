package bloomkv

// Options and WriteOptions: the settings of a store and of a write, and
// their defaults.

import (
	"fmt"
	"log/slog"
	"runtime"

	"github.com/bloomkv/bloomkv/filterblock"
	"github.com/bloomkv/bloomkv/sstable"
	"github.com/bloomkv/bloomkv/vfs"
)

// Options configure a DB. The zero value of a field means its default; a nil
// *Options means all defaults.
type Options struct {
	// FS is the file system every file operation goes through (the
	// operating system's, vfs.Default). Package vfs also has an in-memory
	// one that can simulate a crash, and one that injects I/O errors.
	FS vfs.FS
	// CacheSize is the block cache's capacity in bytes (8 MiB).
	CacheSize int64
	// CacheWrittenBlocks puts the data blocks of each table a flush or
	// compaction writes into the block cache, as RocksDB's
	// prepopulate_block_cache does, while the cache has room for them and
	// has never evicted a block. A store whose data fits its cache then
	// reads nothing back from disk after writes rewrote its tables, at the
	// cost of copying every block written. Once the cache has evicted, it
	// takes no more, and, as without the option, caches a point lookup's
	// block on its second miss and an iterator's as stored: with a store
	// larger than its cache, the written blocks fill it and hasten that.
	// Off by default.
	CacheWrittenBlocks bool
	// MemTableSize is the size at which the memtable is frozen and flushed
	// to a table (4 MiB). A store whose memtables reach 1 MiB also keeps
	// memory for half a memtable and 256 KiB more (at most 4.25 MiB)
	// ready for the next ones, so that writes do not pay the page faults
	// of fresh memory.
	MemTableSize int64
	// MaxImmutableMemTables is how many frozen memtables may wait for a
	// flush before writes stall (2).
	MaxImmutableMemTables int
	// BloomBitsPerKey sizes each table's blocked Bloom filter
	// (sstable.DefaultBloomBitsPerKey; 1 to 32; negative for none).
	BloomBitsPerKey int
	// BlockSize is the target size of a table's data blocks
	// (sstable.DefaultBlockSize).
	BlockSize int
	// Compression compresses table blocks: sstable.DefaultCompression
	// (the zero value) is Snappy; sstable.NoCompression stores them as
	// they are.
	Compression sstable.Compression
	// L0CompactionThreshold is the number of level-0 tables holding one
	// same key (the sorted runs a read of it meets in level 0) at which
	// level 0 is compacted into the base level (2). It is compacted, too,
	// once it holds half of L0StopWritesThreshold tables, when its tables
	// can move down without a rewrite, and once iterator seeks have met
	// its tables about once per 16 KiB of them (at least 100 times).
	L0CompactionThreshold int
	// L0StopWritesThreshold is the number of level-0 tables at which
	// writes stop until a compaction has run (12).
	L0StopWritesThreshold int
	// MaxConcurrentCompactions bounds background compactions (half the
	// cores Go may use, GOMAXPROCS, and at least 1: the other half serves
	// the writers and readers).
	MaxConcurrentCompactions int
	// LBaseMaxBytes is the size the base level, the one level 0 compacts
	// into, may reach before it is compacted into the next (64 MiB). The
	// base is the highest level the data needs when the last level (6)
	// holds all but 1/LevelMultiplier (10) of it and each level above a
	// LevelMultiplier-th of the next: the last level itself in a store of
	// up to about LBaseMaxBytes×LevelMultiplier/(LevelMultiplier-1) bytes,
	// level 5 in one up to LevelMultiplier times that, and so on. Each
	// level from the base down to the one above the last has that share as
	// its target, a LevelMultiplier-th of the next level's (the base's at
	// least LBaseMaxBytes/LevelMultiplier), so that the levels above the
	// last hold about a LevelMultiplier-th of the data; the last has no
	// limit.
	LBaseMaxBytes   int64
	LevelMultiplier int
	// TargetFileSize is the size at which a compaction starts a new output
	// table (2 MiB).
	TargetFileSize int64
	// DisableDiffFilter turns off the differential-file filter (see
	// DB.MayHaveChanged): every Get then asks the memtables and every level
	// above the base, as a store without it would. It is on by default.
	DisableDiffFilter bool
	// DisableMmapReads reads tables with read system calls only. By default
	// a table is also mapped into memory (on 64-bit Unix, when the store is
	// on the operating system's file system), and a block the cache lacks
	// is verified and decoded where it lies in the mapping, which saves a
	// system call and a copy per block; as LevelDB does on 64-bit
	// platforms.
	DisableMmapReads bool
	// VerifyIngestedTables makes Ingest read and check each table whole
	// before it changes anything: every block's checksum, and every
	// entry's order, kind, sequence number and size, at a cost that grows
	// with the tables, as RocksDB's verify_checksums_before_ingest does.
	// By default Ingest checks only what placing a table needs (as
	// Pebble's Ingest does), and the store checks each of its data blocks
	// when it first reads it, so that a bad entry in a table's middle is
	// an error then, for the reads and compactions that reach its block (a
	// failed compaction stops the store's writes until it is reopened),
	// rather than a refused Ingest (see DB.Ingest).
	VerifyIngestedTables bool
	// FormatVersion is the format version a new store is created at
	// (FormatNewest). An existing store keeps its own version unless this
	// one is newer: Open then raises the store's to it (not when ReadOnly),
	// after which builds that do not know it cannot open the store. See
	// FormatVersion; a version newer than FormatNewest is refused.
	FormatVersion FormatVersion
	// ReadOnly opens an existing store without writing to it.
	ReadOnly bool
	// ErrorIfExists makes Open fail when the directory holds a store.
	ErrorIfExists bool
	// Logger receives the store's log lines (slog.Default()).
	Logger *slog.Logger
	// EventListener is told of flushes, compactions, write stalls,
	// background errors and ingestions; see EventListener for when its
	// functions run.
	EventListener EventListener
}

// WriteOptions say how durable a write must be before it returns.
type WriteOptions struct {
	// Sync makes the write survive a crash or power loss before it returns
	// (an fsync of the write-ahead log, shared by concurrent writers).
	Sync bool
}

// Sync and NoSync are the two durability levels: Sync waits for the log to
// reach stable storage; NoSync returns once the write is in the log's buffer,
// which reaches the operating system within about a millisecond (a crash
// may lose a recent suffix of NoSync writes, never earlier ones and never the
// store's consistency).
var (
	Sync   = &WriteOptions{Sync: true}
	NoSync = &WriteOptions{Sync: false}
)

func (o *Options) withDefaults() (*Options, error) {
	var c Options
	if o != nil {
		c = *o
	}
	if c.FS == nil {
		c.FS = vfs.Default
	}
	if c.CacheSize == 0 {
		c.CacheSize = 8 << 20
	}
	if c.MemTableSize == 0 {
		c.MemTableSize = 4 << 20
	}
	if c.MaxImmutableMemTables == 0 {
		c.MaxImmutableMemTables = 2
	}
	if c.BloomBitsPerKey == 0 {
		c.BloomBitsPerKey = sstable.DefaultBloomBitsPerKey
	}
	if c.BlockSize == 0 {
		c.BlockSize = sstable.DefaultBlockSize
	}
	if c.L0CompactionThreshold == 0 {
		c.L0CompactionThreshold = 2
	}
	if c.L0StopWritesThreshold == 0 {
		c.L0StopWritesThreshold = 12
	}
	if c.MaxConcurrentCompactions == 0 {
		c.MaxConcurrentCompactions = max(1, runtime.GOMAXPROCS(0)/2)
	}
	if c.LBaseMaxBytes == 0 {
		c.LBaseMaxBytes = 64 << 20
	}
	if c.LevelMultiplier == 0 {
		c.LevelMultiplier = 10
	}
	if c.TargetFileSize == 0 {
		c.TargetFileSize = 2 << 20
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	c.EventListener = c.EventListener.withDefaults()
	switch {
	case c.CacheSize < 0:
		return nil, fmt.Errorf("bloomkv: CacheSize %d is negative", c.CacheSize)
	case c.MemTableSize < 64<<10 || c.MemTableSize > 1<<32:
		return nil, fmt.Errorf("bloomkv: MemTableSize %d out of range [64 KiB, 4 GiB]", c.MemTableSize)
	case c.MaxImmutableMemTables < 1:
		return nil, fmt.Errorf("bloomkv: MaxImmutableMemTables %d must be at least 1", c.MaxImmutableMemTables)
	case c.BlockSize < 256 || c.BlockSize > 1<<20:
		return nil, fmt.Errorf("bloomkv: BlockSize %d out of range [256, 1 MiB]", c.BlockSize)
	case c.L0CompactionThreshold < 1 || c.L0StopWritesThreshold < c.L0CompactionThreshold:
		return nil, fmt.Errorf("bloomkv: L0 thresholds compaction=%d stop=%d: need 1 <= compaction <= stop", c.L0CompactionThreshold, c.L0StopWritesThreshold)
	case c.MaxConcurrentCompactions < 1:
		return nil, fmt.Errorf("bloomkv: MaxConcurrentCompactions %d must be at least 1", c.MaxConcurrentCompactions)
	case c.LBaseMaxBytes < 1:
		return nil, fmt.Errorf("bloomkv: LBaseMaxBytes %d must be positive", c.LBaseMaxBytes)
	case c.LevelMultiplier < 2:
		return nil, fmt.Errorf("bloomkv: LevelMultiplier %d must be at least 2", c.LevelMultiplier)
	case c.TargetFileSize < 1:
		return nil, fmt.Errorf("bloomkv: TargetFileSize %d must be positive", c.TargetFileSize)
	}
	if err := checkFormatOption(c.FormatVersion); err != nil {
		return nil, err
	}
	if c.BloomBitsPerKey > 0 {
		if err := filterblock.ValidateBitsPerKey(c.BloomBitsPerKey); err != nil {
			return nil, fmt.Errorf("bloomkv: %w", err)
		}
	}
	return &c, nil
}

func (o *Options) writerOptions() sstable.WriterOptions {
	return sstable.WriterOptions{
		BlockSize:       o.BlockSize,
		BloomBitsPerKey: o.BloomBitsPerKey,
		Compression:     o.Compression,
		// Flushes and compactions compress and write blocks on a second
		// goroutine when Go may use a second core: on one, it would only
		// add hand-offs.
		Parallel: runtime.GOMAXPROCS(0) > 1,
	}
}
