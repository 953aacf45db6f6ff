package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"os/signal"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/bloomkv/bloomkv/semijoin"
)

// isRemote reports whether a store argument is a served store's URL.
func isRemote(arg string) bool {
	return strings.HasPrefix(arg, "http://") || strings.HasPrefix(arg, "https://")
}

// side is one store of join, estimate or diff, metered for the progress
// line.
type side struct {
	arg   string
	s     semijoin.Differ
	m     *meter
	close func() error
}

// openSide opens a store argument: a directory, read-only, or a URL,
// dialled with o.
func openSide(arg string, o *semijoin.DialOptions) (*side, error) {
	m := &meter{}
	m.keys.Store(-1)
	if isRemote(arg) {
		s, err := semijoin.DialWith(arg, o)
		if err != nil {
			return nil, err
		}
		return &side{arg: arg, s: metered{s, m}, m: m, close: func() error { return nil }}, nil
	}
	if _, err := os.Stat(arg); errors.Is(err, fs.ErrNotExist) && hostPort.MatchString(arg) {
		return nil, usageError{fmt.Errorf("%q is not a directory, and a served store's URL starts with http:// or https:// (try http://%s)", arg, arg)}
	}
	d, err := openDB(arg)
	if err != nil {
		return nil, err
	}
	l := semijoin.Local(d, semijoin.Limits{})
	return &side{arg: arg, s: metered{l, m}, m: m, close: d.Close}, nil
}

// dialFlags are the flags of the two-store commands that say how to reach
// a served store: they apply to every side that is a URL.
type dialFlags struct {
	ca, cert, key                     string
	tokenFile, tokenFileA, tokenFileB string
}

func (f *dialFlags) register(c *cobra.Command) {
	c.Flags().StringVar(&f.ca, "ca", "", "trust the PEM CA certificates in FILE for an https:// store (instead of the system's)")
	c.Flags().StringVar(&f.cert, "cert", "", "present this PEM client certificate to an https:// store (mutual TLS); needs --key")
	c.Flags().StringVar(&f.key, "key", "", "the PEM private key of --cert")
	c.Flags().StringVar(&f.tokenFile, "token-file", "", "send the bearer token held in FILE to the served store (both, only when they are one server)")
	c.Flags().StringVar(&f.tokenFileA, "token-file-a", "", "send the bearer token held in FILE to A, a served store")
	c.Flags().StringVar(&f.tokenFileB, "token-file-b", "", "send the bearer token held in FILE to B, a served store")
}

// options checks the flags against the store arguments and returns the
// options to dial A and B with (nil for a directory). The token files are
// read here, once. One token never goes to two servers: a token for one
// would be handed to the other.
func (f *dialFlags) options(e *env, args []string) ([2]*semijoin.DialOptions, error) {
	var out [2]*semijoin.DialOptions
	if (f.cert == "") != (f.key == "") {
		return out, usageError{fmt.Errorf("--cert and --key go together")}
	}
	if f.tokenFile != "" && (f.tokenFileA != "" || f.tokenFileB != "") {
		return out, usageError{fmt.Errorf("--token-file, or --token-file-a and --token-file-b, not both")}
	}
	if (f.ca != "" || f.cert != "" || f.tokenFile != "") && !slices.ContainsFunc(args, isRemote) {
		return out, usageError{fmt.Errorf("--ca, --cert, --key and --token-file are for a served store, and neither %s nor %s is a URL", args[0], args[1])}
	}
	if f.tokenFile != "" && isRemote(args[0]) && isRemote(args[1]) && origin(args[0]) != origin(args[1]) {
		return out, usageError{fmt.Errorf("--token-file would send one token to two servers, %s and %s: give each its own with --token-file-a and --token-file-b", origin(args[0]), origin(args[1]))}
	}
	tokens := [2]string{f.tokenFileA, f.tokenFileB}
	for i, arg := range args[:2] {
		if tokens[i] != "" && !isRemote(arg) {
			return out, usageError{fmt.Errorf("--token-file-%c is for a served store, and %s is not a URL", 'a'+i, arg)}
		}
		if tokens[i] == "" {
			tokens[i] = f.tokenFile
		}
	}
	https := func(a string) bool { return strings.HasPrefix(a, "https://") }
	for i, arg := range args[:2] {
		if !isRemote(arg) {
			continue
		}
		token, err := e.tokenOf(tokens[i])
		if err != nil {
			return out, err
		}
		o := &semijoin.DialOptions{Token: token}
		// The TLS files go to https:// stores alone when the other side is
		// a plain http:// one; given for http:// stores only, they go to
		// them, which DialWith refuses with its reason.
		if https(arg) || !slices.ContainsFunc(args, https) {
			o.CAFile, o.CertFile, o.KeyFile = f.ca, f.cert, f.key
		}
		out[i] = o
	}
	return out, nil
}

