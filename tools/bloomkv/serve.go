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
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/bloomkv/bloomkv"
	"github.com/bloomkv/bloomkv/semijoin"
)

// listen opens serve's listener; tests bind a loopback address in its
// place to see how serve treats another.
var listen = net.Listen

// shutdownWait is how long serve lets answers under way finish when
// stopped.
const shutdownWait = 10 * time.Second

type serveOut struct {
	Dir      string `json:"dir"`
	URL      string `json:"url"`
	Writable bool   `json:"writable"`
	KeysOnly bool   `json:"keys_only,omitempty"`
	Stopped  bool   `json:"stopped,omitempty"`
}

type serveFlags struct {
	addr            string
	writable        bool
	maxRequestBytes int
	maxFilterBits   uint64
	maxSessions     int
	maxSymbols      int
	maxConcurrent   int
	tlsCert, tlsKey string
	clientCA        string
	tokenFile       string
	keysOnly        bool
	insecure        bool
}

func serveCmd(e *env) *cobra.Command {
	var f serveFlags
	c := &cobra.Command{
		Use:   "serve [--addr ADDR] [--writable] [--tls-cert FILE --tls-key FILE] [--client-ca FILE] [--token-file FILE] [--keys-only] DIR",
		Short: "Serve a store over HTTP for join, estimate and diff from another machine",
		Long: `Serve the store in DIR over HTTP or HTTPS (semijoin.Handler): its key
counts, Bloom filters of its keys, its records that pass a filter or that
are asked for by key, its records in order, and the sketches and records of
diff. Another bloomkv (or a program with semijoin.Dial) then names it by the
URL printed at start: join, estimate and diff take it in place of a
directory.

The store is opened read-only, as the db commands open it (the write-ahead
logs replayed into memory, nothing written), unless --writable: it is then
opened as the application opens it (its logs replayed and flushed). The
server only reads either way. It stops on SIGINT or SIGTERM, letting the
answers under way finish for up to 10 s, and closes the store.

Whoever reaches the server can read the whole store, so it is safe by
default: --addr must be a loopback address (127.0.0.0/8, ::1, localhost)
unless the server has both TLS (--tls-cert and --tls-key, PEM files) and
authentication: a bearer token (--token-file, a file holding it; a token is
never taken on the command line) or client certificates signed by
--client-ca (mutual TLS). --insecure serves a non-loopback address without
them anyway, and says on stderr at each start what that exposes.
--keys-only never sends a value: a join against it gets the matching keys
with A's values alone, and diff the differing keys without B's values
(its sketches still hash whole records, so one who guesses a value can
confirm the guess).

Requests over --max-request-bytes, and filters over --max-filter-bits, are
refused (413); at most --max-sessions diff sketches are open at once, each
handing out at most --max-sketch-symbols coded symbols (413 past them), and
past --max-concurrent requests at once the server answers 503 with a
Retry-After. A refused token or certificate gets 401 or 403 and no more.`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(c *cobra.Command, a []string) error {
			if f.maxRequestBytes < 0 || f.maxSessions < 0 || f.maxConcurrent < 0 || f.maxSymbols < 0 {
				return usageError{fmt.Errorf("--max-request-bytes, --max-sessions, --max-sketch-symbols and --max-concurrent must not be negative")}
			}
			if err := f.check(); err != nil {
				return err
			}
			return e.serve(a[0], &f)
		},
	}
	c.Flags().StringVar(&f.addr, "addr", "127.0.0.1:7380", "address to listen on (host:port; port 0 picks one); not loopback needs TLS and authentication, or --insecure")
	c.Flags().BoolVar(&f.writable, "writable", false, "open the store read-write (logs replayed and flushed) instead of read-only")
	c.Flags().IntVar(&f.maxRequestBytes, "max-request-bytes", semijoin.DefaultMaxRequestBytes, "largest request body accepted, uncompressed")
	c.Flags().Uint64Var(&f.maxFilterBits, "max-filter-bits", semijoin.DefaultMaxFilterBits, "largest Bloom filter built or accepted, in bits")
	c.Flags().IntVar(&f.maxSessions, "max-sessions", semijoin.DefaultMaxSessions, "most diff sketches open at once")
	c.Flags().IntVar(&f.maxSymbols, "max-sketch-symbols", semijoin.DefaultMaxSketchSymbols, "most coded symbols one diff sketch hands out (32 bytes each, kept until it closes)")
	c.Flags().IntVar(&f.maxConcurrent, "max-concurrent", semijoin.DefaultMaxConcurrent, "most requests served at once; past it, 503 with Retry-After")
	c.Flags().StringVar(&f.tlsCert, "tls-cert", "", "serve HTTPS with this PEM certificate (chain); needs --tls-key")
	c.Flags().StringVar(&f.tlsKey, "tls-key", "", "the PEM private key of --tls-cert")
	c.Flags().StringVar(&f.clientCA, "client-ca", "", "require client certificates signed by the PEM CA certificates in FILE (mutual TLS; needs --tls-cert)")
	c.Flags().StringVar(&f.tokenFile, "token-file", "", "require the bearer token held in FILE (keep it private: mode 0600)")
	c.Flags().BoolVar(&f.keysOnly, "keys-only", false, "never send a value: joins against the store get its keys alone")
	c.Flags().BoolVar(&f.insecure, "insecure", false, "serve a non-loopback --addr without TLS and authentication (anyone who reaches it reads the store)")
	return c
}

// tls reports whether the flags ask for HTTPS.
func (f *serveFlags) tls() bool { return f.tlsCert != "" }

// authenticated reports whether the flags ask clients to prove who they
// are: a token, or a certificate from --client-ca.
func (f *serveFlags) authenticated() bool { return f.tokenFile != "" || f.clientCA != "" }

