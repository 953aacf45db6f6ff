package semijoin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/bloomkv/bloomkv/internal/riblt"
	"github.com/zeebo/xxh3"
)

// Sketcher hands out, in order, the coded symbols of a rateless invertible
// Bloom lookup table (Yang et al., "Practical Rateless Set Reconciliation",
// 2024) of a range's records: one item per record, the 64-bit hashes of its
// key and of its value.
type Sketcher interface {
	// Next returns the next n coded symbols, in the wire form of
	// internal/riblt (AppendSymbols).
	Next(ctx context.Context, n int) ([]byte, error)
	// Close releases the sketch.
	Close() error
}

// Differ is what a Store offers Diff: a sketch of its records, and the
// records whose key hashes the other side names. Local stores and Dial's
// remote ones implement it.
type Differ interface {
	Store
	// Sketch starts a sketch of the records in r, hashed with seed.
	Sketch(ctx context.Context, r KeyRange, seed uint64) (Sketcher, error)
	// Resolve calls fn, in key order, with each record in r whose key
	// hashes (with seed) to one of hashes.
	Resolve(ctx context.Context, r KeyRange, seed uint64, hashes []uint64, fn func(key, value []byte) error) error
}

// itemOf is the sketch item of a record: its key's and its value's hashes.
func itemOf(key, value []byte, seed uint64) riblt.Item {
	return riblt.Item{Key: xxh3.HashSeed(key, seed), Val: xxh3.HashSeed(value, seed)}
}

// localSketcher sketches a local store's records.
type localSketcher struct {
	enc  *riblt.Encoder
	next int
	buf  []riblt.CodedSymbol
}

