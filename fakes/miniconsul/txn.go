package miniconsul

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

// MaxTxnOps is the most operations one /v1/txn request may carry (the
// agent's maxTxnOps).
const MaxTxnOps = 128

// The KV verbs of a transaction (api.KVOp).
const (
	verbSet            = "set"
	verbDelete         = "delete"
	verbDeleteCAS      = "delete-cas"
	verbDeleteTree     = "delete-tree"
	verbCAS            = "cas"
	verbLock           = "lock"
	verbUnlock         = "unlock"
	verbGet            = "get"
	verbGetOrEmpty     = "get-or-empty"
	verbGetTree        = "get-tree"
	verbCheckSession   = "check-session"
	verbCheckIndex     = "check-index"
	verbCheckNotExists = "check-not-exists"
)

// txnMaxReqLenDoc is the page the agent names when a /v1/txn body is too
// large.
const txnMaxReqLenDoc = "https://developer.hashicorp.com/docs/agent/config/config-files#txn_max_req_len"

// txnOp is one operation of a /v1/txn body, in the JSON shape of
// api.TxnOp: a KV operation, or one on the catalog, which miniconsul does
// not model.
type txnOp struct {
	KV      *kvOp
	Node    json.RawMessage
	Service json.RawMessage
	Check   json.RawMessage
}

// kvOp is a KV operation (api.KVTxnOp); Value is base64 in JSON.
type kvOp struct {
	Verb    string
	Key     string
	Value   []byte
	Flags   uint64
	Index   uint64
	Session string
}

// txnError is one refused operation (structs.TxnError).
type txnError struct {
	OpIndex int
	What    string
}

// txnResult is one result of a transaction (structs.TxnResult).
type txnResult struct{ KV *entry }

// txnResponse is the body /v1/txn answers (structs.TxnResponse).
type txnResponse struct {
	Results []txnResult
	Errors  []txnError
}

// txnReadResponse is the body of a transaction of reads, which the agent
// serves through its read path (structs.TxnReadResponse): the response
// and the query's metadata, left zero when the pre-checks refused it.
type txnReadResponse struct {
	txnResponse
	Index                 uint64
	LastContact           int
	KnownLeader           bool
	ConsistencyLevel      string
	NotModified           bool
	Backend               int
	ResultsFilteredByACLs bool
}

// knownVerb reports whether verb is one of the agent's KV verbs.
func knownVerb(verb string) bool {
	switch verb {
	case verbGet, verbGetOrEmpty, verbGetTree, verbCheckSession, verbCheckIndex, verbCheckNotExists:
		return true
	}
	return isWriteVerb(verb)
}

// isWriteVerb reports whether a KV verb writes (the agent's isWrite): a
// transaction without one is served as a read.
func isWriteVerb(verb string) bool {
	switch verb {
	case verbSet, verbDelete, verbDeleteCAS, verbDeleteTree, verbCAS, verbLock, verbUnlock:
		return true
	}
	return false
}

// handleTxn serves PUT /v1/txn with KV operations, as the agent does: the
// body's limits (413), a transaction of reads served at once, one of
// writes checked (a key given, no lock under lock-delay) and then applied
// at one index, all or nothing. Any refused operation makes the answer 409
// with every error and no result; success is 200 with the results.
func (s *Server) handleTxn(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength > MaxValueSize {
		// Read what is sent, up to a bound, so that the server keeps the
		// connection rather than lingering on a close.
		_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 4*MaxValueSize))
		fail(w, http.StatusRequestEntityTooLarge, fmt.Sprintf(
			"Request body(%d bytes) too large, max size: %d bytes. See %s.", r.ContentLength, MaxValueSize,
			txnMaxReqLenDoc))
		return
	}
	ops, ok := decodeTxn(w, r)
	if !ok {
		return
	}
	writes := 0
	for _, op := range ops {
		if isWriteVerb(op.Verb) {
			writes++
		}
	}
	if writes == 0 {
		if _, ok := parseQuery(w, r); !ok || s.wrongDC(w, r) {
			return
		}
	} else if s.wrongDC(w, r) {
		return
	}
	st := s.st
	st.mu.Lock()
	defer st.mu.Unlock()
	var resp txnResponse
	refused := st.txnPreCheckLocked(ops)
	if refused == nil && writes > 0 {
		var locked []string
		for _, op := range ops {
			if op.Verb == verbLock {
				locked = append(locked, op.Key)
			}
		}
		s.lockChecked(locked...)
	}
	if refused != nil {
		resp.Errors = refused
	} else if writes == 0 {
		resp.Results, resp.Errors = st.txnRunLocked(ops)
	} else {
		resp.Results, resp.Errors = st.txnApplyLocked(ops)
	}
	if writes == 0 {
		w.Header().Set("X-Consul-KnownLeader", "true")
		w.Header().Set("X-Consul-LastContact", "0")
	}
	if resp.Errors != nil {
		resp.Results = nil
	}
	var body any = resp
	if writes == 0 {
		read := txnReadResponse{txnResponse: resp}
		if refused == nil { // the agent sets the metadata after its pre-checks
			read.Index, read.KnownLeader = 1, true
		}
		body = read
	}
	if resp.Errors != nil {
		b, err := json.Marshal(body)
		if err != nil {
			fail(w, http.StatusInternalServerError, err.Error())
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusConflict)
		_, _ = w.Write(b)
		return
	}
	writeJSON(w, body)
}

