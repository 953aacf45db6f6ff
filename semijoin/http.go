package semijoin

import (
	"encoding/binary"
	"fmt"
	"net/http"
	"strings"

	"github.com/bloomkv/bloomkv/internal/frame"
)

// The HTTP protocol between Handler and Dial.
//
// Every call is a POST to BASE/semijoin/v1/NAME with no query string. Its
// body is one complete frame stream (internal/frame: checksummed,
// Snappy-compressed frames and an end frame) whose payload is the request's
// parameters, each
//
//	tag (1 byte), uvarint length (shortest form), that many bytes
//
// in increasing tag order, each at most once. A parameter is absent, or
// present (perhaps empty): an absent start or end is an open bound, an
// empty one is the empty key.
//
//	tag  name     value                                   endpoints
//	1    start    key range start (inclusive)             all but sketch/next, sketch/close
//	2    end      key range end (exclusive)               same
//	3    passing  filter, filterblock wire form           stats, filter
//	4    filter   filter, filterblock wire form           probe (required)
//	5    m        uvarint: filter bits                    filter (required)
//	6    k        uvarint: filter probes                  filter (required)
//	7    values   1 byte, 0 or 1: send values             probe, lookup (required)
//	8    keys     uvarint length and bytes, per key       lookup (required)
//	9    seed     uvarint: hash seed                      sketch/open, resolve (required)
//	10   hashes   8 bytes little-endian per key hash      resolve (required)
//	11   session  16 bytes: a sketch's id                 sketch/next, sketch/close (required)
//	12   n        uvarint: symbols wanted                 sketch/next (required)
//
// Uvarints take their shortest form and fill their parameter exactly. An
// unknown tag, a parameter the endpoint does not take, one out of order or
// repeated, a missing one and a malformed value are refused with 400.
//
// A 200 response (Content-Type application/x-bloomkv-semijoin) is a frame
// stream too, written a frame (64 KiB) at a time and flushed after each, so
// the server holds one frame of an answer whatever its size. Its payload is
// a sequence of frame records:
//
//   - a record of two fields is a key and its value (empty when values were
//     not asked for): the answer of probe, lookup, scan and resolve, in key
//     order;
//   - a record of one field is a message, its first byte the message's type:
//     'S' stats (keys, key bytes, value bytes, scanned: four uint64
//     little-endian), 'F' a filter in wire form, 'I' a sketch session's
//     id, 'Y' coded symbols (internal/riblt wire form), 'Z' the end of a
//     complete answer, or 'E' an error met mid-answer: a class byte ('B'
//     bad request, 'C' corrupt data, 'R' any other failure) and a one-line
//     reason.
//
// Every answer ends with exactly one 'Z' or 'E' message and then the end
// frame. A reader trusts an answer only after 'Z' and a valid end frame:
// a stream cut anywhere before them (a lost connection) is an error, never
// a shorter answer.
//
// A request refused before any of its answer was sent gets a 4xx or 5xx
// status and a one-line text/plain reason: 400 malformed (and the store's
// ErrBadRequest), 404 an unknown endpoint or sketch session, 405 not a
// POST, 413 a body or filter over the limits, 415 another content type,
// 422 damaged data (a frame or filter that fails its checksum, the store's
// ErrCorrupt), 429 too many sketch sessions, 500 anything else.
//
// Every response of the handler, refusals included, carries the header
// Bloomkv-Semijoin: v1, by which a client tells a refusal of a semijoin
// server from the answer of some other server at the URL.
//
// A handler given a token (HandlerOptions.Token) first checks every
// request's Authorization header, "Bearer <token>": without one, or with
// one of another form, it answers 401 with WWW-Authenticate: Bearer and
// the body "unauthorized"; with another token, 403 and "forbidden". Past
// its limit of requests at once it answers 503 with Retry-After: 1. A
// keys-only handler (HandlerOptions.KeysOnly) marks every response with
// the header Bloomkv-Keys-Only: 1, and its records of two fields carry
// empty values whatever the request asks.

// pathPrefix is where Handler serves its endpoints.
const pathPrefix = "/semijoin/v1/"

// contentType is that of request and response bodies.
const contentType = "application/x-bloomkv-semijoin"

