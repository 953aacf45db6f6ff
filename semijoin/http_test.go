package semijoin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bloomkv/bloomkv"
	"github.com/bloomkv/bloomkv/filterblock"
)

// serve starts a server of d with options o, closed at the end of the test,
// and returns it and a Dial'd store of it.
func serve(t testing.TB, d Differ, o *HandlerOptions) (*httptest.Server, *handler, Differ) {
	t.Helper()
	h := Handler(d, o).(*handler)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, h, dial(t, srv.URL)
}

func dial(t testing.TB, url string) Differ {
	t.Helper()
	r, err := Dial(url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// swapServer is a server whose handler a test changes between trials.
type swapServer struct {
	srv      *httptest.Server
	h        atomic.Pointer[handler]
	requests atomic.Int64
}

func newSwapServer(t testing.TB) *swapServer {
	s := &swapServer{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		s.h.Load().ServeHTTP(w, r)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

// serving serves d and returns a remote store of it.
func (s *swapServer) serving(t testing.TB, d Differ) Differ {
	s.h.Store(Handler(d, nil).(*handler))
	return dial(t, s.srv.URL)
}

// TestHTTPJoinExact: over random pairs of stores, every strategy returns
// exactly the join a model computes, in key order, with B remote, A
// remote, or both, as a join and a semi-join, over everything or a range.
func TestHTTPJoinExact(t *testing.T) {
	trials := 150
	if testing.Short() {
		trials = 40
	}
	r := rand.New(rand.NewPCG(5, 6))
	srvA, srvB := newSwapServer(t), newSwapServer(t)
	for trial := range trials {
		ma, mb := sides(r)
		da, db := openStore(t), openStore(t)
		fill(t, da, ma)
		fill(t, db, mb)
		if trial%3 == 0 {
			for _, d := range []*bloomkv.DB{da, db} {
				if err := d.Flush(); err != nil {
					t.Fatal(err)
				}
			}
		}
		var a, b Store = Local(da, Limits{}), Local(db, Limits{})
		where := []string{"B remote", "A remote", "both remote"}[trial%3]
		if trial%3 != 1 {
			b = srvB.serving(t, Local(db, Limits{}))
		}
		if trial%3 != 0 {
			a = srvA.serving(t, Local(da, Limits{}))
		}
		var kr KeyRange
		if trial%4 == 1 {
			kr = KeyRange{Start: []byte("2"), End: []byte("k0000500")}
		}
		semi := trial%5 == 2
		want := modelJoin(ma, mb, kr, semi)
		for s := Auto; s <= TwoWay; s++ {
			o := &Options{Range: kr, Strategy: s, SemiJoin: semi, BatchKeys: 16 + r.IntN(300)}
			got, rep := collect(t, a, b, o)
			if !sameMatches(got, want) {
				t.Fatalf("trial %d, %s, %v (|A| %d, |B| %d, range %q, semi %v): %d matches, want %d",
					trial, where, s, len(ma), len(mb), kr, semi, len(got), len(want))
			}
			if rep.Matches != int64(len(want)) || rep.Candidates != rep.Matches+rep.FalsePositives {
				t.Fatalf("trial %d, %s, %v: report %+v, want %d matches", trial, where, s, rep, len(want))
			}
		}
		da.Close()
		db.Close()
	}
	t.Logf("%d requests to A, %d to B", srvA.requests.Load(), srvB.requests.Load())
	if srvA.requests.Load() < int64(trials) || srvB.requests.Load() < int64(trials) {
		t.Errorf("%d requests to A, %d to B, in %d trials", srvA.requests.Load(), srvB.requests.Load(), trials)
	}
}

// TestHTTPDiffExact: Diff with B remote (and A remote, every other trial)
// finds exactly the model's differences, and closes its sketch on the
// server.
func TestHTTPDiffExact(t *testing.T) {
	trials := 80
	if testing.Short() {
		trials = 25
	}
	r := rand.New(rand.NewPCG(7, 8))
	srvA, srvB := newSwapServer(t), newSwapServer(t)
	for trial := range trials {
		ma, mb, n := diffSides(r)
		da, db := openStore(t), openStore(t)
		fill(t, da, ma)
		fill(t, db, mb)
		var a Differ = Local(da, Limits{})
		if trial%2 == 1 {
			a = srvA.serving(t, a)
		}
		b := srvB.serving(t, Local(db, Limits{}))
		want := modelDiff(ma, mb)
		got, rep := collectDiff(t, a, b, &DiffOptions{Seed: uint64(trial)})
		if !slices.EqualFunc(got, want, func(x, y Difference) bool {
			return x.Kind == y.Kind && bytes.Equal(x.Key, y.Key) && bytes.Equal(x.A, y.A) && bytes.Equal(x.B, y.B)
		}) {
			t.Fatalf("trial %d (%d keys): %d differences, want %d", trial, n, len(got), len(want))
		}
		if int(rep.OnlyA+rep.OnlyB+rep.Changed) != len(want) {
			t.Fatalf("trial %d: report %+v for %d differences", trial, rep, len(want))
		}
		h := srvB.h.Load()
		h.mu.Lock()
		open := len(h.sessions)
		h.mu.Unlock()
		if open != 0 {
			t.Fatalf("trial %d: %d sketch sessions left open on the server", trial, open)
		}
		da.Close()
		db.Close()
	}
	t.Logf("%d requests to A, %d to B", srvA.requests.Load(), srvB.requests.Load())
}

// remoteFixture is a store of 2,000 keys and a remote store of it.
func remoteFixture(t testing.TB, o *HandlerOptions) (local, remote Differ, h *handler, srv *httptest.Server) {
	d := openStore(t)
	b := d.NewBatch()
	for i := range 2000 {
		b.Set(fmt.Appendf(nil, "k%05d", i), fmt.Appendf(nil, "value-%d", i))
	}
	b.Set([]byte{}, []byte("the empty key"))
	b.Set([]byte("k00007"), nil) // an empty value
	if err := d.Apply(b, bloomkv.NoSync); err != nil {
		t.Fatal(err)
	}
	limits := Limits{}
	if o != nil {
		limits = o.Limits
	}
	local = Local(d, limits)
	srv, h, remote = serve(t, local, o)
	return local, remote, h, srv
}

type kv struct{ k, v string }

func records(t testing.TB, call func(fn func(k, v []byte) error) error) ([]kv, error) {
	t.Helper()
	var out []kv
	err := call(func(k, v []byte) error {
		s := kv{string(k), string(v)}
		if v == nil {
			s.v = "<nil>"
		}
		out = append(out, s)
		return nil
	})
	return out, err
}

// TestHTTPStoreCalls: each call of a remote store answers what the local
// store does, bound by bound (open, empty, set), filter or none, values or
// none; and fails as the local one does on bad input.
func TestHTTPStoreCalls(t *testing.T) {
	local, remote, _, _ := remoteFixture(t, nil)
	ctx := context.Background()
	f, err := local.Filter(ctx, KeyRange{End: []byte("k00500")}, FilterSpec{M: 4096, K: 3})
	if err != nil {
		t.Fatal(err)
	}
	ranges := []KeyRange{{}, {Start: []byte{}}, {End: []byte{}}, {Start: []byte("k00100"), End: []byte("k00300")}, {Start: []byte("k01990")}}
	for _, kr := range ranges {
		for _, passing := range [][]byte{nil, f} {
			ls, lerr := local.Stats(ctx, kr, passing)
			rs, rerr := remote.Stats(ctx, kr, passing)
			if ls != rs || lerr != nil || rerr != nil {
				t.Errorf("Stats(%q, filter %v): remote %+v %v, local %+v %v", kr, passing != nil, rs, rerr, ls, lerr)
			}
			spec := FilterSpec{M: 1000, K: 4, Passing: passing}
			lf, lerr := local.Filter(ctx, kr, spec)
			rf, rerr := remote.Filter(ctx, kr, spec)
			if !bytes.Equal(lf, rf) || lerr != nil || rerr != nil {
				t.Errorf("Filter(%q): remote %d bytes %v, local %d bytes %v", kr, len(rf), rerr, len(lf), lerr)
			}
		}
		keys := [][]byte{{}, []byte("a"), []byte("k00007"), []byte("k00150"), []byte("k00151"), []byte("k01999"), []byte("z")}
		for _, values := range []bool{false, true} {
			calls := map[string]func(s Differ) func(fn func(k, v []byte) error) error{
				"probe": func(s Differ) func(fn func(k, v []byte) error) error {
					return func(fn func(k, v []byte) error) error { return s.Probe(ctx, kr, f, values, fn) }
				},
				"lookup": func(s Differ) func(fn func(k, v []byte) error) error {
					return func(fn func(k, v []byte) error) error { return s.Lookup(ctx, kr, keys, values, fn) }
				},
				"scan": func(s Differ) func(fn func(k, v []byte) error) error {
					return func(fn func(k, v []byte) error) error { return s.Scan(ctx, kr, fn) }
				},
				"resolve": func(s Differ) func(fn func(k, v []byte) error) error {
					hs := []uint64{itemOf([]byte("k00150"), nil, 9).Key, itemOf([]byte{}, nil, 9).Key, 12345}
					slices.Sort(hs)
					return func(fn func(k, v []byte) error) error { return s.Resolve(ctx, kr, 9, hs, fn) }
				},
			}
			for name, call := range calls {
				lr, lerr := records(t, call(local))
				rr, rerr := records(t, call(remote))
				// Local values are nil or not as the iterator has them;
				// remote ones are nil exactly when not asked for.
				for i := range lr {
					if lr[i].v == "<nil>" && (values || name == "scan" || name == "resolve") {
						lr[i].v = ""
					}
				}
				if !slices.Equal(lr, rr) || lerr != nil || rerr != nil {
					t.Errorf("%s(%q, values %v): remote %d records %v, local %d %v", name, kr, values, len(rr), rerr, len(lr), lerr)
				}
			}
		}
	}
	// Sketches: the same symbols, batch by batch.
	lsk, err := local.Sketch(ctx, KeyRange{}, 3)
	if err != nil {
		t.Fatal(err)
	}
	rsk, err := remote.Sketch(ctx, KeyRange{}, 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{1, 16, 1000} {
		l, lerr := lsk.Next(ctx, n)
		r, rerr := rsk.Next(ctx, n)
		if !bytes.Equal(l, r) || lerr != nil || rerr != nil {
			t.Errorf("Next(%d): remote %d bytes %v, local %d bytes %v", n, len(r), rerr, len(l), lerr)
		}
	}
	if err := rsk.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if _, err := rsk.Next(ctx, 1); !errors.Is(err, ErrBadRequest) {
		t.Errorf("Next after Close: %v", err)
	}

	// Bad input fails remotely as it does locally.
	noop := func(k, v []byte) error { return nil }
	damaged := bytes.Clone(f)
	damaged[len(damaged)/2] ^= 4
	for _, c := range []struct {
		name string
		call func(s Differ) error
		want error
	}{
		{"empty range", func(s Differ) error { return s.Scan(ctx, KeyRange{Start: []byte("b"), End: []byte("a")}, noop) }, ErrBadRequest},
		{"unsorted keys", func(s Differ) error {
			return s.Lookup(ctx, KeyRange{}, [][]byte{[]byte("b"), []byte("a")}, true, noop)
		}, ErrBadRequest},
		{"damaged filter", func(s Differ) error { return s.Probe(ctx, KeyRange{}, damaged, true, noop) }, ErrCorrupt},
		{"no filter", func(s Differ) error { return s.Probe(ctx, KeyRange{}, nil, true, noop) }, ErrCorrupt},
		{"damaged passing filter", func(s Differ) error { _, err := s.Stats(ctx, KeyRange{}, damaged); return err }, ErrCorrupt},
		{"filter of 0 probes", func(s Differ) error { _, err := s.Filter(ctx, KeyRange{}, FilterSpec{M: 64, K: 0}); return err }, ErrBadRequest},
		{"too many symbols", func(s Differ) error {
			sk, err := s.Sketch(ctx, KeyRange{}, 0)
			if err != nil {
				return err
			}
			defer sk.Close()
			_, err = sk.Next(ctx, MaxSketchBatch+1)
			return err
		}, ErrBadRequest},
	} {
		lerr, rerr := c.call(local), c.call(remote)
		if !errors.Is(lerr, c.want) || !errors.Is(rerr, c.want) {
			t.Errorf("%s: remote %v, local %v; want both %v", c.name, rerr, lerr, c.want)
		}
	}
}

// TestHTTPEstimate: an estimate against a remote B, or a remote A, is the
// local one.
func TestHTTPEstimate(t *testing.T) {
	da, db := openStore(t), openStore(t)
	ma, mb := map[string]string{}, map[string]string{}
	for i := range 3000 {
		ma[fmt.Sprintf("k%06d", i)] = "a"
		mb[fmt.Sprintf("k%06d", i+2000)] = "b"
	}
	fill(t, da, ma)
	fill(t, db, mb)
	a, b := Local(da, Limits{}), Local(db, Limits{})
	_, _, ra := serve(t, a, nil)
	_, _, rb := serve(t, b, nil)
	want, err := Estimate(context.Background(), a, b, KeyRange{}, 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range [][2]Store{{a, rb}, {ra, b}, {ra, rb}} {
		got, err := Estimate(context.Background(), p[0], p[1], KeyRange{}, 10)
		if err != nil || got != want {
			t.Errorf("remote estimate %+v, %v; local %+v", got, err, want)
		}
	}
}

// TestDialURL: Dial takes http and https URLs with a path prefix, and
// refuses others; a server that is not there is ErrRemote.
func TestDialURL(t *testing.T) {
	for _, u := range []string{"ftp://host/", "http://", "http://host/?q=1", "http://host/#f", "::"} {
		if _, err := Dial(u, nil); !errors.Is(err, ErrBadRequest) {
			t.Errorf("Dial(%q): %v", u, err)
		}
	}
	local, _, _, _ := remoteFixture(t, nil)
	mux := http.NewServeMux()
	mux.Handle("/stores/one/", http.StripPrefix("/stores/one", Handler(local, nil)))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for _, u := range []string{srv.URL + "/stores/one", srv.URL + "/stores/one/", srv.URL + "/stores/one/semijoin/v1/"} {
		s, err := Dial(u, srv.Client())
		if err != nil {
			t.Fatal(err)
		}
		if st, err := s.Stats(context.Background(), KeyRange{}, nil); err != nil || st.Keys != 2001 {
			t.Errorf("%s: %+v, %v", u, st, err)
		}
	}
	// A path the handler is not mounted at: the mux's 404 is not the
	// handler's.
	s, _ := Dial(srv.URL+"/elsewhere", nil)
	if _, err := s.Stats(context.Background(), KeyRange{}, nil); !errors.Is(err, ErrRemote) || !strings.Contains(err.Error(), "HTTP 404 (text/plain; charset=utf-8) from a server that is not a bloomkv semijoin server") {
		t.Errorf("wrong path: %v", err)
	}
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	s, _ = Dial(gone.URL, nil)
	if _, err := s.Stats(context.Background(), KeyRange{}, nil); !errors.Is(err, ErrRemote) {
		t.Errorf("no server: %v", err)
	}
	// Not a semijoin server: a 200 of another type.
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "hello") }))
	defer other.Close()
	s, _ = Dial(other.URL, nil)
	if _, err := s.Stats(context.Background(), KeyRange{}, nil); !errors.Is(err, ErrRemote) {
		t.Errorf("another server: %v", err)
	}
}

// TestHTTPSessions: sketches beyond MaxSessions are refused (429,
// ErrRemote) until one closes; an unused one expires after SessionTTL.
func TestHTTPSessions(t *testing.T) {
	const ttl = 2 * time.Minute
	local, _, _, _ := remoteFixture(t, nil)
	h := Handler(local, &HandlerOptions{MaxSessions: 2, SessionTTL: ttl}).(*handler)
	var clock atomic.Int64 // nanoseconds
	h.now = func() time.Time { return time.Unix(0, clock.Load()) }
	srv := httptest.NewServer(h)
	defer srv.Close()
	remote := dial(t, srv.URL)
	ctx := context.Background()
	s1, err := remote.Sketch(ctx, KeyRange{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := remote.Sketch(ctx, KeyRange{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := remote.Sketch(ctx, KeyRange{}, 0); !errors.Is(err, ErrRemote) || !strings.Contains(err.Error(), "429") {
		t.Errorf("third sketch: %v", err)
	}
	if err := s1.Close(); err != nil {
		t.Fatal(err)
	}
	s3, err := remote.Sketch(ctx, KeyRange{}, 0)
	if err != nil {
		t.Fatalf("sketch after a close: %v", err)
	}
	clock.Add(int64(ttl / 2))
	if _, err := s3.Next(ctx, 10); err != nil { // s3 used: it lives on
		t.Fatal(err)
	}
	clock.Add(int64(ttl/2 + time.Second)) // s2 unused for longer than the TTL
	if _, err := s2.Next(ctx, 10); !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), "404") {
		t.Errorf("expired sketch: %v", err)
	}
	if _, err := s3.Next(ctx, 10); err != nil {
		t.Errorf("live sketch: %v", err)
	}
	s3.Close()
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.sessions) != 0 {
		t.Errorf("%d sessions open", len(h.sessions))
	}
}

// TestHTTPFilterLimit: a filter asked for, or sent, over the server's limit
// is refused with 413 before the store builds or decodes it.
func TestHTTPFilterLimit(t *testing.T) {
	_, remote, _, _ := remoteFixture(t, &HandlerOptions{Limits: Limits{MaxFilterBits: 1 << 16}})
	ctx := context.Background()
	if _, err := remote.Filter(ctx, KeyRange{}, FilterSpec{M: 1<<16 + 1, K: 3}); !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), "413") {
		t.Errorf("filter over the limit: %v", err)
	}
	big, err := filterblock.NewBloom(1<<20, 3)
	if err != nil {
		t.Fatal(err)
	}
	err = remote.Probe(ctx, KeyRange{}, big.AppendWire(nil), true, func(k, v []byte) error { return nil })
	if !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), "413") {
		t.Errorf("probe with a filter over the limit: %v", err)
	}
	if _, err := remote.Stats(ctx, KeyRange{}, big.AppendWire(nil)); !errors.Is(err, ErrBadRequest) {
		t.Errorf("stats with a filter over the limit: %v", err)
	}
	if _, err := remote.Filter(ctx, KeyRange{}, FilterSpec{M: 1 << 16, K: 3}); err != nil {
		t.Errorf("filter at the limit: %v", err)
	}
}

