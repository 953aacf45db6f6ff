package bloomkv

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/manifest"
)

// TestCompactionPicker gives the picker hand-built levels and checks the
// compaction it picks: pickAutoLocked (the level scores' choice) or, for
// the cases with manual set, manualSetupLocked (one step of Compact).
//
// levels holds one line a level, "L1: 3:[a-b] 4:[c-e]=8M": each table is
// its number, its key range and, after "=", its size (K, M and G suffixes;
// 1M if left out). A table's sequence numbers are its number, so that a
// higher number is a newer level-0 table. busy lists the tables a running
// compaction holds; running, the compactions under way, "L1->L2 [a-c]"
// (from, into, and the key range they write). manual, "L0: 1 2", is the
// level and tables Compact hands to manualSetupLocked.
//
// want renders the pick, "L0 -> L1: inputs 1,2 + 3,4; move=false;
// bottom=true; score=1.00" (inputs of the level, then of the output level;
// the score only for automatic picks), or "none". scores, when set, is
// levelScores for L0 to L6 before the pick.
func TestCompactionPicker(t *testing.T) {
	const mb = 1 << 20
	cases := []struct {
		name    string
		opts    Options
		levels  string
		busy    string
		running []string
		manual  string
		scores  string
		// snapshots lists the read sequence numbers of open snapshots,
		// ascending (a table's sequence numbers are its number).
		snapshots string
		// compacting: a Compact call is under way.
		compacting bool
		// base, when set, is the base level levelTargets computes.
		base int
		want string
	}{
		{
			name:   "nothing due",
			levels: "L0: 1:[a-c]\nL6: 2:[a-z]=10M",
			scores: "0.50 0 0 0 0 0 0",
			want:   "none",
		},

		// Level 0: its depth over L0CompactionThreshold, its tables over half
		// of L0StopWritesThreshold, 1 when its tables can move down.
		{
			name:   "L0 two deep over a key merges into the base tables it overlaps",
			levels: "L0: 1:[a-c] 2:[b-d]\nL6: 3:[a-b] 4:[c-g] 5:[h-k]",
			scores: "1.00 0 0 0 0 0 0",
			want:   "L0 -> L6: inputs 1,2 + 3,4; move=false; bottom=true; score=1.00",
		},
		{
			name:   "L0's depth counts the tables holding one same key, not its tables",
			levels: "L0: 1:[a-b] 2:[c-d] 3:[e-f]\nL6: 4:[a-z]",
			scores: "0.50 0 0 0 0 0 0",
			want:   "none",
		},
		{
			name:   "L0 holding half of L0StopWritesThreshold tables is due, one deep",
			levels: "L0: 1:[a-a] 2:[b-b] 3:[c-c] 4:[d-d] 5:[e-e] 6:[f-f]\nL6: 7:[a-z]",
			scores: "1.00 0 0 0 0 0 0",
			want:   "L0 -> L6: inputs 1,2,3,4,5,6 + 7; move=false; bottom=true; score=1.00",
		},
		{
			name:   "L0 tables overlapping nothing, one another included, move into the base together",
			levels: "L0: 1:[a-c] 2:[x-z]\nL6: 3:[m-n]",
			scores: "1.00 0 0 0 0 0 0",
			want:   "L0 -> L6: inputs 1,2 + none; move=true; bottom=true; score=1.00",
		},
		{
			name:   "a lone L0 table in an empty store moves to the last level",
			levels: "L0: 1:[a-c]",
			want:   "L0 -> L6: inputs 1 + none; move=true; bottom=true; score=1.00",
		},
		{
			name:   "L0 tables overlapping one another merge, even over nothing",
			levels: "L0: 1:[a-c] 2:[b-z]",
			want:   "L0 -> L6: inputs 1,2 + none; move=false; bottom=true; score=1.00",
		},
		{
			name:   "L0CompactionThreshold 4: three deep is not due",
			opts:   Options{L0CompactionThreshold: 4},
			levels: "L0: 1:[a-c] 2:[b-d] 3:[c-e]",
			scores: "0.75 0 0 0 0 0 0",
			want:   "none",
		},
		{
			name:   "L0CompactionThreshold 4: four deep is due",
			opts:   Options{L0CompactionThreshold: 4},
			levels: "L0: 1:[a-c] 2:[b-d] 3:[c-e] 4:[c-c]\nL6: 5:[b-c]",
			want:   "L0 -> L6: inputs 1,2,3,4 + 5; move=false; bottom=true; score=1.00",
		},

		// The base level: the first level below L0 holding data, or the
		// level above it while it would hold over LBaseMaxBytes.
		{
			name:   "L0 goes into the base, the first level holding data: here L5",
			levels: "L0: 1:[a-c] 2:[b-d]\nL5: 3:[a-b]=1M\nL6: 4:[a-z]=100M",
			base:   5,
			scores: "1.00 0 0 0 0 0.02 0",
			want:   "L0 -> L5: inputs 1,2 + 3; move=false; bottom=false; score=1.00",
		},
		{
			name:   "a store of up to LBaseMaxBytes×10/9 has the last level for base",
			opts:   Options{LBaseMaxBytes: 10 * mb},
			levels: "L0: 1:[a-c] 2:[b-d]\nL6: 3:[a-z]=8M",
			base:   6,
			want:   "L0 -> L6: inputs 1,2 + 3; move=false; bottom=true; score=1.00",
		},
		{
			name:   "the base rises as the store grows past it: L0 goes into an empty L5",
			opts:   Options{LBaseMaxBytes: 10 * mb},
			levels: "L0: 1:[a-c] 2:[b-d]\nL6: 3:[a-z]=100M",
			base:   5,
			want:   "L0 -> L5: inputs 1,2 + none; move=false; bottom=false; score=1.00",
		},
		{
			name:    "an L0 compaction running into a level above the first holding data makes it the base",
			levels:  "L0: 1:[a-c] 2:[b-d]\nL6: 5:[a-z]=10M",
			running: []string{"L0->L5 [x-y]"},
			base:    5,
			want:    "L0 -> L5: inputs 1,2 + none; move=false; bottom=false; score=1.00",
		},

		// Deletions count the bytes they are expected to free below
		// (compensated sizes): here 0.5M an entry in L6 (table 5: 100
		// entries in 50M), so table 3's 50 deletions weigh 25M.
		{
			name:   "a level's deletions make it due before its bytes would",
			opts:   Options{LBaseMaxBytes: 10 * mb},
			levels: "L5: 3:[a-m]=2M!50 4:[n-z]=2M\nL6: 5:[a-z]=50M!0",
			base:   5,
			scores: "0 0 0 0 0 2.90 0",
			want:   "L5 -> L6: inputs 3 + 5; move=false; bottom=true; score=2.90",
		},
		{
			name:   "the same level without deletions is not due",
			opts:   Options{LBaseMaxBytes: 10 * mb},
			levels: "L5: 3:[a-m]=2M!0 4:[n-z]=2M\nL6: 5:[a-z]=50M!0",
			base:   5,
			scores: "0 0 0 0 0 0.40 0",
			want:   "none",
		},
		{
			name:   "deletions are worth nothing when no table below counts its entries",
			opts:   Options{LBaseMaxBytes: 10 * mb},
			levels: "L5: 3:[a-m]=2M!50 4:[n-z]=2M\nL6: 5:[a-z]=50M",
			base:   5,
			scores: "0 0 0 0 0 0.40 0",
			want:   "none",
		},
		{
			// L6 holds 300 entries in 50M, 1/6M each. Each L5 table
			// overlaps one 8M table; 3 moves 2M down, 4 1M and 60
			// deletions worth 10M: 4 rewrites the fewest bytes per
			// compensated byte (8/11 against 8/2), though 3 moves more
			// bytes. L5 scores (3M + 10M) / 10M.
			name:   "the picked table is the one with the fewest bytes rewritten per compensated byte",
			opts:   Options{LBaseMaxBytes: 10 * mb},
			levels: "L5: 3:[a-c]=2M!0 4:[x-z]=1M!60\nL6: 6:[a-d]=8M!0 7:[w-z]=8M!0 8:[e-v]=34M!0",
			base:   5,
			want:   "L5 -> L6: inputs 4 + 7; move=false; bottom=true; score=1.30",
		},

		// The levels from the base down: their bytes over targets that grow
		// from LBaseMaxBytes to the last level's share by a constant factor.
		{
			// Ratios of L6 bytes rewritten to L5 bytes moved: 2M/1M for
			// table 1, 4M/8M for table 2, 80M/4M for table 3. Table 1
			// rewrites the fewest bytes, table 2 the fewest per byte.
			name:   "the base over its target: the table with the least overlap ratio below goes",
			opts:   Options{LBaseMaxBytes: 10 * mb},
			levels: "L5: 1:[a-c]=1M 2:[d-f]=8M 3:[g-i]=4M\nL6: 4:[a-b]=2M 5:[e-e]=4M 6:[g-h]=80M",
			base:   5,
			scores: "0 0 0 0 0 1.30 0",
			want:   "L5 -> L6: inputs 2 + 5; move=false; bottom=true; score=1.30",
		},
		{
			name:   "a base table over nothing below moves",
			opts:   Options{LBaseMaxBytes: 10 * mb},
			levels: "L5: 1:[a-c]=6M 2:[d-f]=6M\nL6: 3:[a-b]=80M",
			want:   "L5 -> L6: inputs 2 + none; move=true; bottom=true; score=1.20",
		},
		{
			// 1076M in all: L6 is to hold 968.4M, L4 10M and L5 the
			// geometric mean, 98.4M.
			name:   "the level under the base has a target between the base's and the last's",
			opts:   Options{LBaseMaxBytes: 10 * mb},
			levels: "L4: 1:[a-c]=15M 2:[d-f]=10M\nL5: 3:[a-b]=1M 4:[d-e]=150M\nL6: 5:[a-z]=900M",
			base:   4,
			scores: "0 0 0 0 2.50 1.53 0",
			want:   "L4 -> L5: inputs 1 + 3; move=false; bottom=false; score=2.50",
		},
		{
			name:   "data left in L1 and L2 (say by a store of static targets) flows down",
			levels: "L1: 3:[a-z]=10M\nL2: 4:[a-z]=100M",
			base:   1,
			scores: "0 0.16 1.43 0 0 0 0",
			want:   "L2 -> L3: inputs 4 + none; move=true; bottom=true; score=1.43",
		},
		{
			name:   "the last level never scores",
			opts:   Options{LBaseMaxBytes: 1},
			levels: "L6: 1:[a-m]=100G 2:[n-z]=100G",
			base:   1,
			scores: "0 0 0 0 0 0 0",
			want:   "none",
		},
		{
			// L0's score (two deep: 1) is divided by the base's (2).
			name:   "the highest score wins: the base over L0",
			opts:   Options{LBaseMaxBytes: 10 * mb},
			levels: "L0: 1:[a-c] 2:[b-d]\nL5: 6:[a-c]=10M 7:[x-z]=10M\nL6: 8:[a-b]=80M",
			scores: "0.50 0 0 0 0 2.00 0",
			want:   "L5 -> L6: inputs 7 + none; move=true; bottom=true; score=2.00",
		},
		{
			// Ten deep: 5, over the base's 2.
			name:   "the highest score wins: L0 over the base",
			opts:   Options{LBaseMaxBytes: 10 * mb},
			levels: "L0: 1:[a-c] 2:[b-d] 3:[c-e] 4:[c-f] 5:[c-g] 9:[a-c] 10:[a-c] 11:[a-c] 12:[a-c] 13:[a-c]\nL5: 6:[a-c]=10M 7:[x-z]=10M\nL6: 8:[a-b]=80M",
			scores: "2.50 0 0 0 0 2.00 0",
			want:   "L0 -> L5: inputs 1,2,3,4,5,9,10,11,12,13 + 6; move=false; bottom=false; score=2.50",
		},
		{
			name:   "L0 holding L0StopWritesThreshold tables is not weighed against the base",
			opts:   Options{LBaseMaxBytes: 10 * mb, L0StopWritesThreshold: 4},
			levels: "L0: 1:[a-c] 2:[b-d] 3:[c-e] 4:[c-f]\nL5: 6:[a-c]=10M 7:[x-z]=10M\nL6: 8:[a-b]=80M",
			scores: "2.00 0 0 0 0 2.00 0",
			want:   "L0 -> L5: inputs 1,2,3,4 + 6; move=false; bottom=false; score=2.00",
		},

		// Busy tables and running compactions.
		{
			name:   "the best base table's table below is busy: the next best goes",
			opts:   Options{LBaseMaxBytes: 10 * mb},
			levels: "L5: 1:[a-c]=1M 2:[d-f]=8M 3:[g-i]=4M\nL6: 4:[a-b]=2M 5:[e-e]=4M 6:[g-h]=80M",
			busy:   "5",
			want:   "L5 -> L6: inputs 1 + 4; move=false; bottom=true; score=1.30",
		},
		{
			name:   "a base table under L0 is busy: L0 waits",
			levels: "L0: 1:[a-c] 2:[b-d]\nL6: 5:[a-b] 6:[c-g]",
			busy:   "6",
			scores: "1.00 0 0 0 0 0 0",
			want:   "none",
		},
		{
			name:   "busy tables do not count towards their level's score",
			opts:   Options{LBaseMaxBytes: 10 * mb},
			levels: "L5: 1:[a-c]=6M 2:[d-f]=6M\nL6: 3:[a-b]=80M",
			busy:   "1",
			scores: "0 0 0 0 0 0.60 0",
			want:   "none",
		},
		{
			name:    "a compaction running into L6 over the range: that base table waits, another goes",
			opts:    Options{LBaseMaxBytes: 10 * mb},
			levels:  "L5: 1:[a-b]=6M 2:[c-d]=6M 3:[m-n]=6M\nL6: 4:[c-e]=1M 5:[m-n]=70M",
			busy:    "1",
			running: []string{"L5->L6 [a-c]"},
			want:    "L5 -> L6: inputs 3 + 5; move=false; bottom=true; score=1.20",
		},
		{
			name:    "a compaction running into L6 over the range: none",
			opts:    Options{LBaseMaxBytes: 10 * mb},
			levels:  "L5: 1:[a-b]=6M 2:[c-d]=12M\nL6: 4:[c-e]=70M",
			busy:    "1",
			running: []string{"L5->L6 [a-c]"},
			scores:  "0 0 0 0 0 1.20 0",
			want:    "none",
		},
		{
			// The base rose to L5 while level 0's tables 1 and 2 merge
			// into L6; table 3, newer, overlaps them. Moved into L5, it
			// would sit below them until the merge ends.
			name:    "an L0 table overlapping a busy L0 table does not move, into a base above the merge's output either",
			opts:    Options{LBaseMaxBytes: 10 * mb},
			levels:  "L0: 1:[a-c] 2:[b-d] 3:[c-e]\nL6: 4:[a-z]=100M",
			busy:    "1 2 4",
			running: []string{"L0->L6 [a-z]"},
			base:    5,
			scores:  "0.50 0 0 0 0 0 0",
			want:    "none",
		},
		{
			name:    "an L0 table clear of the busy L0 tables moves into the base above the merge's output",
			opts:    Options{LBaseMaxBytes: 10 * mb},
			levels:  "L0: 1:[a-c] 2:[b-d] 3:[x-y]\nL6: 4:[a-m]=100M",
			busy:    "1 2 4",
			running: []string{"L0->L6 [a-m]"},
			base:    5,
			want:    "L0 -> L5: inputs 3 + none; move=true; bottom=true; score=1.00",
		},
		{
			name:    "a compaction running into the base over the range: L0 waits",
			levels:  "L0: 1:[a-c] 2:[b-d]\nL6: 5:[x-z]",
			running: []string{"L0->L6 [d-g]"},
			want:    "none",
		},
		{
			name:    "a compaction running into the base elsewhere: L0 goes",
			levels:  "L0: 1:[a-c] 2:[b-d]\nL6: 5:[x-z]",
			running: []string{"L0->L6 [g-h]"},
			want:    "L0 -> L6: inputs 1,2 + none; move=false; bottom=true; score=1.00",
		},
		{
			name:    "the highest-scoring level cannot go: the next one does",
			opts:    Options{LBaseMaxBytes: 10 * mb},
			levels:  "L0: 1:[a-c] 2:[b-d] 3:[a-d] 4:[b-c]\nL5: 6:[a-c]=10M 7:[m-n]=10M\nL6: 8:[a-b]=80M",
			running: []string{"L5->L6 [a-z]"},
			scores:  "1.00 0 0 0 0 2.00 0",
			want:    "L0 -> L5: inputs 1,2,3,4 + 6; move=false; bottom=false; score=1.00",
		},

		// bottom: whether a level below the output holds keys in range.
		{
			name:   "bottom unset: L2 holds keys in the range",
			opts:   Options{L0CompactionThreshold: 1},
			levels: "L0: 1:[c-d]\nL1: 2:[a-c]\nL2: 3:[b-b]",
			want:   "L0 -> L1: inputs 1 + 2; move=false; bottom=false; score=1.00",
		},
		{
			name:   "bottom unset: the last level holds keys in the range",
			opts:   Options{L0CompactionThreshold: 1},
			levels: "L0: 1:[c-d]\nL1: 2:[a-c]\nL6: 3:[d-e]",
			want:   "L0 -> L1: inputs 1 + 2; move=false; bottom=false; score=1.00",
		},
		{
			name:   "bottom set: the deeper levels hold keys outside the range only",
			opts:   Options{L0CompactionThreshold: 1},
			levels: "L0: 1:[c-d]\nL1: 2:[a-c]\nL2: 3:[e-f]\nL6: 4:[0-9]",
			want:   "L0 -> L1: inputs 1 + 2; move=false; bottom=true; score=1.00",
		},
		{
			name:    "bottom unset: a compaction running into a deeper level over the range",
			opts:    Options{L0CompactionThreshold: 1},
			levels:  "L0: 1:[c-d]\nL1: 2:[a-c]",
			running: []string{"L3->L4 [b-b]"},
			want:    "L0 -> L1: inputs 1 + 2; move=false; bottom=false; score=1.00",
		},

		// Elision-only compactions: when no level is due, a last-level table
		// whose deletions ("!n": n of its 100 entries) every snapshot sees.
		{
			name:   "no level due: the last-level table densest in deletions is rewritten alone",
			levels: "L6: 1:[a-c]!40 2:[d-f]!60 3:[g-h]",
			want:   "L6 -> L6: inputs 2 + none; move=false; bottom=true; score=0.60",
		},
		{
			name:   "fewer than elisionMinShare of its entries deletions: none",
			levels: "L6: 1:[a-c]!9",
			want:   "none",
		},
		{
			name:      "a snapshot that does not see a table's deletions holds it back",
			levels:    "L6: 1:[a-c]!40 2:[d-f]!60",
			snapshots: "2",
			want:      "L6 -> L6: inputs 1 + none; move=false; bottom=true; score=0.40",
		},
		{
			name:   "a level due goes first",
			levels: "L0: 1:[a-c] 2:[b-d]\nL6: 3:[a-z]!50",
			want:   "L0 -> L6: inputs 1,2 + 3; move=false; bottom=true; score=1.00",
		},
		{
			name:   "a busy table waits",
			levels: "L6: 1:[a-c]!40",
			busy:   "1",
			want:   "none",
		},
		{
			name:   "above the last level, the densest table goes into the next level with the tables it overlaps",
			levels: "L5: 1:[a-c]!40 2:[d-f]!60 3:[g-h]!5\nL6: 4:[a-b]!0 5:[c-e]!0 6:[f-z]!0",
			want:   "L5 -> L6: inputs 2 + 5,6; move=false; bottom=true; score=0.60",
		},
		{
			name:   "a denser table whose overlap is busy yields to the next",
			levels: "L5: 1:[a-c]!50 2:[d-f]!60\nL6: 4:[a-b]!0 5:[c-e]!0 6:[f-z]!0",
			busy:   "6",
			want:   "L5 -> L6: inputs 1 + 4,5; move=false; bottom=true; score=0.50",
		},
		{
			// L6 holds 200 entries in 20M, 0.1M each. Table 1's 60
			// deletions free 6M, over a quarter of the 20M it would
			// rewrite; 40 would free 4M, under it.
			name:   "a table of deletions over all of the level below is compacted only when it frees a quarter of what it rewrites",
			levels: "L5: 1:[a-m]=1M!60\nL6: 11:[a-f]=10M!0 12:[g-m]=10M!0",
			want:   "L5 -> L6: inputs 1 + 11,12; move=false; bottom=true; score=0.60",
		},
		{
			name:   "and not when it frees less",
			levels: "L5: 1:[a-m]=1M!40\nL6: 11:[a-f]=10M!0 12:[g-m]=10M!0",
			want:   "none",
		},
		{
			name:      "a snapshot that does not see a table's deletions holds it back, above the last level too",
			levels:    "L5: 1:[a-c]!40\nL6: 4:[a-z]",
			snapshots: "1",
			want:      "none",
		},
		{
			name:   "a table of deletions overlapping nothing below moves down",
			levels: "L4: 1:[a-c]!50\nL6: 2:[x-z]",
			want:   "L4 -> L5: inputs 1 + none; move=true; bottom=true; score=0.50",
		},

		{
			name:       "no background compaction starts while Compact is under way",
			levels:     "L0: 1:[a-c] 2:[b-d]\nL6: 3:[a-b] 4:[c-g] 5:[h-k]",
			compacting: true,
			scores:     "1.00 0 0 0 0 0 0",
			want:       "none",
		},

		// Compact's steps (manualSetupLocked).
		{
			name:   "Compact: L0 over empty levels goes into the last level",
			levels: "L0: 1:[a-c] 2:[b-d]",
			manual: "L0: 1 2",
			want:   "L0 -> L6: inputs 1,2 + none; move=false; bottom=true",
		},
		{
			name:   "Compact: L1's tables under L0 move to the last level first",
			levels: "L0: 1:[a-m] 2:[c-z]\nL1: 3:[a-f] 4:[g-z]",
			manual: "L0: 1 2",
			want:   "L1 -> L6: inputs 3,4 + none; move=true; bottom=false",
		},
		{
			name:   "Compact: then L0 merges into them there, once",
			levels: "L0: 1:[a-m] 2:[c-z]\nL6: 3:[a-f] 4:[g-z]",
			manual: "L0: 1 2",
			want:   "L0 -> L6: inputs 1,2 + 3,4; move=false; bottom=true",
		},
		{
			name:   "Compact: empty levels are skipped: the inputs merge with the first level holding keys in range into the next",
			levels: "L0: 1:[a-c]\nL3: 2:[b-d]\nL5: 3:[a-z]",
			manual: "L0: 1",
			want:   "L0 -> L5: inputs 1 + 2 (L3) + 3; move=false; bottom=true",
		},
		{
			name:   "Compact: a level holding keys outside the range only is skipped, twice",
			levels: "L1: 1:[a-c]\nL2: 2:[x-z]\nL4: 3:[b-d]=5M\nL5: 4:[c-c]",
			manual: "L1: 1",
			want:   "L1 -> L5: inputs 1 + 3 (L4) + 4; move=false; bottom=true",
		},
		{
			name:   "Compact: L0 merges with the base and the last level at once",
			levels: "L0: 1:[a-c] 2:[b-d]\nL5: 3:[a-b]\nL6: 4:[a-z]",
			manual: "L0: 1 2",
			want:   "L0 -> L6: inputs 1,2 + 3 (L5) + 4; move=false; bottom=true",
		},
		{
			name:   "Compact: L0 merges with every level below holding keys in range at once",
			levels: "L0: 1:[a-c] 2:[b-d]\nL4: 3:[a-b]\nL5: 4:[a-e]\nL6: 5:[a-z]",
			manual: "L0: 1 2",
			want:   "L0 -> L6: inputs 1,2 + 3 (L4) + 4 (L5) + 5; move=false; bottom=true",
		},
		{
			name:   "Compact: every level would widen the range onto another table of one between: three levels",
			levels: "L0: 1:[c-d]\nL4: 2:[c-e]\nL5: 3:[a-f] 4:[g-h]\nL6: 5:[a-z]",
			manual: "L0: 1",
			want:   "L0 -> L5: inputs 1 + 2 (L4) + 3; move=false; bottom=false",
		},
		{
			name:    "Compact: a compaction running into a level between the ones read: not that far",
			levels:  "L1: 1:[a-c]\nL2: 2:[a-d]\nL4: 3:[a-z]\nL6: 4:[a-z]",
			running: []string{"L3->L5 [b-b]"},
			manual:  "L1: 1",
			want:    "L1 -> L4: inputs 1 + 2 (L2) + 3; move=false; bottom=false",
		},
		{
			name:   "Compact: three levels would widen the range onto another table of the middle one: two levels",
			levels: "L0: 1:[c-d]\nL5: 2:[c-e] 3:[f-g]\nL6: 4:[a-z]",
			manual: "L0: 1",
			want:   "L0 -> L5: inputs 1 + 2; move=false; bottom=false",
		},
		{
			name:   "Compact: the output level's tables widen the range onto a level between: the next level instead",
			levels: "L0: 1:[c-d]\nL1: 2:[e-f]\nL2: 3:[a-z]\nL3: 4:[y-z]",
			manual: "L0: 1",
			want:   "L0 -> L1: inputs 1 + none; move=true; bottom=false",
		},
		{
			name:   "Compact: a busy table under the inputs",
			levels: "L0: 1:[a-c]\nL3: 2:[b-d]\nL5: 3:[a-z]",
			busy:   "2",
			manual: "L0: 1",
			want:   "none",
		},
		{
			name:   "Compact: a busy table to move to the last level first",
			levels: "L0: 1:[a-c]\nL1: 2:[a-b]",
			busy:   "2",
			manual: "L0: 1",
			want:   "none",
		},
		{
			name:    "Compact: a compaction running into the last level over the range: no move, a merge into the level below",
			levels:  "L1: 1:[a-c]\nL2: 2:[b-d]",
			running: []string{"L5->L6 [c-c]"},
			manual:  "L1: 1",
			want:    "L1 -> L2: inputs 1 + 2; move=false; bottom=false",
		},
		{
			name:    "Compact: a compaction running into an empty level between: none",
			levels:  "L1: 1:[a-c]\nL3: 2:[a-z]",
			running: []string{"L0->L2 [b-b]"},
			manual:  "L1: 1",
			want:    "none",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := c.opts.withDefaultsMust(t)
			v := parseLevels(t, c.levels)
			d := &DB{opts: o, version: v, busy: map[uint64]bool{}, fileRefs: map[uint64]int{}, elide: map[uint64]elisionCandidate{}}
			d.noteElisionLocked(&manifest.VersionEdit{NewFiles: newFiles(v)})
			for _, s := range strings.Fields(c.snapshots) {
				d.snapshots = append(d.snapshots, base.SeqNum(parseUint(t, s)))
			}
			for _, f := range strings.Fields(c.busy) {
				d.busy[parseUint(t, f)] = true
			}
			for _, r := range c.running {
				d.running = append(d.running, parseRunning(t, r))
			}
			if c.compacting {
				d.manualCompacts = 1
			}
			if c.base != 0 {
				if got := d.levelTargets(v, d.running).base; got != c.base {
					t.Errorf("base level L%d, want L%d", got, c.base)
				}
			}
			if c.scores != "" {
				if got := renderScores(d.levelScoresLocked(v)); got != c.scores {
					t.Errorf("scores %s, want %s", got, c.scores)
				}
			}
			var picked *compaction
			if c.manual != "" {
				l, inputs := parseManual(t, v, c.manual)
				picked = d.manualSetupLocked(l, inputs)
			} else {
				running := len(d.running)
				picked = d.pickAutoLocked()
				if picked != nil {
					// The pick is started: its tables are busy, and it
					// is running.
					for _, f := range append(slices.Clone(picked.inputs[0]), picked.inputs[1]...) {
						if !d.busy[f.FileNum] {
							t.Errorf("table %d picked but not marked busy", f.FileNum)
						}
					}
					if len(d.running) != running+1 || d.running[running] != picked {
						t.Errorf("the pick is not among the running compactions")
					}
				}
			}
			if got := renderCompaction(picked); got != c.want {
				t.Errorf("levels:\n%s\npicked %s\nwant   %s", c.levels, got, c.want)
			}
		})
	}
}

