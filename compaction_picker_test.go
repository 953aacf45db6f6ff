package bloomkv

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/bloomkv/bloomkv/internal/base"
	"github.com/bloomkv/bloomkv/internal/manifest"
	"github.com/cockroachdb/datadriven"
)

// TestCompactionPicker runs the datadriven files under
// testdata/compaction_picker: each gives the picker hand-built levels and
// checks the compaction it picks, pickAutoLocked (the level scores' choice)
// or manualSetupLocked (one step of Compact). go test -rewrite rewrites the
// files' expected outputs.
//
// define sets up a store; its input holds one line a level, "L1: 3:[a-b]
// 4:[c-e]=8M!40": each table is its number, its key range, after "=" its
// size (K, M and G suffixes; 1M if left out) and after "!" its deletions
// out of 100 entries (entries left uncounted if left out). A table's
// sequence numbers are its number, so that a higher number is a newer
// level-0 table. Lines "running: L1->L2 [a-c]" add a compaction under way
// (from, into, and the key range it writes). Its arguments:
//
//	l0_compaction_threshold=N, l0_stop_writes_threshold=N,
//	lbase_max_bytes=SIZE   the options so named (defaults otherwise)
//	busy=(N, ...)          the tables running compactions hold
//	snapshots=(N, ...)     the read sequence numbers of open snapshots,
//	                       ascending
//	compacting             a Compact call is under way
//
// It prints the base level levelTargets computes and levelScores for L0 to
// L6.
//
// pick runs pickAutoLocked on the store last defined, and starts what it
// picks: its tables become busy and it joins the running compactions, so a
// second pick sees the first under way. pick-manual runs manualSetupLocked
// on the level and tables of its input, "L0: 1 2". Both print the pick,
// "L0 -> L1: inputs 1,2 + 3,4; move=false; bottom=true; score=1.00" (inputs
// of the level, of any levels between as "+ 5 (L3)", then of the output
// level; the score only for automatic picks), or "none".
func TestCompactionPicker(t *testing.T) {
	datadriven.Walk(t, "testdata/compaction_picker", func(t *testing.T, path string) {
		var d *DB
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			switch td.Cmd {
			case "define":
				d = definePickerDB(t, td)
				return fmt.Sprintf("base: L%d\nscores: %s\n",
					d.levelTargets(d.mu.version, d.mu.running).base, renderScores(d.levelScoresLocked(d.mu.version)))
			case "pick":
				if d == nil {
					td.Fatalf(t, "pick before define")
				}
				running := len(d.mu.running)
				picked := d.pickAutoLocked()
				if picked != nil {
					// The pick is started: its tables are busy, and it is
					// running.
					for _, f := range append(slices.Clone(picked.inputs[0]), picked.inputs[1]...) {
						if !d.mu.busy[f.FileNum] {
							t.Errorf("%s: table %d picked but not marked busy", td.Pos, f.FileNum)
						}
					}
					if len(d.mu.running) != running+1 || d.mu.running[running] != picked {
						t.Errorf("%s: the pick is not among the running compactions", td.Pos)
					}
				}
				return renderCompaction(picked) + "\n"
			case "pick-manual":
				if d == nil {
					td.Fatalf(t, "pick-manual before define")
				}
				l, inputs := parseManual(t, d.mu.version, strings.TrimSpace(td.Input))
				return renderCompaction(d.manualSetupLocked(l, inputs)) + "\n"
			default:
				td.Fatalf(t, "unknown command %q", td.Cmd)
				return ""
			}
		})
	})
}

// definePickerDB builds the DB a define command describes (see
// TestCompactionPicker): its options, levels, running compactions, busy
// tables, snapshots and Compact calls under way.
func definePickerDB(t *testing.T, td *datadriven.TestData) *DB {
	t.Helper()
	var opts Options
	for _, arg := range td.CmdArgs {
		switch arg.Key {
		case "l0_compaction_threshold":
			arg.Scan(t, 0, &opts.L0CompactionThreshold)
		case "l0_stop_writes_threshold":
			arg.Scan(t, 0, &opts.L0StopWritesThreshold)
		case "lbase_max_bytes":
			opts.LBaseMaxBytes = int64(parseSize(t, arg.SingleVal(t)))
		case "busy", "snapshots", "compacting":
		default:
			td.Fatalf(t, "unknown argument %q", arg.Key)
		}
	}
	var levels []string
	var running []*compaction
	for _, line := range strings.Split(strings.TrimSpace(td.Input), "\n") {
		if r, ok := strings.CutPrefix(line, "running:"); ok {
			running = append(running, parseRunning(t, strings.TrimSpace(r)))
		} else {
			levels = append(levels, line)
		}
	}
	v := parseLevels(t, strings.Join(levels, "\n"))
	d := &DB{opts: opts.withDefaultsMust(t)}
	d.mu.version = v
	d.mu.running = running
	d.mu.busy = map[uint64]bool{}
	d.mu.fileRefs = map[uint64]int{}
	d.mu.elide = map[uint64]elisionCandidate{}
	d.noteElisionLocked(&manifest.VersionEdit{NewFiles: newFiles(v)})
	if arg, ok := td.Arg("snapshots"); ok {
		for _, s := range arg.Vals {
			d.mu.snapshots = append(d.mu.snapshots, base.SeqNum(parseUint(t, s)))
		}
	}
	if arg, ok := td.Arg("busy"); ok {
		for _, f := range arg.Vals {
			d.mu.busy[parseUint(t, f)] = true
		}
	}
	if td.HasArg("compacting") {
		d.mu.manualCompacts = 1
	}
	return d
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