// lookupLog is a store that records, for each Lookup it serves, the number
// of keys asked for and their bytes on the wire.
type lookupLog struct {
	Differ
	mu    sync.Mutex
	calls []lookupCall
}

type lookupCall struct {
	keys  int
	bytes int64
}

func (l *lookupLog) Lookup(ctx context.Context, r KeyRange, keys [][]byte, values bool, fn func(k, v []byte) error) error {
	c := lookupCall{keys: len(keys)}
	for _, k := range keys {
		c.bytes += keyBytes(k)
	}
	l.mu.Lock()
	l.calls = append(l.calls, c)
	l.mu.Unlock()
	return l.Differ.Lookup(ctx, r, keys, values, fn)
}

// take returns the calls recorded since the last take.
func (l *lookupLog) take() []lookupCall {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.calls
	l.calls = nil
	return c
}

// joinSame joins a and b, which hold the same values for the keys both
// hold, by strategy s with options o, and checks that the matches are the
// keys of want (ascending), each with its value on both sides.
func joinSame(t *testing.T, a, b Store, s Strategy, o Options, want [][]byte) {
	t.Helper()
	o.Strategy = s
	n := 0
	_, err := Join(context.Background(), a, b, &o, func(m Match) error {
		if n >= len(want) || !bytes.Equal(m.Key, want[n]) || !bytes.Equal(m.A, m.B) {
			return fmt.Errorf("match %d: key of %d bytes, values %q and %q; want key %d of %d", n, len(m.Key), m.A, m.B, n, len(want))
		}
		n++
		return nil
	})
	if err != nil {
		t.Fatalf("%v: %v", s, err)
	}
	if n != len(want) {
		t.Fatalf("%v: %d matches, want %d", s, n, len(want))
	}
}

