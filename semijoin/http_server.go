package semijoin

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net/http"
	"sync"
	"time"

	"github.com/bloomkv/bloomkv/internal/frame"
)

// HandlerOptions configure Handler. The zero value, like nil, means the
// defaults.
type HandlerOptions struct {
	// MaxRequestBytes bounds a request's parameters, uncompressed (default
	// DefaultMaxRequestBytes). A larger request is refused with 413.
	MaxRequestBytes int
	// Limits bound the filters a request may carry or ask for: a larger one
	// is refused with 413. LocalHandler gives them to Local as well.
	Limits Limits
	// MaxSessions bounds the sketches (Diff's) open at once (default
	// DefaultMaxSessions); a request for another is refused with 429.
	MaxSessions int
	// SessionTTL is how long a sketch may go unused before it is closed
	// (default DefaultSessionTTL).
	SessionTTL time.Duration
	// Token, when not empty, is the bearer token every request must carry
	// (Authorization: Bearer <Token>). A request without one, or with the
	// header in another form, is refused with 401 and WWW-Authenticate:
	// Bearer; one with another token with 403. Either refusal comes before
	// anything else is looked at, and its body is a fixed word that says
	// nothing of the store.
	Token string
	// KeysOnly serves keys and never a value: filters, counts (Stats,
	// value bytes included), keys and diff sketches. Probe, Lookup, Scan
	// and Resolve answer keys with empty values whatever the request asks,
	// and every response carries the header Bloomkv-Keys-Only: 1, by which
	// Dial's store knows (Join then reports Report.KeysOnlyB, and Diff
	// DiffReport.KeysOnlyB). A sketch still hashes whole records, so Diff
	// finds changed values; it carries a 64-bit hash of each value, which
	// lets a client that guesses a value confirm its guess.
	KeysOnly bool
	// MaxConcurrent bounds the requests served at once (default
	// DefaultMaxConcurrent). One past it is refused at once with 503 and
	// Retry-After: 1.
	MaxConcurrent int
	// MaxSketchSymbols bounds the coded symbols one sketch session hands
	// out (default DefaultMaxSketchSymbols); a sketch keeps every symbol it
	// has made, 32 bytes each, until it closes. A request past it is
	// refused with 413: a Diff then needs a larger bound or a smaller range.
	MaxSketchSymbols int
}

// Defaults of HandlerOptions.
const (
	DefaultMaxRequestBytes = 64 << 20
	DefaultMaxSessions     = 16
	DefaultSessionTTL      = 2 * time.Minute
	DefaultMaxConcurrent   = 64
	// DefaultMaxSketchSymbols is twice the symbols Diff asks for at most by
	// default (DiffOptions.MaxSymbols): 128 MiB of symbols per session.
	DefaultMaxSketchSymbols = 2 * defaultMaxSymbols
)

// Handler returns an http.Handler that serves s to Dial's remote stores:
// its Stats, Filter, Probe, Lookup, Scan, Sketch and Resolve, as POST
// requests under /semijoin/v1/ (the protocol is described in http.go).
// Answers stream as s produces them, a 64 KiB frame at a time. A request
// that is malformed, damaged or over o's limits is refused with a 4xx
// status and a one-line reason; an error met after part of an answer was
// sent ends the answer with that error, which Dial's store returns.
//
// The usual call serves a store in this process:
//
//	http.ListenAndServe(addr, semijoin.Handler(semijoin.Local(db, limits), nil))
//
// which LocalHandler(db, nil) shortens.
func Handler(s Differ, o *HandlerOptions) http.Handler {
	if o == nil {
		o = &HandlerOptions{}
	}
	h := &handler{
		s:             s,
		maxRequest:    o.MaxRequestBytes,
		maxFilterBits: o.Limits.maxFilterBits(),
		maxSessions:   o.MaxSessions,
		ttl:           o.SessionTTL,
		now:           time.Now,
		sessions:      map[string]*session{},
		keysOnly:      o.KeysOnly,
		maxSymbols:    o.MaxSketchSymbols,
	}
	if h.maxSymbols <= 0 {
		h.maxSymbols = DefaultMaxSketchSymbols
	}
	if o.Token != "" {
		sum := sha256.Sum256([]byte(o.Token))
		h.token = &sum
	}
	n := o.MaxConcurrent
	if n <= 0 {
		n = DefaultMaxConcurrent
	}
	h.slots = make(chan struct{}, n)
	if h.maxRequest <= 0 {
		h.maxRequest = DefaultMaxRequestBytes
	}
	if h.maxSessions <= 0 {
		h.maxSessions = DefaultMaxSessions
	}
	if h.ttl <= 0 {
		h.ttl = DefaultSessionTTL
	}
	return h
}

