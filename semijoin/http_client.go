package semijoin

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/bloomkv/bloomkv/internal/frame"
)

// Errors of a remote store (Dial), besides ErrBadRequest and ErrCorrupt,
// checkable with errors.Is.
var (
	// ErrRemote: the remote store could not be reached, or failed to
	// serve a request (its own error, a 5xx or 429 status).
	ErrRemote = errors.New("semijoin: remote store failed")
	// ErrTruncated: an answer stopped before its end, the connection lost
	// mid-stream. What came before was passed on, but the answer is not
	// complete. The error also wraps the reason (frame.ErrTruncated for a
	// stream cut short).
	ErrTruncated = errors.New("semijoin: answer truncated")
)

// maxAnswerField bounds a field of an answer: a key, a value, a filter
// (DefaultMaxFilterBits is 512 MiB of bits), a batch of symbols. Fields are
// read as they arrive, so the bound is on what a server sends, not on what
// it claims.
const maxAnswerField = 1 << 30

// closeTimeout bounds a sketch's Close, which has no context.
const closeTimeout = 10 * time.Second

// Dial returns the store a Handler serves at baseURL: an http:// or
// https:// URL of the server and of any path the handler is mounted under
// (a trailing /semijoin/v1 is accepted too). Its calls go through c (nil for
// http.DefaultClient), each with its context: cancelling it abandons the
// call, which returns the context's error. Dial only checks the URL; the
// first call meets the server.
//
// A request the server refuses is an error wrapping ErrBadRequest,
// ErrCorrupt, ErrRemote or ErrUnauthorized, with the server's reason. Of a
// server that serves keys only (HandlerOptions.KeysOnly), every value is
// nil. DialWith adds TLS settings and a token. An answer cut short
// is an error wrapping ErrTruncated, never a shorter answer: what the
// callbacks got before it is all there is.
func Dial(baseURL string, c *http.Client) (Differ, error) {
	u, err := url.Parse(baseURL)
	switch {
	case err != nil:
		return nil, fmt.Errorf("semijoin: store URL %q: %w: %w", baseURL, ErrBadRequest, err)
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("semijoin: store URL %q: scheme %q, want http or https: %w", baseURL, u.Scheme, ErrBadRequest)
	case u.Host == "":
		return nil, fmt.Errorf("semijoin: store URL %q has no host: %w", baseURL, ErrBadRequest)
	case u.RawQuery != "" || u.Fragment != "":
		return nil, fmt.Errorf("semijoin: store URL %q has a query or fragment: %w", baseURL, ErrBadRequest)
	case u.User != nil:
		// Errors name the URL, and would carry the password with it.
		return nil, fmt.Errorf("semijoin: store URL %s holds credentials: authenticate with a token or a client certificate (DialWith): %w", u.Redacted(), ErrBadRequest)
	}
	u.Path = strings.TrimSuffix(strings.TrimSuffix(u.Path, "/"), strings.TrimSuffix(pathPrefix, "/"))
	u.Path = strings.TrimSuffix(u.Path, "/")
	u.RawPath = ""
	if c == nil {
		c = http.DefaultClient
	}
	return &remote{base: u.String(), hc: noRedirects(c)}, nil
}

// remote is a store served by a Handler.
type remote struct {
	base     string // the URL the endpoints' paths follow
	hc       *http.Client
	hasToken bool   // a bearer token goes with every call
	caFile   string // the CAs trusted for the server's certificate, if not the system's

	// keysOnlySeen is set once a response says the server is keys-only.
	keysOnlySeen atomic.Bool
}

// KeysOnly reports whether the server has said it serves keys without
// values (KeysOnlyStore).
func (c *remote) KeysOnly() bool { return c.keysOnlySeen.Load() }

// remoteError is an error of a remote call: its message, its kind (a
// sentinel) and its cause, if any.
type remoteError struct {
	msg   string
	kind  error
	cause error
}

func (e *remoteError) Error() string { return e.msg }

func (e *remoteError) Unwrap() []error {
	if e.cause == nil {
		return []error{e.kind}
	}
	return []error{e.kind, e.cause}
}