// parseLevels builds a version from lines "L1: 3:[a-b] 4:[c-e]=8M".
func parseLevels(t *testing.T, s string) *manifest.Version {
	t.Helper()
	edit := &manifest.VersionEdit{}
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		name, tables, ok := strings.Cut(line, ":")
		if !ok || !strings.HasPrefix(name, "L") {
			t.Fatalf("bad level line %q", line)
		}
		l := int(parseUint(t, name[1:]))
		for _, tok := range strings.Fields(tables) {
			tok, dels, _ := strings.Cut(tok, "!")
			tok, size, _ := strings.Cut(tok, "=")
			num, rng, ok := strings.Cut(tok, ":")
			if !ok {
				t.Fatalf("bad table %q", tok)
			}
			lo, hi := parseRange(t, rng)
			f := &manifest.FileMetadata{FileNum: parseUint(t, num), Size: 1 << 20}
			seq := base.SeqNum(f.FileNum)
			f.Smallest = base.MakeInternalKey(lo, seq, base.KindSet)
			f.Largest = base.MakeInternalKey(hi, seq, base.KindSet)
			f.SmallestSeq, f.LargestSeq = seq, seq
			if size != "" {
				f.Size = parseSize(t, size)
			}
			if dels != "" {
				f.Entries, f.Deletions = 100, parseUint(t, dels)
			}
			edit.NewFiles = append(edit.NewFiles, manifest.NewFile{Level: l, Meta: f})
		}
	}
	v, err := (&manifest.Version{}).Apply(edit)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// parseRange parses "[lo-hi]".
