package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/bloomkv/bloomkv"
	"github.com/bloomkv/bloomkv/semijoin"
)

// shutdownWait is how long serve lets answers under way finish when
// stopped.
const shutdownWait = 10 * time.Second

type serveOut struct {
	Dir      string `json:"dir"`
	URL      string `json:"url"`
	Writable bool   `json:"writable"`
	Stopped  bool   `json:"stopped,omitempty"`
}

type serveFlags struct {
	addr            string
	writable        bool
	maxRequestBytes int
	maxFilterBits   uint64
	maxSessions     int
}

func serveCmd(e *env) *cobra.Command {
	var f serveFlags
	c := &cobra.Command{
		Use:   "serve [--addr ADDR] [--writable] DIR",
		Short: "Serve a store over HTTP for join, estimate and diff from another machine",
		Long: `Serve the store in DIR over HTTP (semijoin.Handler): its key counts,
Bloom filters of its keys, its records that pass a filter or that are asked
for by key, its records in order, and the sketches and records of diff.
Another bloomkv (or a program with semijoin.Dial) then names it by the URL
printed at start: join, estimate and diff take it in place of a directory.

The store is opened read-only, as the db commands open it (the write-ahead
logs replayed into memory, nothing written), unless --writable: it is then
opened as the application opens it (its logs replayed and flushed). The
server only reads either way. It stops on SIGINT or SIGTERM, letting the
answers under way finish for up to 10 s, and closes the store.

Requests over --max-request-bytes, and filters over --max-filter-bits, are
refused (413); at most --max-sessions diff sketches are open at once.`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(c *cobra.Command, a []string) error {
			if f.maxRequestBytes < 0 || f.maxSessions < 0 {
				return usageError{fmt.Errorf("--max-request-bytes and --max-sessions must not be negative")}
			}
			return e.serve(a[0], &f)
		},
	}
	c.Flags().StringVar(&f.addr, "addr", "127.0.0.1:7380", "address to listen on (host:port; port 0 picks one)")
	c.Flags().BoolVar(&f.writable, "writable", false, "open the store read-write (logs replayed and flushed) instead of read-only")
	c.Flags().IntVar(&f.maxRequestBytes, "max-request-bytes", semijoin.DefaultMaxRequestBytes, "largest request body accepted, uncompressed")
	c.Flags().Uint64Var(&f.maxFilterBits, "max-filter-bits", semijoin.DefaultMaxFilterBits, "largest Bloom filter built or accepted, in bits")
	c.Flags().IntVar(&f.maxSessions, "max-sessions", semijoin.DefaultMaxSessions, "most diff sketches open at once")
	return c
}

// openWritable opens the store in dir read-write; it must hold one.
func openWritable(dir string) (*bloomkv.DB, error) {
	if _, err := os.Stat(filepath.Join(dir, "CURRENT")); err != nil {
		return nil, fmt.Errorf("%s holds no store: %w", dir, err)
	}
	return bloomkv.Open(dir, &bloomkv.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
}

func (e *env) serve(dir string, f *serveFlags) error {
	open := openDB
	if f.writable {
		open = openWritable
	}
	d, err := open(dir)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		d.Close()
		return err
	}
	h := semijoin.LocalHandler(d, &semijoin.HandlerOptions{
		MaxRequestBytes: f.maxRequestBytes,
		Limits:          semijoin.Limits{MaxFilterBits: f.maxFilterBits},
		MaxSessions:     f.maxSessions,
	})
	// Requests run under base, cancelled when the server stops, and the
	// gate holds the store open until the last has returned.
	base, cancelBase := context.WithCancel(context.Background())
	defer cancelBase()
	g := newGate()
	srv := &http.Server{
		Handler:           g.wrap(h),
		BaseContext:       func(net.Listener) context.Context { return base },
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          log.New(e.errOut, "bloomkv: serve: ", 0),
	}
	out := serveOut{Dir: dir, URL: "http://" + ln.Addr().String(), Writable: f.writable}
	mode := "read-only"
	if f.writable {
		mode = "writable"
	}
	if e.json {
		e.emit(out)
	} else {
		e.printf("serving %s (%s) at %s; stop with Ctrl-C\n", dir, mode, out.URL)
	}

	ctx, stop := signal.NotifyContext(e.ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	var serveErr error
	select {
	case <-ctx.Done():
		stop()
		sctx, cancel := context.WithTimeout(context.Background(), shutdownWait)
		if err := srv.Shutdown(sctx); err != nil {
			cancelBase()
			srv.Close()
		}
		cancel()
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			serveErr = err
		}
	case serveErr = <-served:
		cancelBase()
		srv.Close()
	}
	g.closeAndWait()
	if err := d.Close(); serveErr != nil || err != nil {
		return errors.Join(serveErr, err)
	}
	out.Stopped = true
	if e.json {
		e.emit(out)
	} else {
		e.printf("stopped serving %s\n", dir)
	}
	return nil
}

// gate counts the requests being served, and once closed refuses new ones
// and waits for those under way.
type gate struct {
	mu     sync.Mutex
	cond   *sync.Cond // on mu
	n      int
	closed bool
}

func newGate() *gate {
	g := &gate{}
	g.cond = sync.NewCond(&g.mu)
	return g
}

func (g *gate) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.mu.Lock()
		if g.closed {
			g.mu.Unlock()
			semijoin.MarkResponse(w) // the semijoin server refuses, not another
			http.Error(w, "bloomkv: the server is stopping", http.StatusServiceUnavailable)
			return
		}
		g.n++
		g.mu.Unlock()
		defer func() {
			g.mu.Lock()
			g.n--
			g.cond.Broadcast()
			g.mu.Unlock()
		}()
		h.ServeHTTP(w, r)
	})
}

func (g *gate) closeAndWait() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = true
	for g.n > 0 {
		g.cond.Wait()
	}
}
