package consulfake_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/lockproof/lockproof/fakes/consulfake"
)

// TestConsulDifferential runs the same API-level scenarios on miniconsul and
// on a real agent and compares what the client observes, line by line.
// Observations never contain absolute indices or IDs (they differ between
// servers by construction): only values, flags, LockIndex, whether an index
// moved, booleans, and status codes with their bodies.
func TestConsulDifferential(t *testing.T) {
	if consulfake.Binary() == "" {
		t.Skipf("no consul binary to compare miniconsul with: set %s or put consul on PATH (build one with tools/consul)",
			consulfake.EnvBin)
	}
	scenarios := []struct {
		name string
		run  func(e *diffEnv)
	}{
		{"kv", diffKV},
		{"locks", diffLocks},
		{"blocking", diffBlocking},
		{"expiry", diffExpiry},
		{"errors", diffErrors},
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			mini := newDiffEnv(t, consulfake.ForceMiniconsul())
			sc.run(mini)
			agent := newDiffEnv(t, consulfake.ForceAgent())
			sc.run(agent)
			compareObservations(t, mini.obs, agent.obs)
		})
	}
}

func compareObservations(t *testing.T, mini, agent []string) {
	t.Helper()
	n := max(len(mini), len(agent))
	for i := 0; i < n; i++ {
		var m, a string
		if i < len(mini) {
			m = mini[i]
		}
		if i < len(agent) {
			a = agent[i]
		}
		if m != a {
			t.Errorf("observation %d differs:\n  miniconsul: %s\n  real agent: %s", i, m, a)
		}
	}
	if !t.Failed() {
		t.Logf("%d observations agree:\n  %s", n, strings.Join(mini, "\n  "))
	}
}

// diffEnv is one server and what a scenario observed on it.
type diffEnv struct {
	t      *testing.T
	c      *consulfake.Server
	cl     *api.Client
	p      string // key prefix
	obs    []string
	names  map[string]string // session ID -> name used in observations
	client *http.Client
}

func newDiffEnv(t *testing.T, force consulfake.Option) *diffEnv {
	c := consulfake.New(t, force, consulfake.ManualTime(consulEpoch), consulfake.SessionTTLMin(time.Second))
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &diffEnv{t: t, c: c, cl: c.NewClient(), p: c.Prefix(), names: map[string]string{},
		client: &http.Client{Transport: tr}}
}

func (e *diffEnv) see(format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	for id, name := range e.names {
		s = strings.ReplaceAll(s, id, name)
	}
	e.obs = append(e.obs, strings.ReplaceAll(s, e.p, "<p>/"))
}

// err renders an error as the client sees it, status and body.
func (e *diffEnv) err(err error) string {
	var se api.StatusError
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &se):
		return fmt.Sprintf("status %d %q", se.Code, se.Body)
	}
	return "error " + err.Error()
}

func (e *diffEnv) session(name string, se *api.SessionEntry) string {
	e.t.Helper()
	id, _, err := e.cl.Session().Create(se, nil)
	if err != nil {
		e.t.Fatalf("create session %s: %v", name, err)
	}
	e.names[id] = "<" + name + ">"
	return id
}

func (e *diffEnv) get(key string) (*api.KVPair, uint64) {
	e.t.Helper()
	p, meta, err := e.cl.KV().Get(e.p+key, nil)
	if err != nil {
		e.t.Fatalf("get %s: %v", key, err)
	}
	return p, meta.LastIndex
}

func (e *diffEnv) seeKey(what, key string) {
	p, _ := e.get(key)
	if p == nil {
		e.see("%s: %s missing", what, key)
		return
	}
	e.see("%s: %s value=%q flags=%d lockIndex=%d session=%q created=modified:%t",
		what, key, p.Value, p.Flags, p.LockIndex, p.Session, p.CreateIndex == p.ModifyIndex)
}

func (e *diffEnv) put(key, value string) {
	e.t.Helper()
	if _, err := e.cl.KV().Put(&api.KVPair{Key: e.p + key, Value: []byte(value)}, nil); err != nil {
		e.t.Fatal(err)
	}
}

func (e *diffEnv) acquire(what, key, sess string) {
	ok, _, err := e.cl.KV().Acquire(&api.KVPair{Key: e.p + key, Session: sess}, nil)
	e.see("%s: acquire %s by %s = %t (%s)", what, key, sess, ok, e.err(err))
}