func (l *local) Sketch(ctx context.Context, r KeyRange, seed uint64) (Sketcher, error) {
	enc := riblt.NewSeededEncoder(seed)
	err := l.scan(ctx, r, func(k, v []byte) error {
		enc.Add(itemOf(k, v, seed))
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &localSketcher{enc: enc}, nil
}

// MaxSketchBatch bounds the symbols one Next call returns.
const MaxSketchBatch = 1 << 16

func (s *localSketcher) Next(ctx context.Context, n int) ([]byte, error) {
	if n < 1 || n > MaxSketchBatch {
		return nil, fmt.Errorf("semijoin: %d symbols asked for: want 1 to %d: %w", n, MaxSketchBatch, ErrBadRequest)
	}
	if s.enc == nil {
		return nil, fmt.Errorf("semijoin: sketch closed: %w", ErrBadRequest)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.buf = s.buf[:0]
	for range n {
		s.buf = append(s.buf, s.enc.ProduceNext())
	}
	out := riblt.AppendSymbols(nil, s.next, s.buf)
	s.next += n
	return out, nil
}

func (s *localSketcher) Close() error {
	s.enc = nil
	return nil
}

func (l *local) Resolve(ctx context.Context, r KeyRange, seed uint64, hashes []uint64, fn func(key, value []byte) error) error {
	want := make(map[uint64]struct{}, len(hashes))
	for _, h := range hashes {
		want[h] = struct{}{}
	}
	return l.scan(ctx, r, func(k, v []byte) error {
		if _, ok := want[xxh3.HashSeed(k, seed)]; ok {
			return fn(k, v)
		}
		return nil
	})
}

// DiffKind says how a key differs between the sides.
type DiffKind int

const (
	// OnlyA: A holds the key, B does not.
	OnlyA DiffKind = iota + 1
	// OnlyB: B holds the key, A does not.
	OnlyB
	// Changed: both hold the key, with different values.
	Changed
)

func (k DiffKind) String() string {
	switch k {
	case OnlyA:
		return "only-a"
	case OnlyB:
		return "only-b"
	case Changed:
		return "changed"
	}
	return fmt.Sprintf("DiffKind(%d)", int(k))
}

// Difference is a key the sides disagree on, with its value on each side
// that holds it (nil on the other). The slices are valid only during the
// call that receives it.
type Difference struct {
	Kind      DiffKind
	Key, A, B []byte
}

// DiffOptions configure Diff.
type DiffOptions struct {
	// Range is the key range compared.
	Range KeyRange
	// Seed seeds the hashes of keys and values (default 0); a different
	// one makes another set of hash collisions, for a second look.
	Seed uint64
	// MaxSymbols bounds the coded symbols Diff reads before it gives up
	// (default 2,000,000: differences of about a million records).
	MaxSymbols int
}

// DiffReport says what Diff did.
type DiffReport struct {
	// Symbols counts the coded symbols B sent; SymbolBytes their bytes on
	// the wire; Items the records A sketched.
	Symbols     int
	SymbolBytes int64
	Items       int64
	// BytesAToB and BytesBToA count everything that crossed: the symbols,
	// the requests, the key hashes A asked B to resolve and B's records of
	// them.
	BytesAToB, BytesBToA int64
	// OnlyA, OnlyB and Changed count the differences found.
	OnlyA, OnlyB, Changed int64
	// KeysOnlyB is set when B is served keys-only (HandlerOptions.KeysOnly):
	// every Difference.B was then nil.
	KeysOnlyB bool
}

const defaultMaxSymbols = 2_000_000

// Diff calls fn, in key order, with each key in o.Range that the sides
// disagree on: held by one side only, or by both with different values. B
// sends coded symbols of its records until A, which decodes them against its
// own records, has found every difference: about 1.4 symbols (some 36 bytes)
// per difference whatever the stores' sizes; then B sends its records of the
// differing keys. A's memory holds its records' hashes (32 bytes each) and
// the differences.
//
// Against a B served keys-only (HandlerOptions.KeysOnly), Diff still finds
// every difference, changed values included, since B's sketch hashes its
// whole records; but B sends keys without values, so every Difference.B is
// nil (a Changed one says that B's value differs from A's, not what it is)
// and DiffReport.KeysOnlyB is set. An A served keys-only is refused with
// ErrBadRequest.
func Diff(ctx context.Context, a, b Differ, o *DiffOptions, fn func(Difference) error) (DiffReport, error) {
	if o == nil {
		o = &DiffOptions{}
	}
	var rep DiffReport
	if err := o.Range.check(); err != nil {
		return rep, err
	}
	limit := o.MaxSymbols
	if limit <= 0 {
		limit = defaultMaxSymbols
	}
	dec := riblt.NewSeededDecoder(o.Seed)
	dec.SetLimit(limit)
	// A hashes its records while B sketches its own.
	var sk Sketcher
	var errA, errB error
	both(func() {
		errA = a.Scan(ctx, o.Range, func(k, v []byte) error {
			dec.AddLocal(itemOf(k, v, o.Seed))
			rep.Items++
			return nil
		})
	}, func() { sk, errB = b.Sketch(ctx, o.Range, o.Seed) })
	if sk != nil {
		defer sk.Close()
	}
	if err := errors.Join(errA, errB); err != nil {
		return rep, err
	}
	if err := checkKeysOnlyA(a); err != nil {
		return rep, err
	}
	rep.BytesAToB += requestBytes
	for !dec.Decoded() {
		// Ask for an eighth more than received so far: the last batch
		// overshoots the symbols needed by at most that.
		n := min(MaxSketchBatch, max(16, dec.Received()/8))
		wire, err := sk.Next(ctx, n)
		if err != nil {
			return rep, err
		}
		rep.BytesAToB += requestBytes
		rep.BytesBToA += int64(len(wire))
		rep.SymbolBytes += int64(len(wire))
		start, syms, err := riblt.DecodeSymbols(wire)
		if err != nil {
			return rep, fmt.Errorf("semijoin: B's symbols: %w: %w", ErrCorrupt, err)
		}
		if start != dec.Received() {
			return rep, fmt.Errorf("semijoin: B sent symbols from %d, expected %d: %w", start, dec.Received(), ErrCorrupt)
		}
		for _, s := range syms {
			if dec.Decoded() {
				break
			}
			rep.Symbols++
			if err := dec.AddCodedSymbol(s); err != nil {
				if errors.Is(err, riblt.ErrLimit) {
					return rep, fmt.Errorf("semijoin: no decode after %d symbols: the sides differ in more records than DiffOptions.MaxSymbols allows for: %w", limit, err)
				}
				return rep, err
			}
		}
	}
	err := resolveDiff(ctx, a, b, o, dec.Local(), dec.Remote(), &rep, fn)
	rep.KeysOnlyB = isKeysOnly(b)
	return rep, err
}

// resolveDiff turns the decoded items into records: A's from its own
// store, B's asked of B by key hash, merged in key order.
func resolveDiff(ctx context.Context, a, b Differ, o *DiffOptions, onlyA, onlyB []riblt.Item, rep *DiffReport, fn func(Difference) error) error {
	hashesOf := func(items []riblt.Item) []uint64 {
		hs := make([]uint64, len(items))
		for i, x := range items {
			hs[i] = x.Key
		}
		slices.Sort(hs)
		return hs
	}
	collect := func(s Differ, hs []uint64) ([]record, error) {
		var out []record
		if len(hs) == 0 {
			return nil, nil
		}
		err := s.Resolve(ctx, o.Range, o.Seed, hs, func(k, v []byte) error {
			out = append(out, record{bytes.Clone(k), bytes.Clone(v)})
			return nil
		})
		return out, err
	}
	ha, hb := hashesOf(onlyA), hashesOf(onlyB)
	var ra, rb []record
	var errA, errB error
	both(func() { ra, errA = collect(a, ha) }, func() { rb, errB = collect(b, hb) })
	if err := errors.Join(errA, errB); err != nil {
		return err
	}
	rep.BytesAToB += requestBytes + 8*int64(len(hb))
	for _, r := range rb {
		rep.BytesBToA += keyBytes(r.key) + keyBytes(r.value)
	}
	if len(ra) != len(ha) || len(rb) != len(hb) {
		// A hash named a record the store no longer holds (it changed
		// since the sketch) or two keys share a hash.
		return fmt.Errorf("semijoin: resolved %d of %d records of A and %d of %d of B: a side changed during Diff, or a hash collided (try another Seed): %w",
			len(ra), len(ha), len(rb), len(hb), ErrCorrupt)
	}
	i, j := 0, 0
	for i < len(ra) || j < len(rb) {
		var d Difference
		switch c := compareRecords(ra, rb, i, j); {
		case c < 0:
			d = Difference{Kind: OnlyA, Key: ra[i].key, A: ra[i].value}
			i++
			rep.OnlyA++
		case c > 0:
			d = Difference{Kind: OnlyB, Key: rb[j].key, B: rb[j].value}
			j++
			rep.OnlyB++
		default:
			d = Difference{Kind: Changed, Key: ra[i].key, A: ra[i].value, B: rb[j].value}
			i++
			j++
			rep.Changed++
		}
		if err := fn(d); err != nil {
			return err
		}
	}
	return nil
}

// compareRecords compares ra[i] with rb[j] by key, an exhausted side
// sorting last.
func compareRecords(ra, rb []record, i, j int) int {
	switch {
	case i == len(ra):
		return 1
	case j == len(rb):
		return -1
	}
	return bytes.Compare(ra[i].key, rb[j].key)
}