// checkBatches checks that the lookups B served asked for every one of n
// keys of total bytes on the wire, in batches of at most batchBytes bytes of
// keys (a single key may take more) and at most defaultBatchKeys keys, and
// returns the number of lookups.
func checkBatches(t *testing.T, s Strategy, calls []lookupCall, n int, total, batchBytes int64) int {
	t.Helper()
	keys, sum := 0, int64(0)
	for i, c := range calls {
		if c.keys > defaultBatchKeys || (c.bytes > batchBytes && c.keys != 1) {
			t.Errorf("%v: lookup %d asked for %d keys of %d bytes; the bounds are %d keys and %d bytes", s, i, c.keys, c.bytes, defaultBatchKeys, batchBytes)
		}
		keys += c.keys
		sum += c.bytes
	}
	if keys != n || sum != total {
		t.Errorf("%v: lookups asked for %d keys of %d bytes, want %d of %d", s, keys, sum, n, total)
	}
	return len(calls)
}

// wideStore is a store made up as it is read, not kept: key i is i in six
// decimal digits padded with 'x' to keyLen bytes, and its value "v" and i.
// It holds key i, for i < n, where held(i). It serves Stats, Filter, Lookup
// and Scan over the whole key space, which is all the joins here ask.
type wideStore struct {
	Differ    // nil: the other calls are not served
	n, keyLen int
	held      func(i int) bool
}

