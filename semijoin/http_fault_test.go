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
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bloomkv/bloomkv"
	"github.com/bloomkv/bloomkv/internal/frame"
)

// bigStore returns a store of n records of 32 bytes on the wire each: a
// 9-byte key, a 20-byte value, and their lengths and field count.
func bigStore(t testing.TB, n int) *bloomkv.DB {
	d := openStore(t)
	r := rand.New(rand.NewPCG(uint64(n), 1))
	b := d.NewBatch()
	for i := range n {
		v := make([]byte, 20)
		for j := range v {
			v[j] = byte('a' + r.IntN(26))
		}
		b.Set(fmt.Appendf(nil, "key%06d", i), v)
	}
	if err := d.Apply(b, bloomkv.NoSync); err != nil {
		t.Fatal(err)
	}
	return d
}

const bigRecordWire = 32

// cutWriter passes the first left bytes of an answer to the client, then
// closes the connection.
type cutWriter struct {
	http.ResponseWriter
	left int
	cut  bool
}

var errCut = errors.New("test: connection cut")

func (w *cutWriter) Write(p []byte) (int, error) {
	if w.cut {
		return 0, errCut
	}
	if len(p) <= w.left {
		w.left -= len(p)
		return w.ResponseWriter.Write(p)
	}
	n, _ := w.ResponseWriter.Write(p[:w.left])
	w.cut = true
	rc := http.NewResponseController(w.ResponseWriter)
	rc.Flush()
	if conn, _, err := rc.Hijack(); err == nil {
		conn.Close()
	}
	return n, errCut
}

func (w *cutWriter) Flush() {
	if !w.cut {
		http.NewResponseController(w.ResponseWriter).Flush()
	}
}

// cutAfter serves h, cutting each answer's connection after n bytes of
// body.
func cutAfter(n int, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(&cutWriter{ResponseWriter: w, left: n}, r)
	})
}

// scanBody returns the framed request body of a scan of everything.
func scanBody() []byte { return frame.AppendMessage(nil, (&request{}).append(nil)) }

// post sends body to endpoint e of h and returns the recorded answer.
func post(h http.Handler, e endpoint, body []byte) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, pathPrefix+e.String(), bytes.NewReader(body))
	req.Header.Set("Content-Type", contentType)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// TestHTTPConnectionCut: a server that closes the connection anywhere in
// an answer (before its headers, in a frame's header, in its payload,
// between frames, in the end frame) makes the call fail with ErrTruncated,
// never return a shorter answer as complete; a Join through it fails too.
func TestHTTPConnectionCut(t *testing.T) {
	const n = 20000
	d := bigStore(t, n)
	h := Handler(Local(d, Limits{}), nil)
	full := post(h, epScan, scanBody()).Body.Len()
	if full < 10*frame.DefaultSize/2 {
		t.Fatalf("answer of %d bytes: too small to cut in many frames", full)
	}
	for _, at := range []int{0, 1, 8, 9, 10, 100, frame.DefaultSize, frame.DefaultSize + 9, frame.DefaultSize + 10,
		frame.DefaultSize + 100, full / 2, full - 26, full - 25, full - 24, full - 1} {
		srv := httptest.NewServer(cutAfter(at, h))
		got := 0
		err := dial(t, srv.URL).Scan(context.Background(), KeyRange{}, func(k, v []byte) error {
			got++
			return nil
		})
		srv.Close()
		switch {
		case err == nil:
			t.Fatalf("cut after %d of %d bytes: %d of %d records and no error", at, full, got, n)
		case at > 0 && !errors.Is(err, ErrTruncated):
			t.Errorf("cut after %d of %d bytes: %v; want ErrTruncated", at, full, err)
		case at > 0 && !strings.Contains(err.Error(), "connection lost mid-stream"):
			t.Errorf("cut after %d bytes: %v", at, err)
		}
		if at == full-1 && !errors.Is(err, frame.ErrTruncated) {
			t.Errorf("cut in the end frame: %v; want frame.ErrTruncated", err)
		}
	}

	// A join whose B is cut mid-probe, and one whose A is cut mid-scan.
	other := openStore(t)
	m := map[string]string{}
	for i := range n {
		if i%3 == 0 {
			m[fmt.Sprintf("key%06d", i)] = "x"
		}
	}
	fill(t, other, m)
	srv := httptest.NewServer(cutAfter(100_000, h))
	defer srv.Close()
	for _, s := range []Strategy{ShipFilter, ShipKeys} {
		if _, err := Join(context.Background(), Local(other, Limits{}), dial(t, srv.URL), &Options{Strategy: s, BatchKeys: 1 << 20}, func(Match) error { return nil }); !errors.Is(err, ErrTruncated) {
			t.Errorf("join %v with B cut: %v", s, err)
		}
		if _, err := Join(context.Background(), dial(t, srv.URL), Local(other, Limits{}), &Options{Strategy: s}, func(Match) error { return nil }); !errors.Is(err, ErrTruncated) {
			t.Errorf("join %v with A cut: %v", s, err)
		}
	}
}