func (c *remote) fail(e endpoint, kind, cause error, format string, args ...any) error {
	return &remoteError{msg: fmt.Sprintf("semijoin: remote %s at %s: %s", e, c.base, fmt.Sprintf(format, args...)), kind: kind, cause: cause}
}

// call sends the request q to endpoint e and passes each record of its
// answer but the final message to fn, returning fn's first error as is. It
// returns nil only for an answer that ended with 'Z' and a valid end frame.
func (c *remote) call(ctx context.Context, e endpoint, q *request, fn func(fields [][]byte) error) error {
	return c.callKeysOnly(ctx, e, q, func(bool, [][]byte) error { return nil }, fn)
}

// callKeysOnly is call, with first also told, before the first record,
// whether the answer comes from a keys-only server; fn gets the records.
func (c *remote) callKeysOnly(ctx context.Context, e endpoint, q *request, first func(keysOnly bool, _ [][]byte) error, fn func(fields [][]byte) error) error {
	body := frame.AppendMessage(nil, q.append(nil))
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+pathPrefix+e.String(), bytes.NewReader(body))
	if err != nil {
		return c.fail(e, ErrBadRequest, err, "%v", err)
	}
	req.Header.Set("Content-Type", contentType)
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("semijoin: remote %s: %w", e, ctx.Err())
		}
		return c.transportError(e, err)
	}
	defer resp.Body.Close()
	keysOnly := resp.Header.Get(keysOnlyHeader) == "1"
	if keysOnly {
		c.keysOnlySeen.Store(true)
	}
	if err := first(keysOnly, nil); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return c.statusError(e, resp)
	}
	if ct := resp.Header.Get("Content-Type"); ct != contentType {
		return c.fail(e, ErrRemote, nil, "an answer of type %q, not %q: expected a store served by 'bloomkv serve' or semijoin.Handler at this URL", ct, contentType)
	}
	return c.readAnswer(ctx, e, resp.Body, fn)
}

// readAnswer reads the answer body of a call to e, passing each record but
// the final message to fn, and returns nil only when the answer is complete
// and ended with 'Z'.
func (c *remote) readAnswer(ctx context.Context, e endpoint, body io.Reader, fn func(fields [][]byte) error) error {
	rr := frame.NewRecordReader(frame.NewReader(body, frame.DefaultSize), maxAnswerField)
	records := 0
	for {
		fields, err := rr.Next()
		if err == nil {
			// Stop at once when cancelled, not at the end of the frame.
			err = ctx.Err()
		}
		if err != nil {
			return c.streamError(ctx, e, records, err)
		}
		if len(fields) == 1 && len(fields[0]) > 0 {
			switch m := fields[0]; m[0] {
			case msgOK:
				if len(m) != 1 {
					return c.fail(e, ErrCorrupt, nil, "an end message of %d bytes", len(m))
				}
				// The end frame must follow, and nothing after it.
				switch _, err := rr.Next(); {
				case err == nil:
					return c.fail(e, ErrCorrupt, nil, "a record after the end message")
				case err != io.EOF:
					return c.streamError(ctx, e, records, err)
				}
				return nil
			case msgError:
				return c.answerError(e, records, m[1:])
			}
		}
		if err := fn(fields); err != nil {
			return err
		}
		records++
	}
}

// streamError describes err, met reading an answer after records records.
func (c *remote) streamError(ctx context.Context, e endpoint, records int, err error) error {
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("semijoin: remote %s: %w", e, ctx.Err())
	case err == io.EOF:
		return c.fail(e, ErrCorrupt, nil, "the answer ended without its end message after %d records", records)
	case errors.Is(err, frame.ErrCorrupt) || errors.Is(err, frame.ErrTooLarge):
		return c.fail(e, ErrCorrupt, err, "damaged answer after %d records: %v", records, err)
	}
	return c.fail(e, ErrTruncated, err, "connection lost mid-stream after %d records: %v", records, err)
}

// answerError returns the error an 'E' message reports.
func (c *remote) answerError(e endpoint, records int, m []byte) error {
	kind := ErrRemote
	if len(m) > 0 {
		switch m[0] {
		case classBadRequest:
			kind = ErrBadRequest
		case classCorrupt:
			kind = ErrCorrupt
		}
		m = m[1:]
	}
	return c.fail(e, kind, nil, "failed after %d records: %s", records, oneLine(string(m)))
}

