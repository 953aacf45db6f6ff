package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/bloomkv/bloomkv/raftstore"
	"github.com/spf13/cobra"
)

// nodeFlags are the flags of bloomkv node.
type nodeFlags struct {
	id, dir, raft, http, join string
	bootstrap, insecure       bool
	logLevel                  string
	sec                       nodeSecurity
}

// nodeSecurity are the flags that secure a node, or reach secured ones:
// its certificate and key, the CA its peers' and clients' certificates
// are verified against, and the bearer token.
type nodeSecurity struct {
	tlsCert, tlsKey, ca, tokenFile string
}

func (s *nodeSecurity) flags(c *cobra.Command, server bool) {
	what := "present this PEM certificate (chain) to the nodes"
	if server {
		what = "serve the API over HTTPS and raft over TLS with this PEM certificate (chain); needs --tls-key and --ca"
	}
	c.Flags().StringVar(&s.tlsCert, "tls-cert", "", what)
	c.Flags().StringVar(&s.tlsKey, "tls-key", "", "the PEM private key of --tls-cert")
	c.Flags().StringVar(&s.ca, "ca", "", "trust the PEM CA certificates in FILE for the nodes' certificates (and, serving, for the clients')")
	if server {
		c.Flags().StringVar(&s.tokenFile, "token-file", "", "require the bearer token held in FILE of clients without a certificate, and send it to the other nodes")
	} else {
		c.Flags().StringVar(&s.tokenFile, "token-file", "", "send the bearer token held in FILE")
	}
}

// check checks the security flags of a node (server) or of a client.
func (s *nodeSecurity) check(server bool) error {
	if (s.tlsCert == "") != (s.tlsKey == "") {
		return usageError{fmt.Errorf("--tls-cert and --tls-key go together")}
	}
	if server && s.tlsCert != "" && s.ca == "" {
		return usageError{fmt.Errorf("--tls-cert needs --ca: raft's transport accepts only nodes whose certificates the CA signed")}
	}
	if server && s.ca != "" && s.tlsCert == "" {
		return usageError{fmt.Errorf("--ca needs --tls-cert and --tls-key")}
	}
	return nil
}

// security returns the TLS configuration and the token the flags ask for
// (nil and "" for none).
func (e *env) security(s *nodeSecurity) (*tls.Config, string, error) {
	conf, err := s.tlsConfig()
	if err != nil {
		return nil, "", err
	}
	token, err := e.tokenOf(s.tokenFile)
	return conf, token, err
}

// tlsConfig returns the TLS configuration the flags ask for, nil if none.
func (s *nodeSecurity) tlsConfig() (*tls.Config, error) {
	if s.tlsCert == "" && s.ca == "" {
		return nil, nil
	}
	conf := &tls.Config{MinVersion: tls.VersionTLS12}
	if s.tlsCert != "" {
		cert, err := tls.LoadX509KeyPair(s.tlsCert, s.tlsKey)
		if err != nil {
			return nil, fmt.Errorf("--tls-cert %s, --tls-key %s: %w", s.tlsCert, s.tlsKey, err)
		}
		conf.Certificates = []tls.Certificate{cert}
	}
	if s.ca != "" {
		pem, err := os.ReadFile(s.ca)
		if err != nil {
			return nil, fmt.Errorf("--ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--ca %s holds no PEM certificate", s.ca)
		}
		conf.RootCAs, conf.ClientCAs = pool, pool
	}
	return conf, nil
}

// nodeOut is what bloomkv node prints when it starts and stops.
type nodeOut struct {
	ID      string `json:"id"`
	Dir     string `json:"dir"`
	Raft    string `json:"raft"`
	URL     string `json:"url"`
	Stopped bool   `json:"stopped,omitempty"`
}

func nodeCmd(e *env) *cobra.Command {
	var f nodeFlags
	c := &cobra.Command{
		Use:   "node --id ID --dir DIR --raft ADDR --http ADDR [--bootstrap | --join URL]",
		Short: "Run a replica of a bloomkv store replicated with raft (raftstore)",
		Long: `node runs one replica of a bloomkv store replicated with raft until it
is interrupted. The first node of a cluster starts with --bootstrap; the
others with --join and the HTTP URL of any node. A node restarted on its
directory rejoins by itself (--bootstrap and --join are then ignored).

Its HTTP API:
  GET    /kv/KEY?consistency=stale|linearizable
  PUT    /kv/KEY        (the body is the value)
  DELETE /kv/KEY
  GET    /cluster       (leader, term, applied index, lag per member)
Writes and linearizable reads sent to a follower are forwarded to the
leader. bloomkv node compare URL URL compares two replicas.

Without --tls-cert the API is plain HTTP and raft's transport plain TCP,
and both addresses must be loopback ones unless --insecure. With
--tls-cert, --tls-key and --ca (every node's certificate signed by that CA,
naming the addresses it is reached at), the API is HTTPS and raft runs over
mutual TLS: a node accepts raft connections only from certificates the CA
signed. A client of the API then presents such a certificate, or, with
--token-file, the bearer token the file holds.`,
		Args: args(cobra.NoArgs),
		RunE: func(c *cobra.Command, _ []string) error { return e.node(&f) },
	}
	c.Flags().StringVar(&f.id, "id", "", "the node's ID, unique in the cluster (required)")
	c.Flags().StringVar(&f.dir, "dir", "", "the node's directory (required)")
	c.Flags().StringVar(&f.raft, "raft", "127.0.0.1:7001", "raft's address (host:port)")
	c.Flags().StringVar(&f.http, "http", "127.0.0.1:8001", "the HTTP API's address (host:port)")
	c.Flags().StringVar(&f.join, "join", "", "join the cluster of the node with this HTTP URL")
	c.Flags().BoolVar(&f.bootstrap, "bootstrap", false, "start a new cluster of this node")
	c.Flags().BoolVar(&f.insecure, "insecure", false, "allow non-loopback addresses without TLS (anyone who reaches them can read and write)")
	c.Flags().StringVar(&f.logLevel, "log-level", "warn", "raft's log level (trace, debug, info, warn, error)")
	f.sec.flags(c, true)
	c.AddCommand(nodeCompareCmd(e))
	return c
}

