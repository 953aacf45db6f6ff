package raftstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/bloomkv/bloomkv"
	"github.com/hashicorp/raft"
)

// maxBody bounds a request body: a value, a command or a join request. A
// value or command near it is refused by MaxCommandSize.
const maxBody = MaxCommandSize + 1<<20

// Handler returns the node's HTTP API:
//
//	GET    /kv/{key}?consistency=stale|linearizable  the value, 404 if none
//	PUT    /kv/{key}                                 set it to the body
//	DELETE /kv/{key}                                 delete it
//	GET    /cluster                                  Status, as JSON
//	POST   /cluster/join                             add a voter ({"id","raft_addr","http_addr"})
//	DELETE /cluster/servers/{id}                     remove a server
//	POST   /raft/apply                               apply an encoded Batch
//	POST   /raft/get                                 a linearizable read on the leader, the key the body
//	/compare/...                                     compare points (Compare)
//
// A request the node cannot serve without a leader gets 503 with
// Retry-After; a malformed one 4xx with a message saying what is wrong;
// one without the node's token (Options.Token), 401.
func (n *Node) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /kv/{key...}", n.serveGet)
	mux.HandleFunc("PUT /kv/{key...}", n.servePut)
	mux.HandleFunc("DELETE /kv/{key...}", n.serveDelete)
	mux.HandleFunc("GET /cluster", n.serveCluster)
	mux.HandleFunc("POST /cluster/join", n.serveJoin)
	mux.HandleFunc("DELETE /cluster/servers/{id}", n.serveRemove)
	mux.HandleFunc("POST /raft/apply", n.serveApply)
	mux.HandleFunc("POST /raft/get", n.serveLeaderGet)
	n.compareRoutes(mux)
	return n.authorize(mux)
}

// httpError writes err as the answer: its status from what it wraps.
func httpError(w http.ResponseWriter, err error) {
	status := http.StatusInternalServerError
	switch {
	case errors.Is(err, bloomkv.ErrNotFound):
		status = http.StatusNotFound
		w.Header().Set(absentHeader, "1")
	case errors.Is(err, ErrNoLeader):
		status = http.StatusServiceUnavailable
		w.Header().Set("Retry-After", "1")
	case errors.Is(err, bloomkv.ErrTooLarge):
		status = http.StatusRequestEntityTooLarge
	case errors.Is(err, ErrCorruption), errors.Is(err, errBadRequest):
		status = http.StatusBadRequest
	case errors.Is(err, context.DeadlineExceeded):
		status = http.StatusGatewayTimeout
	}
	http.Error(w, err.Error(), status)
}

var errBadRequest = errors.New("bad request")

func badRequest(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errBadRequest, fmt.Sprintf(format, args...))
}

// requestContext bounds a request's work by its timeout parameter (a Go
// duration), 10 seconds without one.
func requestContext(r *http.Request) (context.Context, context.CancelFunc, error) {
	d := 10 * time.Second
	if s := r.URL.Query().Get("timeout"); s != "" {
		v, err := time.ParseDuration(s)
		if err != nil || v <= 0 {
			return nil, nil, badRequest("timeout %q: want a positive Go duration such as 2s", s)
		}
		d = v
	}
	ctx, cancel := context.WithTimeout(r.Context(), d)
	return ctx, cancel, nil
}

func keyOf(r *http.Request) ([]byte, error) {
	k := r.PathValue("key")
	if k == "" {
		return nil, badRequest("empty key: use /kv/{key}")
	}
	return []byte(k), checkKeySize(len(k))
}

// checkKeySize refuses a key of n bytes the store cannot hold once its
// key-space prefix is added.
func checkKeySize(n int) error {
	if n+2 > bloomkv.MaxKeySize {
		return badRequest("key of %d bytes is over the limit", n)
	}
	return nil
}

// checkQuery refuses parameters other than allowed.
func checkQuery(r *http.Request, allowed ...string) error {
	for k := range r.URL.Query() {
		ok := false
		for _, a := range allowed {
			ok = ok || k == a
		}
		if !ok {
			return badRequest("unknown parameter %q (allowed: %s)", k, strings.Join(allowed, ", "))
		}
	}
	return nil
}

// kvRequest checks a request of /kv/{key} (its query parameters among
// allowed) and returns its key; on a bad request it answers it and returns
// false.
func kvRequest(w http.ResponseWriter, r *http.Request, allowed ...string) ([]byte, bool) {
	if err := checkQuery(r, allowed...); err != nil {
		httpError(w, err)
		return nil, false
	}
	key, err := keyOf(r)
	if err != nil {
		httpError(w, err)
		return nil, false
	}
	return key, true
}

func (n *Node) serveGet(w http.ResponseWriter, r *http.Request) {
	key, ok := kvRequest(w, r, "consistency", "timeout")
	if !ok {
		return
	}
	c, err := ParseConsistency(r.URL.Query().Get("consistency"))
	if err != nil {
		httpError(w, badRequest("%v", err))
		return
	}
	answerRead(w, r, func(ctx context.Context) ([]byte, error) {
		if c == Linearizable && r.Header.Get(forwardedHeader) != "" {
			return n.leaderGet(ctx, key)
		}
		return n.Get(ctx, key, c)
	})
}