// origin is a store URL's scheme and host: the server it names.
func origin(arg string) string {
	u, err := url.Parse(arg)
	if err != nil {
		return arg
	}
	return u.Scheme + "://" + u.Host
}

// hostPort matches a store argument that names a server without its
// scheme: host:port, perhaps with a path.
var hostPort = regexp.MustCompile(`^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):[0-9]{1,5}(/.*)?$`)

// withSides opens the stores a and b, runs fn on them with a context that
// SIGINT and SIGTERM cancel, and closes them. The same directory named
// twice is opened once (a store is locked while open).
func (e *env) withSides(a, b string, o [2]*semijoin.DialOptions, fn func(ctx context.Context, a, b *side) error) error {
	sa, err := openSide(a, o[0])
	if err != nil {
		return err
	}
	var sb *side
	if sameDir(a, b) {
		m := &meter{}
		m.keys.Store(-1)
		sb = &side{arg: b, s: metered{sa.s.(metered).Differ, m}, m: m, close: func() error { return nil }}
	} else if sb, err = openSide(b, o[1]); err != nil {
		sa.close()
		return err
	}
	ctx, stop := signal.NotifyContext(e.ctx, os.Interrupt, syscall.SIGTERM)
	err = fn(ctx, sa, sb)
	stop()
	if errors.Is(err, semijoin.ErrUnauthorized) {
		err = fmt.Errorf("refused by the served store (see --token-file, --cert and --key): %w", err)
	}
	return errors.Join(err, sa.close(), sb.close())
}

// sameDir reports whether a and b name the same directory.
func sameDir(a, b string) bool {
	if isRemote(a) || isRemote(b) {
		return false
	}
	fa, errA := os.Stat(a)
	fb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(fa, fb)
}

// meter counts what a side has streamed, for the progress line.
type meter struct {
	records atomic.Int64 // records streamed to this side's caller
	keys    atomic.Int64 // the side's keys, once Stats has said; -1 before
	symbols atomic.Int64 // coded symbols asked of its sketch
}

// metered counts the records a store streams.
type metered struct {
	semijoin.Differ
	m *meter
}

// KeysOnly forwards the wrapped store's word that it serves keys only
// (semijoin.KeysOnlyStore).
func (s metered) KeysOnly() bool { return keysOnly(s.Differ) }

// keysOnly reports whether s has said it serves keys without values.
func keysOnly(s semijoin.Store) bool {
	k, ok := s.(semijoin.KeysOnlyStore)
	return ok && k.KeysOnly()
}

func (s metered) count(fn func(k, v []byte) error) func(k, v []byte) error {
	return func(k, v []byte) error {
		s.m.records.Add(1)
		return fn(k, v)
	}
}

func (s metered) Stats(ctx context.Context, r semijoin.KeyRange, passing []byte) (semijoin.Stats, error) {
	st, err := s.Differ.Stats(ctx, r, passing)
	if err == nil && passing == nil {
		s.m.keys.Store(st.Keys)
	}
	return st, err
}