func (s *wideStore) key(buf []byte, i int) []byte {
	buf = fmt.Appendf(buf[:0], "%06d", i)
	return append(buf, bytes.Repeat([]byte("x"), s.keyLen-len(buf))...)
}

// each calls fn with each key held that passes the filter passing, if any.
func (s *wideStore) each(passing []byte, fn func(i int, k []byte) error) error {
	var f *filterblock.Bloom
	if passing != nil {
		var err error
		if f, err = filterblock.DecodeWire(passing, DefaultMaxFilterBits); err != nil {
			return err
		}
	}
	var buf []byte
	for i := range s.n {
		if !s.held(i) {
			continue
		}
		buf = s.key(buf, i)
		if f != nil && !f.MayContain(buf) {
			continue
		}
		if err := fn(i, buf); err != nil {
			return err
		}
	}
	return nil
}

func (s *wideStore) Stats(_ context.Context, _ KeyRange, passing []byte) (Stats, error) {
	var st Stats
	err := s.each(passing, func(i int, k []byte) error {
		st.Keys++
		st.KeyBytes += int64(len(k))
		st.ValueBytes += int64(len(fmt.Sprint("v", i)))
		return nil
	})
	st.Scanned = int64(s.n)
	return st, err
}

func (s *wideStore) Filter(_ context.Context, _ KeyRange, spec FilterSpec) ([]byte, error) {
	f, err := filterblock.NewBloom(spec.M, spec.K)
	if err != nil {
		return nil, err
	}
	err = s.each(spec.Passing, func(_ int, k []byte) error {
		f.Add(k)
		return nil
	})
	return f.AppendWire(nil), err
}

