package semijoin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"iter"
	"math"

	"github.com/bloomkv/bloomkv/filterblock"
)

// Strategy is how Join moves data between the two sides.
type Strategy int

const (
	// Auto picks the strategy whose expected bytes on the wire are fewest,
	// from the two sides' Stats (Mullin's cost model: filter bytes plus
	// false positives times record bytes), among those whose filters fit
	// within Options.MaxFilterBits: ShipKeys when none does.
	Auto Strategy = iota
	// ShipKeys sends A's keys to B, which returns its records of them.
	ShipKeys
	// ShipFilter sends a standard Bloom filter of A's keys, at the bits
	// per key that minimise its bytes plus those of the false positives B
	// returns; A drops the false positives by merging B's answer with its
	// own keys.
	ShipFilter
	// ShipCompressed sends a sparse filter of A's keys whose compressed
	// encoding is small for its false-positive rate (the survey's Table 1:
	// filterblock.PickWireParams), sized by the same cost.
	ShipCompressed
	// TwoWay sends a filter of A's keys; B answers with a filter of its
	// keys that pass it; A sends its keys that pass B's filter, and B
	// returns its records of them. B's records cross once, without false
	// positives: it pays where B's records are large.
	TwoWay
)

var strategyNames = [...]string{"auto", "keys", "filter", "compressed", "two-way"}

func (s Strategy) String() string {
	if s >= 0 && int(s) < len(strategyNames) {
		return strategyNames[s]
	}
	return fmt.Sprintf("Strategy(%d)", int(s))
}

// ParseStrategy returns the Strategy named s (its String).
func ParseStrategy(s string) (Strategy, error) {
	for i, n := range strategyNames {
		if n == s {
			return Strategy(i), nil
		}
	}
	return 0, fmt.Errorf("semijoin: unknown strategy %q (want auto, keys, filter, compressed or two-way)", s)
}

// Options configure Join.
type Options struct {
	// Range is the key range joined on both sides.
	Range KeyRange
	// Strategy is how data moves (default Auto).
	Strategy Strategy
	// SemiJoin asks for A ⋉ B: A's records whose key B holds. B then sends
	// keys without values, and Match.B is nil.
	SemiJoin bool
	// BatchKeys bounds the keys A sends B in one lookup (ShipKeys, TwoWay),
	// and so the memory Join holds (default 4096).
	BatchKeys int
	// BatchBytes bounds the bytes of those keys, with their length
	// prefixes, in one lookup (default a quarter of DefaultMaxRequestBytes,
	// the limit on a Handler's requests unless it is told otherwise). A key
	// larger than it goes alone. Set it under the MaxRequestBytes of a B
	// served with a lower limit.
	BatchBytes int
	// MaxFilterBits bounds the filters Join asks for (default
	// DefaultMaxFilterBits). Asking for a strategy whose filters cannot fit
	// within it is an error wrapping ErrBadRequest.
	MaxFilterBits uint64
	// Overlap, when known (Estimate), is the expected number of keys both
	// sides hold; Auto weighs TwoWay with it, and with the largest overlap
	// possible when it is 0.
	Overlap float64
}

// Match is a key both sides hold, with A's value and B's (nil for a
// semi-join). The slices are valid only during the call that receives it.
type Match struct {
	Key, A, B []byte
}

// Report says what a Join did.
type Report struct {
	// Strategy is the strategy used (Auto's choice, when asked for Auto).
	Strategy Strategy
	// StatsA and StatsB are the sides' Stats.
	StatsA, StatsB Stats
	// Expected holds the bytes on the wire each strategy was expected to
	// cost, by strategy (Auto's choice is the least); matches excluded. A
	// strategy whose filters would not fit within Options.MaxFilterBits is
	// absent.
	Expected map[Strategy]float64
	// BytesAToB and BytesBToA count the bytes that crossed (or would cross,
	// between local stores) from A to B and back: filters, keys and
	// records with their length prefixes, and a fixed 16 bytes a request.
	BytesAToB, BytesBToA int64
	// FilterBytes counts the filters' bytes among them; FilterFPRate is the
	// expected false-positive rate of the filter A sent.
	FilterBytes  int64
	FilterFPRate float64
	// Candidates counts the records B sent; FalsePositives those of them
	// whose key A does not hold; Matches the keys both hold.
	Candidates, FalsePositives, Matches int64
	// KeysOnlyB is set when B is served keys-only (HandlerOptions.KeysOnly):
	// the join was then a semi-join, every Match.B nil.
	KeysOnlyB bool
}

