package main

import (
	"context"
	crand "crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/bloomkv/bloomkv"
	"github.com/bloomkv/bloomkv/filterblock"
	"github.com/bloomkv/bloomkv/internal/benchutil"
	"github.com/bloomkv/bloomkv/internal/humanize"
	"github.com/bloomkv/bloomkv/internal/testpki"
	"github.com/bloomkv/bloomkv/semijoin"
)

// The semijoin workload: two bloomkv stores, A of n/5 keys and B of 2n (100k
// and 1M at the default size), whose keys overlap in 1 %, 10 % and 50 % of
// A's; each joined with every strategy, A's estimate of the overlap, and a
// Diff of B with a copy of it that differs in 1,000 keys. The joins run in
// one process, with B served over loopback HTTP, and over loopback HTTPS
// with a bearer token, to measure what TLS and the token cost.

// semijoinReport is the workload's part of the JSON report.
type semijoinReport struct {
	KeysA        int64          `json:"keys_a"`
	KeysB        int64          `json:"keys_b"`
	Joins        []semijoinRun  `json:"joins"`
	Estimates    []semijoinEst  `json:"estimates"`
	ScanKeysPerS float64        `json:"scan_keys_per_sec"`
	ProbeKeysPer float64        `json:"probe_keys_per_sec"`
	Diff         *semijoinDiff  `json:"diff,omitempty"`
	Goals        []semijoinGoal `json:"goals"`
	Seconds      float64        `json:"seconds"`
}

type semijoinRun struct {
	Overlap float64 `json:"overlap"`
	// Transport is "process" (both stores in this process), "http" (B
	// served over loopback HTTP; the bytes are those on the connection) or
	// "https" (over loopback TLS with a bearer token; the bytes on the
	// connection, TLS's included).
	Transport      string  `json:"transport"`
	Strategy       string  `json:"strategy"`
	Chosen         string  `json:"chosen"` // Auto's pick
	BytesAToB      int64   `json:"bytes_a_to_b"`
	BytesBToA      int64   `json:"bytes_b_to_a"`
	FilterBytes    int64   `json:"filter_bytes"`
	FilterFPRate   float64 `json:"filter_fp_rate"`
	GolombBound    float64 `json:"golomb_bound_bytes,omitempty"`
	Matches        int64   `json:"matches"`
	FalsePositives int64   `json:"false_positives"`
	Seconds        float64 `json:"seconds"`
	// KeysPerSec is the keys of both sides joined per second, end to end.
	KeysPerSec float64 `json:"joined_keys_per_sec"`
}

type semijoinEst struct {
	Overlap    float64 `json:"overlap"`
	True       int64   `json:"true"`
	Estimate   float64 `json:"estimate"`
	ErrorBound float64 `json:"error_bound"`
	RelError   float64 `json:"rel_error"`
	Bytes      int64   `json:"bytes"`
}

type semijoinDiff struct {
	Keys        int64   `json:"keys"`
	Differences int64   `json:"differences"`
	Symbols     int     `json:"symbols"`
	SymbolBytes int64   `json:"symbol_bytes"`
	TotalBytes  int64   `json:"total_bytes"`
	Seconds     float64 `json:"seconds"`
}

// tlsGoalName names the goal of TLS and a token's cost to a join.
const tlsGoalName = "join time over HTTPS with a token / over HTTP, all overlaps and strategies"

type semijoinGoal struct {
	Name   string  `json:"name"`
	Got    float64 `json:"got"`
	Target float64 `json:"target"`
	AtMost bool    `json:"at_most"`
	Met    bool    `json:"met"`
}

// semijoinOverlaps are the shares of A's keys that B holds.
var semijoinOverlaps = []float64{0.01, 0.10, 0.50}

// semijoinTransports are the ways the joins reach B.
var semijoinTransports = []string{"process", "http", "https"}

var semijoinStrategies = []semijoin.Strategy{semijoin.ShipKeys, semijoin.ShipFilter, semijoin.ShipCompressed, semijoin.TwoWay, semijoin.Auto}

