package miniconsul

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// routes maps the endpoints the official api client uses for KV, sessions
// and status. Anything else answers 404, as Consul does for unknown paths.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/kv/", s.handleKV)
	mux.HandleFunc("/v1/session/create", s.only("PUT", s.handleSessionCreate))
	mux.HandleFunc("/v1/session/destroy/", s.only("PUT", s.handleSessionDestroy))
	mux.HandleFunc("/v1/session/renew/", s.only("PUT", s.handleSessionRenew))
	mux.HandleFunc("/v1/session/info/", s.only("GET", s.handleSessionInfo))
	mux.HandleFunc("/v1/session/list", s.only("GET", s.handleSessionList))
	mux.HandleFunc("/v1/session/node/", s.only("GET", s.handleSessionNode))
	mux.HandleFunc("/v1/txn", s.only("PUT", s.handleTxn))
	mux.HandleFunc("/v1/status/leader", s.only("GET", s.handleLeader))
	mux.HandleFunc("/v1/status/peers", s.only("GET", s.handlePeers))
	return s.track(mux)
}

// track counts requests in flight so that Close can wait for them.
func (s *Server) track(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Add and Close's Wait must not race (a WaitGroup's Add from zero
		// concurrent with its Wait is a misuse the race detector reports):
		// once Close closed s.closed under trackMu, no request joins.
		s.trackMu.Lock()
		select {
		case <-s.closed:
			s.trackMu.Unlock()
			http.Error(w, "miniconsul: server closed", http.StatusServiceUnavailable)
			return
		default:
		}
		s.wg.Add(1)
		s.trackMu.Unlock()
		defer s.wg.Done()
		s.st.mu.Lock()
		s.st.expireDueLocked()
		s.st.mu.Unlock()
		next.ServeHTTP(w, r)
	})
}

// only answers 405 to any method but method, with Consul's message.
func (s *Server) only(method string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != method {
			methodNotAllowed(w, r, method)
			return
		}
		h(w, r)
	}
}

func methodNotAllowed(w http.ResponseWriter, r *http.Request, allow ...string) {
	w.Header().Set("Allow", strings.Join(allow, ","))
	fail(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed", r.Method))
}

// errNoDCPath is the agent's answer to a request for a datacenter it has
// no route to (structs.ErrNoDCPath), with status 500.
const errNoDCPath = "No path to datacenter"

// wrongDC answers 500 "No path to datacenter" if the request's ?dc= names
// a datacenter other than the server's, as an agent with no route to it
// does when it would forward the request there; it reports whether it
// answered. Handlers call it where the agent makes its RPC: after the
// checks the HTTP layer makes, before the server's.
func (s *Server) wrongDC(w http.ResponseWriter, r *http.Request) bool {
	dc := r.URL.Query().Get("dc")
	if dc == "" || dc == s.cfg.dc {
		return false
	}
	fail(w, http.StatusInternalServerError, errNoDCPath)
	return true
}

// fail writes a Consul error: the status and the bare message as the body.
func fail(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	_, _ = fmt.Fprint(w, msg)
}

// writeJSON writes v as Consul does (compact JSON, no trailing newline).
func writeJSON(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		fail(w, http.StatusInternalServerError, err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

// setQueryMeta sets the headers of a read: the index and the leader
// metadata the api client parses (a lone server is always its leader).
func setQueryMeta(w http.ResponseWriter, index uint64) {
	h := w.Header()
	h.Set("X-Consul-Index", strconv.FormatUint(max(index, 1), 10))
	h.Set("X-Consul-KnownLeader", "true")
	h.Set("X-Consul-LastContact", "0")
	h.Set("X-Consul-Effective-Consistency", "leader")
	h.Set("X-Consul-Query-Backend", "blocking-query")
}

// query holds the blocking parameters of a read.
type query struct {
	minIndex uint64
	wait     time.Duration
}

// parseQuery reads index and wait as Consul's parseWait does, answering 400
// with Consul's messages; ok is false when it has answered.
func parseQuery(w http.ResponseWriter, r *http.Request) (q query, ok bool) {
	v := r.URL.Query()
	if _, stale := v["stale"]; stale {
		if _, cons := v["consistent"]; cons {
			fail(w, http.StatusBadRequest, "Cannot specify ?stale with ?consistent, conflicting semantics.")
			return q, false
		}
	}
	q.wait = DefaultQueryWait
	if s := v.Get("wait"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			fail(w, http.StatusBadRequest, "Invalid wait time")
			return q, false
		}
		if d > 0 {
			q.wait = min(d, MaxQueryWait)
		}
	}
	if s := v.Get("index"); s != "" {
		i, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			fail(w, http.StatusBadRequest, "Invalid index")
			return q, false
		}
		q.minIndex = i
	}
	return q, true
}

// result is one evaluation of a read: its index, whether the thing read was
// missing, and a channel closed at the next change that may alter it.
type result struct {
	index    uint64
	notFound bool
	watch    <-chan struct{}
}

// block evaluates eval (called with the store locked) for a query on key
// ("" for a query on a table) until its index is
// above q.minIndex, as Consul's blocking queries do: with no index it
// answers at once; otherwise it waits for a change (woken by the watch
// channel, never by polling), for q.wait on the server's clock, for the
// client to go away or for Close. A read that finds nothing twice in a row
// waits on as if the index had not moved, as Consul does, so a missing key
// is reported only once it appears or the wait ends. Unlike Consul, no
// jitter (up to wait/16) is added to the wait: the end is exact.
func (s *Server) block(ctx context.Context, q query, key string, eval func() result) {
	st := s.st
	st.mu.Lock()
	res := eval()
	if q.minIndex == 0 || max(res.index, 1) > q.minIndex {
		st.mu.Unlock()
		return
	}
	// The timer is armed before the query counts as parked: a test that
	// saw it parked and then advances a manual clock must fire it.
	waited := make(chan struct{})
	timer := s.cfg.clock.AfterFunc(q.wait, func() { close(waited) })
	defer timer.Stop()
	p := &parkedQuery{key: key, minIndex: q.minIndex}
	st.parked[p] = true
	st.addBlockedLocked(1)
	st.mu.Unlock()
	defer func() {
		st.mu.Lock()
		delete(st.parked, p)
		st.addBlockedLocked(-1)
		st.mu.Unlock()
	}()
	minIndex, notFound := q.minIndex, res.notFound
	for {
		select {
		case <-res.watch:
		case <-waited:
			return
		case <-ctx.Done():
			return
		case <-s.closed:
			return
		}
		st.mu.Lock()
		res = eval()
		st.mu.Unlock()
		if res.notFound {
			if notFound {
				minIndex = max(minIndex, res.index)
			}
			notFound = true
		}
		if max(res.index, 1) > minIndex {
			return
		}
	}
}

func (s *Server) handleLeader(w http.ResponseWriter, r *http.Request) {
	if !s.wrongDC(w, r) {
		writeJSON(w, s.Addr())
	}
}

func (s *Server) handlePeers(w http.ResponseWriter, r *http.Request) {
	if !s.wrongDC(w, r) {
		writeJSON(w, []string{s.Addr()})
	}
}
