package raftstore

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bloomkv/bloomkv"
	"github.com/bloomkv/bloomkv/semijoin"
)

// compareTTL bounds how long a compare point is kept.
const compareTTL = 2 * time.Minute

// maxComparePoints bounds the compare points a node keeps at once; each
// may hold a snapshot of the store, which pins the tables it reads.
const maxComparePoints = 64

// compareWait bounds how long a compare point's requests wait for the
// marking entry to apply.
const compareWait = 30 * time.Second

// comparePoint is a snapshot a node takes at a marked log entry for a
// comparison, and the semijoin handler that serves it.
type comparePoint struct {
	token string
	ch    <-chan markedSnapshot
	timer *time.Timer // drops the point a TTL after its last use; nil in tests
	users int         // requests and compares using it; guarded by compares.mu

	// turn holds a token while no waiter receives from ch: one waiter at a
	// time receives, so that the one that finds ch closed knows no other
	// took a snapshot from it.
	turn  chan struct{}
	ready chan struct{} // closed once m and h are set, or no snapshot came
	m     markedSnapshot
	h     http.Handler
}

func newComparePoint(token string, ch <-chan markedSnapshot) *comparePoint {
	p := &comparePoint{token: token, ch: ch, turn: make(chan struct{}, 1), ready: make(chan struct{})}
	p.turn <- struct{}{}
	return p
}

// wait returns the point's snapshot once the marking entry has applied.
func (p *comparePoint) wait(ctx context.Context) (markedSnapshot, error) {
	timedOut := func() (markedSnapshot, error) {
		return markedSnapshot{}, fmt.Errorf("raftstore: compare point %s: the marking entry did not apply: %w", p.token, ctx.Err())
	}
	select {
	case <-p.ready:
	case <-ctx.Done():
		return timedOut()
	case <-p.turn:
		select {
		case m, ok := <-p.ch:
			if ok {
				p.m = m
				p.h = http.StripPrefix("/compare/"+p.token, semijoin.LocalHandler(m.snap, nil))
			}
			close(p.ready) // the turn is not handed back: the point is settled
		case <-ctx.Done():
			p.turn <- struct{}{}
			return timedOut()
		}
	}
	if p.m.snap == nil {
		return markedSnapshot{}, fmt.Errorf("raftstore: compare point %s: no snapshot was taken", p.token)
	}
	return p.m, nil
}

// release closes the point's snapshot, if one has come.
func (p *comparePoint) release() {
	select {
	case <-p.ready:
		if p.m.snap != nil {
			p.m.snap.Close()
		}
	default:
	}
}

// compares holds a node's compare points.
type compares struct {
	mu     sync.Mutex
	points map[string]*comparePoint
	ttl    atomic.Int64 // a point's time to live: compareTTL, shorter in tests
}

func newToken() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// errTooManyPoints refuses a compare point past maxComparePoints.
var errTooManyPoints = errors.New("raftstore: too many compare points in progress")

// expect registers a compare point for token, dropped once it has gone
// unused for compareTTL, unless released before. A token registered
// already gets its point: a request retried registers nothing new.
func (n *Node) expect(token string) (*comparePoint, error) {
	n.cmp.mu.Lock()
	defer n.cmp.mu.Unlock()
	if p := n.cmp.points[token]; p != nil {
		return p, nil
	}
	if len(n.cmp.points) >= maxComparePoints {
		return nil, fmt.Errorf("%w (%d): retry later", errTooManyPoints, maxComparePoints)
	}
	p := newComparePoint(token, n.fsm.expectMark(token))
	p.timer = time.AfterFunc(time.Duration(n.cmp.ttl.Load()), func() { n.expire(token, p) })
	n.cmp.points[token] = p
	return p, nil
}

// expire drops p at its TTL unless it is in use: the last use to end
// starts its TTL again.
func (n *Node) expire(token string, p *comparePoint) {
	n.cmp.mu.Lock()
	defer n.cmp.mu.Unlock()
	if n.cmp.points[token] == p && p.users == 0 {
		n.dropPoint(token, p)
	}
}