// serverHeader names the header every response of the handler carries,
// with serverVersion, the protocol's version.
const (
	serverHeader  = "Bloomkv-Semijoin"
	serverVersion = "v1"
)

// MarkResponse marks w's response as a semijoin server's, as Handler marks
// each of its own, so that a client reads a refusal made in front of the
// handler (a server that is stopping, a wrapper's limit) as the server's,
// with its status and reason.
func MarkResponse(w http.ResponseWriter) { w.Header().Set(serverHeader, serverVersion) }

// sessionIDLen is the length of a sketch session's id.
const sessionIDLen = 16

// endpoint is one of the calls of the protocol.
type endpoint uint8

const (
	epStats endpoint = iota
	epFilter
	epProbe
	epLookup
	epScan
	epSketchOpen
	epSketchNext
	epSketchClose
	epResolve
	numEndpoints
)

func (e endpoint) String() string {
	switch e {
	case epStats:
		return "stats"
	case epFilter:
		return "filter"
	case epProbe:
		return "probe"
	case epLookup:
		return "lookup"
	case epScan:
		return "scan"
	case epSketchOpen:
		return "sketch/open"
	case epSketchNext:
		return "sketch/next"
	case epSketchClose:
		return "sketch/close"
	case epResolve:
		return "resolve"
	}
	return fmt.Sprintf("endpoint(%d)", int(e))
}

// endpointOf returns the endpoint served at path.
func endpointOf(path string) (endpoint, bool) {
	name, ok := strings.CutPrefix(path, pathPrefix)
	if !ok {
		return 0, false
	}
	for e := range numEndpoints {
		if e.String() == name {
			return e, true
		}
	}
	return 0, false
}

// param is a request parameter's tag.
type param uint8

const (
	pStart param = iota + 1
	pEnd
	pPassing
	pFilter
	pM
	pK
	pValues
	pKeys
	pSeed
	pHashes
	pSession
	pN
	numParams
)

func (p param) String() string {
	switch p {
	case pStart:
		return "start"
	case pEnd:
		return "end"
	case pPassing:
		return "passing"
	case pFilter:
		return "filter"
	case pM:
		return "m"
	case pK:
		return "k"
	case pValues:
		return "values"
	case pKeys:
		return "keys"
	case pSeed:
		return "seed"
	case pHashes:
		return "hashes"
	case pSession:
		return "session"
	case pN:
		return "n"
	}
	return fmt.Sprintf("%d", int(p))
}

// params is a set of parameters.
type params uint32

func set(ps ...param) params {
	var s params
	for _, p := range ps {
		s |= 1 << p
	}
	return s
}

func (s params) has(p param) bool { return s&(1<<p) != 0 }

// params returns the parameters e takes and those it requires.
func (e endpoint) params() (allowed, required params) {
	rng := set(pStart, pEnd)
	switch e {
	case epStats:
		return rng | set(pPassing), 0
	case epFilter:
		return rng | set(pPassing, pM, pK), set(pM, pK)
	case epProbe:
		return rng | set(pFilter, pValues), set(pFilter, pValues)
	case epLookup:
		return rng | set(pKeys, pValues), set(pKeys, pValues)
	case epScan:
		return rng, 0
	case epSketchOpen:
		return rng | set(pSeed), set(pSeed)
	case epSketchNext:
		return set(pSession, pN), set(pSession, pN)
	case epSketchClose:
		return set(pSession), set(pSession)
	case epResolve:
		return rng | set(pSeed, pHashes), set(pSeed, pHashes)
	}
	return 0, 0
}

// request holds a request's parameters; has says which are present. Decoded
// byte slices point into the payload.
type request struct {
	has             params
	start, end      []byte
	passing, filter []byte
	m, k, seed, n   uint64
	values          bool
	keys            [][]byte
	hashes          []uint64
	session         []byte
}

// rangeOf returns the request's key range.
func (q *request) rangeOf() KeyRange { return KeyRange{Start: q.start, End: q.end} }

// withRange sets the start and end parameters of r's bounds that are not
// open.
func (q *request) withRange(r KeyRange) *request {
	if r.Start != nil {
		q.has |= set(pStart)
		q.start = r.Start
	}
	if r.End != nil {
		q.has |= set(pEnd)
		q.end = r.End
	}
	return q
}

