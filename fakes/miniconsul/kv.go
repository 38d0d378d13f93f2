package miniconsul

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
)

// handleKV serves /v1/kv/<key>: GET (single key, ?recurse, ?keys with
// ?separator, ?raw, blocking with ?index and ?wait), PUT (?flags, ?cas,
// ?acquire, ?release) and DELETE (?recurse, ?cas).
func (s *Server) handleKV(w http.ResponseWriter, r *http.Request) {
	key := strings.TrimPrefix(r.URL.Path, "/v1/kv/")
	switch r.Method {
	case "GET":
		s.kvGet(w, r, key)
	case "PUT":
		s.kvPut(w, r, key)
	case "DELETE":
		s.kvDelete(w, r, key)
	default:
		methodNotAllowed(w, r, "GET", "PUT", "DELETE")
	}
}

func has(r *http.Request, param string) bool {
	_, ok := r.URL.Query()[param]
	return ok
}

// conflicting answers 400 as Consul's conflictingFlags when more than one of
// flags is given.
func conflicting(w http.ResponseWriter, r *http.Request, flags ...string) bool {
	n := 0
	for _, f := range flags {
		if has(r, f) {
			n++
		}
	}
	if n > 1 {
		fail(w, http.StatusBadRequest, "Conflicting flags: "+r.URL.Query().Encode())
		return true
	}
	return false
}

func (s *Server) kvGet(w http.ResponseWriter, r *http.Request, key string) {
	q, ok := parseQuery(w, r)
	if !ok {
		return
	}
	if !has(r, "keys") && !has(r, "recurse") && key == "" {
		fail(w, http.StatusBadRequest, "Missing key name")
		return
	}
	if s.wrongDC(w, r) {
		return
	}
	switch {
	case has(r, "keys"):
		s.kvKeys(w, r, key, q)
	case has(r, "recurse"):
		s.kvList(w, r, key, q)
	default:
		s.kvGetOne(w, r, key, q)
	}
}

func (s *Server) kvGetOne(w http.ResponseWriter, r *http.Request, key string, q query) {
	var found *entry
	var index uint64
	s.block(r.Context(), q, key, func() result {
		found = s.st.kv[key]
		if found == nil {
			index = s.st.kvTableIndexLocked()
		} else {
			index = found.ModifyIndex
		}
		return result{index: index, notFound: found == nil, watch: s.st.watchKeyLocked(key)}
	})
	setQueryMeta(w, index)
	if found == nil {
		w.WriteHeader(http.StatusNotFound)
		return
	}
	if has(r, "raw") {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write(found.Value)
		return
	}
	writeJSON(w, []*entry{found})
}

func (s *Server) kvList(w http.ResponseWriter, r *http.Request, prefix string, q query) {
	var found []*entry
	var index uint64
	s.block(r.Context(), q, "", func() result {
		found, index = s.st.listLocked(prefix)
		return result{index: index, notFound: len(found) == 0, watch: s.st.kvWatch}
	})
	setQueryMeta(w, index)
	if len(found) == 0 {
		w.WriteHeader(http.StatusNotFound)
		return
	}
	writeJSON(w, found)
}

func (s *Server) kvKeys(w http.ResponseWriter, r *http.Request, prefix string, q query) {
	sep := r.URL.Query().Get("separator")
	var keys []string
	var index uint64
	s.block(r.Context(), q, "", func() result {
		var found []*entry
		found, index = s.st.listLocked(prefix)
		keys = listKeys(found, prefix, sep)
		return result{index: index, watch: s.st.kvWatch}
	})
	setQueryMeta(w, index)
	if len(keys) == 0 && prefix != "" {
		w.WriteHeader(http.StatusNotFound)
		return
	}
	if keys == nil {
		keys = []string{}
	}
	writeJSON(w, keys)
}