func (s *wideStore) Scan(_ context.Context, _ KeyRange, fn func(k, v []byte) error) error {
	return s.each(nil, func(i int, k []byte) error { return fn(k, fmt.Append(nil, "v", i)) })
}

func (s *wideStore) Lookup(_ context.Context, _ KeyRange, keys [][]byte, values bool, fn func(k, v []byte) error) error {
	var buf []byte
	for _, k := range keys {
		i, err := strconv.Atoi(string(k[:min(6, len(k))]))
		if err != nil || i < 0 || i >= s.n || !s.held(i) {
			continue
		}
		if buf = s.key(buf, i); !bytes.Equal(k, buf) {
			continue
		}
		var v []byte
		if values {
			v = fmt.Append(nil, "v", i)
		}
		if err := fn(k, v); err != nil {
			return err
		}
	}
	return nil
}

// TestHTTPJoinLargeKeys: ShipKeys and TwoWay over HTTP join keys of 16 KiB,
// of which a batch of the default BatchKeys passes a Handler's default
// request limit, at the default options: each lookup holds at most a
// quarter of the limit, and the join is exact.
func TestHTTPJoinLargeKeys(t *testing.T) {
	const n, keyLen = defaultBatchKeys + 4, 16 << 10
	if n*(keyLen+3) <= DefaultMaxRequestBytes {
		t.Fatalf("%d keys of %d bytes fit in a request", n, keyLen)
	}
	a := &wideStore{n: n, keyLen: keyLen, held: func(int) bool { return true }}
	for _, c := range []struct {
		s    Strategy
		held func(i int) bool
	}{
		// B holds few of A's keys: A sends all of them.
		{ShipKeys, func(i int) bool { return i%97 == 0 }},
		// B holds all of A's keys: all pass both filters, and A sends
		// them all.
		{TwoWay, func(int) bool { return true }},
	} {
		t.Run(c.s.String(), func(t *testing.T) {
			if c.s == TwoWay && testing.Short() {
				t.Skip("its lookups are ShipKeys'; TestHTTPJoinKeyOverBatchBytes covers them")
			}
			log := &lookupLog{Differ: &wideStore{n: n, keyLen: keyLen, held: c.held}}
			_, _, b := serve(t, log, nil)
			var want [][]byte
			total := int64(0)
			for i := range n {
				k := a.key(nil, i)
				total += keyBytes(k)
				if c.held(i) {
					want = append(want, k)
				}
			}
			joinSame(t, a, b, c.s, Options{}, want)
			lookups := checkBatches(t, c.s, log.take(), n, total, defaultBatchBytes)
			if least := int((total + defaultBatchBytes - 1) / defaultBatchBytes); lookups < least {
				t.Errorf("%v: %d lookups for %d bytes of keys", c.s, lookups, total)
			}
		})
	}
}