func (s metered) Probe(ctx context.Context, r semijoin.KeyRange, filter []byte, values bool, fn func(k, v []byte) error) error {
	return s.Differ.Probe(ctx, r, filter, values, s.count(fn))
}

func (s metered) Lookup(ctx context.Context, r semijoin.KeyRange, keys [][]byte, values bool, fn func(k, v []byte) error) error {
	return s.Differ.Lookup(ctx, r, keys, values, s.count(fn))
}

func (s metered) Scan(ctx context.Context, r semijoin.KeyRange, fn func(k, v []byte) error) error {
	return s.Differ.Scan(ctx, r, s.count(fn))
}

func (s metered) Resolve(ctx context.Context, r semijoin.KeyRange, seed uint64, hashes []uint64, fn func(k, v []byte) error) error {
	return s.Differ.Resolve(ctx, r, seed, hashes, s.count(fn))
}

func (s metered) Sketch(ctx context.Context, r semijoin.KeyRange, seed uint64) (semijoin.Sketcher, error) {
	sk, err := s.Differ.Sketch(ctx, r, seed)
	if err != nil {
		return nil, err
	}
	return meteredSketch{sk, s.m}, nil
}

type meteredSketch struct {
	semijoin.Sketcher
	m *meter
}

func (s meteredSketch) Next(ctx context.Context, n int) ([]byte, error) {
	b, err := s.Sketcher.Next(ctx, n)
	if err == nil {
		s.m.symbols.Add(int64(n))
	}
	return b, err
}

// rangeFlags are the --start and --end flags of the two-store commands.
type rangeFlags struct {
	startArg, endArg string
	r                semijoin.KeyRange
}

func (f *rangeFlags) register(c *cobra.Command) {
	c.Flags().StringVar(&f.startArg, "start", "", "first key of the range (inclusive; hex:... for hex)")
	c.Flags().StringVar(&f.endArg, "end", "", "key the range stops before (exclusive; hex:... for hex)")
}

func (f *rangeFlags) parse(c *cobra.Command) error {
	b := bounds{startArg: f.startArg, endArg: f.endArg}
	if err := b.parse(c); err != nil {
		return err
	}
	if b.start != nil && b.end != nil && string(b.start) >= string(b.end) {
		return usageError{fmt.Errorf("--start %s is not before --end %s", quoteKey(b.start), quoteKey(b.end))}
	}
	f.r = semijoin.KeyRange{Start: b.start, End: b.end}
	return nil
}

const twoStoresHelp = `A and B are each a store's directory (opened read-only, as the db commands
open it) or the http:// or https:// URL that bloomkv serve printed for one.
For a served store, --ca names the CAs that signed its certificate (instead
of the system's), --cert and --key a client certificate for one that asks
for it (mutual TLS), and --token-file a file holding its bearer token; they
apply to each side that is a URL. A refusal (401, 403, a certificate turned
down) exits 1 with one line.`

type matchOut struct {
	Key string  `json:"key"`
	A   string  `json:"a"`
	B   *string `json:"b,omitempty"`
}

type sideStatsOut struct {
	Keys       int64 `json:"keys"`
	KeyBytes   int64 `json:"key_bytes"`
	ValueBytes int64 `json:"value_bytes"`
}

type joinOut struct {
	Strategy       string             `json:"strategy"`
	Asked          string             `json:"asked"`
	Semi           bool               `json:"semi"`
	A              sideStatsOut       `json:"a"`
	B              sideStatsOut       `json:"b"`
	BytesAToB      int64              `json:"bytes_a_to_b"`
	BytesBToA      int64              `json:"bytes_b_to_a"`
	FilterBytes    int64              `json:"filter_bytes"`
	FilterFPRate   float64            `json:"filter_fp_rate"`
	Candidates     int64              `json:"candidates"`
	FalsePositives int64              `json:"false_positives"`
	Matches        int64              `json:"matches"`
	Stopped        bool               `json:"stopped_at_limit,omitempty"`
	KeysOnlyB      bool               `json:"keys_only_b,omitempty"`
	Expected       map[string]float64 `json:"expected_bytes"`
}