// statusError returns the error a refused request's status and reason
// report.
func (c *remote) statusError(e endpoint, resp *http.Response) error {
	line, _, _ := bufio.NewReader(io.LimitReader(resp.Body, 4096)).ReadLine()
	switch {
	case resp.StatusCode == http.StatusBadRequest && strings.HasPrefix(string(line), httpToHTTPS):
		return c.fail(e, ErrRemote, nil, "HTTP %d: the server speaks TLS: use an https:// URL", resp.StatusCode)
	case resp.StatusCode == http.StatusUnauthorized && c.hasToken:
		return c.fail(e, ErrUnauthorized, nil, "HTTP %d: the server did not take the token sent (none reached it, or not in the form \"Bearer <token>\")", resp.StatusCode)
	case resp.StatusCode == http.StatusUnauthorized:
		return c.fail(e, ErrUnauthorized, nil, "HTTP %d: the server needs a token", resp.StatusCode)
	case resp.StatusCode == http.StatusForbidden && c.hasToken:
		return c.fail(e, ErrUnauthorized, nil, "HTTP %d: the server refused the token", resp.StatusCode)
	case resp.StatusCode == http.StatusForbidden:
		return c.fail(e, ErrUnauthorized, nil, "HTTP %d: the server refused the request", resp.StatusCode)
	}
	if resp.Header.Get(serverHeader) == "" {
		// Some other server, or a proxy in front of one: its reason is
		// likely a page, and says nothing of the store.
		what := resp.Header.Get("Content-Type")
		if what == "" {
			what = "no content type"
		}
		return c.fail(e, ErrRemote, nil, "HTTP %d (%s) from a server that is not a bloomkv semijoin server: expected a store served by 'bloomkv serve' or semijoin.Handler at this URL", resp.StatusCode, what)
	}
	kind := ErrRemote
	switch resp.StatusCode {
	case http.StatusBadRequest, http.StatusNotFound, http.StatusMethodNotAllowed,
		http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType:
		kind = ErrBadRequest
	case http.StatusUnprocessableEntity:
		kind = ErrCorrupt
	}
	reason := oneLine(string(line))
	if reason == "" {
		reason = http.StatusText(resp.StatusCode)
	}
	return c.fail(e, kind, nil, "HTTP %d: %s", resp.StatusCode, reason)
}

// unary calls e, whose answer is one message of type typ, and returns its
// body.
func (c *remote) unary(ctx context.Context, e endpoint, q *request, typ byte) ([]byte, error) {
	var body []byte
	got := false
	err := c.call(ctx, e, q, func(f [][]byte) error {
		if got || len(f) != 1 || len(f[0]) == 0 || f[0][0] != typ {
			return c.fail(e, ErrCorrupt, nil, "an unexpected record in the answer")
		}
		body, got = bytes.Clone(f[0][1:]), true
		return nil
	})
	if err == nil && !got {
		err = c.fail(e, ErrCorrupt, nil, "the answer holds no %q message", typ)
	}
	return body, err
}

// stream calls e, whose answer is records of r in key order, with values
// or without, and passes them to fn.
func (c *remote) stream(ctx context.Context, e endpoint, q *request, values bool, fn func(key, value []byte) error) error {
	r := q.rangeOf()
	var prev []byte
	n := 0
	keysOnly := false
	first := func(ko bool, _ [][]byte) error {
		keysOnly = ko
		return nil
	}
	return c.callKeysOnly(ctx, e, q, first, func(f [][]byte) error {
		if len(f) != 2 {
			return c.fail(e, ErrCorrupt, nil, "a record of %d fields where a key and value belong", len(f))
		}
		k, v := f[0], f[1]
		switch {
		case n > 0 && bytes.Compare(prev, k) >= 0:
			return c.fail(e, ErrCorrupt, nil, "key %q after %q: out of order", k, prev)
		case !r.contains(k):
			return c.fail(e, ErrCorrupt, nil, "key %q outside the range asked for", k)
		case (!values || keysOnly) && len(v) > 0:
			return c.fail(e, ErrCorrupt, nil, "a value for key %q, not asked for or from a keys-only server", k)
		case !values || keysOnly:
			v = nil
		case v == nil:
			v = []byte{}
		}
		prev = append(prev[:0], k...)
		n++
		return fn(k, v)
	})
}

