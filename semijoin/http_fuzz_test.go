package semijoin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/bloomkv/bloomkv"
	"github.com/bloomkv/bloomkv/internal/frame"
	"github.com/bloomkv/bloomkv/vfs"
)

// seedRequests are a valid request of each endpoint, and some near misses.
func seedRequests() [][2][]byte {
	filter := []byte("bkw\x01\x01\x03\x80\x01\x00\x00") // a header, then whatever
	var out [][2][]byte
	add := func(e endpoint, q *request) { out = append(out, [2][]byte{{byte(e)}, q.append(nil)}) }
	rng := KeyRange{Start: []byte("a"), End: []byte("k00100")}
	add(epStats, (&request{}).withRange(rng))
	add(epStats, &request{has: set(pPassing), passing: filter})
	add(epFilter, (&request{has: set(pM, pK), m: 1000, k: 3}).withRange(KeyRange{End: []byte{}}))
	add(epProbe, &request{has: set(pFilter, pValues), filter: filter, values: true})
	add(epLookup, (&request{has: set(pKeys, pValues), keys: [][]byte{{}, []byte("k00001"), []byte("k00002")}}).withRange(rng))
	add(epScan, &request{})
	add(epSketchOpen, &request{has: set(pSeed), seed: 7})
	add(epSketchNext, &request{has: set(pSession, pN), session: make([]byte, 16), n: 100})
	add(epSketchClose, &request{has: set(pSession), session: make([]byte, 16)})
	add(epResolve, &request{has: set(pSeed, pHashes), seed: 1, hashes: []uint64{1, 2, 3}})
	out = append(out, [2][]byte{{byte(epStats)}, {13, 0}}, [2][]byte{{byte(epFilter)}, {5, 2, 0x80, 0}})
	return out
}

// FuzzDecodeRequest: the request decoder never panics; it refuses with a
// one-line ErrBadRequest, or accepts exactly the canonical encoding, which
// re-encodes to the same bytes.
func FuzzDecodeRequest(f *testing.F) {
	for _, s := range seedRequests() {
		f.Add(s[0][0], s[1])
	}
	f.Fuzz(func(t *testing.T, ep byte, payload []byte) {
		e := endpoint(ep % byte(numEndpoints))
		q, err := decodeRequest(e, payload, math.MaxInt)
		if err != nil {
			if !errors.Is(err, ErrBadRequest) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("%v: %q", e, err)
			}
			return
		}
		if again := q.append(nil); !bytes.Equal(again, payload) {
			t.Fatalf("%v: %x decodes to a request that encodes to %x", e, payload, again)
		}
		allowed, required := e.params()
		if q.has&^allowed != 0 || required&^q.has != 0 {
			t.Fatalf("%v: parameters %b accepted (allowed %b, required %b)", e, q.has, allowed, required)
		}
	})
}

// FuzzHandler: whatever the body, framed or not, the handler answers 200
// with a complete answer that Dial's reader accepts, or a 4xx with a
// one-line reason; never a 5xx, never a panic.
func FuzzHandler(f *testing.F) {
	for _, s := range seedRequests() {
		f.Add(s[0][0], s[1], false)
	}
	f.Add(byte(epScan), frame.AppendMessage(nil, nil), true)
	d, err := bloomkv.Open("/db", &bloomkv.Options{FS: vfs.NewMem()})
	if err != nil {
		f.Fatal(err)
	}
	defer d.Close()
	b := d.NewBatch()
	for i := range 300 {
		b.Set(fmt.Appendf(nil, "k%05d", i), fmt.Appendf(nil, "v%d", i))
	}
	if err := d.Apply(b, bloomkv.NoSync); err != nil {
		f.Fatal(err)
	}
	h := LocalHandler(d, &HandlerOptions{MaxRequestBytes: 1 << 16, Limits: Limits{MaxFilterBits: 1 << 16}, MaxSessions: 4})
	client := &remote{base: "fuzz"}
	f.Fuzz(func(t *testing.T, ep byte, payload []byte, raw bool) {
		e := endpoint(ep % byte(numEndpoints))
		body := payload
		if !raw {
			body = frame.AppendMessage(nil, payload)
		}
		rec := post(h, e, body)
		switch {
		case rec.Code == http.StatusOK:
			if err := client.readAnswer(context.Background(), e, rec.Body, func([][]byte) error { return nil }); err != nil {
				t.Fatalf("%v: 200 with an answer that does not read: %v", e, err)
			}
		case rec.Code >= 400 && rec.Code < 500:
			if s := rec.Body.String(); strings.Count(s, "\n") != 1 || !strings.HasSuffix(s, "\n") {
				t.Fatalf("%v: %d with reason %q", e, rec.Code, s)
			}
		default:
			t.Fatalf("%v: status %d: %q", e, rec.Code, rec.Body.String())
		}
	})
}

// FuzzAuthorization: whatever the Authorization header, a handler with a
// token serves the request only when the header is "Bearer " and the
// token; otherwise it answers 401 or 403 with its fixed body. The parser
// never panics and accepts only a token of printable ASCII.
func FuzzAuthorization(f *testing.F) {
	const token = "the-token"
	for _, s := range []string{"", "Bearer " + token, "bearer " + token, "Bearer  " + token, "Bearer", "Bearer ", "Basic x",
		"Bearer " + token + " ", "Bearer " + token + "x", "Bearer\t" + token, "BEARER " + token} {
		f.Add(s)
	}
	h := LocalHandler(openStore(f), &HandlerOptions{Token: token})
	f.Fuzz(func(t *testing.T, auth string) {
		tok, ok := bearerToken(auth)
		if ok && (!validToken(tok) || !strings.HasSuffix(auth, tok)) {
			t.Fatalf("%q: token %q", auth, tok)
		}
		req := httptest.NewRequest(http.MethodPost, pathPrefix+"stats", bytes.NewReader(frame.AppendMessage(nil, nil)))
		req.Header.Set("Authorization", auth)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		switch {
		case ok && tok == token:
			if rec.Code != http.StatusOK {
				t.Fatalf("%q: %d %q", auth, rec.Code, rec.Body.String())
			}
		case ok:
			if rec.Code != http.StatusForbidden || rec.Body.String() != "forbidden\n" {
				t.Fatalf("%q: %d %q", auth, rec.Code, rec.Body.String())
			}
		default:
			if rec.Code != http.StatusUnauthorized || rec.Body.String() != "unauthorized\n" {
				t.Fatalf("%q: %d %q", auth, rec.Code, rec.Body.String())
			}
		}
	})
}