func joinCmd(e *env) *cobra.Command {
	var strategy string
	var semi bool
	var limit int
	var rf rangeFlags
	var df dialFlags
	var fm formats
	c := &cobra.Command{
		Use:   "join [--strategy S] [--semi] [--start K] [--end K] [--limit N] A B",
		Short: "Print the keys two stores both hold, with both values, moving little data between them",
		Long: `Join stores A and B on their keys (semijoin.Join): print each key both hold,
in key order, with A's value and B's ("key" "a" "b"; with --semi, A ⋉ B, A's
records whose key B holds, "key" "a"), then a report: the strategy, the bytes
that crossed each way, the records B sent (candidates), those A does not hold
(false positives of a filter, dropped) and the matches.

--strategy picks how data moves: keys (A sends its keys), filter (a Bloom
filter of A's keys; B sends the records that pass), compressed (a sparse
filter, sent compressed), two-way (filters both ways, then keys), or auto,
the fewest expected bytes. The result is the same whichever: exact.

` + twoStoresHelp + `

--limit N prints the first N matches; the report then counts those and
covers the work done until the join stopped. The matches go to stdout and
the report to stderr; with --json each match is a JSON object on stdout,
and the report one on stderr.
While it runs, a progress line shows on stderr when stderr is a terminal.`,
		Args: args(cobra.ExactArgs(2)),
		RunE: func(c *cobra.Command, a []string) error {
			st, err := semijoin.ParseStrategy(strategy)
			if err != nil {
				return usageError{err}
			}
			if limit < 0 {
				return usageError{fmt.Errorf("--limit %d is negative", limit)}
			}
			if err := rf.parse(c); err != nil {
				return err
			}
			o := &semijoin.Options{Range: rf.r, Strategy: st, SemiJoin: semi}
			do, err := df.options(e, a)
			if err != nil {
				return err
			}
			return e.withSides(a[0], a[1], do, func(ctx context.Context, sa, sb *side) error {
				return e.join(ctx, sa, sb, o, limit, &fm)
			})
		},
	}
	c.Flags().StringVar(&strategy, "strategy", "auto", "auto, keys, filter, compressed or two-way")
	c.Flags().BoolVar(&semi, "semi", false, "a semi-join: A's records whose key B holds (B sends no values)")
	c.Flags().IntVar(&limit, "limit", 0, "stop after N matches (0: all)")
	rf.register(c)
	df.register(c)
	fm.register(c, e, formatQuoted)
	return c
}

// errLimit stops a join at its --limit.
var errLimit = errors.New("limit reached")

