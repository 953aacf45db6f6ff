package raftstore

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bloomkv/bloomkv"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// Consistency is the guarantee a read asks for.
type Consistency int

const (
	// Stale reads the local replica, which may lag the leader.
	Stale Consistency = iota
	// Linearizable reads the state of every write acknowledged before the
	// read began: the leader confirms its leadership through raft before
	// reading; a follower forwards the read to the leader.
	Linearizable
)

// String returns "stale" or "linearizable".
func (c Consistency) String() string {
	if c == Linearizable {
		return "linearizable"
	}
	return "stale"
}

// ParseConsistency parses "stale" or "linearizable" ("" is Stale).
func ParseConsistency(s string) (Consistency, error) {
	switch s {
	case "", "stale":
		return Stale, nil
	case "linearizable":
		return Linearizable, nil
	}
	return Stale, fmt.Errorf("raftstore: consistency %q: want stale or linearizable", s)
}

// ErrNoLeader is wrapped by the errors of calls that need a leader while
// the node knows of none (during an election, or cut off from the
// cluster); such a call did not change anything and may be retried.
var ErrNoLeader = errors.New("raftstore: no known leader")

// Options configure a Node.
type Options struct {
	// ID names the node in the cluster; it must be unique and stable.
	ID string
	// Dir holds the node's log, state machine and snapshots.
	Dir string
	// RaftAddr is the address raft binds to and other nodes reach it at
	// (host:port; port 0 picks one).
	RaftAddr string
	// HTTPAddr is the address of the node's HTTP API (host:port; port 0
	// picks one), through which nodes forward writes and linearizable
	// reads to the leader. Other nodes reach it there, so its host is a
	// specific one, not 0.0.0.0 or ::.
	HTTPAddr string
	// Bootstrap starts a new cluster of this node alone, unless Dir holds
	// raft state already.
	Bootstrap bool
	// Join is the HTTP URL of a node of the cluster to join, unless Dir
	// holds raft state already.
	Join string
	// SnapshotThreshold, TrailingLogs and SnapshotInterval are raft's
	// (zero for raft's defaults).
	SnapshotThreshold uint64
	TrailingLogs      uint64
	SnapshotInterval  time.Duration
	// Fast shortens raft's timeouts to suit nodes on one machine.
	Fast bool
	// LogOutput receives raft's log (os.Stderr if nil).
	LogOutput io.Writer
	// LogLevel is raft's log level ("warn" if empty).
	LogLevel string

	// TLS, when not nil, secures the node: its HTTP API is served over
	// HTTPS and raft's transport runs over TLS, both with TLS's
	// certificates, and the node's own connections to other nodes present
	// them and verify the others' against TLS.RootCAs. Raft's transport
	// accepts only nodes whose certificates TLS.ClientCAs verifies, which
	// must therefore be set. The HTTP API asks for a client certificate
	// too: it requires one unless Token is set, and then takes either.
	TLS *tls.Config
	// Token, when not empty, is a bearer token every request to the HTTP
	// API must carry (Authorization: Bearer TOKEN) unless it presents a
	// client certificate TLS verifies; the node sends it on its own
	// requests to the others.
	Token string

	// wrapTransport, in tests, wraps the raft transport.
	wrapTransport func(raft.Transport) raft.Transport
}