// KeysOnlyStore is a store that may serve keys without values: Dial's
// store of a keys-only Handler. KeysOnly reports whether it has said so
// (from its first answer on). A wrapper of a store forwards it, so that
// Join and Diff still know.
type KeysOnlyStore interface{ KeysOnly() bool }

// isKeysOnly reports whether s said it serves keys without values.
func isKeysOnly(s Store) bool {
	k, ok := s.(KeysOnlyStore)
	return ok && k.KeysOnly()
}

// checkKeysOnlyA refuses, as side A, a store that said it serves keys
// without values: Join would report its values, and Diff hash its records,
// as if every value were empty.
func checkKeysOnlyA(a Store) error {
	if isKeysOnly(a) {
		return fmt.Errorf("semijoin: A serves keys without values (HandlerOptions.KeysOnly): give that store as B: %w", ErrBadRequest)
	}
	return nil
}

// requestBytes is what a request without a body counts for on the wire.
const requestBytes = 16

const defaultBatchKeys = 4096

// defaultBatchBytes is a quarter of a Handler's default request limit, so
// that the rest of a lookup request, the range's bounds (each as long as a
// key may be) and the other parameters, fits in the other three quarters.
const defaultBatchBytes = DefaultMaxRequestBytes / 4

// Join calls fn, in key order, for each key in o.Range that both a and b
// hold. The result is exact: false positives of a filter never reach fn.
// Memory stays bounded whatever the sides' sizes (a batch of o.BatchKeys
// keys and o.BatchBytes of them, with A's values; the filters; and one
// record of each side). A served keys-only (HandlerOptions.KeysOnly) is
// refused with ErrBadRequest, as its values would read as empty: give
// such a store as B.
func Join(ctx context.Context, a, b Store, o *Options, fn func(Match) error) (Report, error) {
	if o == nil {
		o = &Options{}
	}
	if err := o.Range.check(); err != nil {
		return Report{}, err
	}
	j := &joiner{ctx: ctx, a: a, b: b, o: *o, fn: fn}
	if j.o.BatchKeys <= 0 {
		j.o.BatchKeys = defaultBatchKeys
	}
	if j.o.BatchBytes <= 0 {
		j.o.BatchBytes = defaultBatchBytes
	}
	if j.o.MaxFilterBits == 0 {
		j.o.MaxFilterBits = DefaultMaxFilterBits
	}
	if err := j.stats(); err != nil {
		return j.rep, err
	}
	if err := checkKeysOnlyA(a); err != nil {
		return j.rep, err
	}
	if isKeysOnly(b) {
		// B sends no values: plan and run a semi-join.
		j.rep.KeysOnlyB = true
		j.o.SemiJoin = true
	}
	plans := j.plan()
	j.rep.Expected = map[Strategy]float64{}
	for s, p := range plans {
		if p.feasible(s, j.o.MaxFilterBits) {
			j.rep.Expected[s] = p.cost
		}
	}
	s := o.Strategy
	if s == Auto {
		s = cheapest(plans, j.o.MaxFilterBits)
	}
	p, ok := plans[s]
	if !ok {
		return j.rep, fmt.Errorf("semijoin: unknown strategy %v: %w", s, ErrBadRequest)
	}
	j.rep.Strategy = s
	if !p.feasible(s, j.o.MaxFilterBits) {
		return j.rep, fmt.Errorf("semijoin: strategy %v needs a filter of more than MaxFilterBits (%d) bits for A's %d keys and B's %d: %w",
			s, j.o.MaxFilterBits, j.rep.StatsA.Keys, j.rep.StatsB.Keys, ErrBadRequest)
	}
	var err error
	switch {
	case j.rep.StatsA.Keys == 0 || j.rep.StatsB.Keys == 0:
		// Nothing can match: no data moves.
	case s == ShipKeys:
		err = j.shipKeys(nil)
	case s == TwoWay:
		err = j.twoWay(plans[s])
	default:
		err = j.shipFilter(plans[s])
	}
	return j.rep, err
}

