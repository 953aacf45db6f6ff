package semijoin

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	"github.com/bloomkv/bloomkv/internal/frame"
)

// capture is a transport that keeps every response's body and headers.
type capture struct {
	mu      sync.Mutex
	bodies  [][]byte
	headers []http.Header
}

func (c *capture) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.bodies = append(c.bodies, b)
	c.headers = append(c.headers, resp.Header.Clone())
	c.mu.Unlock()
	resp.Body = io.NopCloser(bytes.NewReader(b))
	return resp, nil
}

// take returns the bodies and headers captured since the last call.
func (c *capture) take() ([][]byte, []http.Header) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, h := c.bodies, c.headers
	c.bodies, c.headers = nil, nil
	return b, h
}

// holds reports whether a response body holds s, as sent or, for a frame
// stream, in its decompressed payload.
func holds(body []byte, s string) bool {
	if bytes.Contains(body, []byte(s)) {
		return true
	}
	payload, _ := io.ReadAll(frame.NewReader(bytes.NewReader(body), frame.DefaultSize))
	return bytes.Contains(payload, []byte(s))
}

// callEverything calls every endpoint of b, values asked for wherever a
// request can ask for them, and returns the number of records answered.
func callEverything(t *testing.T, b Differ) int {
	t.Helper()
	ctx := context.Background()
	n := 0
	count := func(k, v []byte) error { n++; return nil }
	if _, err := b.Stats(ctx, KeyRange{}, nil); err != nil {
		t.Fatal(err)
	}
	filter, err := b.Filter(ctx, KeyRange{}, FilterSpec{M: 1 << 14, K: 4})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Stats(ctx, KeyRange{}, filter); err != nil {
		t.Fatal(err)
	}
	if err := b.Probe(ctx, KeyRange{}, filter, true, count); err != nil {
		t.Fatal(err)
	}
	keys := [][]byte{[]byte("key00001"), []byte("key00002"), []byte("key00500"), []byte("nope")}
	if err := b.Lookup(ctx, KeyRange{}, keys, true, count); err != nil {
		t.Fatal(err)
	}
	if err := b.Scan(ctx, KeyRange{Start: []byte("key001")}, count); err != nil {
		t.Fatal(err)
	}
	sk, err := b.Sketch(ctx, KeyRange{}, 3)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sk.Next(ctx, 100); err != nil {
		t.Fatal(err)
	}
	if err := sk.Close(); err != nil {
		t.Fatal(err)
	}
	var hashes []uint64
	for _, k := range keys {
		hashes = append(hashes, itemOf(k, nil, 3).Key)
	}
	slices.Sort(hashes)
	if err := b.Resolve(ctx, KeyRange{}, 3, hashes, count); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestKeysOnly: a keys-only handler's answers to every endpoint, values
// asked for, and to a Join and a Diff, never hold a value, and each
// carries Bloomkv-Keys-Only: 1; Join returns exactly the matching keys
// with A's values, Diff every difference with B's values nil. The same
// calls to a handler that is not keys-only show the values, so the search
// can find them.
func TestKeysOnly(t *testing.T) {
	ma, mb := secureSides()
	db := storeOf(t, mb)
	a := Local(storeOf(t, ma), Limits{})
	for _, keysOnly := range []bool{false, true} {
		srv := httptest.NewServer(LocalHandler(db, &HandlerOptions{KeysOnly: keysOnly}))
		t.Cleanup(srv.Close)
		tr := &capture{}
		b, err := DialWith(srv.URL, &DialOptions{Client: &http.Client{Transport: tr}})
		if err != nil {
			t.Fatal(err)
		}
		if n := callEverything(t, b); n < 100 {
			t.Fatalf("keys-only %v: %d records answered", keysOnly, n)
		}
		// Every Join strategy, and Diff.
		want := modelJoin(ma, mb, KeyRange{}, keysOnly)
		for s := Auto; s <= TwoWay; s++ {
			got, rep := collect(t, a, b, &Options{Strategy: s, BatchKeys: 200})
			if !sameMatches(got, want) || rep.KeysOnlyB != keysOnly {
				t.Errorf("keys-only %v, %v: %d matches, want %d; report's KeysOnlyB %v", keysOnly, s, len(got), len(want), rep.KeysOnlyB)
			}
		}
		wantDiff := modelDiff(ma, mb)
		changed := 0
		for i := range wantDiff {
			if keysOnly {
				wantDiff[i].B = nil
			}
			if wantDiff[i].Kind == Changed {
				changed++
			}
		}
		got, rep := collectDiff(t, a, b, nil)
		if !sameDifferences(got, wantDiff) || rep.KeysOnlyB != keysOnly || changed == 0 || rep.Changed != int64(changed) {
			t.Errorf("keys-only %v: Diff found %d differences (%d changed), want %d (%d changed); report's KeysOnlyB %v",
				keysOnly, len(got), rep.Changed, len(wantDiff), changed, rep.KeysOnlyB)
		}

		bodies, headers := tr.take()
		found := 0
		for i, body := range bodies {
			if holds(body, valueMarker) {
				found++
				if keysOnly {
					t.Errorf("response %d of a keys-only server holds a value", i)
				}
			}
			if got := headers[i].Get(keysOnlyHeader); (got == "1") != keysOnly {
				t.Errorf("keys-only %v: response %d with %s %q", keysOnly, i, keysOnlyHeader, got)
			}
		}
		if !keysOnly && found == 0 {
			t.Fatalf("no value found in the %d answers of a server that is not keys-only: the search cannot see one", len(bodies))
		}
		t.Logf("keys-only %v: %d responses, %d with values", keysOnly, len(bodies), found)
	}
}

// TestKeysOnlyRefusalsMarked: a keys-only handler's refusals carry the
// header too.
func TestKeysOnlyRefusalsMarked(t *testing.T) {
	h := LocalHandler(openStore(t), &HandlerOptions{KeysOnly: true, Token: "t"})
	rec := post(h, epScan, scanBody())
	if rec.Code != http.StatusUnauthorized || rec.Header().Get(keysOnlyHeader) != "1" {
		t.Fatalf("%d, header %q", rec.Code, rec.Header().Get(keysOnlyHeader))
	}
}

// TestKeysOnlyARefused: a keys-only server given as side A is refused by
// Join (every strategy) and Diff, before any match or difference is
// reported: its values would read as empty, every shared key a "change".
func TestKeysOnlyARefused(t *testing.T) {
	ma, mb := secureSides()
	srv := httptest.NewServer(LocalHandler(storeOf(t, ma), &HandlerOptions{KeysOnly: true}))
	t.Cleanup(srv.Close)
	a, err := Dial(srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := Local(storeOf(t, mb), Limits{})
	ctx := context.Background()
	for s := Auto; s <= TwoWay; s++ {
		matches := 0
		_, err := Join(ctx, a, b, &Options{Strategy: s}, func(Match) error { matches++; return nil })
		if !errors.Is(err, ErrBadRequest) || matches != 0 {
			t.Errorf("%v: Join with a keys-only A: %v after %d matches, want ErrBadRequest", s, err, matches)
		}
	}
	diffs := 0
	_, err = Diff(ctx, a, b, nil, func(Difference) error { diffs++; return nil })
	if !errors.Is(err, ErrBadRequest) || diffs != 0 {
		t.Errorf("Diff with a keys-only A: %v after %d differences, want ErrBadRequest", err, diffs)
	}
}