// check refuses flags that do not go together, and a non-loopback address
// the flags do not protect.
func (f *serveFlags) check() error {
	if (f.tlsCert == "") != (f.tlsKey == "") {
		return usageError{fmt.Errorf("--tls-cert and --tls-key go together")}
	}
	if f.clientCA != "" && !f.tls() {
		return usageError{fmt.Errorf("--client-ca needs --tls-cert and --tls-key: client certificates are asked for by TLS")}
	}
	loopback, err := isLoopbackAddr(f.addr)
	if err != nil {
		return usageError{err}
	}
	if !loopback && !(f.tls() && f.authenticated()) && !f.insecure {
		return usageError{fmt.Errorf("--addr %s is not a loopback address: anyone who reaches it could read the store; serve it with TLS (--tls-cert, --tls-key) and authentication (--token-file or --client-ca), or pass --insecure", f.addr)}
	}
	return nil
}

// exposure is the warning serve prints at start when the flags leave a
// non-loopback address open, or "" when they do not.
func (f *serveFlags) exposure() string {
	if loopback, _ := isLoopbackAddr(f.addr); loopback || (f.tls() && f.authenticated()) {
		return ""
	}
	what := "the store"
	if f.keysOnly {
		what = "the store's keys"
	}
	switch {
	case !f.tls() && !f.authenticated():
		return fmt.Sprintf("serving without TLS or authentication on a non-loopback address (%s): anyone who reaches it can read %s", f.addr, what)
	case !f.tls():
		return fmt.Sprintf("serving without TLS on a non-loopback address (%s): the token and %s cross the network in clear text", f.addr, what)
	default:
		return fmt.Sprintf("serving without authentication on a non-loopback address (%s): anyone who reaches it can read %s", f.addr, what)
	}
}

// isLoopbackAddr reports whether the host of addr (host:port) is a
// loopback address (isLoopbackHost).
func isLoopbackAddr(addr string) (bool, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, fmt.Errorf("--addr %q: %w", addr, err)
	}
	return isLoopbackHost(host), nil
}

// isLoopbackHost reports whether host is a loopback address: 127.0.0.0/8,
// ::1 or localhost. An empty host, like 0.0.0.0 or ::, means every
// interface, and a host name other than localhost may resolve to anything:
// neither is loopback.
func isLoopbackHost(host string) bool {
	if strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Zone() == "" && ip.Unmap().IsLoopback()
}

// tokenOf reads the token in path ("" for none), warning when the file is
// readable by every user.
func (e *env) tokenOf(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	tok, err := semijoin.ReadTokenFile(path)
	if err != nil {
		return "", err
	}
	if st, err := os.Stat(path); err == nil && st.Mode().Perm()&0o077 != 0 {
		fmt.Fprintf(e.errOut, "bloomkv: warning: --token-file %s is open to other users (mode %04o); chmod 600 it\n", path, st.Mode().Perm())
	}
	return tok, nil
}

// openWritable opens the store in dir read-write; it must hold one.
func openWritable(dir string) (*bloomkv.DB, error) {
	if _, err := os.Stat(filepath.Join(dir, "CURRENT")); err != nil {
		return nil, fmt.Errorf("%s holds no store: %w", dir, err)
	}
	return bloomkv.Open(dir, &bloomkv.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
}

func (e *env) serve(dir string, f *serveFlags) error {
	token, err := e.tokenOf(f.tokenFile)
	if err != nil {
		return err
	}
	open := openDB
	if f.writable {
		open = openWritable
	}
	d, err := open(dir)
	if err != nil {
		return err
	}
	h := semijoin.LocalHandler(d, &semijoin.HandlerOptions{
		MaxRequestBytes:  f.maxRequestBytes,
		Limits:           semijoin.Limits{MaxFilterBits: f.maxFilterBits},
		MaxSessions:      f.maxSessions,
		MaxSketchSymbols: f.maxSymbols,
		MaxConcurrent:    f.maxConcurrent,
		Token:            token,
		KeysOnly:         f.keysOnly,
	})
	// Requests run under base, cancelled when the server stops, and the
	// gate holds the store open until the last has returned.
	base, cancelBase := context.WithCancel(context.Background())
	defer cancelBase()
	g := newGate()
	srv, err := semijoin.NewServer(g.wrap(h), &semijoin.ServerOptions{
		CertFile:     f.tlsCert,
		KeyFile:      f.tlsKey,
		ClientCAFile: f.clientCA,
		BaseContext:  func(net.Listener) context.Context { return base },
		ErrorLog:     log.New(e.errOut, "bloomkv: serve: ", 0),
	})
	if err != nil {
		d.Close()
		return err
	}
	ln, err := listen("tcp", f.addr)
	if err != nil {
		d.Close()
		return err
	}
	scheme := "http://"
	if srv.TLSConfig != nil {
		scheme = "https://"
	}
	out := serveOut{Dir: dir, URL: scheme + ln.Addr().String(), Writable: f.writable, KeysOnly: f.keysOnly}
	mode := "read-only"
	if f.writable {
		mode = "writable"
	}
	if f.keysOnly {
		mode += ", keys only"
	}
	if w := f.exposure(); w != "" {
		fmt.Fprintf(e.errOut, "bloomkv: warning: %s\n", w)
	}
	if e.json {
		e.emit(out)
	} else {
		e.printf("serving %s (%s) at %s; stop with Ctrl-C\n", dir, mode, out.URL)
	}

	ctx, stop := signal.NotifyContext(e.ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	served := make(chan error, 1)
	go func() { served <- semijoin.Serve(srv, ln) }()
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