// LocalHandler returns the Handler of the store r reads (a *bloomkv.DB or a
// *bloomkv.Snapshot): Handler(Local(r, o.Limits), o).
func LocalHandler(r Reader, o *HandlerOptions) http.Handler {
	var l Limits
	if o != nil {
		l = o.Limits
	}
	return Handler(Local(r, l), o)
}

type handler struct {
	s             Differ
	maxRequest    int
	maxFilterBits uint64
	maxSessions   int
	ttl           time.Duration
	now           func() time.Time
	token         *[sha256.Size]byte // the token's hash; nil for none
	keysOnly      bool
	maxSymbols    int           // the symbols a sketch session hands out at most
	slots         chan struct{} // a token per request under way

	mu       sync.Mutex
	sessions map[string]*session // by id; guarded by mu
	opening  int                 // sketches being built; guarded by mu
}

// session is an open sketch.
type session struct {
	last  time.Time   // last use; guarded by handler.mu
	timer *time.Timer // closes the session once it has expired

	mu     sync.Mutex // serializes the use of sk
	sk     Sketcher
	sent   int // symbols handed out
	closed bool
}

// statusError is an error the handler answers with a given status.
type statusError struct {
	status int
	err    error
}

func (e *statusError) Error() string { return e.err.Error() }
func (e *statusError) Unwrap() error { return e.err }

// refusal returns a statusError of status whose error wraps kind.
func refusal(status int, kind error, format string, args ...any) error {
	return &statusError{status, fmt.Errorf("semijoin: %s: %w", fmt.Sprintf(format, args...), kind)}
}

// classify returns the status and the error class of an 'E' message that
// answer err.
func classify(err error) (int, byte) {
	status := http.StatusInternalServerError
	var se *statusError
	switch {
	case errors.As(err, &se):
		status = se.status
	case errors.Is(err, ErrBadRequest):
		status = http.StatusBadRequest
	case errors.Is(err, ErrCorrupt):
		status = http.StatusUnprocessableEntity
	}
	switch {
	case status == http.StatusUnprocessableEntity:
		return status, classCorrupt
	case status >= 400 && status < 500 && status != http.StatusTooManyRequests:
		return status, classBadRequest
	}
	return status, classRemote
}

// refuse answers err with its status and a one-line reason.
func refuse(w http.ResponseWriter, err error) {
	status, _ := classify(err)
	if status == http.StatusMethodNotAllowed {
		w.Header().Set("Allow", http.MethodPost)
	}
	http.Error(w, oneLine(err.Error()), status)
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	MarkResponse(w)
	if h.keysOnly {
		w.Header().Set(keysOnlyHeader, "1")
	}
	if h.token != nil && !authorize(w, r, h.token) {
		return
	}
	select {
	case h.slots <- struct{}{}:
		defer func() { <-h.slots }()
	default:
		w.Header().Set("Retry-After", "1")
		http.Error(w, fmt.Sprintf("semijoin: server busy: %d requests under way, the limit: retry later", cap(h.slots)), http.StatusServiceUnavailable)
		return
	}
	out := &responder{w: w, rc: http.NewResponseController(w)}
	out.frameTimeout, _ = r.Context().Value(frameTimeoutKey{}).(time.Duration)
	e, ok := endpointOf(r.URL.Path)
	switch ct := r.Header.Get("Content-Type"); {
	case !ok:
		out.refuse(refusal(http.StatusNotFound, ErrBadRequest, "no endpoint %q: the endpoints are %sstats, filter, probe, lookup, scan, sketch/open, sketch/next, sketch/close and resolve", r.URL.Path, pathPrefix))
		return
	case r.Method != http.MethodPost:
		out.refuse(refusal(http.StatusMethodNotAllowed, ErrBadRequest, "%s %s: only POST is served", r.Method, r.URL.Path))
		return
	case r.URL.RawQuery != "":
		out.refuse(refusal(http.StatusBadRequest, ErrBadRequest, "unknown query parameters %q: parameters go in the body", r.URL.RawQuery))
		return
	case ct != "" && ct != contentType:
		out.refuse(refusal(http.StatusUnsupportedMediaType, ErrBadRequest, "content type %q, want %q", ct, contentType))
		return
	}
	payload, err := h.readBody(w, r)
	if err != nil {
		out.refuse(err)
		return
	}
	q, err := decodeRequest(e, payload, h.maxRequest/keyHeaderBytes)
	if err == nil {
		err = h.checkFilters(e, &q)
	}
	if err != nil {
		out.refuse(err)
		return
	}
	if h.keysOnly {
		q.values = false
	}
	out.finish(h.serve(r.Context(), e, &q, out))
}

