package semijoin

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bloomkv/bloomkv/internal/frame"
)

// blockingStore is a store whose Stats waits, once entered, until release
// is closed.
type blockingStore struct {
	Differ
	entered chan struct{}
	release chan struct{}
}

func (s *blockingStore) Stats(ctx context.Context, r KeyRange, passing []byte) (Stats, error) {
	s.entered <- struct{}{}
	select {
	case <-s.release:
	case <-ctx.Done():
		return Stats{}, ctx.Err()
	}
	return s.Differ.Stats(ctx, r, passing)
}

// TestMaxConcurrent: past MaxConcurrent requests under way, a request is
// refused at once with 503 and Retry-After: 1; those under way complete.
func TestMaxConcurrent(t *testing.T) {
	const limit = 3
	s := &blockingStore{Differ: Local(openStore(t), Limits{}), entered: make(chan struct{}, limit), release: make(chan struct{})}
	srv := httptest.NewServer(Handler(s, &HandlerOptions{MaxConcurrent: limit}))
	t.Cleanup(srv.Close)
	b := dial(t, srv.URL)
	var wg sync.WaitGroup
	errs := make(chan error, limit)
	for range limit {
		wg.Go(func() {
			_, err := b.Stats(context.Background(), KeyRange{}, nil)
			errs <- err
		})
	}
	for range limit {
		<-s.entered
	}
	resp, err := http.Post(srv.URL+pathPrefix+"scan", contentType, strings.NewReader(string(scanBody())))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" {
		t.Errorf("past the limit: %d, Retry-After %q: %q", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	if _, err := b.Stats(context.Background(), KeyRange{}, nil); !errors.Is(err, ErrRemote) || !strings.Contains(err.Error(), "503") {
		t.Errorf("past the limit, through Dial: %v", err)
	}
	close(s.release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("a request under way: %v", err)
		}
	}
	// Slots are given back.
	s.entered = make(chan struct{}, 2*limit)
	for range 2 * limit {
		if _, err := b.Stats(context.Background(), KeyRange{}, nil); err != nil {
			t.Fatal(err)
		}
	}
}

// dripBody is the body of a valid lookup request of some 4 KB.
func dripBody() []byte {
	var keys [][]byte
	for i := range 400 {
		keys = append(keys, fmt.Appendf(nil, "key%05d", i))
	}
	return frame.AppendMessage(nil, (&request{has: set(pKeys, pValues), keys: keys}).append(nil))
}

// dripClient sends a lookup request whose body goes one byte every
// interval, until the server answers or closes the connection or stop is
// closed. It returns the status line of the server's answer ("" for none)
// and the bytes of the body it sent, of n.
func dripClient(addr string, body []byte, interval time.Duration, stop <-chan struct{}) (line string, sent, n int, err error) {
	n = len(body)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return "", 0, n, err
	}
	defer c.Close()
	fmt.Fprintf(c, "POST %slookup HTTP/1.1\r\nHost: %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n", pathPrefix, addr, contentType, n)
	answered := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(c).ReadString('\n')
		answered <- strings.TrimSpace(line)
	}()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for sent < n {
		select {
		case line := <-answered:
			return line, sent, n, nil
		case <-stop:
			return "", sent, n, errors.New("stopped")
		case <-tick.C:
		}
		if _, err := c.Write(body[sent : sent+1]); err != nil {
			return <-answered, sent, n, nil
		}
		sent++
	}
	return <-answered, sent, n, nil
}

// TestSlowClientCutOff: a client that drips its request body is cut off
// at the server's ReadTimeout, while a Join through the same server
// completes.
func TestSlowClientCutOff(t *testing.T) {
	ma, mb := secureSides()
	addr := startServer(t, LocalHandler(storeOf(t, mb), nil),
		&ServerOptions{ReadHeaderTimeout: 300 * time.Millisecond, ReadTimeout: 300 * time.Millisecond, WriteTimeout: time.Second})
	const slow = 8
	body := dripBody()
	stop := make(chan struct{})
	timer := time.AfterFunc(10*time.Second, func() { close(stop) })
	defer timer.Stop()
	type result struct {
		line    string
		sent, n int
		err     error
	}
	results := make(chan result, slow)
	for range slow {
		go func() {
			line, sent, n, err := dripClient(addr, body, 20*time.Millisecond, stop)
			results <- result{line, sent, n, err}
		}()
	}
	b := dial(t, "http://"+addr)
	a := Local(storeOf(t, ma), Limits{})
	got, _ := collect(t, a, b, &Options{Strategy: ShipKeys, BatchKeys: 100})
	if want := modelJoin(ma, mb, KeyRange{}, false); !sameMatches(got, want) {
		t.Errorf("join beside slow clients: %d matches, want %d", len(got), len(want))
	}
	for range slow {
		r := <-results
		if r.err != nil || r.sent >= r.n {
			t.Fatalf("a slow client was not cut off: sent %d of %d bytes: %v", r.sent, r.n, r.err)
		}
		if r.line != "" && !strings.Contains(r.line, " 400 ") {
			t.Errorf("a slow client got %q", r.line)
		}
	}
}