// usePoint returns the point of token, nil if none, held from expiring
// until done is called.
func (n *Node) usePoint(token string) (p *comparePoint, done func()) {
	n.cmp.mu.Lock()
	defer n.cmp.mu.Unlock()
	p = n.cmp.points[token]
	if p == nil {
		return nil, func() {}
	}
	p.users++
	return p, func() {
		n.cmp.mu.Lock()
		defer n.cmp.mu.Unlock()
		p.users--
		if p.users == 0 && p.timer != nil && n.cmp.points[token] == p {
			p.timer.Reset(time.Duration(n.cmp.ttl.Load()))
		}
	}
}

// dropPoint forgets a point; n.cmp.mu is held.
func (n *Node) dropPoint(token string, p *comparePoint) {
	if p.timer != nil {
		p.timer.Stop()
	}
	delete(n.cmp.points, token)
	n.fsm.dropMark(token)
	go func() {
		// A snapshot taken after the point was dropped is released too:
		// the wait outlasts any waiter holding the turn.
		ctx, cancel := context.WithTimeout(context.Background(), compareWait+time.Second)
		defer cancel()
		p.wait(ctx)
		p.release()
	}()
}

// dropPoints forgets every point, releasing the snapshots taken, for Close.
func (n *Node) dropPoints() {
	n.cmp.mu.Lock()
	defer n.cmp.mu.Unlock()
	for token, p := range n.cmp.points {
		if p.timer != nil {
			p.timer.Stop()
		}
		delete(n.cmp.points, token)
		n.fsm.dropMark(token)
		// A snapshot no request has received yet waits in the channel.
		select {
		case <-p.turn:
			select {
			case m, ok := <-p.ch:
				if ok {
					m.snap.Close()
				}
			default:
			}
		default:
		}
		p.release()
	}
}

func (n *Node) release(token string) {
	n.cmp.mu.Lock()
	defer n.cmp.mu.Unlock()
	if p := n.cmp.points[token]; p != nil {
		n.dropPoint(token, p)
	}
}

func (n *Node) compareRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /compare/{token}", func(w http.ResponseWriter, r *http.Request) {
		t := r.PathValue("token")
		if len(t) < 16 || len(t) > 64 {
			httpError(w, badRequest("compare token of %d characters: want 16 to 64", len(t)))
			return
		}
		if _, err := n.expect(t); err != nil {
			w.Header().Set("Retry-After", "1")
			http.Error(w, err.Error(), http.StatusTooManyRequests)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("DELETE /compare/{token}", func(w http.ResponseWriter, r *http.Request) {
		n.release(r.PathValue("token"))
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /compare/{token}", func(w http.ResponseWriter, r *http.Request) {
		_, m, done, ok := n.awaitPoint(w, r)
		if !ok {
			return
		}
		defer done()
		json.NewEncoder(w).Encode(map[string]uint64{"index": m.index})
	})
	mux.HandleFunc("/compare/{token}/", func(w http.ResponseWriter, r *http.Request) {
		p, _, done, ok := n.awaitPoint(w, r)
		if !ok {
			return
		}
		defer done()
		p.h.ServeHTTP(w, r)
	})
}

// awaitPoint waits, up to compareWait, for the compare point the request's
// token names to be reached, and holds it from expiring until done is
// called; or it answers the request with an error and reports false.
func (n *Node) awaitPoint(w http.ResponseWriter, r *http.Request) (*comparePoint, markedSnapshot, func(), bool) {
	p, done := n.usePoint(r.PathValue("token"))
	if p == nil {
		http.Error(w, "no such compare point", http.StatusNotFound)
		return nil, markedSnapshot{}, nil, false
	}
	ctx, cancel := context.WithTimeout(r.Context(), compareWait)
	defer cancel()
	m, err := p.wait(ctx)
	if err != nil {
		done()
		httpError(w, err)
		return nil, markedSnapshot{}, nil, false
	}
	return p, m, done, true
}

