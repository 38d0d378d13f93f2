package miniconsul

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

const (
	behaviorRelease = "release"
	behaviorDelete  = "delete"
	serfHealth      = "serfHealth"
)

// createRequest is the body of /v1/session/create.
type createRequest struct {
	Name          string
	Node          string
	LockDelay     any
	Behavior      string
	TTL           string
	Checks        []string
	NodeChecks    []string
	ServiceChecks []serviceCheck
}

// handleSessionCreate follows Consul: defaults (this node, the serfHealth
// check, a 15s lock-delay, Behavior release, no TTL), then Session.Apply's
// checks with its messages.
func (s *Server) handleSessionCreate(w http.ResponseWriter, r *http.Request) {
	req := createRequest{Node: s.cfg.node}
	if r.ContentLength != 0 {
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			fail(w, http.StatusBadRequest, fmt.Sprintf("Request decode failed: %v", err))
			return
		}
	}
	delay, err := parseLockDelay(req.LockDelay)
	if err != nil {
		fail(w, http.StatusBadRequest, fmt.Sprintf("Request decode failed: %v", err))
		return
	}
	if s.wrongDC(w, r) {
		return
	}
	sess := &session{ID: newUUID(), Name: req.Name, Node: req.Node, LockDelay: delay,
		Behavior: req.Behavior, TTL: req.TTL, NodeChecks: req.NodeChecks, ServiceChecks: req.ServiceChecks}
	if sess.NodeChecks == nil && req.ServiceChecks == nil {
		sess.NodeChecks = []string{serfHealth}
		if req.Checks != nil {
			sess.NodeChecks = req.Checks
		}
	}
	if msg := s.validateSession(sess); msg != "" {
		fail(w, http.StatusInternalServerError, msg)
		return
	}
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	if msg := checksMissing(sess); msg != "" {
		s.st.appliedLocked() // refused by the state store, in the raft log
		fail(w, http.StatusInternalServerError, msg)
		return
	}
	s.st.createSessionLocked(sess)
	writeJSON(w, map[string]string{"ID": sess.ID})
}

// parseLockDelay decodes LockDelay as Consul's Session.UnmarshalJSON: a
// duration string or a number of nanoseconds, where values below 1000 are
// taken as seconds. Absent, it is DefaultLockDelay.
func parseLockDelay(v any) (time.Duration, error) {
	var d time.Duration
	switch v := v.(type) {
	case nil:
		return DefaultLockDelay, nil
	case string:
		p, err := time.ParseDuration(v)
		if err != nil {
			return 0, err
		}
		d = p
	case float64:
		d = time.Duration(v)
	}
	if d < 1000 {
		d *= time.Second
	}
	return d, nil
}

// validateSession returns Consul's message for an invalid session, or "".
func (s *Server) validateSession(sess *session) string {
	switch sess.Behavior {
	case "":
		sess.Behavior = behaviorRelease
	case behaviorRelease, behaviorDelete:
	default:
		return fmt.Sprintf("Invalid Behavior setting '%s'", sess.Behavior)
	}
	if sess.Node == "" {
		return "Must provide Node"
	}
	if sess.Node != s.cfg.node {
		return "Missing node registration"
	}
	if sess.TTL == "" {
		return ""
	}
	ttl, err := time.ParseDuration(sess.TTL)
	if err != nil {
		return fmt.Sprintf("Session TTL '%s' invalid: %v", sess.TTL, err)
	}
	if ttl != 0 && (ttl < s.cfg.ttlMin || ttl > SessionTTLMax) {
		return fmt.Sprintf("Invalid Session TTL '%d', must be between [%v=%v]", ttl, s.cfg.ttlMin, SessionTTLMax)
	}
	sess.ttl = ttl
	return ""
}

// newUUID returns a random (version 4) UUID, the form of Consul's session
// IDs.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go ≥ 1.24)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// checksMissing returns the agent's message for a session that names a
// health check its node does not have, or "": the node has one check,
// serfHealth, and no service is registered, so any service check is
// missing.
func checksMissing(sess *session) string {
	for _, id := range sess.NodeChecks {
		if id != serfHealth {
			return fmt.Sprintf("apply failed: Missing check '%s' registration", id)
		}
	}
	for _, c := range sess.ServiceChecks {
		return fmt.Sprintf("apply failed: Missing check '%s' registration", c.ID)
	}
	return ""
}

// sessionID returns the path after prefix, or answers 400 "Missing
// session" and returns "".
func sessionID(w http.ResponseWriter, r *http.Request, prefix string) string {
	id := strings.TrimPrefix(r.URL.Path, prefix)
	if id == "" {
		fail(w, http.StatusBadRequest, "Missing session")
	}
	return id
}

// handleSessionDestroy invalidates the session (releasing its locks, with
// lock-delay) and answers true, also for an unknown session, as Consul.
func (s *Server) handleSessionDestroy(w http.ResponseWriter, r *http.Request) {
	id := sessionID(w, r, "/v1/session/destroy/")
	if id == "" || s.wrongDC(w, r) {
		return
	}
	s.st.mu.Lock()
	if !s.st.invalidateLocked(id) {
		s.st.appliedLocked() // a destroy of no session is still a raft write
	}
	s.st.mu.Unlock()
	writeJSON(w, true)
}

// handleSessionRenew restarts the session's TTL and answers the session, or
// 404 with Consul's message.
func (s *Server) handleSessionRenew(w http.ResponseWriter, r *http.Request) {
	id := sessionID(w, r, "/v1/session/renew/")
	if id == "" || s.wrongDC(w, r) {
		return
	}
	s.st.mu.Lock()
	sess, ok := s.st.sessions[id]
	if ok {
		s.st.armLocked(sess)
	}
	var out []session
	if ok {
		out = []session{*sess}
	}
	s.st.mu.Unlock()
	if !ok {
		fail(w, http.StatusNotFound, fmt.Sprintf("Session id '%s' not found", id))
		return
	}
	writeJSON(w, out)
}

func (s *Server) handleSessionInfo(w http.ResponseWriter, r *http.Request) {
	id := sessionID(w, r, "/v1/session/info/")
	if id == "" {
		return
	}
	s.sessionQuery(w, r, func(sess *session) bool { return sess.ID == id })
}

func (s *Server) handleSessionList(w http.ResponseWriter, r *http.Request) {
	s.sessionQuery(w, r, func(*session) bool { return true })
}

func (s *Server) handleSessionNode(w http.ResponseWriter, r *http.Request) {
	node := strings.TrimPrefix(r.URL.Path, "/v1/session/node/")
	if node == "" {
		fail(w, http.StatusBadRequest, "Missing node name")
		return
	}
	s.sessionQuery(w, r, func(sess *session) bool { return sess.Node == node })
}

// sessionQuery answers the sessions that match, sorted by ID, as a
// blocking query on the sessions table.
func (s *Server) sessionQuery(w http.ResponseWriter, r *http.Request, match func(*session) bool) {
	q, ok := parseQuery(w, r)
	if !ok || s.wrongDC(w, r) {
		return
	}
	out := []session{}
	var index uint64
	s.block(r.Context(), q, "", func() result {
		out = out[:0]
		for _, id := range s.st.sessionIDsLocked() {
			if sess := s.st.sessions[id]; match(sess) {
				out = append(out, *sess)
			}
		}
		index = s.st.sessIndex
		return result{index: index, watch: s.st.sessWatch}
	})
	setQueryMeta(w, index)
	writeJSON(w, out)
}
