package miniconsul_test

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/lockproof/lockproof/fakes/miniconsul"
)

// TestStartupTime: a server starts (listening, serving) in well under 10 ms.
func TestStartupTime(t *testing.T) {
	const n = 21
	var took []time.Duration
	for i := 0; i < n; i++ {
		began := time.Now()
		s, err := miniconsul.Start()
		d := time.Since(began)
		if err != nil {
			t.Fatal(err)
		}
		took = append(took, d)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(took)
	t.Logf("miniconsul start-up over %d runs: median %v, max %v", n, took[n/2], took[n-1])
	if took[n/2] >= 10*time.Millisecond {
		t.Fatalf("median start-up %v, want < 10ms", took[n/2])
	}
}

func TestStartRejectsBadOptions(t *testing.T) {
	for name, opt := range map[string]miniconsul.Option{
		"nil clock":       miniconsul.WithClock[miniconsul.Timer](nil),
		"zero TTL min":    miniconsul.WithSessionTTLMin(0),
		"multiplier 0":    miniconsul.WithSessionTTLMultiplier(0),
		"empty node":      miniconsul.WithNodeName(""),
		"TTL min too big": miniconsul.WithSessionTTLMin(25 * time.Hour),
	} {
		if s, err := miniconsul.Start(opt); err == nil {
			_ = s.Close()
			t.Errorf("%s: Start succeeded", name)
		}
	}
}

func TestKVPutGetListKeysDelete(t *testing.T) {
	_, c, _ := start(t)
	kv := c.KV()
	for _, k := range []string{"a/1", "a/2", "a/b/3", "z"} {
		if _, err := kv.Put(&api.KVPair{Key: k, Value: []byte("v-" + k), Flags: 7}, nil); err != nil {
			t.Fatal(err)
		}
	}
	p, meta := mustGet(t, c, "a/1")
	if p == nil || string(p.Value) != "v-a/1" || p.Flags != 7 || p.CreateIndex != p.ModifyIndex || p.LockIndex != 0 {
		t.Fatalf("get a/1 = %+v", p)
	}
	if meta.LastIndex != p.ModifyIndex || !meta.KnownLeader {
		t.Fatalf("meta %+v, want index %d and a known leader", meta, p.ModifyIndex)
	}
	if p, _ := mustGet(t, c, "nope"); p != nil {
		t.Fatalf("missing key returned %+v", p)
	}
	list, _, err := kv.List("a/", nil)
	if err != nil || len(list) != 3 || list[0].Key != "a/1" || list[2].Key != "a/b/3" {
		t.Fatalf("list a/ = %v, %v", list, err)
	}
	keys, _, err := kv.Keys("a/", "/", nil)
	if want := []string{"a/1", "a/2", "a/b/"}; err != nil || !slices.Equal(keys, want) {
		t.Fatalf("keys a/ sep / = %v, %v; want %v", keys, err, want)
	}
	// An identical write changes nothing, not even the index.
	if _, err := kv.Put(&api.KVPair{Key: "a/1", Value: []byte("v-a/1"), Flags: 7}, nil); err != nil {
		t.Fatal(err)
	}
	if q, _ := mustGet(t, c, "a/1"); q.ModifyIndex != p.ModifyIndex {
		t.Fatalf("identical write moved ModifyIndex %d -> %d", p.ModifyIndex, q.ModifyIndex)
	}
	if _, err := kv.DeleteTree("a/", nil); err != nil {
		t.Fatal(err)
	}
	if list, _, _ := kv.List("a/", nil); len(list) != 0 {
		t.Fatalf("after delete tree: %v", list)
	}
	if _, err := kv.Delete("z", nil); err != nil {
		t.Fatal(err)
	}
	if keys, _, _ := kv.Keys("", "", nil); len(keys) != 0 {
		t.Fatalf("keys left: %v", keys)
	}
}

func TestKVCAS(t *testing.T) {
	_, c, _ := start(t)
	kv := c.KV()
	ok, _, err := kv.CAS(&api.KVPair{Key: "k", Value: []byte("1")}, nil) // index 0: create only
	if err != nil || !ok {
		t.Fatalf("cas create: %v %v", ok, err)
	}
	if ok, _, _ := kv.CAS(&api.KVPair{Key: "k", Value: []byte("x")}, nil); ok {
		t.Fatal("cas 0 over an existing key succeeded")
	}
	p, _ := mustGet(t, c, "k")
	if ok, _, _ := kv.CAS(&api.KVPair{Key: "k", Value: []byte("x"), ModifyIndex: p.ModifyIndex + 1}, nil); ok {
		t.Fatal("cas with a wrong index succeeded")
	}
	if ok, _, _ := kv.CAS(&api.KVPair{Key: "k", Value: []byte("2"), ModifyIndex: p.ModifyIndex}, nil); !ok {
		t.Fatal("cas with the right index failed")
	}
	q, _ := mustGet(t, c, "k")
	if string(q.Value) != "2" || q.CreateIndex != p.CreateIndex || q.ModifyIndex <= p.ModifyIndex {
		t.Fatalf("after cas: %+v (before %+v)", q, p)
	}
	if ok, _, _ := kv.DeleteCAS(&api.KVPair{Key: "k", ModifyIndex: p.ModifyIndex}, nil); ok {
		t.Fatal("delete cas with a stale index succeeded")
	}
	if ok, _, _ := kv.DeleteCAS(&api.KVPair{Key: "k", ModifyIndex: q.ModifyIndex}, nil); !ok {
		t.Fatal("delete cas with the right index failed")
	}
	if ok, _, _ := kv.DeleteCAS(&api.KVPair{Key: "k", ModifyIndex: 12345}, nil); !ok {
		t.Fatal("delete cas of a missing key must answer true, as Consul")
	}
}

// TestAcquireRelease: LockIndex counts acquisitions, a second session is
// refused, release keeps LockIndex, a plain PUT keeps the session.
func TestAcquireRelease(t *testing.T) {
	_, c, _ := start(t)
	s1 := mustSession(t, c, &api.SessionEntry{TTL: "10s", LockDelay: time.Millisecond})
	s2 := mustSession(t, c, nil)
	if !mustAcquire(t, c, "lock", s1) {
		t.Fatal("first acquire failed")
	}
	p, _ := mustGet(t, c, "lock")
	if p.Session != s1 || p.LockIndex != 1 {
		t.Fatalf("after acquire: %+v", p)
	}
	if mustAcquire(t, c, "lock", s2) {
		t.Fatal("second session acquired a held lock")
	}
	if !mustAcquire(t, c, "lock", s1) {
		t.Fatal("re-acquire by the holder failed")
	}
	if q, _ := mustGet(t, c, "lock"); q.LockIndex != 1 {
		t.Fatalf("re-acquire by the holder moved LockIndex to %d", q.LockIndex)
	}
	if ok, _, _ := c.KV().Release(&api.KVPair{Key: "lock", Session: s2}, nil); ok {
		t.Fatal("a foreign session released the lock")
	}
	if _, err := c.KV().Put(&api.KVPair{Key: "lock", Value: []byte("v")}, nil); err != nil {
		t.Fatal(err)
	}
	if q, _ := mustGet(t, c, "lock"); q.Session != s1 {
		t.Fatalf("a plain put dropped the session: %+v", q)
	}
	if ok, _, _ := c.KV().Release(&api.KVPair{Key: "lock", Session: s1}, nil); !ok {
		t.Fatal("release by the holder failed")
	}
	q, _ := mustGet(t, c, "lock")
	if q.Session != "" || q.LockIndex != 0 {
		// A plain PUT sets LockIndex to 0, as on Consul (its DirEntry carries none).
		t.Fatalf("after release: %+v", q)
	}
	if !mustAcquire(t, c, "lock", s2) {
		t.Fatal("acquire after release failed (no lock-delay applies to a release)")
	}
	if q, _ := mustGet(t, c, "lock"); q.LockIndex != 1 || q.Session != s2 {
		t.Fatalf("after second acquisition: %+v", q)
	}
}

// TestSessionTTLExpiry: a session is invalidated TTL × 2 after its last
// renewal (Consul's multiplier); its lock is released, with lock-delay.
func TestSessionTTLExpiry(t *testing.T) {
	s, c, clock := start(t)
	id := mustSession(t, c, &api.SessionEntry{TTL: "10s", LockDelay: 3 * time.Second})
	other := mustSession(t, c, nil)
	if !mustAcquire(t, c, "job", id) {
		t.Fatal("acquire failed")
	}
	clock.Advance(15 * time.Second)
	if e, _, err := c.Session().Renew(id, nil); err != nil || e == nil || e.TTL != "10s" {
		t.Fatalf("renew: %+v %v", e, err)
	}
	clock.Advance(20*time.Second - time.Millisecond)
	if e, _, _ := c.Session().Info(id, nil); e == nil {
		t.Fatal("session invalidated before TTL × 2 from its renewal")
	}
	clock.Advance(time.Millisecond)
	if e, _, _ := c.Session().Info(id, nil); e != nil {
		t.Fatal("session alive TTL × 2 after its renewal")
	}
	p, _ := mustGet(t, c, "job")
	if p.Session != "" || p.LockIndex != 1 {
		t.Fatalf("after expiry: %+v", p)
	}
	if until := s.LockDelay("job"); !until.Equal(clock.Now().Add(3 * time.Second)) {
		t.Fatalf("lock-delay until %v, want now+3s", until)
	}
	if mustAcquire(t, c, "job", other) {
		t.Fatal("acquired during lock-delay")
	}
	clock.Advance(3*time.Second - time.Millisecond)
	if mustAcquire(t, c, "job", other) {
		t.Fatal("acquired before the lock-delay ended")
	}
	clock.Advance(time.Millisecond)
	if !mustAcquire(t, c, "job", other) {
		t.Fatal("acquire after the lock-delay failed")
	}
	if e, _, _ := c.Session().Renew(id, nil); e != nil {
		t.Fatal("renew of an expired session succeeded")
	}
}

func TestSessionTTLMultiplierOne(t *testing.T) {
	_, c, clock := start(t, miniconsul.WithSessionTTLMultiplier(1), miniconsul.WithSessionTTLMin(time.Second))
	id := mustSession(t, c, &api.SessionEntry{TTL: "1s"})
	clock.Advance(time.Second - time.Millisecond)
	if e, _, _ := c.Session().Info(id, nil); e == nil {
		t.Fatal("invalidated before its TTL")
	}
	clock.Advance(time.Millisecond)
	if e, _, _ := c.Session().Info(id, nil); e != nil {
		t.Fatal("alive after its TTL with multiplier 1")
	}
}

// TestSessionDestroyBehaviors: destroy releases (release) or deletes
// (delete) the session's keys, and starts lock-delay either way.
func TestSessionDestroyBehaviors(t *testing.T) {
	s, c, clock := start(t)
	rel := mustSession(t, c, &api.SessionEntry{Behavior: api.SessionBehaviorRelease})
	del := mustSession(t, c, &api.SessionEntry{Behavior: api.SessionBehaviorDelete, LockDelay: time.Second})
	mustAcquire(t, c, "r", rel)
	mustAcquire(t, c, "d", del)
	if _, err := c.Session().Destroy(rel, nil); err != nil {
		t.Fatal(err)
	}
	if !s.InvalidateSession(del) || s.InvalidateSession(del) {
		t.Fatal("InvalidateSession must report true once, then false")
	}
	if p, _ := mustGet(t, c, "r"); p == nil || p.Session != "" {
		t.Fatalf("release behaviour: %+v", p)
	}
	if p, _ := mustGet(t, c, "d"); p != nil {
		t.Fatalf("delete behaviour left %+v", p)
	}
	if got := s.LockDelay("r"); !got.Equal(clock.Now().Add(miniconsul.DefaultLockDelay)) {
		t.Fatalf("default lock-delay until %v", got)
	}
	if _, err := c.Session().Destroy(rel, nil); err != nil {
		t.Fatalf("destroying an unknown session must succeed: %v", err)
	}
	list, _, err := c.Session().List(nil)
	if err != nil || len(list) != 0 {
		t.Fatalf("sessions left: %v %v", list, err)
	}
}

func TestSessionInfoListNode(t *testing.T) {
	s, c, _ := start(t)
	a := mustSession(t, c, &api.SessionEntry{Name: "a", TTL: "30s", LockDelay: 2 * time.Second})
	b := mustSession(t, c, &api.SessionEntry{Name: "b"})
	e, _, err := c.Session().Info(a, nil)
	if err != nil || e == nil {
		t.Fatalf("info: %v %v", e, err)
	}
	if e.Name != "a" || e.TTL != "30s" || e.LockDelay != 2*time.Second || e.Behavior != "release" ||
		e.Node != s.NodeName() || !slices.Equal(e.NodeChecks, []string{"serfHealth"}) {
		t.Fatalf("info = %+v", e)
	}
	list, _, err := c.Session().List(nil)
	want := []string{a, b}
	sort.Strings(want)
	if err != nil || len(list) != 2 || list[0].ID != want[0] || list[1].ID != want[1] {
		t.Fatalf("list = %v %v", list, err)
	}
	node, _, err := c.Session().Node(s.NodeName(), nil)
	if err != nil || len(node) != 2 {
		t.Fatalf("node sessions = %v %v", node, err)
	}
	if ids := s.Sessions(); !slices.Equal(ids, want) {
		t.Fatalf("Sessions() = %v, want %v", ids, want)
	}
}

// TestBadRequests: Consul's status codes and messages, through the api
// client (which reports "Unexpected response code: <code> (<body>)") and raw.
func TestBadRequests(t *testing.T) {
	s, c, _ := start(t)
	_, _, err := c.Session().Create(&api.SessionEntry{TTL: "5s"}, nil)
	wantStatus(t, "TTL below the minimum", err, 500, "Invalid Session TTL '5000000000', must be between [10s=24h0m0s]")
	_, _, err = c.Session().Create(&api.SessionEntry{TTL: "25h"}, nil)
	wantStatus(t, "TTL above the maximum", err, 500, "Invalid Session TTL '90000000000000', must be between [10s=24h0m0s]")
	_, _, err = c.Session().Create(&api.SessionEntry{TTL: "soon"}, nil)
	wantStatus(t, "unparsable TTL", err, 500, `Session TTL 'soon' invalid: time: invalid duration "soon"`)
	_, _, err = c.Session().Create(&api.SessionEntry{Behavior: "explode"}, nil)
	wantStatus(t, "bad behavior", err, 500, "Invalid Behavior setting 'explode'")
	_, _, err = c.KV().Acquire(&api.KVPair{Key: "k", Session: "00000000-0000-0000-0000-000000000000"}, nil)
	wantStatus(t, "acquire, unknown session", err, 500, `raft apply failed: invalid session "00000000-0000-0000-0000-000000000000"`)
	_, _, err = c.KV().Acquire(&api.KVPair{Key: "k"}, nil)
	wantStatus(t, "acquire, no session", err, 500, "raft apply failed: missing session")

	for _, tc := range []struct {
		method, path, body string
		code               int
		msg                string
	}{
		{"GET", "/v1/kv/k?index=1&wait=soon", "", 400, "Invalid wait time"},
		{"GET", "/v1/kv/k?index=x", "", 400, "Invalid index"},
		{"GET", "/v1/kv/", "", 400, "Missing key name"},
		{"PUT", "/v1/kv/", "", 400, "Missing key name"},
		{"PUT", "/v1/kv/k?cas=1&acquire=x", "", 400, "Conflicting flags: acquire=x&cas=1"},
		{"PUT", "/v1/kv/k?flags=x", "", 500, `strconv.ParseUint: parsing "x": invalid syntax`},
		{"DELETE", "/v1/kv/k?recurse&cas=1", "", 400, "Conflicting flags: cas=1&recurse="},
		{"POST", "/v1/kv/k", "", 405, "method POST not allowed"},
		{"GET", "/v1/session/create", "", 405, "method GET not allowed"},
		{"PUT", "/v1/session/create", "{", 400, "Request decode failed: unexpected EOF"},
		{"PUT", "/v1/session/renew/6b1e8f5a-0000-4000-8000-000000000000", "", 404,
			"Session id '6b1e8f5a-0000-4000-8000-000000000000' not found"},
		{"PUT", "/v1/session/destroy/", "", 400, "Missing session"},
		{"GET", "/v1/session/info/", "", 400, "Missing session"},
		{"PUT", "/v1/session/create", `{"Node":"elsewhere"}`, 500, "Missing node registration"},
	} {
		code, body := raw(t, s, tc.method, tc.path, tc.body)
		if code != tc.code || body != tc.msg {
			t.Errorf("%s %s: %d %q, want %d %q", tc.method, tc.path, code, body, tc.code, tc.msg)
		}
	}
	if code, body := raw(t, s, "GET", "/v1/status/leader", ""); code != http.StatusOK || body != `"`+s.Addr()+`"` {
		t.Errorf("leader: %d %s", code, body)
	}
}

func wantStatus(t *testing.T, what string, err error, code int, body string) {
	t.Helper()
	var se api.StatusError
	if !errors.As(err, &se) || se.Code != code || se.Body != body {
		t.Errorf("%s: err = %v, want status %d %q", what, err, code, body)
	}
}

// A client whose transport dials in memory sees what a client over TCP
// sees, blocking queries included; a closed server refuses the dial as a
// closed port.
func TestDialInMemory(t *testing.T) {
	s, tcp, _ := start(t)
	tr := &http.Transport{DialContext: s.DialInMemory}
	defer tr.CloseIdleConnections()
	mem, err := api.NewClient(&api.Config{Address: s.Addr(), HttpClient: &http.Client{Transport: tr}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mem.KV().Put(&api.KVPair{Key: "k", Value: []byte("v")}, nil); err != nil {
		t.Fatal(err)
	}
	p, meta := mustGet(t, tcp, "k")
	if p == nil || string(p.Value) != "v" {
		t.Fatalf("the TCP client reads %+v", p)
	}
	woke := make(chan string, 1)
	go func() {
		p, _, err := mem.KV().Get("k", &api.QueryOptions{WaitIndex: meta.LastIndex})
		if err != nil || p == nil {
			woke <- fmt.Sprint(err)
			return
		}
		woke <- string(p.Value)
	}()
	waitBlocked(t, s, 1)
	if _, err := tcp.KV().Put(&api.KVPair{Key: "k", Value: []byte("w")}, nil); err != nil {
		t.Fatal(err)
	}
	if got := <-woke; got != "w" {
		t.Fatalf("the blocking query in memory woke with %q, want w", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DialInMemory(bg(), "tcp", s.Addr()); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("DialInMemory after Close: %v, want ECONNREFUSED", err)
	}
}