func parseRange(t *testing.T, s string) (lo, hi []byte) {
	t.Helper()
	inner, ok := strings.CutPrefix(s, "[")
	inner, ok2 := strings.CutSuffix(inner, "]")
	a, b, ok3 := strings.Cut(inner, "-")
	if !ok || !ok2 || !ok3 {
		t.Fatalf("bad key range %q", s)
	}
	return []byte(a), []byte(b)
}

// parseRunning parses a running compaction, "L1->L2 [a-c]".
func parseRunning(t *testing.T, s string) *compaction {
	t.Helper()
	levels, rng, ok := strings.Cut(s, " ")
	from, into, ok2 := strings.Cut(levels, "->")
	if !ok || !ok2 {
		t.Fatalf("bad running compaction %q", s)
	}
	c := &compaction{level: parseLevel(t, from), outputLevel: parseLevel(t, into)}
	c.lo, c.hi = parseRange(t, rng)
	return c
}

// parseManual parses "L0: 1 2" into the level and its tables so numbered.
func parseManual(t *testing.T, v *manifest.Version, s string) (int, []*manifest.FileMetadata) {
	t.Helper()
	name, nums, _ := strings.Cut(s, ":")
	l := parseLevel(t, name)
	var inputs []*manifest.FileMetadata
	for _, n := range strings.Fields(nums) {
		files := v.Files(l)
		i := slices.IndexFunc(files, func(f *manifest.FileMetadata) bool { return f.FileNum == parseUint(t, n) })
		if i < 0 {
			t.Fatalf("%s: L%d holds no table %s", s, l, n)
		}
		inputs = append(inputs, files[i])
	}
	return l, inputs
}