// TestHTTPJoinKeyOverBatchBytes: keys of bloomkv.MaxKeySize join over HTTP
// at the default options, and at a BatchBytes below their size, each goes
// to B alone; the join is exact. A key over B's request limit ends the join
// with a refusal (413, ErrBadRequest) at its first lookup, not retried.
func TestHTTPJoinKeyOverBatchBytes(t *testing.T) {
	const batchBytes = 32 << 10
	d := openStore(t)
	b := d.NewBatch()
	var want [][]byte
	total := int64(0)
	add := func(k []byte) {
		b.Set(k, fmt.Appendf(nil, "v%d", len(want)))
		want = append(want, k)
		total += keyBytes(k)
	}
	for i := range 50 {
		add(fmt.Appendf(nil, "a%03d", i))
	}
	for i := range 2 {
		add(append(fmt.Appendf(nil, "m%d", i), bytes.Repeat([]byte("y"), bloomkv.MaxKeySize-2)...))
	}
	for i := range 50 {
		add(fmt.Appendf(nil, "z%03d", i))
	}
	if err := d.Apply(b, bloomkv.NoSync); err != nil {
		t.Fatal(err)
	}
	log := &lookupLog{Differ: Local(d, Limits{})}
	_, _, remote := serve(t, log, nil)
	for _, s := range []Strategy{ShipKeys, TwoWay} {
		joinSame(t, Local(d, Limits{}), remote, s, Options{}, want)
		checkBatches(t, s, log.take(), len(want), total, defaultBatchBytes)
		joinSame(t, Local(d, Limits{}), remote, s, Options{BatchBytes: batchBytes}, want)
		calls := log.take()
		checkBatches(t, s, calls, len(want), total, batchBytes)
		alone := 0
		for _, c := range calls {
			if c.bytes > batchBytes {
				alone++
			}
		}
		if alone != 2 {
			t.Errorf("%v: %d lookups over %d bytes, want one for each of the 2 large keys", s, alone, batchBytes)
		}
	}

	// B refuses requests over 64 KiB: the small keys pass, the first large
	// key is refused, once.
	h := Handler(Local(d, Limits{}), &HandlerOptions{MaxRequestBytes: 64 << 10})
	var lookups atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == pathPrefix+epLookup.String() {
			lookups.Add(1)
		}
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()
	remote = dial(t, srv.URL)
	for _, s := range []Strategy{ShipKeys, TwoWay} {
		lookups.Store(0)
		_, err := Join(context.Background(), Local(d, Limits{}), remote, &Options{Strategy: s, BatchBytes: batchBytes}, func(Match) error { return nil })
		if !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), "413") {
			t.Errorf("%v: a key over the server's limit: %v; want a refusal with 413", s, err)
		}
		if n := lookups.Load(); n != 2 {
			t.Errorf("%v: %d lookup requests, want 2: the small keys', and the large key's, refused", s, n)
		}
	}
}