type joiner struct {
	ctx  context.Context
	a, b Store
	o    Options
	fn   func(Match) error
	rep  Report
}

// stats asks both sides for their Stats, at once.
func (j *joiner) stats() error {
	var errA, errB error
	both(func() { j.rep.StatsA, errA = j.a.Stats(j.ctx, j.o.Range, nil) },
		func() { j.rep.StatsB, errB = j.b.Stats(j.ctx, j.o.Range, nil) })
	j.rep.BytesAToB += requestBytes
	j.rep.BytesBToA += requestBytes
	return errors.Join(errA, errB)
}

// plan is a strategy's filter parameters and expected cost in bytes.
type plan struct {
	cost   float64
	m      uint64
	k      int
	fp     float64 // expected false-positive rate of A's filter
	m2     uint64  // TwoWay: B's filter
	k2     int
	filter float64 // expected bytes of A's filter
}

// feasible reports whether p can be carried out as strategy s: each filter
// it asks a side for has from 1 to maxBits bits and from 1 to
// filterblock.MaxStandardProbes probes, as the stores require. The planner
// leaves m (or m2) 0 where no filter fits within maxBits. Shipping keys asks
// for no filter.
func (p plan) feasible(s Strategy, maxBits uint64) bool {
	fits := func(m uint64, k int) bool {
		return m >= 1 && m <= maxBits && k >= 1 && k <= filterblock.MaxStandardProbes
	}
	switch s {
	case ShipKeys:
		return true
	case ShipFilter, ShipCompressed:
		return fits(p.m, p.k)
	case TwoWay:
		return fits(p.m, p.k) && fits(p.m2, p.k2)
	}
	return false
}

// cheapest returns Auto's choice: the strategy of least expected cost among
// those whose plans are feasible within maxBits; ShipKeys, always feasible,
// on a tie.
func cheapest(plans map[Strategy]plan, maxBits uint64) Strategy {
	s := ShipKeys
	for c := ShipFilter; c <= TwoWay; c++ {
		if p, ok := plans[c]; ok && p.feasible(c, maxBits) && p.cost < plans[s].cost {
			s = c
		}
	}
	return s
}

// plan works out each strategy's parameters and expected bytes, without
// the matches' records, which every strategy sends once. It assumes no
// overlap for the false positives (their worst case).
func (j *joiner) plan() map[Strategy]plan {
	sa, sb := j.rep.StatsA, j.rep.StatsB
	nA, nB := float64(sa.Keys), float64(sb.Keys)
	keyA := sa.avgKey() + 1 // a length prefix
	recB := sb.avgRecord() + 2
	if j.o.SemiJoin {
		recB = sb.avgKey() + 2
	}
	plans := map[Strategy]plan{ShipKeys: {cost: nA * keyA}}
	if sa.Keys == 0 {
		for s := ShipFilter; s <= TwoWay; s++ {
			plans[s] = plan{m: 1, k: 1, m2: 1, k2: 1}
		}
		return plans
	}
	// A standard filter: bits per key b at the k that minimises its
	// false-positive rate; its encoding is about m/8 bytes.
	best := plan{cost: math.Inf(1)}
	for b := 1; b <= 64; b++ {
		m := uint64(math.Ceil(nA * float64(b)))
		if m > j.o.MaxFilterBits {
			break
		}
		k := max(1, min(filterblock.MaxStandardProbes, int(math.Round(float64(b)*math.Ln2))))
		fp := filterblock.FPRate(m, k, nA)
		bytes := float64(m)/8 + wireOverhead
		if c := bytes + fp*nB*recB; c < best.cost {
			best = plan{cost: c, m: m, k: k, fp: fp, filter: bytes}
		}
	}
	plans[ShipFilter] = best
	// A compressed filter: the m and k whose expected encoding plus false
	// positives cost least; sparse filters (large m, small k) compress
	// to near their entropy (the survey's Table 1).
	bestC := cheapestFilter(nA, nB*recB, j.o.MaxFilterBits)
	if bestC.m == 0 {
		bestC = best
	}
	plans[ShipCompressed] = bestC
	// Two-way: A's compressed filter; B's filter of its candidates (nC
	// of them); A's keys that pass it: the overlap's and the false
	// positives'. The overlap is unknown before the join: o.Overlap, or
	// else the largest it can be. Without a filter of A within the bound
	// there is no two-way plan, whatever B's filter would cost.
	tw := bestC
	if tw.m == 0 {
		plans[TwoWay] = plan{cost: math.Inf(1)}
		return plans
	}
	overlap := min(nA, nB)
	if j.o.Overlap > 0 {
		overlap = min(j.o.Overlap, overlap)
	}
	nC := max(1, overlap+tw.fp*(nB-overlap))
	back := cheapestFilter(nC, nA*keyA, j.o.MaxFilterBits)
	tw.m2, tw.k2 = back.m, back.k
	tw.cost = tw.filter + back.cost + overlap*keyA
	if back.m == 0 {
		tw.cost = math.Inf(1)
	}
	plans[TwoWay] = tw
	return plans
}