// listKeys returns the keys of found, each cut after the first separator
// that follows prefix (when sep is not empty), without repeats.
func listKeys(found []*entry, prefix, sep string) []string {
	var keys []string
	seen := map[string]bool{}
	for _, e := range found {
		k := e.Key
		if sep != "" {
			if i := strings.Index(k[len(prefix):], sep); i >= 0 {
				k = k[:len(prefix)+i+len(sep)]
			}
		}
		if !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}

// kvPut follows Consul's KVSPut: argument checks, then one of set, cas,
// acquire or release; set always answers true.
func (s *Server) kvPut(w http.ResponseWriter, r *http.Request, key string) {
	if key == "" {
		fail(w, http.StatusBadRequest, "Missing key name")
		return
	}
	if conflicting(w, r, "cas", "acquire", "release") {
		return
	}
	v := r.URL.Query()
	e := &entry{Key: key}
	if has(r, "flags") {
		f, err := strconv.ParseUint(v.Get("flags"), 10, 64)
		if err != nil {
			fail(w, http.StatusInternalServerError, err.Error())
			return
		}
		e.Flags = f
	}
	var cas uint64
	if has(r, "cas") {
		c, err := strconv.ParseUint(v.Get("cas"), 10, 64)
		if err != nil {
			fail(w, http.StatusInternalServerError, err.Error())
			return
		}
		cas = c
	}
	if r.ContentLength > MaxValueSize {
		fail(w, http.StatusRequestEntityTooLarge, fmt.Sprintf(
			"Request body(%d bytes) too large, max size: %d bytes. See %s.", r.ContentLength, MaxValueSize,
			"https://developer.hashicorp.com/docs/agent/config/config-files#kv_max_value_size"))
		return
	}
	var body bytes.Buffer
	if _, err := io.Copy(&body, r.Body); err != nil {
		fail(w, http.StatusInternalServerError, err.Error())
		return
	}
	e.Value = body.Bytes()

	if s.wrongDC(w, r) {
		return
	}
	st := s.st
	st.mu.Lock()
	defer st.mu.Unlock()
	var ok bool
	var err error
	before := st.index
	switch {
	case has(r, "acquire"):
		e.Session = v.Get("acquire")
		if e.Session != "" && st.lockDelayedLocked(key) {
			// Refused by the leader before the write reaches raft: a
			// key under lock-delay refuses any acquire, even with an
			// unknown session.
			writeJSON(w, false)
			return
		}
		if e.Session != "" {
			s.lockChecked(key)
			before = st.index
		}
		ok, err = st.putAcquireLocked(e)
	case has(r, "release"):
		e.Session = v.Get("release")
		ok, err = st.putReleaseLocked(e)
	case has(r, "cas"):
		ok = st.casLocked(e, cas)
	default:
		st.setLocked(e, false)
		ok = true
	}
	if st.index == before {
		st.appliedLocked()
	}
	if err != nil {
		fail(w, http.StatusInternalServerError, raftPrefix+err.Error())
		return
	}
	writeJSON(w, ok)
}

// putAcquireLocked is an acquire past the lock-delay check.
func (st *store) putAcquireLocked(e *entry) (bool, error) {
	if e.Session == "" {
		return false, errMissingSession
	}
	return st.acquireLocked(e)
}

func (st *store) putReleaseLocked(e *entry) (bool, error) {
	if e.Session == "" {
		return false, errMissingSession
	}
	return st.releaseLocked(e), nil
}

// casLocked is Consul's kvsSetCASTxn: index 0 writes only a new key, any
// other index only over an entry with that ModifyIndex.
func (st *store) casLocked(e *entry, cas uint64) bool {
	old := st.kv[e.Key]
	switch {
	case cas == 0 && old != nil, cas != 0 && old == nil, old != nil && old.ModifyIndex != cas:
		return false
	}
	st.setLocked(e, false)
	return true
}

// kvDelete follows Consul's KVSDelete: ?recurse deletes a prefix, ?cas only
// the entry with that ModifyIndex; only a cas delete can answer false.
func (s *Server) kvDelete(w http.ResponseWriter, r *http.Request, key string) {
	if conflicting(w, r, "recurse", "cas") {
		return
	}
	recurse := has(r, "recurse")
	if !recurse && key == "" {
		fail(w, http.StatusBadRequest, "Missing key name")
		return
	}
	var cas uint64
	if has(r, "cas") {
		c, err := strconv.ParseUint(r.URL.Query().Get("cas"), 10, 64)
		if err != nil {
			fail(w, http.StatusInternalServerError, err.Error())
			return
		}
		cas = c
	}
	if s.wrongDC(w, r) {
		return
	}
	st := s.st
	st.mu.Lock()
	defer st.mu.Unlock()
	before, ok := st.index, true
	switch {
	case has(r, "cas"):
		ok = st.deleteCASLocked(key, cas)
	case recurse:
		st.deleteTreeLocked(key)
	default:
		if _, found := st.kv[key]; found {
			st.deleteLocked(key, st.nextIndexLocked())
		}
	}
	if st.index == before {
		st.appliedLocked()
	}
	writeJSON(w, ok)
}

// deleteCASLocked is Consul's kvsDeleteCASTxn: a missing key counts as
// deleted.
func (st *store) deleteCASLocked(key string, cas uint64) bool {
	old := st.kv[key]
	if old == nil {
		return true
	}
	if old.ModifyIndex != cas {
		return false
	}
	st.deleteLocked(key, st.nextIndexLocked())
	return true
}

// deleteTreeLocked deletes every key under prefix in one write.
func (st *store) deleteTreeLocked(prefix string) {
	var idx uint64
	for _, k := range st.sortedKeysLocked() {
		if !strings.HasPrefix(k, prefix) {
			continue
		}
		if idx == 0 {
			idx = st.nextIndexLocked()
		}
		st.deleteLocked(k, idx)
	}
}