func parseLevel(t *testing.T, s string) int {
	t.Helper()
	l, ok := strings.CutPrefix(s, "L")
	if !ok {
		t.Fatalf("bad level %q", s)
	}
	return int(parseUint(t, l))
}

func parseUint(t *testing.T, s string) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// parseSize parses a byte count with an optional K, M or G suffix.
func parseSize(t *testing.T, s string) uint64 {
	t.Helper()
	shift := 0
	switch {
	case strings.HasSuffix(s, "K"):
		shift = 10
	case strings.HasSuffix(s, "M"):
		shift = 20
	case strings.HasSuffix(s, "G"):
		shift = 30
	}
	if shift > 0 {
		s = s[:len(s)-1]
	}
	return parseUint(t, s) << shift
}

func renderScores(s [manifest.NumLevels]float64) string {
	parts := make([]string, len(s))
	for l, x := range s {
		parts[l] = "0"
		if x != 0 {
			parts[l] = fmt.Sprintf("%.2f", x)
		}
	}
	return strings.Join(parts, " ")
}

func renderCompaction(c *compaction) string {
	if c == nil {
		return "none"
	}
	nums := func(files []*manifest.FileMetadata) string {
		if len(files) == 0 {
			return "none"
		}
		var ns []uint64
		for _, f := range files {
			ns = append(ns, f.FileNum)
		}
		slices.Sort(ns)
		return strings.Trim(strings.Join(strings.Fields(fmt.Sprint(ns)), ","), "[]")
	}
	mid := ""
	for l := range manifest.NumLevels {
		var files []*manifest.FileMetadata
		for i, f := range c.mid {
			if c.midLevels[i] == l {
				files = append(files, f)
			}
		}
		if len(files) > 0 {
			mid += fmt.Sprintf(" + %s (L%d)", nums(files), l)
		}
	}
	s := fmt.Sprintf("L%d -> L%d: inputs %s%s + %s; move=%t; bottom=%t", c.level, c.outputLevel, nums(c.inputs[0]), mid, nums(c.inputs[1]), c.move, c.bottom)
	if c.score != 0 {
		s += fmt.Sprintf("; score=%.2f", c.score)
	}
	return s
}

// newFiles lists every table of v as added by an edit.
func newFiles(v *manifest.Version) []manifest.NewFile {
	var out []manifest.NewFile
	for l, f := range v.All() {
		out = append(out, manifest.NewFile{Level: l, Meta: f})
	}
	return out
}