// BenchmarkJoinUnderLoad: a Join of 20,000 keys through NewServer's server
// while 1,000 idle connections and 50 clients that drip their requests
// hold it, against the same Join without them; x-unloaded is the ratio of
// their times.
func BenchmarkJoinUnderLoad(b *testing.B) {
	ma, mb := map[string]string{}, map[string]string{}
	for i := range 20000 {
		k := fmt.Sprintf("key%06d", i)
		mb[k] = fmt.Sprintf("value-%d", i)
		if i%3 == 0 {
			ma[k] = "a"
		}
	}
	addr := startServer(b, LocalHandler(storeOf(b, mb), nil),
		&ServerOptions{ReadHeaderTimeout: time.Second, ReadTimeout: time.Second, IdleTimeout: time.Minute})
	store := dial(b, "http://"+addr)
	a := Local(storeOf(b, ma), Limits{})
	join := func() time.Duration {
		start := time.Now()
		if _, err := Join(context.Background(), a, store, &Options{Strategy: ShipFilter}, func(Match) error { return nil }); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	join()
	var unloaded time.Duration
	for range b.N {
		unloaded += join()
	}

	stop := make(chan struct{})
	body := dripBody()
	var wg sync.WaitGroup
	var conns []net.Conn
	for range 1000 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			b.Fatal(err)
		}
		conns = append(conns, c)
	}
	for range 50 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				dripClient(addr, body, time.Second, stop) // a byte a second
			}
		})
	}
	time.Sleep(100 * time.Millisecond)
	b.ResetTimer()
	var loaded time.Duration
	for range b.N {
		loaded += join()
	}
	b.StopTimer()
	close(stop)
	wg.Wait()
	for _, c := range conns {
		c.Close()
	}
	b.ReportMetric(float64(loaded)/float64(unloaded), "x-unloaded")
}

// TestWriteTimeoutPerFrame: an answer that streams for longer than
// WriteTimeout, to a client that keeps reading, completes: the timeout
// bounds each frame, not the answer.
func TestWriteTimeoutPerFrame(t *testing.T) {
	const n = 400000
	d := bigStore(t, n)
	// Each pause below is a tenth of the timeout, leaving a loaded
	// machine the rest for a frame's write; the pauses together, 3 s, are
	// twice it.
	addr := startServer(t, LocalHandler(d, nil), &ServerOptions{WriteTimeout: 1500 * time.Millisecond})
	// A small receive buffer: the client's window reopens as soon as it
	// reads, so that a frame waits for the client's pauses alone, not for
	// an autotuned buffer of megabytes to drain by half.
	dialer := &net.Dialer{}
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dialer.DialContext(ctx, network, addr)
		if err == nil {
			err = c.(*net.TCPConn).SetReadBuffer(64 << 10)
		}
		return c, err
	}}}
	b, err := DialWith("http://"+addr, &DialOptions{Client: client})
	if err != nil {
		t.Fatal(err)
	}
	start, got := time.Now(), 0
	err = b.Scan(context.Background(), KeyRange{}, func(k, v []byte) error {
		// A pause every 20,000 records, spread over the whole answer,
		// which is larger than the sockets' buffers: each under the
		// timeout, together well over it.
		if got++; got%20000 == 0 {
			time.Sleep(150 * time.Millisecond)
		}
		return nil
	})
	if err != nil || got != n {
		t.Fatalf("%d of %d records: %v", got, n, err)
	}
	t.Logf("%d records in %v", got, time.Since(start))
}