// readBody reads the request's framed payload within the limit.
func (h *handler) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	// Frames add 9 bytes to 64 KiB of payload, and an end frame.
	maxWire := int64(h.maxRequest) + int64(h.maxRequest)/1024 + 64
	tooLarge := func() error {
		return refusal(http.StatusRequestEntityTooLarge, ErrBadRequest, "request body over the limit of %d bytes", h.maxRequest)
	}
	if r.ContentLength > maxWire {
		return nil, tooLarge()
	}
	payload, err := frame.ReadMessage(http.MaxBytesReader(w, r.Body, maxWire), h.maxRequest)
	var mbe *http.MaxBytesError
	switch {
	case err == nil:
		return payload, nil
	case errors.As(err, &mbe) || errors.Is(err, frame.ErrTooLarge):
		return nil, tooLarge()
	case errors.Is(err, frame.ErrCorrupt):
		return nil, refusal(http.StatusUnprocessableEntity, ErrCorrupt, "damaged request body: %v", err)
	case errors.Is(err, frame.ErrTruncated):
		return nil, refusal(http.StatusBadRequest, ErrBadRequest, "truncated request body: %v", err)
	}
	return nil, refusal(http.StatusBadRequest, ErrBadRequest, "reading the request body: %v", err)
}

// checkFilters refuses a filter asked for, or carried, of more bits than
// the limit, before the store allocates it.
func (h *handler) checkFilters(e endpoint, q *request) error {
	over := func(m uint64) error {
		return refusal(http.StatusRequestEntityTooLarge, ErrBadRequest, "%s: a filter of %d bits exceeds the limit of %d", e, m, h.maxFilterBits)
	}
	if e == epFilter && q.m > h.maxFilterBits {
		return over(q.m)
	}
	for _, f := range [][]byte{q.passing, q.filter} {
		if m, ok := wireBits(f); ok && m > h.maxFilterBits {
			return over(m)
		}
	}
	return nil
}

// wireBits returns the number of bits a filter in filterblock's wire form
// states: the uvarint after its 3-byte magic "bkw", wire version, hash
// version and k. A filter that does not state one is left to its decoder.
func wireBits(f []byte) (uint64, bool) {
	if len(f) < 7 || string(f[:3]) != "bkw" {
		return 0, false
	}
	m, n := binary.Uvarint(f[6:])
	return m, n > 0
}

// serve runs the call e asks for, writing its answer to out.
func (h *handler) serve(ctx context.Context, e endpoint, q *request, out *responder) error {
	r := q.rangeOf()
	switch e {
	case epStats:
		st, err := h.s.Stats(ctx, r, q.passing)
		if err != nil {
			return err
		}
		return out.message(msgStats, appendStats(nil, st))
	case epFilter:
		if q.k > math.MaxInt32 {
			return fmt.Errorf("semijoin: filter of %d probes: %w", q.k, ErrBadRequest)
		}
		wire, err := h.s.Filter(ctx, r, FilterSpec{M: q.m, K: int(q.k), Passing: q.passing})
		if err != nil {
			return err
		}
		return out.message(msgFilter, wire)
	case epProbe:
		return h.s.Probe(ctx, r, q.filter, q.values, out.keyRecord(h.keysOnly))
	case epLookup:
		return h.s.Lookup(ctx, r, q.keys, q.values, out.keyRecord(h.keysOnly))
	case epScan:
		return h.s.Scan(ctx, r, out.keyRecord(h.keysOnly))
	case epResolve:
		return h.s.Resolve(ctx, r, q.seed, q.hashes, out.keyRecord(h.keysOnly))
	case epSketchOpen:
		id, err := h.openSketch(ctx, r, q.seed)
		if err != nil {
			return err
		}
		return out.message(msgSession, id)
	case epSketchNext:
		syms, err := h.nextSymbols(ctx, q.session, q.n)
		if err != nil {
			return err
		}
		return out.message(msgSymbols, syms)
	case epSketchClose:
		return h.closeSketch(q.session)
	}
	return refusal(http.StatusNotFound, ErrBadRequest, "no endpoint %v", e)
}

// openSketch starts a sketch and returns its session's id.
func (h *handler) openSketch(ctx context.Context, r KeyRange, seed uint64) ([]byte, error) {
	h.sweep()
	h.mu.Lock()
	if len(h.sessions)+h.opening >= h.maxSessions {
		h.mu.Unlock()
		return nil, refusal(http.StatusTooManyRequests, ErrRemote, "%d sketches open, the limit: close one or wait %v for an unused one to expire", h.maxSessions, h.ttl)
	}
	h.opening++
	h.mu.Unlock()
	sk, err := h.s.Sketch(ctx, r, seed)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.opening--
	if err != nil {
		return nil, err
	}
	id := make([]byte, sessionIDLen)
	rand.Read(id)
	s := &session{sk: sk, last: h.now()}
	s.timer = time.AfterFunc(h.ttl, h.sweep)
	h.sessions[string(id)] = s
	return id, nil
}