// TestHTTPNotASemijoinServer: a server at the URL that is not a semijoin
// server (a web page's 501, a 404) is named so, with what it answered, and
// not as the store's refusal; a semijoin server's refusal still gives its
// reason.
func TestHTTPNotASemijoinServer(t *testing.T) {
	for _, status := range []int{http.StatusNotImplemented, http.StatusNotFound} {
		web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(status)
			io.WriteString(w, "<!DOCTYPE HTML><html><body>Unsupported method</body></html>\n")
		}))
		remote, err := Dial(web.URL, web.Client())
		if err != nil {
			t.Fatal(err)
		}
		_, err = remote.Stats(context.Background(), KeyRange{}, nil)
		web.Close()
		msg := fmt.Sprint(err)
		if !errors.Is(err, ErrRemote) || !strings.Contains(msg, fmt.Sprintf("HTTP %d (text/html) from a server that is not a bloomkv semijoin server", status)) ||
			strings.Contains(msg, "DOCTYPE") {
			t.Errorf("HTTP %d from a web server: %v", status, err)
		}
	}
	local, _, _, _ := remoteFixture(t, nil)
	srv, _, _ := serve(t, local, nil)
	resp, err := srv.Client().Post(srv.URL+"/semijoin/v1/nothing", contentType, strings.NewReader(""))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || resp.Header.Get(serverHeader) != serverVersion {
		t.Errorf("a refusal: HTTP %d, %s %q", resp.StatusCode, serverHeader, resp.Header.Get(serverHeader))
	}
	s := dial(t, srv.URL+"/semijoin/v1/nothing/")
	if _, err := s.Stats(context.Background(), KeyRange{}, nil); !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), "HTTP 404: semijoin: no endpoint") {
		t.Errorf("a refusal's reason: %v", err)
	}
}