// flipWriter flips one bit of an answer's body.
type flipWriter struct {
	http.ResponseWriter
	at, off int
	bit     byte
}

func (w *flipWriter) Write(p []byte) (int, error) {
	if w.at >= w.off && w.at < w.off+len(p) {
		p = bytes.Clone(p)
		p[w.at-w.off] ^= w.bit
	}
	w.off += len(p)
	return w.ResponseWriter.Write(p)
}

func (w *flipWriter) Flush() { http.NewResponseController(w.ResponseWriter).Flush() }

// TestHTTPDamagedAnswer: a bit flipped anywhere in an answer makes the
// call fail (ErrCorrupt, or ErrTruncated where the flip lengthened a frame
// beyond the stream), never return a different answer.
func TestHTTPDamagedAnswer(t *testing.T) {
	d := bigStore(t, 3000)
	h := Handler(Local(d, Limits{}), nil)
	full := post(h, epScan, scanBody()).Body.Len()
	r := rand.New(rand.NewPCG(9, 10))
	var at int
	var bit byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		h.ServeHTTP(&flipWriter{ResponseWriter: w, at: at, bit: bit}, req)
	}))
	defer srv.Close()
	remote := dial(t, srv.URL)
	flips := 300
	if testing.Short() {
		flips = 100
	}
	for i := range flips {
		at, bit = r.IntN(full), 1<<r.IntN(8)
		if i < 9 {
			at = i // the first frame's header
		}
		err := remote.Scan(context.Background(), KeyRange{}, func(k, v []byte) error { return nil })
		if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrTruncated) {
			t.Fatalf("bit %#x flipped at %d of %d: %v", bit, at, full, err)
		}
	}
}

// expectRefused asserts that rec is a refusal with status want and a
// one-line text reason holding reason.
func expectRefused(t *testing.T, what string, rec *httptest.ResponseRecorder, want int, reason string) {
	t.Helper()
	body := rec.Body.String()
	switch {
	case rec.Code != want:
		t.Errorf("%s: status %d, want %d (%q)", what, rec.Code, want, body)
	case !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/plain"):
		t.Errorf("%s: content type %q", what, rec.Header().Get("Content-Type"))
	case strings.Count(body, "\n") != 1 || !strings.HasSuffix(body, "\n"):
		t.Errorf("%s: reason not one line: %q", what, body)
	case !strings.Contains(body, reason):
		t.Errorf("%s: reason %q lacks %q", what, body, reason)
	}
}

// probeBody returns a framed probe request carrying a filter of d's keys.
func probeBody(t testing.TB, s Store) []byte {
	f, err := s.Filter(context.Background(), KeyRange{}, FilterSpec{M: 4096, K: 3})
	if err != nil {
		t.Fatal(err)
	}
	return frame.AppendMessage(nil, (&request{has: set(pFilter, pValues), filter: f, values: true}).append(nil))
}