func (f *nodeFlags) check() error {
	if f.id == "" || f.dir == "" {
		return usageError{fmt.Errorf("node needs --id and --dir")}
	}
	if f.bootstrap && f.join != "" {
		return usageError{fmt.Errorf("--bootstrap and --join exclude each other")}
	}
	if err := f.sec.check(true); err != nil {
		return err
	}
	for _, a := range []string{f.raft, f.http} {
		loopback, err := isLoopbackAddr(a)
		if err != nil {
			return usageError{fmt.Errorf("address %q: %v", a, err)}
		}
		if !loopback && !f.insecure && f.sec.tlsCert == "" {
			return usageError{fmt.Errorf("address %s is not a loopback address: without TLS anyone who reaches it could read and write the store; "+
				"secure the node (--tls-cert, --tls-key, --ca), or pass --insecure", a)}
		}
	}
	return nil
}

func (e *env) node(f *nodeFlags) error {
	if err := f.check(); err != nil {
		return err
	}
	conf, token, err := e.security(&f.sec)
	if err != nil {
		return err
	}
	n, err := raftstore.Open(raftstore.Options{
		ID: f.id, Dir: f.dir, RaftAddr: f.raft, HTTPAddr: f.http,
		Bootstrap: f.bootstrap, Join: f.join,
		LogOutput: e.errOut, LogLevel: f.logLevel,
		TLS: conf, Token: token,
	})
	if err != nil {
		return err
	}
	out := nodeOut{ID: f.id, Dir: f.dir, Raft: n.RaftAddr(), URL: n.URL()}
	if e.json {
		e.emit(out)
	} else {
		e.printf("node %s (%s): raft %s, API %s; stop with Ctrl-C\n", f.id, f.dir, out.Raft, out.URL)
	}
	ctx, stop := signal.NotifyContext(e.ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	if err := n.Close(); err != nil {
		return err
	}
	out.Stopped = true
	if e.json {
		e.emit(out)
	} else {
		e.printf("node %s stopped\n", f.id)
	}
	return nil
}

// nodeDiff is one differing key of bloomkv node compare.
type nodeDiff struct {
	Kind string `json:"kind"`
	Key  string `json:"key"`
}

// nodeCompareOut is the summary of bloomkv node compare.
type nodeCompareOut struct {
	Index       uint64 `json:"index"`
	Differences int    `json:"differences"`
	Bytes       int64  `json:"bytes"`
}

func nodeCompareCmd(e *env) *cobra.Command {
	var sec nodeSecurity
	var fm formats
	c := &cobra.Command{
		Use:   "compare [--ca FILE] [--tls-cert FILE --tls-key FILE] [--token-file FILE] URL URL",
		Short: "Compare two replicas at one applied index, shipping data in proportion to their difference",
		Long: `compare compares the user keys of two replicas, given by the URLs of their
HTTP APIs, at one point of the log: it marks the log through the first, each
replica takes a snapshot as it applies the mark, and the two snapshots are
compared by semijoin.Diff. It prints each differing key (only-a, only-b or
changed) and a summary; the exit status is 1 if the replicas differ.`,
		Args: args(cobra.ExactArgs(2)),
		RunE: func(c *cobra.Command, a []string) error {
			if err := sec.check(false); err != nil {
				return err
			}
			conf, token, err := e.security(&sec)
			if err != nil {
				return err
			}
			o := &raftstore.ClientOptions{Token: token}
			if conf != nil {
				o.Client = &http.Client{Transport: &http.Transport{TLSClientConfig: conf}}
			}
			rep, err := raftstore.CompareURLsWith(e.ctx, a[0], a[1], o)
			if err != nil {
				return err
			}
			for _, d := range rep.Differences {
				if e.json {
					e.emit(nodeDiff{Kind: d.Kind.String(), Key: fm.k(d.Key)})
				} else {
					e.printf("%s %s\n", d.Kind, fm.k(d.Key))
				}
			}
			out := nodeCompareOut{Index: rep.Index, Differences: len(rep.Differences), Bytes: rep.Diff.BytesAToB + rep.Diff.BytesBToA}
			if e.json {
				e.emit(out)
			} else {
				e.printf("at index %d: %d differences; %d bytes shipped\n", out.Index, out.Differences, out.Bytes)
			}
			if out.Differences > 0 {
				e.failed = true
			}
			return nil
		},
	}
	sec.flags(c, false)
	fm.register(c, e, formatQuoted)
	return c
}