// Node is one replica of a bloomkv store replicated with raft, serving an
// HTTP API. It is safe for concurrent use.
type Node struct {
	opts   Options
	logs   *LogStore
	fsm    *FSM
	snaps  *snapshotStore
	trans  raft.Transport
	raft   *raft.Raft
	ln     net.Listener
	srv    *http.Server
	caller caller

	httpAddr    string
	barrierTerm atomic.Uint64
	cmp         compares

	done      chan struct{}
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// metaHTTP is the metadata key holding a node's HTTP address.
func metaHTTP(id string) []byte { return []byte("http/" + id) }

// Open starts a node.
func Open(opts Options) (*Node, error) {
	if opts.ID == "" || opts.Dir == "" || opts.RaftAddr == "" || opts.HTTPAddr == "" {
		return nil, errors.New("raftstore: open node: ID, Dir, RaftAddr and HTTPAddr are needed")
	}
	if opts.TLS != nil && opts.TLS.ClientCAs == nil {
		return nil, errors.New("raftstore: open node: TLS needs ClientCAs: raft's transport accepts only nodes whose certificates it verifies")
	}
	// The HTTP address is the one the node gives its peers to forward to.
	if host, _, err := net.SplitHostPort(opts.HTTPAddr); err != nil {
		return nil, fmt.Errorf("raftstore: open node: HTTP address %q: %w", opts.HTTPAddr, err)
	} else if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		return nil, fmt.Errorf("raftstore: open node: HTTP address %q is not one other nodes can reach: bind a specific one", opts.HTTPAddr)
	} else if opts.Token != "" && opts.TLS == nil && !isLoopbackHost(host) {
		// The node's requests to the others carry the token, which goes
		// only over https:// or to a loopback host (caller.send).
		return nil, fmt.Errorf("raftstore: open node: a token without TLS on %s would cross the network in clear text: give TLS too, or a loopback address", opts.HTTPAddr)
	}
	n := &Node{opts: opts, done: make(chan struct{})}
	n.caller = caller{client: &http.Client{Timeout: 30 * time.Second}, token: opts.Token}
	if opts.TLS != nil {
		n.caller.client.Transport = &http.Transport{TLSClientConfig: opts.TLS.Clone(), ForceAttemptHTTP2: true}
	}
	n.cmp.points = map[string]*comparePoint{}
	n.cmp.ttl.Store(int64(compareTTL))
	ok := false
	defer func() {
		if !ok {
			n.closeParts()
		}
	}()
	var err error
	if n.logs, err = OpenLogStore(filepath.Join(opts.Dir, "log"), nil); err != nil {
		return nil, err
	}
	if n.fsm, err = OpenFSM(filepath.Join(opts.Dir, "fsm"), nil); err != nil {
		return nil, err
	}
	logOut := opts.LogOutput
	if logOut == nil {
		logOut = os.Stderr
	}
	level := opts.LogLevel
	if level == "" {
		level = "warn"
	}
	logger := hclog.New(&hclog.LoggerOptions{Name: "raft-" + opts.ID, Output: logOut, Level: hclog.LevelFromString(level)})
	if n.snaps, err = openSnapshotStore(filepath.Join(opts.Dir, "snapshots"), 2); err != nil {
		return nil, err
	}
	n.fsm.store = n.snaps
	var tcp *raft.NetworkTransport
	if opts.TLS == nil {
		tcp, err = raft.NewTCPTransportWithLogger(opts.RaftAddr, nil, 3, 10*time.Second, logger)
	} else {
		tcp, err = newTLSTransport(opts.RaftAddr, opts.TLS, logger)
	}
	if err != nil {
		return nil, fmt.Errorf("raftstore: raft transport on %s: %w", opts.RaftAddr, err)
	}
	n.trans = tcp
	if opts.wrapTransport != nil {
		n.trans = opts.wrapTransport(tcp)
	}
	if n.ln, err = net.Listen("tcp", opts.HTTPAddr); err != nil {
		return nil, fmt.Errorf("raftstore: HTTP API on %s: %w", opts.HTTPAddr, err)
	}
	if opts.TLS != nil {
		conf := opts.TLS.Clone()
		conf.ClientAuth = tls.RequireAndVerifyClientCert
		if opts.Token != "" {
			conf.ClientAuth = tls.VerifyClientCertIfGiven
		}
		n.ln = tls.NewListener(n.ln, conf)
	}
	n.httpAddr = n.ln.Addr().String()

	conf := raft.DefaultConfig()
	conf.LocalID = raft.ServerID(opts.ID)
	conf.Logger = logger
	if opts.SnapshotThreshold > 0 {
		conf.SnapshotThreshold = opts.SnapshotThreshold
	}
	if opts.TrailingLogs > 0 {
		conf.TrailingLogs = opts.TrailingLogs
	}
	if opts.SnapshotInterval > 0 {
		conf.SnapshotInterval = opts.SnapshotInterval
	}
	if opts.Fast {
		conf.HeartbeatTimeout = 300 * time.Millisecond
		conf.ElectionTimeout = 300 * time.Millisecond
		conf.LeaderLeaseTimeout = 150 * time.Millisecond
		conf.CommitTimeout = 5 * time.Millisecond
	}
	// The FSM's state is durable: raft restores the last snapshot at start
	// only when the state may be older than it (stateHolds), and replays
	// the log after it.
	snaps, err := n.snaps.List()
	if err != nil {
		return nil, fmt.Errorf("raftstore: list snapshots: %w", err)
	}
	conf.NoSnapshotRestoreOnStart = len(snaps) == 0 || stateHolds(n.fsm, n.logs, snaps[0].Index, snaps[0].Term)

	existing, err := raft.HasExistingState(n.logs, n.logs, n.snaps)
	if err != nil {
		return nil, fmt.Errorf("raftstore: read raft state: %w", err)
	}
	if n.raft, err = raft.NewRaft(conf, n.fsm, n.logs, n.logs, n.snaps, n.trans); err != nil {
		return nil, fmt.Errorf("raftstore: start raft: %w", err)
	}
	// A client that sends its request slowly, or keeps a connection idle,
	// is cut off: neither holds a connection and its buffers for long.
	// Answers take as long as they take (a compare streams for minutes).
	n.srv = &http.Server{Handler: n.Handler(), ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute,
		ErrorLog: log.New(logOut, "raftstore: http: ", log.LstdFlags)}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		n.srv.Serve(n.ln)
	}()
	if !existing && opts.Bootstrap {
		cfg := raft.Configuration{Servers: []raft.Server{{ID: conf.LocalID, Address: n.trans.LocalAddr()}}}
		if err := n.raft.BootstrapCluster(cfg).Error(); err != nil {
			return nil, fmt.Errorf("raftstore: bootstrap: %w", err)
		}
	}
	if !existing && opts.Join != "" {
		if err := n.join(opts.Join); err != nil {
			return nil, err
		}
	}
	n.wg.Add(1)
	go n.register()
	ok = true
	return n, nil
}