// KeyDifference is a key on which two replicas differ: held by one of them
// only, or with different values.
type KeyDifference struct {
	Kind semijoin.DiffKind
	Key  []byte
	// A and B are the values on each side (nil where the side has none).
	A, B []byte
}

// CompareReport is the result of a comparison.
type CompareReport struct {
	// Index is the log index both replicas were compared at.
	Index uint64
	// Differences lists the differing keys, in no set order.
	Differences []KeyDifference
	// Diff is semijoin.Diff's account, bytes shipped included.
	Diff semijoin.DiffReport
}

// userRange is the stored range of the user's keys.
var userRange = semijoin.KeyRange{Start: []byte{prefixUser}, End: userEnd}

// Compare compares this replica's user keys with those of the node whose
// HTTP API is at peerURL, both at one applied index: it marks a point in
// the log, each replica takes a snapshot when it applies it, and
// semijoin.Diff compares the two, shipping coded symbols in proportion to
// the difference rather than the data.
func (n *Node) Compare(ctx context.Context, peerURL string) (*CompareReport, error) {
	token := newToken()
	if _, err := n.expect(token); err != nil {
		return nil, err
	}
	defer n.release(token)
	local, done := n.usePoint(token) // held for the whole comparison
	defer done()
	if local == nil {
		return nil, fmt.Errorf("raftstore: compare: point %s dropped as it was made", token)
	}
	peer := strings.TrimSuffix(peerURL, "/")
	c := n.caller
	if err := c.post(ctx, http.MethodPost, peer+"/compare/"+token, nil); err != nil {
		return nil, fmt.Errorf("raftstore: compare: register at %s: %w", peer, err)
	}
	defer c.post(context.Background(), http.MethodDelete, peer+"/compare/"+token, nil)
	var b Batch
	b.mark([]byte(token))
	if err := n.apply(ctx, &b); err != nil {
		return nil, fmt.Errorf("raftstore: compare: mark the log: %w", err)
	}
	wctx, cancel := context.WithTimeout(ctx, compareWait)
	defer cancel()
	m, err := local.wait(wctx)
	if err != nil {
		return nil, err
	}
	remote, err := c.dial(peer + "/compare/" + token)
	if err != nil {
		return nil, fmt.Errorf("raftstore: compare: %w", err)
	}
	rep := &CompareReport{Index: m.index}
	return rep, diffInto(ctx, semijoin.Local(m.snap, semijoin.Limits{}), remote, rep)
}

// CompareURLs compares the replicas whose HTTP APIs are at urlA and urlB,
// both at one applied index, as Node.Compare does, from outside the
// cluster.
func CompareURLs(ctx context.Context, urlA, urlB string) (*CompareReport, error) {
	return CompareURLsWith(ctx, urlA, urlB, nil)
}

// ClientOptions are how a program reaches nodes whose HTTP APIs are secured
// (Options.TLS, Options.Token).
type ClientOptions struct {
	// Client makes the requests; its transport holds the TLS settings (the
	// CAs trusted, a client certificate). Nil: http.DefaultClient.
	Client *http.Client
	// Token is sent with every request as a bearer token.
	Token string
}

