package semijoin

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"

	"github.com/bloomkv/bloomkv/internal/frame"
)

// allocDuring returns the bytes the process allocated while fn ran.
func allocDuring(fn func()) uint64 {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// A request costs the server memory in proportion to what it sent, within
// MaxRequestBytes: a lookup of MaxRequestBytes of empty keys (one byte each,
// 24 bytes each as slices) is refused before the keys are taken apart, and
// a body that states a frame of MaxRequestBytes and sends none of it costs
// no such frame.
func TestRequestMemoryBounded(t *testing.T) {
	const limit = 4 << 20
	h := LocalHandler(storeOf(t, map[string]string{"a": "1"}), &HandlerOptions{MaxRequestBytes: limit})
	n := limit - 16
	payload := []byte{byte(pValues), 1, 0, byte(pKeys)}
	payload = binary.AppendUvarint(payload, uint64(n))
	payload = append(payload, make([]byte, n)...)
	body := frame.AppendMessage(nil, payload)
	var status int
	alloc := allocDuring(func() { status = post(h, epLookup, body).Code })
	if status != http.StatusBadRequest {
		t.Errorf("a lookup of %d empty keys: status %d, want 400", n, status)
	}
	if alloc > 8*limit {
		t.Errorf("a lookup of %d empty keys in %d bytes on the wire: %d MiB allocated", n, len(body), alloc>>20)
	}

	// A lookup of as many keys as the limit allows is served.
	var q request
	q.values = true
	q.has = set(pValues) | set(pKeys)
	for i := range limit / keyHeaderBytes {
		q.keys = append(q.keys, fmt.Appendf(nil, "k%08d", i))
	}
	if rec := post(h, epLookup, frame.AppendMessage(nil, q.append(nil))); rec.Code != http.StatusOK {
		t.Errorf("a lookup of %d keys: %d %s", len(q.keys), rec.Code, rec.Body.String())
	}

	hdr := make([]byte, 9)
	hdr[0] = 0x01 // a data frame, stored
	binary.LittleEndian.PutUint32(hdr[1:5], limit)
	alloc = allocDuring(func() { status = post(h, epScan, hdr).Code })
	if status/100 != 4 {
		t.Errorf("a body stating a frame of %d bytes and sending none: status %d", limit, status)
	}
	if alloc > 1<<20 {
		t.Errorf("a %d-byte body stating a frame of %d bytes: %d KiB allocated", len(hdr), limit, alloc>>10)
	}
}

// A sketch session hands out at most MaxSketchSymbols symbols: it keeps
// every symbol it made until it closes.
func TestSketchSymbolsBounded(t *testing.T) {
	const most = 3 * MaxSketchBatch
	srv := httptest.NewServer(LocalHandler(storeOf(t, map[string]string{"a": "1"}), &HandlerOptions{MaxSketchSymbols: most}))
	defer srv.Close()
	b, err := Dial(srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	sk, err := b.Sketch(ctx, KeyRange{}, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer sk.Close()
	for i := range most / MaxSketchBatch {
		if _, err := sk.Next(ctx, MaxSketchBatch); err != nil {
			t.Fatalf("batch %d, within the bound: %v", i, err)
		}
	}
	if _, err := sk.Next(ctx, 1); !errors.Is(err, ErrBadRequest) {
		t.Fatalf("a symbol past the bound: %v, want ErrBadRequest", err)
	}
}