func (e *env) join(ctx context.Context, a, b *side, o *semijoin.Options, limit int, fm *formats) error {
	var matches atomic.Int64
	stop := e.startProgress(func() string {
		done := ""
		if n := a.m.keys.Load(); n > 0 {
			done = bar(float64(a.m.records.Load()) / float64(n))
		}
		return fmt.Sprintf("join %s A %d of %s read, B sent %d, %d matches", done, a.m.records.Load(), keysOf(a.m.keys.Load()), b.m.records.Load(), matches.Load())
	})
	// A store served keys only turns the join into a semi-join: its
	// matches come without B's value, and are printed as --semi prints
	// them. The store says so in its first answer, before any match.
	withB := func() bool { return !o.SemiJoin && !keysOnly(b.s) }
	rep, err := semijoin.Join(ctx, a.s, b.s, o, func(m semijoin.Match) error {
		if limit > 0 && matches.Load() == int64(limit) {
			return errLimit
		}
		matches.Add(1)
		if e.json {
			out := matchOut{Key: fm.k(m.Key), A: fm.v(m.A)}
			if withB() {
				v := fm.v(m.B)
				out.B = &v
			}
			e.emit(out)
			return nil
		}
		line := fm.k(m.Key) + " " + fm.v(m.A)
		if withB() {
			line += " " + fm.v(m.B)
		}
		e.printf("%s\n", line)
		return nil
	})
	stop()
	stopped := errors.Is(err, errLimit)
	if err != nil && !stopped {
		return err
	}
	out := joinOut{Strategy: rep.Strategy.String(), Asked: o.Strategy.String(), Semi: o.SemiJoin,
		A:         sideStatsOut{rep.StatsA.Keys, rep.StatsA.KeyBytes, rep.StatsA.ValueBytes},
		B:         sideStatsOut{rep.StatsB.Keys, rep.StatsB.KeyBytes, rep.StatsB.ValueBytes},
		BytesAToB: rep.BytesAToB, BytesBToA: rep.BytesBToA, FilterBytes: rep.FilterBytes, FilterFPRate: rep.FilterFPRate,
		Candidates: rep.Candidates, FalsePositives: rep.FalsePositives, Matches: matches.Load(), Stopped: stopped,
		KeysOnlyB: rep.KeysOnlyB, Expected: map[string]float64{}}
	for s, c := range rep.Expected {
		out.Expected[s.String()] = c
	}
	if e.json {
		e.emitReport(out)
		return nil
	}
	how := "asked for"
	if o.Strategy == semijoin.Auto {
		how = "chosen by auto"
	}
	kind := "join"
	if o.SemiJoin || out.KeysOnlyB {
		kind = "semi-join"
	}
	e.reportf("%s of %s and %s: %s, strategy %s (%s)\n", kind, a.arg, b.arg, plural(out.Matches, "match"), out.Strategy, how)
	if stopped {
		e.reportf("  stopped       at --limit %d: the figures cover the work done until then\n", limit)
	}
	for _, s := range []struct {
		name string
		st   sideStatsOut
	}{{"A", out.A}, {"B", out.B}} {
		e.reportf("  %s             %s, %d key bytes, %d value bytes\n", s.name, plural(s.st.Keys, "key"), s.st.KeyBytes, s.st.ValueBytes)
	}
	if out.KeysOnlyB {
		e.reportf("  keys only     B served keys only: the matches carry A's values alone\n")
	}
	e.reportf("  moved         %d bytes A to B, %d bytes B to A\n", out.BytesAToB, out.BytesBToA)
	if out.FilterBytes > 0 {
		e.reportf("  filters       %d bytes; A's at an expected false-positive rate of %s\n", out.FilterBytes, percent(out.FilterFPRate))
	}
	e.reportf("  candidates    %d sent by B: %s, %s\n", out.Candidates, plural(out.Matches, "match"), plural(out.FalsePositives, "false positive"))
	var names []string
	for s := semijoin.ShipKeys; s <= semijoin.TwoWay; s++ {
		if c, ok := rep.Expected[s]; ok {
			names = append(names, fmt.Sprintf("%s %.0f", s, c))
		}
	}
	if len(names) > 0 {
		e.reportf("  expected      %s bytes (without the matches' records)\n", strings.Join(names, ", "))
	}
	return nil
}

type estimateOut struct {
	A            int64   `json:"a"`
	B            int64   `json:"b"`
	Intersection float64 `json:"intersection"`
	ErrorBound   float64 `json:"error_bound"`
	Passed       int64   `json:"passed"`
	FPRate       float64 `json:"fp_rate"`
	FilterBytes  int64   `json:"filter_bytes"`
	BitsPerKey   float64 `json:"bits_per_key"`
}