// TestHTTPDamagedRequest: every single-bit flip of a probe's body, every
// truncation of it, and a flipped bit of the filter it carries are refused
// with a 4xx and a one-line reason, and by a remote store with ErrCorrupt
// or ErrBadRequest: never answered.
func TestHTTPDamagedRequest(t *testing.T) {
	local, remote, h, srv := remoteFixture(t, nil)
	body := probeBody(t, local)
	if rec := post(h, epProbe, body); rec.Code != http.StatusOK {
		t.Fatalf("the undamaged probe: %d %q", rec.Code, rec.Body.String())
	}
	for i := range 8 * len(body) {
		b := bytes.Clone(body)
		b[i/8] ^= 1 << (i % 8)
		rec := post(h, epProbe, b)
		if rec.Code != http.StatusBadRequest && rec.Code != http.StatusRequestEntityTooLarge && rec.Code != http.StatusUnprocessableEntity {
			t.Fatalf("bit %d flipped: status %d %q", i, rec.Code, rec.Body.String())
		}
		expectRefused(t, fmt.Sprintf("bit %d flipped", i), rec, rec.Code, "semijoin: ")
	}
	for n := range len(body) {
		expectRefused(t, fmt.Sprintf("body cut at %d", n), post(h, epProbe, body[:n]), http.StatusBadRequest, "truncated request body")
	}
	// Over the network: a damaged frame, a truncated body.
	b := bytes.Clone(body)
	b[len(b)/2] ^= 0x10
	for _, c := range []struct {
		body   []byte
		status int
		reason string
	}{{b, http.StatusUnprocessableEntity, "damaged request body"}, {body[:len(body)-3], http.StatusBadRequest, "truncated request body"}} {
		resp, err := http.Post(srv.URL+pathPrefix+"probe", contentType, bytes.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		reason, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status || !bytes.Contains(reason, []byte(c.reason)) || bytes.Count(reason, []byte("\n")) != 1 {
			t.Errorf("network: %d %q, want %d %q", resp.StatusCode, reason, c.status, c.reason)
		}
	}
	// A filter with a flipped bit, in a sound body.
	f, err := local.Filter(context.Background(), KeyRange{}, FilterSpec{M: 4096, K: 3})
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(11, 12))
	corrupt := 0
	for range 200 {
		g := bytes.Clone(f)
		g[r.IntN(len(g))] ^= 1 << r.IntN(8)
		err := remote.Probe(context.Background(), KeyRange{}, g, true, func(k, v []byte) error {
			return errors.New("a record answered a damaged filter")
		})
		switch {
		case errors.Is(err, ErrCorrupt):
			corrupt++
		case errors.Is(err, ErrBadRequest): // a flip in m: over the limit
		default:
			t.Fatalf("damaged filter: %v", err)
		}
	}
	if corrupt < 150 {
		t.Errorf("%d of 200 damaged filters were ErrCorrupt", corrupt)
	}
}

// TestHTTPTooLarge: a request over MaxRequestBytes is refused with 413,
// whether its Content-Length says so, its frames do, or its payload
// decompresses beyond the limit.
func TestHTTPTooLarge(t *testing.T) {
	const limit = 4096
	_, remote, h, _ := remoteFixture(t, &HandlerOptions{MaxRequestBytes: limit})
	var keys [][]byte
	for i := range 1000 { // 7,000 bytes
		keys = append(keys, fmt.Appendf(nil, "k%05d", i))
	}
	err := remote.Lookup(context.Background(), KeyRange{}, keys, true, func(k, v []byte) error { return nil })
	if !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), "413") || !strings.Contains(err.Error(), "limit of 4096 bytes") {
		t.Errorf("lookup of 1,000 keys: %v", err)
	}
	if err := remote.Lookup(context.Background(), KeyRange{}, keys[:100], true, func(k, v []byte) error { return nil }); err != nil {
		t.Errorf("lookup of 100 keys: %v", err)
	}
	// A payload of 1 MiB of one key compresses to little on the wire.
	big := frame.AppendMessage(nil, (&request{has: set(pKeys, pValues), keys: [][]byte{make([]byte, 1<<20)}}).append(nil))
	expectRefused(t, "compressed 1 MiB", post(h, epLookup, big), http.StatusRequestEntityTooLarge, "limit of 4096 bytes")
	// Content-Length over the limit: refused before reading the body,
	// which never ends here.
	req := httptest.NewRequest(http.MethodPost, pathPrefix+"lookup", endless{})
	req.ContentLength = 1 << 20
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	expectRefused(t, "Content-Length over the limit", rec, http.StatusRequestEntityTooLarge, "limit of 4096 bytes")
	// A body longer than it says it is.
	req = httptest.NewRequest(http.MethodPost, pathPrefix+"lookup", io.MultiReader(bytes.NewReader(big[:100]), endless{}))
	req.ContentLength = -1
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code/100 != 4 {
		t.Errorf("endless body: %d %q", rec.Code, rec.Body.String())
	}
}