// decodeTxn decodes and checks a /v1/txn body, answering the agent's
// errors (400 for a body that does not decode, 413 for too many
// operations or too large a value) and 501 for a catalog operation; ok is
// false when it has answered. An operation of no kind is dropped, as the
// agent drops it.
func decodeTxn(w http.ResponseWriter, r *http.Request) (ops []kvOp, ok bool) {
	var in []txnOp
	// A body without a length is cut after MaxValueSize bytes (as the
	// agent's MaxBytesReader does, but leaving the connection open).
	body := &io.LimitedReader{R: r.Body, N: MaxValueSize + 1}
	err := json.NewDecoder(body).Decode(&in)
	switch {
	case body.N <= 0:
		fail(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("Request body too large, max size: %d bytes. See %s.",
			MaxValueSize, txnMaxReqLenDoc))
		return nil, false
	case err != nil:
		fail(w, http.StatusBadRequest, fmt.Sprintf("Failed to parse body: %v", err))
		return nil, false
	}
	if len(in) > MaxTxnOps {
		fail(w, http.StatusRequestEntityTooLarge,
			fmt.Sprintf("Transaction contains too many operations (%d > %d)", len(in), MaxTxnOps))
		return nil, false
	}
	for _, op := range in {
		switch {
		case op.KV != nil:
			if len(op.KV.Value) > MaxValueSize {
				fail(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("Value for key %q is too large (%d > %d bytes)",
					op.KV.Key, len(op.KV.Value), MaxValueSize))
				return nil, false
			}
			ops = append(ops, *op.KV)
		case op.Node != nil || op.Service != nil || op.Check != nil:
			fail(w, http.StatusNotImplemented, "miniconsul: /v1/txn serves KV operations only (no catalog)")
			return nil, false
		}
	}
	return ops, true
}

// txnPreCheckLocked is the checks the agent's leader makes before a
// transaction reaches raft: every operation but delete-tree names a key,
// and no lock is on a key under lock-delay. It returns the errors, or nil.
func (st *store) txnPreCheckLocked(ops []kvOp) []txnError {
	var errs []txnError
	for i, op := range ops {
		switch {
		case !knownVerb(op.Verb):
			errs = append(errs, txnError{i, "unknown KV operation: " + op.Verb})
		case op.Key == "" && op.Verb != verbDeleteTree:
			errs = append(errs, txnError{i, "Must provide key"})
		case op.Verb == verbLock && st.lockDelayedLocked(op.Key):
			errs = append(errs, txnError{i, fmt.Sprintf("failed to lock key %q due to lock delay", op.Key)})
		}
	}
	return errs
}

// txnApplyLocked applies a transaction with writes as one raft entry: it
// takes one index, whatever the outcome, and every write in it is at that
// index; if any operation fails, the KV table is as it was before.
func (st *store) txnApplyLocked(ops []kvOp) ([]txnResult, []txnError) {
	kv := make(map[string]*entry, len(st.kv))
	for k, e := range st.kv {
		kv[k] = e
	}
	tombs := make(map[string]uint64, len(st.tombs))
	for k, i := range st.tombs {
		tombs[k] = i
	}
	kvIndex := st.kvIndex
	st.index++
	st.txnIndex = st.index
	defer func() { st.txnIndex = 0 }()
	results, errs := st.txnRunLocked(ops)
	if errs != nil {
		// Blocking queries the failed writes woke find nothing new and
		// wait on.
		st.kv, st.tombs, st.kvIndex = kv, tombs, kvIndex
		return nil, errs
	}
	return results, nil
}