// runSemijoin runs the workload in dir, telling prog what it is doing.
func runSemijoin(cfg *config, s settings, dir string, prog func(string)) (*semijoinReport, error) {
	start := time.Now()
	dir = filepath.Join(dir, "semijoin")
	if !cfg.keep {
		defer os.RemoveAll(dir) // after the stores' deferred Close
	}
	nA, nB := max(cfg.n/5, 10), max(2*cfg.n, 100)
	rep := &semijoinReport{KeysA: int64(nA), KeysB: int64(nB)}
	ctx := context.Background()
	opts := bloomkvOptions(s, false)
	vals := newValues(cfg.valueSize, cfg.seed)
	rng := rand.New(rand.NewPCG(cfg.seed, 0x73656d69))
	// B holds the even ids 0, 2, …, 2(nB-1); A's keys are ids spread over
	// the same range, the first share of them even (in B), the rest odd.
	prog("semijoin: loading B")
	db, err := loadStore(filepath.Join(dir, "b"), opts, nB, func(i int) uint64 { return uint64(2 * i) }, vals, rng)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	b := semijoin.Local(db, semijoin.Limits{})
	// B over loopback HTTP and over loopback HTTPS with a token, their
	// connections counted.
	remote := map[string]semijoin.Store{}
	listeners := map[string]*countingListener{}
	for _, tr := range []string{"http", "https"} {
		s, cl, stop, err := serveSemijoin(b, tr == "https", filepath.Join(dir, "tls"))
		if err != nil {
			return nil, err
		}
		defer stop()
		remote[tr], listeners[tr] = s, cl
	}
	// The probe side against B's own full scan.
	scanStart := time.Now()
	if err := b.Scan(ctx, semijoin.KeyRange{}, func(k, v []byte) error { return nil }); err != nil {
		return nil, err
	}
	rep.ScanKeysPerS = float64(nB) / time.Since(scanStart).Seconds()
	for _, ov := range semijoinOverlaps {
		prog(fmt.Sprintf("semijoin: overlap %.0f%%", ov*100))
		inB := int(ov * float64(nA))
		stride := max(1, nB/nA)
		da, err := loadStore(filepath.Join(dir, fmt.Sprintf("a-%.0f", ov*100)), opts, nA, func(i int) uint64 {
			id := uint64(2 * stride * i) // in B's range, spread
			if i >= inB {
				id++ // odd: not in B
			}
			return id
		}, vals, rng)
		if err != nil {
			return nil, err
		}
		a := semijoin.Local(da, semijoin.Limits{})
		for _, transport := range semijoinTransports {
			side, cl := semijoin.Store(b), listeners[transport]
			if transport != "process" {
				side = remote[transport]
			}
			for _, st := range semijoinStrategies {
				var read0, written0 int64
				if cl != nil {
					read0, written0 = cl.read.Load(), cl.written.Load()
				}
				t0 := time.Now()
				var n int64
				jr, err := semijoin.Join(ctx, a, side, &semijoin.Options{Strategy: st}, func(semijoin.Match) error { n++; return nil })
				if err != nil {
					da.Close()
					return nil, fmt.Errorf("join %v over %s at overlap %.0f%%: %w", st, transport, ov*100, err)
				}
				el := time.Since(t0).Seconds()
				run := semijoinRun{Overlap: ov, Transport: transport, Strategy: st.String(), Chosen: jr.Strategy.String(), BytesAToB: jr.BytesAToB, BytesBToA: jr.BytesBToA,
					FilterBytes: jr.FilterBytes, FilterFPRate: jr.FilterFPRate, Matches: jr.Matches, FalsePositives: jr.FalsePositives,
					Seconds: el, KeysPerSec: float64(nA+nB) / el}
				if cl != nil {
					run.BytesAToB, run.BytesBToA = cl.read.Load()-read0, cl.written.Load()-written0
				}
				if jr.Strategy == semijoin.ShipCompressed || jr.Strategy == semijoin.ShipFilter {
					run.GolombBound = golombBound(nA, jr.FilterFPRate)
				}
				if n != int64(inB) {
					da.Close()
					return nil, fmt.Errorf("join %v over %s at overlap %.0f%%: %d matches, want %d", st, transport, ov*100, n, inB)
				}
				rep.Joins = append(rep.Joins, run)
			}
		}
		e, err := semijoin.Estimate(ctx, a, b, semijoin.KeyRange{}, 0)
		if err != nil {
			da.Close()
			return nil, err
		}
		rep.Estimates = append(rep.Estimates, semijoinEst{Overlap: ov, True: int64(inB), Estimate: e.Intersection, ErrorBound: e.ErrorBound,
			RelError: (e.Intersection - float64(inB)) / float64(max(inB, 1)), Bytes: e.FilterBytes})
		if ov == semijoinOverlaps[0] {
			// The probe side: B scanning its keys against A's filter.
			wire, err := a.Filter(ctx, semijoin.KeyRange{}, semijoin.FilterSpec{M: uint64(16 * nA), K: 11})
			if err != nil {
				da.Close()
				return nil, err
			}
			t0 := time.Now()
			if err := b.Probe(ctx, semijoin.KeyRange{}, wire, true, func(k, v []byte) error { return nil }); err != nil {
				da.Close()
				return nil, err
			}
			rep.ProbeKeysPer = float64(nB) / time.Since(t0).Seconds()
		}
		if err := da.Close(); err != nil {
			return nil, err
		}
	}
	prog("semijoin: diff")
	if rep.Diff, err = semijoinDiffRun(ctx, dir, opts, nB, b, vals, rng); err != nil {
		return nil, err
	}
	rep.Seconds = time.Since(start).Seconds()
	rep.checkGoals()
	return rep, nil
}