// append appends the request's payload to dst.
func (q *request) append(dst []byte) []byte {
	for p := pStart; p < numParams; p++ {
		if !q.has.has(p) {
			continue
		}
		dst = append(dst, byte(p))
		switch p {
		case pStart, pEnd, pPassing, pFilter, pSession:
			b := q.bytesParam(p)
			dst = binary.AppendUvarint(dst, uint64(len(b)))
			dst = append(dst, b...)
		case pM, pK, pSeed, pN:
			v := q.uintParam(p)
			dst = binary.AppendUvarint(dst, uint64(uvarintSize(v)))
			dst = binary.AppendUvarint(dst, v)
		case pValues:
			dst = append(dst, 1, b2byte(q.values))
		case pKeys:
			n := 0
			for _, k := range q.keys {
				n += uvarintSize(uint64(len(k))) + len(k)
			}
			dst = binary.AppendUvarint(dst, uint64(n))
			for _, k := range q.keys {
				dst = binary.AppendUvarint(dst, uint64(len(k)))
				dst = append(dst, k...)
			}
		case pHashes:
			dst = binary.AppendUvarint(dst, uint64(8*len(q.hashes)))
			for _, h := range q.hashes {
				dst = binary.LittleEndian.AppendUint64(dst, h)
			}
		}
	}
	return dst
}

// bytesParam returns the value of a parameter of bytes.
func (q *request) bytesParam(p param) []byte {
	switch p {
	case pStart:
		return q.start
	case pEnd:
		return q.end
	case pPassing:
		return q.passing
	case pFilter:
		return q.filter
	}
	return q.session
}

// uintParam returns the value of an integer parameter.
func (q *request) uintParam(p param) uint64 {
	switch p {
	case pM:
		return q.m
	case pK:
		return q.k
	case pSeed:
		return q.seed
	}
	return q.n
}