// serveLeaderGet serves a linearizable read a follower forwards: the key
// is the body, so that any key goes as it is (a path would be cleaned of
// "." and ".." and bound in length).
func (n *Node) serveLeaderGet(w http.ResponseWriter, r *http.Request) {
	if err := checkQuery(r, "timeout"); err != nil {
		httpError(w, err)
		return
	}
	key, err := readBody(w, r)
	if err != nil {
		httpError(w, err)
		return
	}
	if err := checkKeySize(len(key)); err != nil {
		httpError(w, err)
		return
	}
	answerRead(w, r, func(ctx context.Context) ([]byte, error) { return n.leaderGet(ctx, key) })
}

// leaderGet reads key linearizably on this node as leader, or refuses: a
// read forwarded to it is not forwarded again.
func (n *Node) leaderGet(ctx context.Context, key []byte) ([]byte, error) {
	if n.raft.State() != raft.Leader {
		return nil, fmt.Errorf("%w: %s is not the leader", ErrNoLeader, n.opts.ID)
	}
	return n.getLinearizable(ctx, key)
}

// answerRead answers r with the value read returns within r's timeout.
func answerRead(w http.ResponseWriter, r *http.Request, read func(context.Context) ([]byte, error)) {
	ctx, cancel, err := requestContext(r)
	if err != nil {
		httpError(w, err)
		return
	}
	defer cancel()
	v, err := read(ctx)
	if err != nil {
		httpError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Write(v)
}

func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, fmt.Errorf("raftstore: request body over %d bytes: %w", maxBody, bloomkv.ErrTooLarge)
		}
		return nil, badRequest("read body: %v", err)
	}
	return b, nil
}

// applyRequest applies b as the request asks: here or forwarded, or, for
// a request forwarded already, on this node as leader or not at all.
func (n *Node) applyRequest(w http.ResponseWriter, r *http.Request, b *Batch) {
	ctx, cancel, err := requestContext(r)
	if err != nil {
		httpError(w, err)
		return
	}
	defer cancel()
	if r.Header.Get(forwardedHeader) != "" {
		if n.raft.State() != raft.Leader {
			err = fmt.Errorf("%w: %s is not the leader", ErrNoLeader, n.opts.ID)
		} else {
			err = n.applyLocal(ctx, b.Bytes())
		}
	} else {
		err = n.apply(ctx, b)
	}
	if err != nil {
		httpError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (n *Node) servePut(w http.ResponseWriter, r *http.Request) { n.serveWrite(w, r, true) }

func (n *Node) serveDelete(w http.ResponseWriter, r *http.Request) { n.serveWrite(w, r, false) }

// serveWrite serves PUT (set, the body the value) or DELETE of /kv/{key}.
func (n *Node) serveWrite(w http.ResponseWriter, r *http.Request, set bool) {
	key, ok := kvRequest(w, r, "timeout")
	if !ok {
		return
	}
	var b Batch
	if set {
		v, err := readBody(w, r)
		if err != nil {
			httpError(w, err)
			return
		}
		b.Set(key, v)
	} else {
		b.Delete(key)
	}
	n.applyRequest(w, r, &b)
}

func (n *Node) serveApply(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(w, r)
	if err != nil {
		httpError(w, err)
		return
	}
	b, err := DecodeBatch(body)
	if err != nil {
		httpError(w, err)
		return
	}
	n.applyRequest(w, r, b)
}

func (n *Node) serveCluster(w http.ResponseWriter, r *http.Request) {
	if err := checkQuery(r, "local"); err != nil {
		httpError(w, err)
		return
	}
	var st *Status
	if r.URL.Query().Get("local") != "" {
		st = n.localStatus()
	} else {
		var err error
		if st, err = n.Status(r.Context()); err != nil {
			httpError(w, err)
			return
		}
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(st)
}

func (n *Node) serveJoin(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(w, r)
	if err != nil {
		httpError(w, err)
		return
	}
	var j joinRequest
	if err := json.Unmarshal(body, &j); err != nil {
		httpError(w, badRequest("join request: %v", err))
		return
	}
	if j.ID == "" || j.RaftAddr == "" {
		httpError(w, badRequest("join request needs id and raft_addr"))
		return
	}
	ctx, cancel, ok := n.membershipContext(w, r)
	if !ok {
		return
	}
	defer cancel()
	if err := n.AddVoter(ctx, j.ID, j.RaftAddr, j.HTTPAddr); err != nil {
		httpError(w, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// membershipContext returns the context of a membership request, or
// answers it with an error and reports false: a request without a valid
// deadline, or one a follower forwarded to a node that is no longer the
// leader (the forwarder then retries with the leader it learns of).
func (n *Node) membershipContext(w http.ResponseWriter, r *http.Request) (context.Context, context.CancelFunc, bool) {
	ctx, cancel, err := requestContext(r)
	if err != nil {
		httpError(w, err)
		return nil, nil, false
	}
	if r.Header.Get(forwardedHeader) != "" && n.raft.State() != raft.Leader {
		cancel()
		httpError(w, fmt.Errorf("%w: %s is not the leader", ErrNoLeader, n.opts.ID))
		return nil, nil, false
	}
	return ctx, cancel, true
}

func (n *Node) serveRemove(w http.ResponseWriter, r *http.Request) {
	ctx, cancel, ok := n.membershipContext(w, r)
	if !ok {
		return
	}
	defer cancel()
	if err := n.RemoveServer(ctx, r.PathValue("id")); err != nil {
		httpError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
