package main

import (
	"fmt"
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

Its HTTP API (plain HTTP, no authentication: the addresses must be loopback
unless --insecure):
  GET    /kv/KEY?consistency=stale|linearizable
  PUT    /kv/KEY        (the body is the value)
  DELETE /kv/KEY
  GET    /cluster       (leader, term, applied index, lag per member)
Writes and linearizable reads sent to a follower are forwarded to the
leader. bloomkv node compare URL URL compares two replicas.`,
		Args: args(cobra.NoArgs),
		RunE: func(c *cobra.Command, _ []string) error { return e.node(&f) },
	}
	c.Flags().StringVar(&f.id, "id", "", "the node's ID, unique in the cluster (required)")
	c.Flags().StringVar(&f.dir, "dir", "", "the node's directory (required)")
	c.Flags().StringVar(&f.raft, "raft", "127.0.0.1:7001", "raft's address (host:port)")
	c.Flags().StringVar(&f.http, "http", "127.0.0.1:8001", "the HTTP API's address (host:port)")
	c.Flags().StringVar(&f.join, "join", "", "join the cluster of the node with this HTTP URL")
	c.Flags().BoolVar(&f.bootstrap, "bootstrap", false, "start a new cluster of this node")
	c.Flags().BoolVar(&f.insecure, "insecure", false, "allow non-loopback addresses (the API has neither TLS nor authentication)")
	c.Flags().StringVar(&f.logLevel, "log-level", "warn", "raft's log level (trace, debug, info, warn, error)")
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
	for _, a := range []string{f.raft, f.http} {
		loopback, err := isLoopbackAddr(a)
		if err != nil {
			return usageError{fmt.Errorf("address %q: %v", a, err)}
		}
		if !loopback && !f.insecure {
			return usageError{fmt.Errorf("address %s is not a loopback address: the node's API has neither TLS nor authentication; pass --insecure to expose it", a)}
		}
	}
	return nil
}

func (e *env) node(f *nodeFlags) error {
	if err := f.check(); err != nil {
		return err
	}
	n, err := raftstore.Open(raftstore.Options{
		ID: f.id, Dir: f.dir, RaftAddr: f.raft, HTTPAddr: f.http,
		Bootstrap: f.bootstrap, Join: f.join,
		LogOutput: e.errOut, LogLevel: f.logLevel,
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
	return &cobra.Command{
		Use:   "compare URL URL",
		Short: "Compare two replicas at one applied index, shipping data in proportion to their difference",
		Long: `compare compares the user keys of two replicas, given by the URLs of their
HTTP APIs, at one point of the log: it marks the log through the first, each
replica takes a snapshot as it applies the mark, and the two snapshots are
compared by semijoin.Diff. It prints each differing key (only-a, only-b or
changed) and a summary; the exit status is 1 if the replicas differ.`,
		Args: args(cobra.ExactArgs(2)),
		RunE: func(c *cobra.Command, a []string) error {
			rep, err := raftstore.CompareURLs(e.ctx, a[0], a[1])
			if err != nil {
				return err
			}
			for _, d := range rep.Differences {
				if e.json {
					e.emit(nodeDiff{Kind: d.Kind.String(), Key: string(d.Key)})
				} else {
					e.printf("%s %q\n", d.Kind, d.Key)
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
}