func estimateCmd(e *env) *cobra.Command {
	var bits float64
	var rf rangeFlags
	var df dialFlags
	c := &cobra.Command{
		Use:   "estimate [--bits-per-key N] [--start K] [--end K] A B",
		Short: "Estimate how many keys two stores share, sending one filter and two counts",
		Long: `Estimate |A ∩ B|, the keys both stores hold (semijoin.Estimate): A sends a
Bloom filter of its keys (--bits-per-key bits each, 1 to 64) to B, which
counts its keys that pass; the estimate corrects the count for the filter's
false positives. It prints the estimate and its error bound (three standard
errors: the true count lies within it but about once in 370 estimates), the
sides' key counts, the keys of B that passed, and the filter's size and
false-positive rate. No record crosses.

` + twoStoresHelp,
		Args: args(cobra.ExactArgs(2)),
		RunE: func(c *cobra.Command, a []string) error {
			if !(bits >= 1 && bits <= 64) {
				return usageError{fmt.Errorf("--bits-per-key %v: want 1 to 64", bits)}
			}
			if err := rf.parse(c); err != nil {
				return err
			}
			do, err := df.options(e, a)
			if err != nil {
				return err
			}
			return e.withSides(a[0], a[1], do, func(ctx context.Context, sa, sb *side) error {
				stop := e.startProgress(func() string {
					return fmt.Sprintf("estimate: A %s, B %s", keysOf(sa.m.keys.Load()), keysOf(sb.m.keys.Load()))
				})
				est, err := semijoin.Estimate(ctx, sa.s, sb.s, rf.r, bits)
				stop()
				if err != nil {
					return err
				}
				out := estimateOut{A: est.A, B: est.B, Intersection: est.Intersection, ErrorBound: est.ErrorBound, Passed: est.Passed,
					FPRate: est.FPRate, FilterBytes: est.FilterBytes, BitsPerKey: bits}
				if e.json {
					e.emit(out)
					return nil
				}
				e.printf("estimate of the keys both %s and %s hold: %.0f ± %.0f (three standard errors)\n", sa.arg, sb.arg, out.Intersection, out.ErrorBound)
				e.printf("  A             %s\n", plural(out.A, "key"))
				e.printf("  B             %s, %d of them passed A's filter\n", plural(out.B, "key"), out.Passed)
				e.printf("  filter        %d bytes (%v bits a key), false-positive rate %s\n", out.FilterBytes, bits, percent(out.FPRate))
				return nil
			})
		},
	}
	c.Flags().Float64Var(&bits, "bits-per-key", semijoin.DefaultEstimateBitsPerKey, "bits of A's filter per key of A (1 to 64)")
	rf.register(c)
	df.register(c)
	return c
}

type differenceOut struct {
	Kind string  `json:"kind"`
	Key  string  `json:"key"`
	A    *string `json:"a,omitempty"`
	B    *string `json:"b,omitempty"`
}

type diffOut struct {
	Differences int64  `json:"differences"`
	OnlyA       int64  `json:"only_a"`
	OnlyB       int64  `json:"only_b"`
	Changed     int64  `json:"changed"`
	Items       int64  `json:"items_a"`
	Symbols     int    `json:"symbols"`
	SymbolBytes int64  `json:"symbol_bytes"`
	BytesAToB   int64  `json:"bytes_a_to_b"`
	BytesBToA   int64  `json:"bytes_b_to_a"`
	Seed        uint64 `json:"seed"`
}