// serveSemijoin serves b on a loopback port, its connections counted, and
// returns the store Dial makes of it. With tlsToken the server speaks TLS,
// with a certificate of a CA made for the run in dir, and takes a bearer
// token, which the client sends.
func serveSemijoin(b semijoin.Differ, tlsToken bool, dir string) (semijoin.Store, *countingListener, func(), error) {
	var ho semijoin.HandlerOptions
	var so semijoin.ServerOptions
	var do semijoin.DialOptions
	scheme := "http://"
	if tlsToken {
		ca, cert, key, err := writeCerts(dir)
		if err != nil {
			return nil, nil, nil, err
		}
		so.CertFile, so.KeyFile, do.CAFile = cert, key, ca
		var tok [16]byte
		crand.Read(tok[:])
		ho.Token, do.Token = hex.EncodeToString(tok[:]), hex.EncodeToString(tok[:])
		scheme = "https://"
	}
	srv, err := semijoin.NewServer(semijoin.Handler(b, &ho), &so)
	if err != nil {
		return nil, nil, nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, nil, err
	}
	cl := &countingListener{Listener: ln}
	go semijoin.Serve(srv, cl)
	s, err := semijoin.DialWith(scheme+ln.Addr().String(), &do)
	if err == nil {
		// One call opens the connection (and makes the TLS handshake)
		// before the joins are timed: they measure the transfers, and the
		// counts of bytes start after it.
		_, err = s.Stats(context.Background(), semijoin.KeyRange{}, nil)
	}
	if err != nil {
		srv.Close()
		return nil, nil, nil, err
	}
	return s, cl, func() { srv.Close() }, nil
}

// writeCerts writes into dir a CA's certificate and a certificate and key
// for 127.0.0.1 that it signed, as PEM files, and returns their paths.
func writeCerts(dir string) (ca, cert, key string, err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", "", err
	}
	authority, err := testpki.NewCA("bloomkv bench CA")
	if err != nil {
		return "", "", "", err
	}
	leaf, err := authority.Issue("127.0.0.1", time.Now().Add(24*time.Hour), x509.ExtKeyUsageServerAuth)
	if err != nil {
		return "", "", "", err
	}
	ca, cert, key = filepath.Join(dir, "ca.pem"), filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	for _, f := range []struct {
		path string
		data []byte
	}{{ca, authority.PEM}, {cert, leaf.CertPEM}, {key, leaf.KeyPEM}} {
		if err := os.WriteFile(f.path, f.data, 0o600); err != nil {
			return "", "", "", err
		}
	}
	return ca, cert, key, nil
}