// endless reads as an endless run of 'x'.
type endless struct{}

func (endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	return len(p), nil
}

// TestHTTPUnknownParameters: requests with parameters an endpoint doesn't
// know, doesn't take, lacks, repeats, misorders or malforms, query
// strings, other methods, paths and content types are refused with a 4xx
// and a one-line reason.
func TestHTTPUnknownParameters(t *testing.T) {
	_, _, h, _ := remoteFixture(t, nil)
	param := func(p byte, v ...byte) []byte { return append([]byte{p, byte(len(v))}, v...) }
	cat := func(ps ...[]byte) []byte { return bytes.Join(ps, nil) }
	for _, c := range []struct {
		e       endpoint
		payload []byte
		reason  string
	}{
		{epStats, param(13), "unknown parameter 13"},
		{epStats, param(0), "unknown parameter 0"},
		{epStats, param(byte(pKeys)), `stats takes no parameter "keys"`},
		{epScan, param(byte(pSeed), 1), `scan takes no parameter "seed"`},
		{epProbe, param(byte(pValues), 1), `missing parameter "filter"`},
		{epFilter, param(byte(pM), 8), `missing parameter "k"`},
		{epStats, cat(param(byte(pStart), 'a'), param(byte(pStart), 'b')), `parameter "start" given twice`},
		{epStats, cat(param(byte(pEnd), 'a'), param(byte(pStart), 'b')), "tag order"},
		{epFilter, cat(param(byte(pM), 0x80, 0), param(byte(pK), 3)), "shortest form"},
		{epFilter, cat(param(byte(pM), 8, 8), param(byte(pK), 3)), "shortest form"},
		{epProbe, cat(param(byte(pFilter)), param(byte(pValues), 2)), "not one byte 0 or 1"},
		{epSketchClose, param(byte(pSession), 1, 2, 3), "3 bytes, want 16"},
		{epResolve, cat(param(byte(pSeed), 0), param(byte(pHashes), 1, 2, 3, 4, 5, 6, 7)), "not a multiple of 8"},
		{epLookup, cat(param(byte(pKeys), 5, 'a'), param(byte(pValues), 1)), "bad length"},
		{epStats, []byte{byte(pStart), 9, 'a'}, "bad length"},
		{epSketchNext, cat(param(byte(pSession), make([]byte, 16)...), param(byte(pN), 0)), "0 symbols asked for"},
		{epSketchNext, cat(param(byte(pSession), make([]byte, 16)...), param(byte(pN), 1)), "no sketch session"},
	} {
		rec := post(h, c.e, frame.AppendMessage(nil, c.payload))
		want := http.StatusBadRequest
		if c.reason == "no sketch session" {
			want = http.StatusNotFound
		}
		expectRefused(t, fmt.Sprintf("%v %x", c.e, c.payload), rec, want, c.reason)
	}
	body := scanBody()
	for _, c := range []struct {
		method, path, ctype string
		status              int
		reason              string
	}{
		{http.MethodPost, pathPrefix + "scan?limit=3", contentType, http.StatusBadRequest, `unknown query parameters "limit=3"`},
		{http.MethodGet, pathPrefix + "scan", "", http.StatusMethodNotAllowed, "only POST"},
		{http.MethodPost, pathPrefix + "drop", contentType, http.StatusNotFound, "no endpoint"},
		{http.MethodPost, "/", contentType, http.StatusNotFound, "no endpoint"},
		{http.MethodPost, pathPrefix + "scan", "application/json", http.StatusUnsupportedMediaType, "content type"},
	} {
		req := httptest.NewRequest(c.method, c.path, bytes.NewReader(body))
		if c.ctype != "" {
			req.Header.Set("Content-Type", c.ctype)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		expectRefused(t, c.method+" "+c.path, rec, c.status, c.reason)
		if c.status == http.StatusMethodNotAllowed && rec.Header().Get("Allow") != http.MethodPost {
			t.Errorf("405 without Allow: POST")
		}
	}
}

// pipeTransport serves requests by calling a handler, its answer going to
// the client through an io.Pipe: nothing buffers between them, so a server
// that wrote ahead of its client would have to hold the answer itself.
type pipeTransport struct{ h http.Handler }

type pipeResponse struct {
	header  http.Header
	pw      *io.PipeWriter
	status  chan *http.Response
	wrote   bool
	flushes atomic.Int64
}

func (p *pipeResponse) Header() http.Header { return p.header }

func (p *pipeResponse) WriteHeader(code int) {
	if !p.wrote {
		p.wrote = true
		p.status <- &http.Response{StatusCode: code, Header: p.header.Clone()}
	}
}

func (p *pipeResponse) Write(b []byte) (int, error) {
	p.WriteHeader(http.StatusOK)
	return p.pw.Write(b)
}

func (p *pipeResponse) Flush() { p.flushes.Add(1) }

func (t pipeTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	pr, pw := io.Pipe()
	p := &pipeResponse{header: http.Header{}, pw: pw, status: make(chan *http.Response, 1)}
	go func() {
		t.h.ServeHTTP(p, req)
		p.WriteHeader(http.StatusOK)
		pw.Close()
	}()
	resp := <-p.status
	resp.Body, resp.Request = pr, req
	return resp, nil
}

// countingStore counts the records its Scan has handed on.
type countingStore struct {
	Differ
	produced atomic.Int64
}

func (c *countingStore) Scan(ctx context.Context, r KeyRange, fn func(k, v []byte) error) error {
	return c.Differ.Scan(ctx, r, func(k, v []byte) error {
		c.produced.Add(1)
		return fn(k, v)
	})
}

// TestHTTPSlowClient: a client reading a scan slowly through a pipe holds
// the server to at most two frames of records ahead of what the client has
// read, so the server's memory does not grow with the answer, and each
// frame is flushed.
func TestHTTPSlowClient(t *testing.T) {
	n := 120_000
	if testing.Short() {
		n = 40_000
	}
	cs := &countingStore{Differ: Local(bigStore(t, n), Limits{})}
	h := Handler(cs, nil)
	remote, err := Dial("http://pipe", &http.Client{Transport: pipeTransport{h}})
	if err != nil {
		t.Fatal(err)
	}
	perFrame := frame.DefaultSize / bigRecordWire
	bound := int64(2*perFrame + 2)
	var consumed, lead int64
	err = remote.Scan(context.Background(), KeyRange{}, func(k, v []byte) error {
		consumed++
		l := cs.produced.Load() - consumed
		lead = max(lead, l)
		if l > bound {
			return fmt.Errorf("the server produced %d records while the client had read %d: %d ahead, more than two frames (%d)", cs.produced.Load(), consumed, l, bound)
		}
		if consumed%1000 == 0 {
			time.Sleep(time.Millisecond) // a slow client
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if consumed != int64(n) {
		t.Fatalf("%d records, want %d", consumed, n)
	}
	t.Logf("%d records (%d frames); the server was at most %d records ahead of the client (bound %d)", n, n/perFrame, lead, bound)
}

// TestHTTPSlowClientFlushes: every frame of an answer is flushed to the
// client as it is written.
func TestHTTPSlowClientFlushes(t *testing.T) {
	const n = 20_000
	h := Handler(Local(bigStore(t, n), Limits{}), nil)
	pr, pw := io.Pipe()
	p := &pipeResponse{header: http.Header{}, pw: pw, status: make(chan *http.Response, 1)}
	req := httptest.NewRequest(http.MethodPost, pathPrefix+"scan", bytes.NewReader(scanBody()))
	go func() {
		h.ServeHTTP(p, req)
		pw.Close()
	}()
	<-p.status
	fr := frame.NewReader(pr, 0)
	buf := make([]byte, frame.DefaultSize)
	total := 0
	for {
		k, err := fr.Read(buf)
		total += k
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	flushes := p.flushes.Load()
	if want := int64(total / frame.DefaultSize); flushes < want {
		t.Errorf("%d flushes for %d bytes of payload (%d frames)", flushes, total, want)
	}
}

// TestHTTPCancel: cancelling a call's context mid-stream returns
// context.Canceled at once, with no record after the cancel, and the
// server's handler ends.
func TestHTTPCancel(t *testing.T) {
	h := Handler(Local(bigStore(t, 60_000), Limits{}), nil)
	var inflight sync.WaitGroup
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inflight.Add(1)
		defer inflight.Done()
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()
	remote := dial(t, srv.URL)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var got int
	var cancelled time.Time
	err := remote.Scan(ctx, KeyRange{}, func(k, v []byte) error {
		got++
		if got == 1000 {
			cancel()
			cancelled = time.Now()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("%v; want context.Canceled", err)
	}
	if took := time.Since(cancelled); took > time.Second || got != 1000 {
		t.Errorf("returned %v after the cancel, with %d records (want 1000)", took, got)
	}
	done := make(chan struct{})
	go func() {
		inflight.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the server's handler still runs 10 s after the client cancelled")
	}
	// Cancelled before the call.
	if _, err := remote.Stats(ctx, KeyRange{}, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: %v", err)
	}
}

// failingStore fails its Scan with err after after records.
type failingStore struct {
	Differ
	after int
	err   error
}

func (f *failingStore) Scan(ctx context.Context, r KeyRange, fn func(k, v []byte) error) error {
	n := 0
	return f.Differ.Scan(ctx, r, func(k, v []byte) error {
		if n == f.after {
			return f.err
		}
		n++
		return fn(k, v)
	})
}

// TestHTTPServerErrorMidStream: an error the store meets after part of its
// answer was sent reaches the caller, with its reason and kind; one met
// before is a 5xx (or 4xx) status.
func TestHTTPServerErrorMidStream(t *testing.T) {
	d := bigStore(t, 20_000)
	for _, c := range []struct {
		after int
		err   error
		want  error
	}{
		{10_000, errors.New("disk on fire"), ErrRemote},
		{10_000, fmt.Errorf("checksum mismatch: %w", ErrCorrupt), ErrCorrupt},
		{0, errors.New("disk on fire"), ErrRemote},
		{0, fmt.Errorf("checksum mismatch: %w", ErrCorrupt), ErrCorrupt},
	} {
		_, _, remote := serve(t, &failingStore{Differ: Local(d, Limits{}), after: c.after, err: c.err}, nil)
		got := 0
		err := remote.Scan(context.Background(), KeyRange{}, func(k, v []byte) error {
			got++
			return nil
		})
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.err.Error()) || got != c.after {
			t.Errorf("store failing after %d: %d records, %v", c.after, got, err)
		}
		if c.after == 0 && !strings.Contains(err.Error(), "HTTP 5") && !strings.Contains(err.Error(), "HTTP 422") {
			t.Errorf("store failing at once: %v; want a status", err)
		}
	}
}