func b2byte(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// uvarintSize is the length of v as a uvarint.
func uvarintSize(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// readUvarint reads a uvarint in its shortest form from b, returning it and
// its length, or a length of 0 when b does not start with one.
func readUvarint(b []byte) (uint64, int) {
	v, n := binary.Uvarint(b)
	if n <= 0 || n != uvarintSize(v) {
		return 0, 0
	}
	return v, n
}

// keyHeaderBytes is what a request's key costs the server beside its
// bytes: its slice header.
const keyHeaderBytes = 24

// decodeRequest decodes the payload of a request to e. Any departure from
// the canonical encoding append makes is an error wrapping ErrBadRequest,
// with a one-line reason, as is a request of more than maxKeys keys: each
// costs a slice header (24 bytes) beside its bytes, so that a payload of
// empty keys would take 24 times its size.
func decodeRequest(e endpoint, payload []byte, maxKeys int) (request, error) {
	var q request
	allowed, required := e.params()
	bad := func(format string, args ...any) (request, error) {
		return request{}, fmt.Errorf("semijoin: %s request: %s: %w", e, fmt.Sprintf(format, args...), ErrBadRequest)
	}
	off := 0
	last := param(0)
	for off < len(payload) {
		p := param(payload[off])
		switch {
		case p == 0 || p >= numParams:
			return bad("unknown parameter %d at offset %d", int(p), off)
		case !allowed.has(p):
			return bad("%s takes no parameter %q", e, p)
		case p == last:
			return bad("parameter %q given twice", p)
		case p < last:
			return bad("parameter %q after %q: parameters go in tag order", p, last)
		}
		last = p
		n, size := readUvarint(payload[off+1:])
		if size == 0 || n > uint64(len(payload)-off-1-size) {
			return bad("parameter %q at offset %d: bad length", p, off)
		}
		off += 1 + size
		v := payload[off : off+int(n) : off+int(n)]
		off += int(n)
		q.has |= set(p)
		if err := q.decodeValue(p, v, maxKeys); err != "" {
			return bad("parameter %q: %s", p, err)
		}
	}
	if missing := required &^ q.has; missing != 0 {
		for p := pStart; p < numParams; p++ {
			if missing.has(p) {
				return bad("missing parameter %q", p)
			}
		}
	}
	return q, nil
}

// decodeValue sets parameter p from its value v, or returns why it can't.
func (q *request) decodeValue(p param, v []byte, maxKeys int) string {
	switch p {
	case pStart:
		q.start = v
	case pEnd:
		q.end = v
	case pPassing:
		q.passing = v
	case pFilter:
		q.filter = v
	case pSession:
		if len(v) != sessionIDLen {
			return fmt.Sprintf("%d bytes, want %d", len(v), sessionIDLen)
		}
		q.session = v
	case pM, pK, pSeed, pN:
		x, n := readUvarint(v)
		if n == 0 || n != len(v) {
			return "not one uvarint in its shortest form"
		}
		switch p {
		case pM:
			q.m = x
		case pK:
			q.k = x
		case pSeed:
			q.seed = x
		default:
			q.n = x
		}
	case pValues:
		if len(v) != 1 || v[0] > 1 {
			return "not one byte 0 or 1"
		}
		q.values = v[0] == 1
	case pKeys:
		// Checked and counted before the keys are taken apart.
		count := 0
		for off := 0; off < len(v); count++ {
			n, size := readUvarint(v[off:])
			if size == 0 || n > uint64(len(v)-off-size) {
				return fmt.Sprintf("key %d at offset %d: bad length", count, off)
			}
			if count == maxKeys {
				return fmt.Sprintf("more than %d keys, the most a request of this server's size limit may hold", maxKeys)
			}
			off += size + int(n)
		}
		q.keys = make([][]byte, 0, count)
		for off := 0; off < len(v); {
			n, size := readUvarint(v[off:])
			off += size
			q.keys = append(q.keys, v[off:off+int(n):off+int(n)])
			off += int(n)
		}
	case pHashes:
		if len(v)%8 != 0 {
			return fmt.Sprintf("%d bytes, not a multiple of 8", len(v))
		}
		q.hashes = make([]uint64, len(v)/8)
		for i := range q.hashes {
			q.hashes[i] = binary.LittleEndian.Uint64(v[8*i:])
		}
	}
	return ""
}

// Message types of a response (see the protocol above).
const (
	msgStats   = 'S'
	msgFilter  = 'F'
	msgSession = 'I'
	msgSymbols = 'Y'
	msgOK      = 'Z'
	msgError   = 'E'
)

// Error classes of an 'E' message.
const (
	classBadRequest = 'B'
	classCorrupt    = 'C'
	classRemote     = 'R'
)

// statsLen is the length of a stats message's body.
const statsLen = 32

func appendStats(dst []byte, s Stats) []byte {
	for _, v := range []int64{s.Keys, s.KeyBytes, s.ValueBytes, s.Scanned} {
		dst = binary.LittleEndian.AppendUint64(dst, uint64(v))
	}
	return dst
}

func decodeStats(b []byte) (Stats, bool) {
	if len(b) != statsLen {
		return Stats{}, false
	}
	v := func(i int) int64 { return int64(binary.LittleEndian.Uint64(b[8*i:])) }
	s := Stats{Keys: v(0), KeyBytes: v(1), ValueBytes: v(2), Scanned: v(3)}
	if s.Keys < 0 || s.KeyBytes < 0 || s.ValueBytes < 0 || s.Scanned < s.Keys {
		return Stats{}, false
	}
	return s, true
}

// writeMessage writes a record of one field, typ and then body, to w: the
// layout RecordWriter.Append(append([]byte{typ}, body...)) would write,
// without copying body.
func writeMessage(w *frame.Writer, typ byte, body []byte) error {
	var hdr [2 + binary.MaxVarintLen64]byte
	hdr[0] = 1
	n := 1 + binary.PutUvarint(hdr[1:], uint64(1+len(body)))
	hdr[n] = typ
	if _, err := w.Write(hdr[:n+1]); err != nil {
		return err
	}
	_, err := w.Write(body)
	return err
}

// oneLine makes s a single line of at most 1,000 bytes.
func oneLine(s string) string {
	s = strings.TrimSpace(strings.ReplaceAll(strings.ReplaceAll(s, "\r", " "), "\n", "; "))
	if len(s) > 1000 {
		s = strings.ToValidUTF8(s[:1000], "") + "..."
	}
	return s
}