func diffCmd(e *env) *cobra.Command {
	var seed uint64
	var rf rangeFlags
	var df dialFlags
	var fm formats
	c := &cobra.Command{
		Use:   "diff [--seed N] [--start K] [--end K] A B",
		Short: "Print the keys two stores disagree on, at a cost that grows with the difference",
		Long: `Diff stores A and B (semijoin.Diff): print, in key order, each key only A
holds (only-a "key" "a"), only B holds (only-b "key" "b"), or both hold with
different values (changed "key" "a" "b"), then a report. B sends coded
symbols of a rateless invertible Bloom lookup table of its records until A,
which subtracts its own, has decoded the difference: about 1.4 symbols (36
bytes) per differing record, whatever the stores' sizes; then B sends its
records of the differing keys. The differences go to stdout and the report
to stderr (with --json, a JSON object each).

Records are hashed with --seed; should two keys' hashes collide (about once
in 2^64 pairs), diff says so, and another seed gets past it. The exit status
is 0 whether or not the stores differ.

` + twoStoresHelp,
		Args: args(cobra.ExactArgs(2)),
		RunE: func(c *cobra.Command, a []string) error {
			if err := rf.parse(c); err != nil {
				return err
			}
			do, err := df.options(e, a)
			if err != nil {
				return err
			}
			return e.withSides(a[0], a[1], do, func(ctx context.Context, sa, sb *side) error {
				return e.diff(ctx, sa, sb, &semijoin.DiffOptions{Range: rf.r, Seed: seed}, &fm)
			})
		},
	}
	c.Flags().Uint64Var(&seed, "seed", 0, "seed of the records' hashes")
	rf.register(c)
	df.register(c)
	fm.register(c, e, formatQuoted)
	return c
}

func (e *env) diff(ctx context.Context, a, b *side, o *semijoin.DiffOptions, fm *formats) error {
	stop := e.startProgress(func() string {
		return fmt.Sprintf("diff: A %d records read, B %d symbols sent, %d records resolved", a.m.records.Load(), b.m.symbols.Load(), b.m.records.Load())
	})
	rep, err := semijoin.Diff(ctx, a.s, b.s, o, func(d semijoin.Difference) error {
		str := func(v []byte) *string {
			if v == nil {
				return nil
			}
			s := fm.v(v)
			return &s
		}
		if e.json {
			out := differenceOut{Kind: d.Kind.String(), Key: fm.k(d.Key)}
			switch d.Kind {
			case semijoin.OnlyA:
				out.A = str(d.A)
			case semijoin.OnlyB:
				out.B = str(d.B)
			default:
				out.A, out.B = str(d.A), str(d.B)
			}
			e.emit(out)
			return nil
		}
		// A store served keys only sends no value: B's is left out.
		bv := func() string {
			if keysOnly(b.s) {
				return ""
			}
			return " " + fm.v(d.B)
		}
		line := d.Kind.String() + " " + fm.k(d.Key)
		switch d.Kind {
		case semijoin.OnlyA:
			line += " " + fm.v(d.A)
		case semijoin.OnlyB:
			line += bv()
		default:
			line += " " + fm.v(d.A) + bv()
		}
		e.printf("%s\n", line)
		return nil
	})
	stop()
	if err != nil {
		return err
	}
	out := diffOut{Differences: rep.OnlyA + rep.OnlyB + rep.Changed, OnlyA: rep.OnlyA, OnlyB: rep.OnlyB, Changed: rep.Changed,
		Items: rep.Items, Symbols: rep.Symbols, SymbolBytes: rep.SymbolBytes, BytesAToB: rep.BytesAToB, BytesBToA: rep.BytesBToA, Seed: o.Seed}
	if e.json {
		e.emitReport(out)
		return nil
	}
	e.reportf("diff of %s and %s: %s: %d only in A, %d only in B, %d changed\n", a.arg, b.arg, plural(out.Differences, "difference"), out.OnlyA, out.OnlyB, out.Changed)
	e.reportf("  A             %s sketched\n", plural(out.Items, "record"))
	e.reportf("  symbols       %d from B, %d bytes\n", out.Symbols, out.SymbolBytes)
	e.reportf("  moved         %d bytes A to B, %d bytes B to A\n", out.BytesAToB, out.BytesBToA)
	return nil
}

// keysOf describes a key count that may not be known yet (-1).
func keysOf(n int64) string {
	if n < 0 {
		return "? keys"
	}
	return plural(n, "key")
}

// bar draws a progress bar of fraction f.
func bar(f float64) string {
	const width = 20
	f = min(max(f, 0), 1)
	n := int(f * width)
	return fmt.Sprintf("[%s%s] %3.0f%%", strings.Repeat("#", n), strings.Repeat(".", width-n), 100*f)
}