// errNoSession answers a request naming a sketch not open.
func errNoSession(id []byte) error {
	return refusal(http.StatusNotFound, ErrBadRequest, "no sketch session %x: never opened, closed, or expired", id)
}

// nextSymbols returns the next n coded symbols of a sketch.
func (h *handler) nextSymbols(ctx context.Context, id []byte, n uint64) ([]byte, error) {
	if n < 1 || n > MaxSketchBatch {
		return nil, fmt.Errorf("semijoin: %d symbols asked for: want 1 to %d: %w", n, MaxSketchBatch, ErrBadRequest)
	}
	h.sweep()
	h.mu.Lock()
	s := h.sessions[string(id)]
	if s != nil {
		s.last = h.now()
		s.timer.Reset(h.ttl)
	}
	h.mu.Unlock()
	if s == nil {
		return nil, errNoSession(id)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errNoSession(id)
	}
	if s.sent+int(n) > h.maxSymbols {
		return nil, refusal(http.StatusRequestEntityTooLarge, ErrBadRequest, "sketch past %d symbols, the most a session hands out (MaxSketchSymbols)", h.maxSymbols)
	}
	wire, err := s.sk.Next(ctx, int(n))
	if err == nil {
		s.sent += int(n)
	}
	return wire, err
}

// closeSketch closes a sketch and forgets its session.
func (h *handler) closeSketch(id []byte) error {
	h.mu.Lock()
	s := h.sessions[string(id)]
	delete(h.sessions, string(id))
	h.mu.Unlock()
	if s == nil {
		return errNoSession(id)
	}
	return s.close()
}

func (s *session) close() error {
	s.timer.Stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	return s.sk.Close()
}

// sweep closes the sessions unused for longer than the TTL.
func (h *handler) sweep() {
	now := h.now()
	var expired []*session
	h.mu.Lock()
	for id, s := range h.sessions {
		if now.Sub(s.last) >= h.ttl {
			delete(h.sessions, id)
			expired = append(expired, s)
		}
	}
	h.mu.Unlock()
	for _, s := range expired {
		s.close()
	}
}

// responder writes an answer. It sends the status and headers with the
// first record, so that an error met before any is answered with a 4xx or
// 5xx status instead.
type responder struct {
	w  http.ResponseWriter
	rc *http.ResponseController
	fw *frame.Writer
	rw *frame.RecordWriter
	// frameTimeout, when not 0, is the time allowed to write each frame
	// (NewServer's WriteTimeout).
	frameTimeout time.Duration
}

// extend gives the next write frameTimeout from now.
func (o *responder) extend() {
	if o.frameTimeout > 0 {
		o.rc.SetWriteDeadline(time.Now().Add(o.frameTimeout))
	}
}

// refuse answers err with its status and a one-line reason.
func (o *responder) refuse(err error) {
	o.extend()
	refuse(o.w, err)
}

func (o *responder) begin() {
	if o.fw != nil {
		return
	}
	o.w.Header().Set("Content-Type", contentType)
	o.w.WriteHeader(http.StatusOK)
	o.fw = frame.NewWriter(flushEach{o}, frame.WithFlush(o.flush))
	o.rw = frame.NewRecordWriter(o.fw)
}

// flush pushes what was written to the client.
func (o *responder) flush() error {
	if err := o.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}

// flushEach writes each frame through to the client: the answer waits in
// the network, not in the server's memory.
type flushEach struct{ o *responder }

func (f flushEach) Write(p []byte) (int, error) {
	f.o.extend()
	n, err := f.o.w.Write(p)
	if err != nil {
		return n, err
	}
	return n, f.o.flush()
}

// record writes a key and its value.
func (o *responder) record(k, v []byte) error {
	o.begin()
	return o.rw.Append(k, v)
}

// keyRecord returns record, or, when keysOnly, a function that writes a
// key with an empty value whatever value it is given.
func (o *responder) keyRecord(keysOnly bool) func(k, v []byte) error {
	if !keysOnly {
		return o.record
	}
	return func(k, _ []byte) error { return o.record(k, nil) }
}

// message writes a message of type typ.
func (o *responder) message(typ byte, body []byte) error {
	o.begin()
	return writeMessage(o.fw, typ, body)
}

// finish ends the answer: with 'Z' and the end frame when err is nil;
// otherwise with err's status, or, once the answer has begun, with an 'E'
// message and the end frame. Errors writing it are the client's loss: the
// answer is cut, which the client sees.
func (o *responder) finish(err error) {
	if err != nil && o.fw == nil {
		o.refuse(err)
		return
	}
	if err == nil {
		err = o.message(msgOK, nil)
	} else {
		_, class := classify(err)
		err = o.message(msgError, append([]byte{class}, oneLine(err.Error())...))
	}
	if err == nil {
		o.fw.Close()
	}
}