// cheapestFilter returns the m and k of a filter of n keys whose expected
// wire bytes, plus its false-positive rate times fpCost (the bytes all the
// keys that could pass it falsely would cost), are least: m of up to maxBits
// on a geometric grid, and every k.
func cheapestFilter(n, fpCost float64, maxBits uint64) plan {
	best := plan{cost: math.Inf(1)}
	for bits := 0.25; bits <= 1<<14; bits *= 1.05 {
		m := uint64(math.Ceil(n * bits))
		if m > maxBits {
			break
		}
		for k := 1; k <= filterblock.MaxStandardProbes; k++ {
			fp := filterblock.FPRate(m, k, n)
			bytes := float64(filterblock.ExpectedWireBytes(m, k, int(n)))
			if c := bytes + fp*fpCost; c < best.cost {
				best = plan{cost: c, m: m, k: k, fp: fp, filter: bytes}
			}
		}
	}
	return best
}

// wireOverhead is about the header and checksum of a filter's encoding.
const wireOverhead = 20

// keyBytes is a key's size on the wire: its bytes and a length prefix.
func keyBytes(k []byte) int64 { return int64(len(k) + uvarintLen(len(k))) }

func uvarintLen(n int) int {
	l := 1
	for n >= 0x80 {
		n >>= 7
		l++
	}
	return l
}

// record is a key and value, copied.
type record struct{ key, value []byte }

// shipKeys sends A's keys (those passing filter, when given) to B in
// batches of at most o.BatchKeys keys and o.BatchBytes bytes of keys on the
// wire, a key over o.BatchBytes alone, and matches B's answers against the
// batch.
func (j *joiner) shipKeys(filter *filterblock.Bloom) error {
	batch := make([]record, 0, j.o.BatchKeys)
	keys := make([][]byte, 0, j.o.BatchKeys)
	batchBytes := int64(0)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		batchBytes = 0
		keys = keys[:0]
		for _, r := range batch {
			keys = append(keys, r.key)
			j.rep.BytesAToB += keyBytes(r.key)
		}
		j.rep.BytesAToB += requestBytes
		i := 0
		err := j.b.Lookup(j.ctx, j.o.Range, keys, !j.o.SemiJoin, func(k, v []byte) error {
			j.rep.BytesBToA += keyBytes(k) + keyBytes(v)
			j.rep.Candidates++
			for i < len(batch) && bytes.Compare(batch[i].key, k) < 0 {
				i++
			}
			if i == len(batch) || !bytes.Equal(batch[i].key, k) {
				return fmt.Errorf("semijoin: lookup answered key %q, which was not asked: %w", k, ErrCorrupt)
			}
			j.rep.Matches++
			return j.emit(k, batch[i].value, v)
		})
		batch = batch[:0]
		return err
	}
	err := j.a.Scan(j.ctx, j.o.Range, func(k, v []byte) error {
		if filter != nil && !filter.MayContain(k) {
			return nil
		}
		kb := keyBytes(k)
		if batchBytes+kb > int64(j.o.BatchBytes) {
			if err := flush(); err != nil {
				return err
			}
		}
		batch = append(batch, record{bytes.Clone(k), bytes.Clone(v)})
		batchBytes += kb
		if len(batch) >= j.o.BatchKeys || batchBytes >= int64(j.o.BatchBytes) {
			return flush()
		}
		return nil
	})
	if err != nil {
		return err
	}
	return flush()
}