// loadStore writes n keys id(0), …, id(n-1) with values from vals into a
// new store in dir, compacted, and returns it open.
func loadStore(dir string, opts *bloomkv.Options, n int, id func(int) uint64, vals *benchutil.ValueSource, rng *rand.Rand) (*bloomkv.DB, error) {
	d, err := bloomkv.Open(dir, opts)
	if err != nil {
		return nil, err
	}
	key := make([]byte, benchutil.KeyLen)
	b := d.NewBatch()
	for i := range n {
		b.Set(benchutil.MakeKey(key, id(i)), vals.Next(rng))
		if b.Len() >= 1<<20 {
			if err := d.Apply(b, bloomkv.NoSync); err != nil {
				d.Close()
				return nil, err
			}
			b = d.NewBatch()
		}
	}
	err = d.Apply(b, bloomkv.NoSync)
	if err == nil {
		err = d.Compact(nil, nil)
	}
	if err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// semijoinDiffRun copies B with 1,000 keys changed (a third only in the
// copy, a third only in B, a third with another value) and times Diff.
func semijoinDiffRun(ctx context.Context, dir string, opts *bloomkv.Options, nB int, b semijoin.Differ, vals *benchutil.ValueSource, rng *rand.Rand) (*semijoinDiff, error) {
	const d = 1000
	step := max(1, nB/d)
	dc, err := bloomkv.Open(filepath.Join(dir, "b-copy"), opts)
	if err != nil {
		return nil, err
	}
	defer dc.Close()
	batch := dc.NewBatch()
	i := 0
	err = b.Scan(ctx, semijoin.KeyRange{}, func(k, v []byte) error {
		switch {
		case i%step == 0 && i/step%3 == 0 && i/step < d: // only in B
		case i%step == 0 && i/step%3 == 1 && i/step < d:
			batch.Set(k, vals.Next(rng))
		default:
			batch.Set(k, v)
		}
		if i%step == 0 && i/step%3 == 2 && i/step < d { // only in the copy
			nk := append([]byte(nil), k...)
			nk[len(nk)-1]++ // an odd id: not in B
			batch.Set(nk, v)
		}
		i++
		if batch.Len() >= 1<<20 {
			if err := dc.Apply(batch, bloomkv.NoSync); err != nil {
				return err
			}
			batch = dc.NewBatch()
		}
		return nil
	})
	if err == nil {
		err = dc.Apply(batch, bloomkv.NoSync)
	}
	if err == nil {
		err = dc.Compact(nil, nil)
	}
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	var n int64
	dr, err := semijoin.Diff(ctx, semijoin.Local(dc, semijoin.Limits{}), b, nil, func(semijoin.Difference) error { n++; return nil })
	if err != nil {
		return nil, err
	}
	return &semijoinDiff{Keys: int64(nB), Differences: n, Symbols: dr.Symbols, SymbolBytes: dr.SymbolBytes,
		TotalBytes: dr.BytesAToB + dr.BytesBToA, Seconds: time.Since(t0).Seconds()}, nil
}

// golombBound is the size in bytes of a Golomb-coded set of n keys with
// false-positive rate fp: a filter of one probe a key (k = 1) whose m bits
// give that rate, its set bits' gaps Golomb-coded.
func golombBound(n int, fp float64) float64 {
	if fp <= 0 || fp >= 1 {
		return 0
	}
	m := uint64(math.Ceil(-float64(n) / math.Log1p(-fp)))
	return float64(filterblock.ExpectedWireBytes(m, 1, n))
}

func (r *semijoinReport) run(ov float64, transport string, st semijoin.Strategy) *semijoinRun {
	for i := range r.Joins {
		if j := &r.Joins[i]; j.Overlap == ov && j.Transport == transport && j.Strategy == st.String() {
			return j
		}
	}
	return nil
}

// countingListener counts the bytes its connections read and write.
type countingListener struct {
	net.Listener
	read, written atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: c, l: l}, nil
}

type countingConn struct {
	net.Conn
	l *countingListener
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.l.read.Add(int64(n))
	return n, err
}

func (c *countingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.l.written.Add(int64(n))
	return n, err
}