func (e *diffEnv) release(what, key, sess string) {
	ok, _, err := e.cl.KV().Release(&api.KVPair{Key: e.p + key, Session: sess}, nil)
	e.see("%s: release %s by %s = %t (%s)", what, key, sess, ok, e.err(err))
}

func (e *diffEnv) raw(method, path, body string) {
	e.t.Helper()
	req, err := http.NewRequest(method, "http://"+e.c.Addr()+strings.ReplaceAll(path, "<p>/", e.p), strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	e.see("%s %s %q: %d %q", method, path, body, resp.StatusCode, strings.TrimSpace(string(b)))
}

func diffKV(e *diffEnv) {
	kv := e.cl.KV()
	if _, err := kv.Put(&api.KVPair{Key: e.p + "a/1", Value: []byte("v1"), Flags: 42}, nil); err != nil {
		e.t.Fatal(err)
	}
	e.seeKey("put", "a/1")
	p1, idx := e.get("a/1")
	e.see("read index is the key's ModifyIndex: %t", idx == p1.ModifyIndex)
	_, _ = kv.Put(&api.KVPair{Key: e.p + "a/1", Value: []byte("v1"), Flags: 42}, nil)
	p2, _ := e.get("a/1")
	e.see("identical put keeps ModifyIndex: %t", p2.ModifyIndex == p1.ModifyIndex)
	_, _ = kv.Put(&api.KVPair{Key: e.p + "a/1", Value: []byte("v2")}, nil)
	p3, _ := e.get("a/1")
	e.see("changed put: ModifyIndex grew %t, CreateIndex kept %t, flags %d", p3.ModifyIndex > p2.ModifyIndex,
		p3.CreateIndex == p1.CreateIndex, p3.Flags)
	for _, c := range []struct {
		what  string
		index uint64
	}{{"cas 0 on existing", 0}, {"cas stale", p1.ModifyIndex}, {"cas current", p3.ModifyIndex}} {
		ok, _, err := kv.CAS(&api.KVPair{Key: e.p + "a/1", Value: []byte("cas"), ModifyIndex: c.index}, nil)
		e.see("%s = %t (%s)", c.what, ok, e.err(err))
	}
	ok, _, err := kv.CAS(&api.KVPair{Key: e.p + "a/2", Value: []byte("new")}, nil)
	e.see("cas 0 on a new key = %t (%s)", ok, e.err(err))
	e.put("a/b/3", "deep")
	keys, _, err := kv.Keys(e.p+"a/", "/", nil)
	e.see("keys a/ sep / = %v (%s)", keys, e.err(err))
	keys, _, err = kv.Keys(e.p+"a/", "", nil)
	e.see("keys a/ = %v (%s)", keys, e.err(err))
	list, _, err := kv.List(e.p+"a/", nil)
	var names []string
	for _, p := range list {
		names = append(names, p.Key+"="+string(p.Value))
	}
	e.see("list a/ = %v (%s)", names, e.err(err))
	e.seeKey("missing", "nope")
	list, _, err = kv.List(e.p+"nope/", nil)
	e.see("list of nothing = %d (%s)", len(list), e.err(err))
	keys, _, err = kv.Keys(e.p+"nope/", "", nil)
	e.see("keys of nothing = %v (%s)", keys, e.err(err))
	p4, _ := e.get("a/2")
	ok, _, err = kv.DeleteCAS(&api.KVPair{Key: e.p + "a/2", ModifyIndex: p4.ModifyIndex + 1000}, nil)
	e.see("delete cas wrong index = %t (%s)", ok, e.err(err))
	ok, _, err = kv.DeleteCAS(&api.KVPair{Key: e.p + "zzz", ModifyIndex: 5}, nil)
	e.see("delete cas missing key = %t (%s)", ok, e.err(err))
	ok, _, err = kv.DeleteCAS(&api.KVPair{Key: e.p + "a/2", ModifyIndex: p4.ModifyIndex}, nil)
	e.see("delete cas right index = %t (%s)", ok, e.err(err))
	_, err = kv.DeleteTree(e.p+"a/", nil)
	list, _, _ = kv.List(e.p+"a/", nil)
	e.see("delete tree (%s): %d left", e.err(err), len(list))
}

func diffLocks(e *diffEnv) {
	s1 := e.session("s1", &api.SessionEntry{Name: "one", TTL: "10s", LockDelay: 500 * time.Millisecond})
	s2 := e.session("s2", &api.SessionEntry{LockDelay: 500 * time.Millisecond})
	info, _, err := e.cl.Session().Info(s1, nil)
	if info != nil {
		e.see("info s1: name=%q ttl=%q behavior=%q lockDelay=%v checks=%v (%s)", info.Name, info.TTL, info.Behavior,
			info.LockDelay, info.NodeChecks, e.err(err))
	}
	info2, _, _ := e.cl.Session().Info(s2, nil)
	e.see("info s2: ttl=%q behavior=%q lockDelay=%v", info2.TTL, info2.Behavior, info2.LockDelay)
	e.acquire("first", "l", s1)
	e.seeKey("held", "l")
	e.acquire("contended", "l", s2)
	e.acquire("again by holder", "l", s1)
	e.seeKey("re-acquired", "l")
	e.release("foreign", "l", s2)
	e.put("l", "plain")
	e.seeKey("plain put on a held key", "l")
	e.release("holder", "l", s1)
	e.seeKey("released", "l")
	e.acquire("after release", "l", s2)
	e.seeKey("second holder", "l")
	_, idx := e.get("l")
	if _, err := e.cl.Session().Destroy(s2, nil); err != nil {
		e.t.Fatal(err)
	}
	p, idx2 := e.get("l")
	e.see("after destroy of the holder: session=%q lockIndex=%d index moved=%t", p.Session, p.LockIndex, idx2 > idx)
	e.acquire("during lock-delay", "l", s1)
	e.c.Advance(700 * time.Millisecond)
	e.acquire("after lock-delay", "l", s1)
	e.seeKey("third holder", "l")
	e.acquire("destroyed session", "l", s2)
	info3, _, err := e.cl.Session().Info(s2, nil)
	e.see("info of a destroyed session: nil=%t (%s)", info3 == nil, e.err(err))
	s3 := e.session("s3", &api.SessionEntry{Behavior: api.SessionBehaviorDelete, LockDelay: time.Millisecond})
	e.acquire("delete behavior", "d", s3)
	_, _ = e.cl.Session().Destroy(s3, nil)
	e.seeKey("after destroy, delete behavior", "d")
	_, err = e.cl.Session().Destroy(s3, nil)
	e.see("destroy again: %s", e.err(err))
	for i := 0; i < 3; i++ { // LockIndex counts acquisitions by turns
		e.release("turn", "l", s1)
		s := e.session(fmt.Sprintf("t%d", i), nil)
		e.acquire("turn", "l", s)
		e.seeKey("turn", "l")
		e.release("turn", "l", s)
		e.acquire("turn back", "l", s1)
	}
}

type blockResult struct {
	p    *api.KVPair
	meta *api.QueryMeta
	err  error
}

func (e *diffEnv) blockingGet(key string, index uint64, wait time.Duration) <-chan blockResult {
	ch := make(chan blockResult, 1)
	go func() {
		p, meta, err := e.cl.KV().Get(e.p+key, &api.QueryOptions{WaitIndex: index, WaitTime: wait})
		ch <- blockResult{p, meta, err}
	}()
	return ch
}

func diffBlocking(e *diffEnv) {
	e.put("k", "1")
	_, idx := e.get("k")
	ch := e.blockingGet("k", idx, 10*time.Second)
	e.c.WaitParked(e.p+"k", idx, 1)
	time.Sleep(50 * time.Millisecond) // the real agent exposes no parked queries: let it park
	e.put("k", "2")
	r := <-ch
	e.see("woken: value=%q index moved=%t index=ModifyIndex:%t (%s)", r.p.Value, r.meta.LastIndex > idx,
		r.meta.LastIndex == r.p.ModifyIndex, e.err(r.err))
	idx = r.meta.LastIndex
	ch = e.blockingGet("k", idx, 300*time.Millisecond)
	e.c.WaitParked(e.p+"k", idx, 1)
	e.c.Advance(300 * time.Millisecond)
	r = <-ch
	e.see("timed out: value=%q same index=%t (%s)", r.p.Value, r.meta.LastIndex == idx, e.err(r.err))
	for _, i := range []uint64{0, idx - 1} {
		r = <-e.blockingGet("k", i, time.Hour)
		e.see("immediate at a lower index: same index=%t (%s)", r.meta.LastIndex == idx, e.err(r.err))
	}
	_, missIdx := e.get("m")
	ch = e.blockingGet("m", missIdx, 10*time.Second)
	e.c.WaitParked(e.p+"m", missIdx, 1)
	time.Sleep(50 * time.Millisecond)
	e.put("other", "x") // moves the KV index, not the missing key
	e.put("m", "here")
	r = <-ch
	e.see("missing key appears: value=%q (%s)", r.p.Value, e.err(r.err))
	ahead := idx + 1_000_000
	ch = e.blockingGet("k", ahead, 300*time.Millisecond)
	e.c.WaitParked(e.p+"k", ahead, 1)
	e.c.Advance(300 * time.Millisecond)
	r = <-ch
	e.see("index ahead of the server: answered lower=%t (%s)", r.meta.LastIndex < ahead, e.err(r.err))
}

func diffExpiry(e *diffEnv) {
	s := e.session("s", &api.SessionEntry{TTL: "1s", LockDelay: time.Second})
	e.acquire("ttl holder", "e", s)
	e.c.Advance(900 * time.Millisecond)
	info, _, _ := e.cl.Session().Info(s, nil)
	e.see("before TTL: alive=%t", info != nil)
	e.c.Advance(1600 * time.Millisecond) // 2.5s: past TTL × 2
	info, _, _ = e.cl.Session().Info(s, nil)
	e.see("after TTL × 2: alive=%t", info != nil)
	e.seeKey("expired holder's key", "e")
	other := e.session("o", nil)
	e.acquire("during the lock-delay that started at expiry", "e", other)
	e.c.Advance(800 * time.Millisecond) // 3.3s: past expiry (2s) + lock-delay (1s)
	e.acquire("after its lock-delay", "e", other)
	r := e.session("r", &api.SessionEntry{TTL: "1s"})
	e.c.Advance(1500 * time.Millisecond)
	entry, _, err := e.cl.Session().Renew(r, nil)
	e.see("renew: ttl=%q (%s)", entry.TTL, e.err(err))
	e.c.Advance(1500 * time.Millisecond) // 3s after create, 1.5s after renew
	info, _, _ = e.cl.Session().Info(r, nil)
	e.see("renewed session alive=%t", info != nil)
	entry, _, err = e.cl.Session().Renew("6b1e8f5a-0000-4000-8000-000000000000", nil)
	e.see("renew unknown: nil=%t (%s)", entry == nil, e.err(err))
}

func diffErrors(e *diffEnv) {
	for _, se := range []*api.SessionEntry{{TTL: "500ms"}, {TTL: "25h"}, {TTL: "soon"}, {Behavior: "explode"}} {
		_, _, err := e.cl.Session().Create(se, nil)
		e.see("create %+v: %s", *se, e.err(err))
	}
	e.acquire("unknown session", "k", "00000000-0000-0000-0000-000000000000")
	e.acquire("empty session", "k", "")
	_, err := e.cl.KV().Put(&api.KVPair{Key: "/abs"}, nil)
	e.see("put with a leading slash: %s", e.err(err))
	for _, r := range []struct{ method, path, body string }{
		{"GET", "/v1/kv/<p>/k?index=1&wait=soon", ""},
		{"GET", "/v1/kv/<p>/k?index=x", ""},
		{"GET", "/v1/kv/", ""},
		{"PUT", "/v1/kv/", ""},
		{"PUT", "/v1/kv/<p>/k?cas=1&acquire=x", ""},
		{"PUT", "/v1/kv/<p>/k?flags=x", ""},
		{"PUT", "/v1/kv/<p>/k?cas=x", ""},
		{"DELETE", "/v1/kv/<p>/k?recurse&cas=1", ""},
		{"DELETE", "/v1/kv/", ""},
		{"POST", "/v1/kv/<p>/k", ""},
		{"GET", "/v1/session/create", ""},
		{"PUT", "/v1/session/create", "{"},
		{"PUT", "/v1/session/create", `{"LockDelay":"soon"}`},
		{"PUT", "/v1/session/renew/6b1e8f5a-0000-4000-8000-000000000000", ""},
		{"PUT", "/v1/session/destroy/", ""},
		{"GET", "/v1/session/info/", ""},
		{"GET", "/v1/kv/<p>/k?stale&consistent", ""},
	} {
		e.raw(r.method, r.path, r.body)
	}
}