func (j *joiner) emit(k, va, vb []byte) error {
	if j.o.SemiJoin {
		vb = nil
	}
	return j.fn(Match{Key: k, A: va, B: vb})
}

// filterOfA asks A for a filter of its keys with p's parameters.
func (j *joiner) filterOfA(p plan) ([]byte, error) {
	wire, err := j.a.Filter(j.ctx, j.o.Range, FilterSpec{M: p.m, K: p.k})
	if err != nil {
		return nil, err
	}
	j.rep.FilterBytes += int64(len(wire))
	j.rep.FilterFPRate = p.fp
	return wire, nil
}

// shipFilter sends A's filter to B, and merges B's candidates with A's
// records, dropping the false positives.
func (j *joiner) shipFilter(p plan) error {
	wire, err := j.filterOfA(p)
	if err != nil {
		return err
	}
	j.rep.BytesAToB += int64(len(wire)) + requestBytes
	next, stop, scanErr := pullScan(j.ctx, j.a, j.o.Range)
	defer stop()
	ra, ok := next()
	err = j.b.Probe(j.ctx, j.o.Range, wire, !j.o.SemiJoin, func(k, v []byte) error {
		j.rep.BytesBToA += keyBytes(k) + keyBytes(v)
		j.rep.Candidates++
		for ok && bytes.Compare(ra.key, k) < 0 {
			ra, ok = next()
		}
		if !ok || !bytes.Equal(ra.key, k) {
			j.rep.FalsePositives++
			return nil
		}
		j.rep.Matches++
		return j.emit(k, ra.value, v)
	})
	stop()
	if err != nil {
		return err
	}
	return *scanErr
}

// twoWay sends A's filter, receives B's filter of its candidates, and
// sends the keys of A that pass it as ShipKeys does.
func (j *joiner) twoWay(p plan) error {
	wire, err := j.filterOfA(p)
	if err != nil {
		return err
	}
	j.rep.BytesAToB += int64(len(wire)) + requestBytes
	back, err := j.b.Filter(j.ctx, j.o.Range, FilterSpec{M: p.m2, K: p.k2, Passing: wire})
	if err != nil {
		return err
	}
	j.rep.FilterBytes += int64(len(back))
	j.rep.BytesBToA += int64(len(back))
	fb, err := filterblock.DecodeWire(back, j.o.MaxFilterBits)
	if err != nil {
		return fmt.Errorf("semijoin: B's filter: %w: %w", ErrCorrupt, err)
	}
	return j.shipKeys(fb)
}

// pullScan turns a Store's Scan into a pull iterator of records, for a
// merge with the other side's stream: next returns the next record (its
// slices valid until the following call: the scan waits in its callback
// meanwhile), or false at the end, after which *err holds the scan's error.
// stop ends the scan early.
func pullScan(ctx context.Context, s Store, r KeyRange) (next func() (record, bool), stop func(), err *error) {
	var scanErr error
	errStop := errors.New("stopped")
	seq := func(yield func(record) bool) {
		err := s.Scan(ctx, r, func(k, v []byte) error {
			if !yield(record{k, v}) {
				return errStop
			}
			return nil
		})
		if err != nil && !errors.Is(err, errStop) {
			scanErr = err
		}
	}
	next, stop = iter.Pull(seq)
	return next, stop, &scanErr
}