func (c *remote) Stats(ctx context.Context, r KeyRange, passing []byte) (Stats, error) {
	q := (&request{}).withRange(r)
	if passing != nil {
		q.has |= set(pPassing)
		q.passing = passing
	}
	body, err := c.unary(ctx, epStats, q, msgStats)
	if err != nil {
		return Stats{}, err
	}
	s, ok := decodeStats(body)
	if !ok {
		return Stats{}, c.fail(epStats, ErrCorrupt, nil, "malformed stats")
	}
	return s, nil
}

func (c *remote) Filter(ctx context.Context, r KeyRange, spec FilterSpec) ([]byte, error) {
	if spec.K < 0 {
		return nil, fmt.Errorf("semijoin: filter of %d probes: %w", spec.K, ErrBadRequest)
	}
	q := (&request{has: set(pM, pK), m: spec.M, k: uint64(spec.K)}).withRange(r)
	if spec.Passing != nil {
		q.has |= set(pPassing)
		q.passing = spec.Passing
	}
	return c.unary(ctx, epFilter, q, msgFilter)
}

func (c *remote) Probe(ctx context.Context, r KeyRange, filter []byte, values bool, fn func(key, value []byte) error) error {
	q := (&request{has: set(pFilter, pValues), filter: filter, values: values}).withRange(r)
	return c.stream(ctx, epProbe, q, values, fn)
}

func (c *remote) Lookup(ctx context.Context, r KeyRange, keys [][]byte, values bool, fn func(key, value []byte) error) error {
	q := (&request{has: set(pKeys, pValues), keys: keys, values: values}).withRange(r)
	return c.stream(ctx, epLookup, q, values, fn)
}

func (c *remote) Scan(ctx context.Context, r KeyRange, fn func(key, value []byte) error) error {
	return c.stream(ctx, epScan, (&request{}).withRange(r), true, fn)
}

func (c *remote) Resolve(ctx context.Context, r KeyRange, seed uint64, hashes []uint64, fn func(key, value []byte) error) error {
	q := (&request{has: set(pSeed, pHashes), seed: seed, hashes: hashes}).withRange(r)
	return c.stream(ctx, epResolve, q, true, fn)
}

func (c *remote) Sketch(ctx context.Context, r KeyRange, seed uint64) (Sketcher, error) {
	q := (&request{has: set(pSeed), seed: seed}).withRange(r)
	id, err := c.unary(ctx, epSketchOpen, q, msgSession)
	if err != nil {
		return nil, err
	}
	if len(id) != sessionIDLen {
		return nil, c.fail(epSketchOpen, ErrCorrupt, nil, "a session id of %d bytes", len(id))
	}
	return &remoteSketcher{c: c, id: id}, nil
}

// remoteSketcher is a sketch open on a Handler.
type remoteSketcher struct {
	c      *remote
	id     []byte
	closed bool
}

func (s *remoteSketcher) Next(ctx context.Context, n int) ([]byte, error) {
	if s.closed {
		return nil, fmt.Errorf("semijoin: sketch closed: %w", ErrBadRequest)
	}
	if n < 1 || n > MaxSketchBatch {
		return nil, fmt.Errorf("semijoin: %d symbols asked for: want 1 to %d: %w", n, MaxSketchBatch, ErrBadRequest)
	}
	q := &request{has: set(pSession, pN), session: s.id, n: uint64(n)}
	return s.c.unary(ctx, epSketchNext, q, msgSymbols)
}

// Close closes the sketch on the server, waiting at most closeTimeout.
func (s *remoteSketcher) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	return s.c.call(ctx, epSketchClose, &request{has: set(pSession), session: s.id}, func([][]byte) error {
		return s.c.fail(epSketchClose, ErrCorrupt, nil, "an unexpected record in the answer")
	})
}

// noRedirects returns a copy of c that does not follow redirects: the
// protocol has none, and following one would send a request's body (keys,
// filters) to whatever host the answer names.
func noRedirects(c *http.Client) *http.Client {
	nc := *c
	nc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &nc
}