// txnRunLocked runs the operations in order, each seeing the ones before
// it, and returns their results, or every error.
func (st *store) txnRunLocked(ops []kvOp) ([]txnResult, []txnError) {
	results := []txnResult{}
	var errs []txnError
	for i, op := range ops {
		res, err := st.txnKVLocked(op)
		if err != nil {
			errs = append(errs, txnError{i, err.Error()})
			continue
		}
		results = append(results, res...)
	}
	return results, errs
}

// txnKVLocked runs one KV operation as the agent's state store does, with
// its messages. A write's result is the entry without its value; a read's
// carries the value.
func (st *store) txnKVLocked(op kvOp) ([]txnResult, error) {
	e := &entry{Key: op.Key, Value: op.Value, Flags: op.Flags, Session: op.Session}
	var err error
	var found *entry
	switch op.Verb {
	case verbSet:
		st.setLocked(e, false)
		found = st.kv[op.Key]
	case verbCAS:
		if !st.casLocked(e, op.Index) {
			return nil, fmt.Errorf("failed to set key %q, index is stale", op.Key)
		}
		found = st.kv[op.Key]
	case verbLock:
		var ok bool
		if e.Session == "" {
			return nil, errMissingSession
		}
		if ok, err = st.acquireLocked(e); err == nil && !ok {
			err = fmt.Errorf("failed to lock key %q, lock is already held", op.Key)
		}
		found = st.kv[op.Key]
	case verbUnlock:
		if e.Session == "" {
			return nil, errMissingSession
		}
		if !st.releaseLocked(e) {
			err = fmt.Errorf("failed to unlock key %q, lock isn't held, or is held by another session", op.Key)
		}
		found = st.kv[op.Key]
	case verbDelete:
		if _, ok := st.kv[op.Key]; ok {
			st.deleteLocked(op.Key, st.nextIndexLocked())
		}
		return nil, nil
	case verbDeleteCAS:
		if !st.deleteCASLocked(op.Key, op.Index) {
			err = fmt.Errorf("failed to delete key %q, index is stale", op.Key)
		}
		return nil, err
	case verbDeleteTree:
		st.deleteTreeLocked(op.Key)
		return nil, nil
	case verbGet, verbGetOrEmpty:
		found = st.kv[op.Key]
		switch {
		case found != nil:
			return []txnResult{{found}}, nil
		case op.Verb == verbGet:
			return nil, fmt.Errorf("key %q doesn't exist", op.Key)
		}
		return []txnResult{{&entry{Key: op.Key, Flags: op.Flags, Session: op.Session, ModifyIndex: op.Index}}}, nil
	case verbGetTree:
		list, _ := st.listLocked(op.Key)
		out := make([]txnResult, len(list))
		for i, f := range list {
			out[i] = txnResult{f}
		}
		return out, nil
	case verbCheckSession, verbCheckIndex:
		found = st.kv[op.Key]
		what := map[string]string{verbCheckSession: "session", verbCheckIndex: "index"}[op.Verb]
		switch {
		case found == nil:
			err = fmt.Errorf("failed to check %s, key %q doesn't exist", what, op.Key)
		case op.Verb == verbCheckSession && found.Session != op.Session:
			err = fmt.Errorf("failed session check for key %q, current session %q != %q", op.Key, found.Session, op.Session)
		case op.Verb == verbCheckIndex && found.ModifyIndex != op.Index:
			err = fmt.Errorf("failed index check for key %q, current modify index %d != %d", op.Key, found.ModifyIndex, op.Index)
		}
	case verbCheckNotExists:
		if st.kv[op.Key] != nil {
			err = fmt.Errorf("key %q exists", op.Key)
		}
		return nil, err
	default:
		err = fmt.Errorf("unknown KV operation: %s", op.Verb)
	}
	if err != nil || found == nil {
		return nil, err
	}
	blank := *found
	blank.Value = nil
	return []txnResult{{&blank}}, nil
}