// ID returns the node's ID.
func (n *Node) ID() string { return n.opts.ID }

// HTTPAddr returns the address the node's HTTP API listens on.
func (n *Node) HTTPAddr() string { return n.httpAddr }

// URL returns the base URL of the node's HTTP API.
func (n *Node) URL() string { return n.baseURL(n.httpAddr) }

// baseURL is the base URL of the HTTP API at addr: https when the node is
// secured by TLS (its peers are, alike).
func (n *Node) baseURL(addr string) string {
	if n.opts.TLS != nil {
		return "https://" + addr
	}
	return "http://" + addr
}

// RaftAddr returns the address raft listens on.
func (n *Node) RaftAddr() string { return string(n.trans.LocalAddr()) }

// Raft returns the node's raft instance.
func (n *Node) Raft() *raft.Raft { return n.raft }

// Close stops the node: raft, its transport, the HTTP API, the stores.
func (n *Node) Close() error {
	n.closeOnce.Do(func() { n.closeErr = n.closeParts() })
	return n.closeErr
}

func (n *Node) closeParts() error {
	var errs []error
	select {
	case <-n.done:
	default:
		close(n.done)
	}
	if n.raft != nil {
		errs = append(errs, n.raft.Shutdown().Error())
	}
	if c, ok := n.trans.(raft.WithClose); ok {
		errs = append(errs, c.Close())
	}
	if n.srv != nil {
		// Requests still waiting on raft after a grace period are cut off.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if n.srv.Shutdown(ctx) != nil {
			n.srv.Close()
		}
		cancel()
	} else if n.ln != nil {
		n.ln.Close()
	}
	n.wg.Wait()
	n.dropPoints()
	if n.fsm != nil {
		errs = append(errs, n.fsm.Close())
	}
	if n.logs != nil {
		errs = append(errs, n.logs.Close())
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("raftstore: close node %s: %w", n.opts.ID, err)
	}
	return nil
}