func (r *semijoinReport) checkGoals() {
	add := func(name string, got, target float64, atMost bool) {
		met := got >= target
		if atMost {
			met = got <= target
		}
		r.Goals = append(r.Goals, semijoinGoal{Name: name, Got: got, Target: target, AtMost: atMost, Met: met})
	}
	for _, ov := range semijoinOverlaps {
		pct := fmt.Sprintf("%.0f%%", ov*100)
		c := r.run(ov, "process", semijoin.ShipCompressed)
		if c.GolombBound > 0 {
			add("compressed filter bytes / Golomb bound, overlap "+pct, float64(c.FilterBytes)/c.GolombBound, 1.05, true)
		}
		total := func(x *semijoinRun) float64 { return float64(x.BytesAToB + x.BytesBToA) }
		for _, tr := range []string{"process", "http"} {
			keys, auto := r.run(ov, tr, semijoin.ShipKeys), r.run(ov, tr, semijoin.Auto)
			if ov <= 0.10 {
				add(fmt.Sprintf("auto bytes / ship keys, %s, overlap %s", tr, pct), total(auto)/total(keys), 0.55, true)
			}
			cheapest := math.Inf(1)
			for _, st := range semijoinStrategies[:4] {
				cheapest = min(cheapest, total(r.run(ov, tr, st)))
			}
			add(fmt.Sprintf("auto bytes / cheapest strategy, %s, overlap %s", tr, pct), total(auto)/cheapest, 1.02, true)
		}
		add("keys joined/s over loopback (auto, millions), overlap "+pct, r.run(ov, "http", semijoin.Auto).KeysPerSec/1e6, 1, false)
	}
	// TLS and the token's cost: the time of every join over HTTPS with a
	// token over that of the same joins over plain HTTP.
	var plain, secure float64
	for _, j := range r.Joins {
		switch j.Transport {
		case "http":
			plain += j.Seconds
		case "https":
			secure += j.Seconds
		}
	}
	if plain > 0 && secure > 0 {
		add(tlsGoalName, secure/plain, 1.30, true)
	}
	for _, e := range r.Estimates {
		add(fmt.Sprintf("|estimate error|, overlap %.0f%%", e.Overlap*100), math.Abs(e.RelError), 0.10, true)
	}
	add("probe keys/s / scan keys/s", r.ProbeKeysPer/r.ScanKeysPerS, 0.8, false)
	if d := r.Diff; d != nil {
		const symbolBytes = 26
		add("diff symbol bytes / (2 × d × 26)", float64(d.SymbolBytes)/float64(2*d.Differences*symbolBytes), 1, true)
		add("diff seconds", d.Seconds, 1, true)
	}
}

func (r *semijoinReport) table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "\nsemijoin: A %s keys, B %s keys; in one process (bytes as they would cross), and with B served over loopback HTTP and over loopback HTTPS with a token (bytes on the connection)\n",
		commas(float64(r.KeysA)), commas(float64(r.KeysB)))
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "overlap\ttransport\tstrategy\tA→B\tB→A\tfilter\tfilter FP\tfalse positives\tmatches\tkeys joined/s (A+B)\t\n")
	for _, j := range r.Joins {
		st := j.Strategy
		if st == "auto" {
			st = "auto: " + j.Chosen
		}
		fmt.Fprintf(tw, "%.0f%%\t%s\t%s\t%s\t%s\t%s\t%.5f\t%d\t%d\t%s\t\n", j.Overlap*100, j.Transport, st,
			humanize.Bytes(uint64(j.BytesAToB)), humanize.Bytes(uint64(j.BytesBToA)), humanize.Bytes(uint64(j.FilterBytes)),
			j.FilterFPRate, j.FalsePositives, j.Matches, commas(j.KeysPerSec))
	}
	tw.Flush()
	for _, e := range r.Estimates {
		fmt.Fprintf(&b, "estimate at %.0f%%: %.0f ± %.0f (true %d, %+.2f%%), %s sent\n", e.Overlap*100, e.Estimate, e.ErrorBound, e.True, e.RelError*100, humanize.Bytes(uint64(e.Bytes)))
	}
	fmt.Fprintf(&b, "B's scan %s keys/s; B probing A's filter %s keys/s\n", commas(r.ScanKeysPerS), commas(r.ProbeKeysPer))
	if d := r.Diff; d != nil {
		fmt.Fprintf(&b, "diff of %s keys: %d differences in %d symbols (%s), %s in all, %.2f s\n", commas(float64(d.Keys)), d.Differences, d.Symbols,
			humanize.Bytes(uint64(d.SymbolBytes)), humanize.Bytes(uint64(d.TotalBytes)), d.Seconds)
	}
	b.WriteString("semijoin goals:\n")
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, g := range r.Goals {
		op, state := goalMark(g.AtMost, g.Met)
		fmt.Fprintf(tw, "  %s\t%s %.2f\t%.3f\t%s\n", g.Name, op, g.Target, g.Got, state)
	}
	tw.Flush()
	return b.String()
}

// goalMark returns how a goal's line shows its bound (">=" or "<=") and
// its state ("met" or "MISSED").
func goalMark(atMost, met bool) (op, state string) {
	op, state = ">=", "MISSED"
	if atMost {
		op = "<="
	}
	if met {
		state = "met"
	}
	return op, state
}