// CompareURLsWith is CompareURLs with the requests made as o says (nil:
// as CompareURLs makes them).
func CompareURLsWith(ctx context.Context, urlA, urlB string, o *ClientOptions) (*CompareReport, error) {
	c := caller{client: http.DefaultClient}
	if o != nil {
		c.token = o.Token
		if o.Client != nil {
			c.client = o.Client
		}
	}
	a, b := strings.TrimSuffix(urlA, "/"), strings.TrimSuffix(urlB, "/")
	token := newToken()
	for _, u := range []string{a, b} {
		if err := c.post(ctx, http.MethodPost, u+"/compare/"+token, nil); err != nil {
			return nil, fmt.Errorf("raftstore: compare: register at %s: %w", u, err)
		}
		defer c.post(context.Background(), http.MethodDelete, u+"/compare/"+token, nil)
	}
	var mark Batch
	mark.mark([]byte(token))
	var err error
	for {
		err = c.post(ctx, http.MethodPost, a+"/raft/apply", mark.Bytes())
		if !errors.Is(err, ErrNoLeader) {
			break
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("raftstore: compare: mark the log: %w", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	if err != nil {
		return nil, fmt.Errorf("raftstore: compare: mark the log: %w", err)
	}
	var idx [2]uint64
	for i, u := range []string{a, b} {
		var body []byte
		if err := c.get(ctx, u+"/compare/"+token, &body); err != nil {
			return nil, fmt.Errorf("raftstore: compare: wait for the mark at %s: %w", u, err)
		}
		var v struct{ Index uint64 }
		if err := json.Unmarshal(body, &v); err != nil {
			return nil, fmt.Errorf("raftstore: compare: %s: %w", u, err)
		}
		idx[i] = v.Index
	}
	if idx[0] != idx[1] {
		return nil, fmt.Errorf("raftstore: compare: the mark applied at index %d on %s and %d on %s", idx[0], a, idx[1], b)
	}
	da, err := c.dial(a + "/compare/" + token)
	if err != nil {
		return nil, fmt.Errorf("raftstore: compare: %w", err)
	}
	db, err := c.dial(b + "/compare/" + token)
	if err != nil {
		return nil, fmt.Errorf("raftstore: compare: %w", err)
	}
	rep := &CompareReport{Index: idx[0]}
	return rep, diffInto(ctx, da, db, rep)
}

func diffInto(ctx context.Context, a, b semijoin.Differ, rep *CompareReport) error {
	dr, err := semijoin.Diff(ctx, a, b, &semijoin.DiffOptions{Range: userRange}, func(d semijoin.Difference) error {
		rep.Differences = append(rep.Differences, KeyDifference{
			Kind: d.Kind, Key: bytes.Clone(d.Key[1:]), A: bytes.Clone(d.A), B: bytes.Clone(d.B),
		})
		return nil
	})
	rep.Diff = dr
	if err != nil {
		return fmt.Errorf("raftstore: compare: %w", err)
	}
	return nil
}

// caller makes requests to nodes' HTTP APIs: with its client, which holds
// the TLS settings, and its bearer token, if any.
type caller struct {
	client *http.Client
	token  string
}

// send sends req, with the token. A token goes only over https://, or over
// http:// to a loopback host (semijoin's rule): elsewhere it would cross
// the network in clear text, and the request is refused instead.
func (c caller) send(req *http.Request) (*http.Response, error) {
	if c.token != "" {
		if req.URL.Scheme != "https" && !isLoopbackHost(req.URL.Hostname()) {
			return nil, fmt.Errorf("raftstore: %s: a token is sent only over https://, or over http:// to a loopback host: it would cross the network in clear text", req.URL.Redacted())
		}
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	return c.client.Do(req)
}

// isLoopbackHost reports whether host names this machine: localhost or a
// loopback address.
func isLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// dial reaches the semijoin API at u as c does.
func (c caller) dial(u string) (semijoin.Differ, error) {
	return semijoin.DialWith(u, &semijoin.DialOptions{Client: c.client, Token: c.token})
}

// post sends a request with body and checks for a 2xx answer; a 503 is an
// error wrapping ErrNoLeader.
func (c caller) post(ctx context.Context, method, u string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(body))
	if err != nil {
		return err
	}
	return c.do(req, nil)
}

func (c caller) get(ctx context.Context, u string, out *[]byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	return c.do(req, out)
}

func (c caller) do(req *http.Request, out *[]byte) error {
	resp, err := c.send(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	switch {
	case resp.StatusCode == http.StatusServiceUnavailable:
		return fmt.Errorf("%w: %s", ErrNoLeader, strings.TrimSpace(string(body)))
	case resp.StatusCode == http.StatusNotFound:
		return fmt.Errorf("%s: %w", strings.TrimSpace(string(body)), bloomkv.ErrNotFound)
	case resp.StatusCode/100 != 2:
		return fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	if out != nil {
		*out = body
	}
	return nil
}