// register records the node's HTTP address in the replicated metadata,
// retrying until it is there or the node closes.
func (n *Node) register() {
	defer n.wg.Done()
	for {
		v, err := n.fsm.meta(metaHTTP(n.opts.ID))
		if err == nil && string(v) == n.httpAddr {
			return
		}
		var b Batch
		b.setMeta(metaHTTP(n.opts.ID), []byte(n.httpAddr))
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = n.apply(ctx, &b)
		cancel()
		if err == nil {
			return
		}
		select {
		case <-n.done:
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// joinRequest is the body of POST /cluster/join.
type joinRequest struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
	HTTPAddr string `json:"http_addr"`
}

// join asks the node at base to add this one as a voter, retrying for up
// to a minute while the cluster has no leader.
func (n *Node) join(base string) error {
	body, _ := json.Marshal(joinRequest{ID: n.opts.ID, RaftAddr: n.RaftAddr(), HTTPAddr: n.httpAddr})
	deadline := time.Now().Add(time.Minute)
	for {
		req, err := http.NewRequest(http.MethodPost, strings.TrimSuffix(base, "/")+"/cluster/join", bytes.NewReader(body))
		if err != nil {
			return fmt.Errorf("raftstore: join %s: %w", base, err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := n.caller.send(req)
		if err == nil {
			msg, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(msg)))
			if resp.StatusCode != http.StatusServiceUnavailable {
				return fmt.Errorf("raftstore: join %s: %w", base, err)
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("raftstore: join %s: %w", base, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// timeoutOf is what remains of ctx's deadline, or d without one.
func timeoutOf(ctx context.Context, d time.Duration) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		return max(time.Until(dl), time.Millisecond)
	}
	return d
}

// leaderURL returns the base URL of the leader's HTTP API, or an error
// wrapping ErrNoLeader.
func (n *Node) leaderURL() (string, error) {
	_, id := n.raft.LeaderWithID()
	if id == "" {
		return "", ErrNoLeader
	}
	addr, err := n.fsm.meta(metaHTTP(string(id)))
	if err != nil {
		return "", fmt.Errorf("%w: the HTTP address of leader %s is not known yet", ErrNoLeader, id)
	}
	return n.baseURL(string(addr)), nil
}

// Apply applies b through raft, atomically on every replica, and returns
// once the leader has applied it. On a follower it is forwarded to the
// leader. An error wrapping ErrNoLeader means nothing was applied, as
// does one wrapping bloomkv.ErrTooLarge (a batch over MaxCommandSize);
// other errors (a leadership lost while committing, a lost connection)
// leave the outcome unknown.
func (n *Node) Apply(ctx context.Context, b *Batch) error {
	if b.Len() == 0 {
		return nil
	}
	return n.apply(ctx, b)
}

func (n *Node) apply(ctx context.Context, b *Batch) error {
	if err := checkCommandSize(b.Bytes()); err != nil {
		return err
	}
	for {
		err := n.applyOnce(ctx, b.Bytes())
		if !errors.Is(err, ErrNoLeader) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("raftstore: apply: %w (%w)", ctx.Err(), err)
		case <-n.done:
			return fmt.Errorf("raftstore: apply: node closed (%w)", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// applyOnce applies cmd on the leader, here or through its HTTP API.
func (n *Node) applyOnce(ctx context.Context, cmd []byte) error {
	if n.raft.State() == raft.Leader {
		return n.applyLocal(ctx, cmd)
	}
	base, err := n.leaderURL()
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/raft/apply", bytes.NewReader(cmd))
	if err != nil {
		return err
	}
	return n.forward(req, nil)
}

// forwardedHeader marks a request one node forwards to the leader: the
// receiver does not forward it again.
const forwardedHeader = "Bloomkv-Forwarded"

// errNoRoute marks a leader's 404 without absentHeader: it does not serve
// the path asked for.
var errNoRoute = errors.New("no such route")

// absentHeader marks a 404 that means no such key, telling it from a 404
// of a path the receiver does not serve (a node of an older version).
const absentHeader = "Bloomkv-Absent"

// forward sends req to the leader and reads a 200 answer into out (if not
// nil); a 503 or a refused connection is an error wrapping ErrNoLeader.
func (n *Node) forward(req *http.Request, out *[]byte) error {
	req.Header.Set(forwardedHeader, n.opts.ID)
	resp, err := n.caller.send(req)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			return fmt.Errorf("%w: %v", ErrNoLeader, err)
		}
		return fmt.Errorf("raftstore: forward to leader: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("raftstore: forward to leader: %w", err)
	}
	switch resp.StatusCode {
	case http.StatusOK, http.StatusNoContent:
		if out != nil {
			*out = body
		}
		return nil
	case http.StatusNotFound:
		if resp.Header.Get(absentHeader) != "" {
			return bloomkv.ErrNotFound
		}
		return fmt.Errorf("raftstore: leader answered %s: %s: %w", resp.Status, strings.TrimSpace(string(body)), errNoRoute)
	case http.StatusServiceUnavailable:
		return fmt.Errorf("%w: leader answered %s", ErrNoLeader, strings.TrimSpace(string(body)))
	case http.StatusBadRequest:
		return fmt.Errorf("raftstore: leader refused the request: %s: %w", strings.TrimSpace(string(body)), ErrCorruption)
	case http.StatusRequestEntityTooLarge:
		return fmt.Errorf("raftstore: leader refused the request: %s: %w", strings.TrimSpace(string(body)), bloomkv.ErrTooLarge)
	}
	return fmt.Errorf("raftstore: leader answered %s: %s", resp.Status, strings.TrimSpace(string(body)))
}

// applyLocal applies cmd through this node's raft, as leader.
func (n *Node) applyLocal(ctx context.Context, cmd []byte) error {
	if err := checkCommandSize(cmd); err != nil {
		return err
	}
	f := n.raft.Apply(cmd, timeoutOf(ctx, 10*time.Second))
	// A node shutting down may leave an Apply unanswered: wait gives up
	// then, or when ctx ends (the outcome is unknown either way).
	if err := n.wait(ctx, f); err != nil {
		if errors.Is(err, raft.ErrNotLeader) {
			return fmt.Errorf("%w: %v", ErrNoLeader, err)
		}
		return fmt.Errorf("raftstore: apply: %w", err)
	}
	if err, ok := f.Response().(error); ok {
		return err
	}
	return nil
}

// Get reads key with the consistency c; bloomkv.ErrNotFound if there is
// no such key.
func (n *Node) Get(ctx context.Context, key []byte, c Consistency) ([]byte, error) {
	if c == Stale {
		return n.fsm.Get(key)
	}
	for {
		v, err := n.getLinearizable(ctx, key)
		if !errors.Is(err, ErrNoLeader) {
			return v, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("raftstore: get: %w (%w)", ctx.Err(), err)
		case <-n.done:
			return nil, fmt.Errorf("raftstore: get: node closed (%w)", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (n *Node) getLinearizable(ctx context.Context, key []byte) ([]byte, error) {
	if n.raft.State() == raft.Leader {
		if err := n.readBarrier(ctx); err != nil {
			return nil, err
		}
		return n.fsm.Get(key)
	}
	base, err := n.leaderURL()
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/raft/get", bytes.NewReader(key))
	if err != nil {
		return nil, err
	}
	var v []byte
	err = n.forward(req, &v)
	if errors.Is(err, errNoRoute) {
		// A leader of an earlier version, without /raft/get.
		req, err = http.NewRequestWithContext(ctx, http.MethodGet, base+"/kv/"+escapeAll(string(key))+"?consistency=linearizable", nil)
		if err != nil {
			return nil, err
		}
		err = n.forward(req, &v)
	}
	if err != nil {
		return nil, err
	}
	return v, nil
}

// readBarrier returns once a local read sees every write acknowledged
// before it was called, if this node is the leader. In a term where the
// leader has not yet committed a barrier entry, it commits one (after it,
// the state holds every entry committed before). Then, within that term,
// the commit index read before a confirmation of leadership (VerifyLeader)
// bounds every acknowledged write, and the read waits until the state has
// applied the newest entry up to it that the state machine is given
// (fsmTarget).
func (n *Node) readBarrier(ctx context.Context) error {
	timeout := timeoutOf(ctx, 10*time.Second)
	term := n.raft.CurrentTerm()
	if n.barrierTerm.Load() != term {
		if err := n.wait(ctx, n.raft.Barrier(timeout)); err != nil {
			return leaderErr(err)
		}
		if n.raft.CurrentTerm() == term {
			n.barrierTerm.Store(term)
		}
		return nil
	}
	ci := n.raft.CommitIndex()
	if err := n.wait(ctx, n.raft.VerifyLeader()); err != nil {
		return leaderErr(err)
	}
	if n.raft.CurrentTerm() != term {
		return fmt.Errorf("%w: term changed during the read", ErrNoLeader)
	}
	target, err := n.fsmTarget(ci)
	if err != nil {
		return err
	}
	for n.fsm.Applied() < target {
		select {
		case <-ctx.Done():
			return fmt.Errorf("raftstore: wait for index %d: %w", target, ctx.Err())
		case <-n.done:
			return fmt.Errorf("raftstore: wait for index %d: node closed", target)
		case <-time.After(time.Millisecond):
		}
	}
	return nil
}

// fsmTarget returns the index of the newest log entry at or below ci that
// raft gives the state machine (a command or a configuration change), or
// the state's applied index when there is none above it. raft applies
// barrier and no-op entries without the state machine, whose applied index
// then stays below the commit index: a read after the barrier it committed
// itself would otherwise wait for an index the state never reaches. An
// entry the log no longer holds lies in a snapshot, which the state holds.
func (n *Node) fsmTarget(ci uint64) (uint64, error) {
	applied := n.fsm.Applied()
	i, _, err := lastFSMEntry(n.logs, applied, ci, func(t raft.LogType) bool {
		return t == raft.LogCommand || t == raft.LogConfiguration
	})
	return i, err
}

// lastFSMEntry walks logs down from upTo to after+1 and returns the index
// of the first entry it meets whose type toFSM says reaches the state
// machine, or after when it meets none. missing says the walk stopped at
// an entry logs no longer holds (the answer is then after).
func lastFSMEntry(logs raft.LogStore, after, upTo uint64, toFSM func(raft.LogType) bool) (index uint64, missing bool, err error) {
	var l raft.Log
	for i := upTo; i > after; i-- {
		err := logs.GetLog(i, &l)
		switch {
		case errors.Is(err, raft.ErrLogNotFound):
			return after, true, nil
		case err != nil:
			return 0, false, fmt.Errorf("raftstore: read log entry %d: %w", i, err)
		case toFSM(l.Type):
			return i, false, nil
		}
	}
	return after, false, nil
}

// stateHolds reports whether the state machine's durable state holds every
// entry raft gives it up to the snapshot at index and term: it has applied
// index, or the log holds the snapshot's own entry (index, of term), which
// makes it the committed history up to there, and between the applied
// index and index only entries raft applies without the state machine
// (no-ops, barriers, the old peer changes). A snapshot's index counts
// those, which the state never sees. Anything else, a failed read
// included, says the state may be older (restore it).
func stateHolds(fsm *FSM, logs raft.LogStore, index, term uint64) bool {
	applied := fsm.Applied()
	if applied >= index {
		return true
	}
	var l raft.Log
	if err := logs.GetLog(index, &l); err != nil || l.Term != term {
		// Not this snapshot's history: a snapshot installed from a leader
		// may be on disk above a local log of another term.
		return false
	}
	i, missing, err := lastFSMEntry(logs, applied, index, func(t raft.LogType) bool {
		switch t {
		case raft.LogNoop, raft.LogBarrier, raft.LogAddPeerDeprecated, raft.LogRemovePeerDeprecated:
			return false
		}
		return true
	})
	return err == nil && !missing && i == applied
}

// wait returns f's error, or gives up on it when ctx ends or the node
// closes: raft answers some futures (VerifyLeader's) only when leadership
// is confirmed or lost, which a closing node may never do.
func (n *Node) wait(ctx context.Context, f raft.Future) error {
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("raftstore: wait for raft: %w", ctx.Err())
	case <-n.done:
		return fmt.Errorf("raftstore: wait for raft: node closed")
	}
}

// leaderErr wraps ErrNoLeader around raft's errors that mean this node is
// not (or no longer) the leader and nothing was done.
func leaderErr(err error) error {
	if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) {
		return fmt.Errorf("%w: %v", ErrNoLeader, err)
	}
	return fmt.Errorf("raftstore: confirm leadership: %w", err)
}

// AddVoter adds the node id, reachable at raftAddr and with its HTTP API
// at httpAddr, as a voter. On a follower it is forwarded to the leader.
func (n *Node) AddVoter(ctx context.Context, id, raftAddr, httpAddr string) error {
	if n.raft.State() != raft.Leader {
		base, err := n.leaderURL()
		if err != nil {
			return err
		}
		body, _ := json.Marshal(joinRequest{ID: id, RaftAddr: raftAddr, HTTPAddr: httpAddr})
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/cluster/join", bytes.NewReader(body))
		if err != nil {
			return err
		}
		return n.forward(req, nil)
	}
	if httpAddr != "" {
		var b Batch
		b.setMeta(metaHTTP(id), []byte(httpAddr))
		if err := n.applyLocal(ctx, b.Bytes()); err != nil {
			return err
		}
	}
	if err := n.wait(ctx, n.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(raftAddr), 0, timeoutOf(ctx, 30*time.Second))); err != nil {
		return fmt.Errorf("raftstore: add voter %s: %w", id, leaderErr(err))
	}
	return nil
}

// RemoveServer removes the node id from the cluster. On a follower it is
// forwarded to the leader.
func (n *Node) RemoveServer(ctx context.Context, id string) error {
	if id == "" {
		return fmt.Errorf("raftstore: remove server: empty id: %w", errBadRequest)
	}
	if n.raft.State() != raft.Leader {
		base, err := n.leaderURL()
		if err != nil {
			return err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodDelete, base+"/cluster/servers/"+escapeAll(id), nil)
		if err != nil {
			return err
		}
		return n.forward(req, nil)
	}
	if err := n.wait(ctx, n.raft.RemoveServer(raft.ServerID(id), 0, timeoutOf(ctx, 30*time.Second))); err != nil {
		return fmt.Errorf("raftstore: remove server %s: %w", id, leaderErr(err))
	}
	return nil
}

// ServerStatus is one member of the cluster as a node sees it.
type ServerStatus struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
	HTTPAddr string `json:"http_addr,omitempty"`
	Suffrage string `json:"suffrage"`
	// Applied is the member's applied index, as it reported it to the
	// leader (0 if it did not answer or this node is not the leader).
	Applied uint64 `json:"applied,omitempty"`
	// Lag is the leader's last index less Applied, in entries; -1 if the
	// member did not answer.
	Lag int64 `json:"lag"`
}

// Status describes a node and, on the leader, the lag of each member.
type Status struct {
	ID       string         `json:"id"`
	State    string         `json:"state"`
	Leader   string         `json:"leader"`
	Term     uint64         `json:"term"`
	Commit   uint64         `json:"commit_index"`
	Applied  uint64         `json:"applied_index"`
	Last     uint64         `json:"last_index"`
	Snapshot string         `json:"last_snapshot_index"`
	Servers  []ServerStatus `json:"servers"`
}

// Status returns the node's status. On the leader it asks each member for
// its applied index to report its lag.
func (n *Node) Status(ctx context.Context) (*Status, error) {
	st := n.localStatus()
	cf := n.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return nil, fmt.Errorf("raftstore: status: %w", err)
	}
	leader := n.raft.State() == raft.Leader
	for _, s := range cf.Configuration().Servers {
		ss := ServerStatus{ID: string(s.ID), RaftAddr: string(s.Address), Suffrage: s.Suffrage.String(), Lag: -1}
		if v, err := n.fsm.meta(metaHTTP(string(s.ID))); err == nil {
			ss.HTTPAddr = string(v)
		}
		if leader {
			if ss.ID == n.opts.ID {
				ss.Applied = st.Applied
			} else if ss.HTTPAddr != "" {
				if peer, err := n.peerStatus(ctx, n.baseURL(ss.HTTPAddr)); err == nil {
					ss.Applied = peer.Applied
				}
			}
			if ss.Applied > 0 {
				ss.Lag = int64(st.Last) - int64(ss.Applied)
			}
		}
		st.Servers = append(st.Servers, ss)
	}
	return st, nil
}

func (n *Node) localStatus() *Status {
	_, leader := n.raft.LeaderWithID()
	return &Status{
		ID:       n.opts.ID,
		State:    n.raft.State().String(),
		Leader:   string(leader),
		Term:     n.raft.CurrentTerm(),
		Commit:   n.raft.CommitIndex(),
		Applied:  n.fsm.Applied(),
		Last:     n.raft.LastIndex(),
		Snapshot: n.raft.Stats()["last_snapshot_index"],
	}
}

func (n *Node) peerStatus(ctx context.Context, base string) (*Status, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/cluster?local=1", nil)
	if err != nil {
		return nil, err
	}
	resp, err := n.caller.send(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", base, resp.Status)
	}
	var st Status
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return nil, err
	}
	return &st, nil
}

// escapeAll percent-encodes every byte of s, for a path segment that must
// reach the handler as it is: url.PathEscape leaves "." and "..", which a
// server cleans from the path.
func escapeAll(s string) string {
	const hex = "0123456789ABCDEF"
	b := make([]byte, 0, 3*len(s))
	for i := 0; i < len(s); i++ {
		b = append(b, '%', hex[s[i]>>4], hex[s[i]&15])
	}
	return string(b)
}
