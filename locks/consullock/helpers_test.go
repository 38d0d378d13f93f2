package consullock

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/lockproof/lockproof/fakes/consulfake"
	"github.com/lockproof/lockproof/locks"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// server starts the Consul of a test on manual time: miniconsul, or a real
// agent when a consul binary is found (Advance then sleeps). On real
// agents a top-level test runs in parallel with the others (see
// parallelOnAgents).
func server(t testing.TB, opts ...consulfake.Option) *consulfake.Server {
	t.Helper()
	parallelOnAgents(t)
	return consulfake.New(t, append([]consulfake.Option{consulfake.ManualTime(epoch)}, opts...)...)
}

// parallel records the tests parallelOnAgents made parallel.
var parallel sync.Map

// parallelOnAgents runs t, a top-level test, in parallel with the others
// when the tests run on real agents, each on an agent of its own: their
// time is mostly the agent's start and real-time waits (TTLs,
// lock-delays), 107 s one after the other. On miniconsul the tests run in
// order, on manual time, as before.
func parallelOnAgents(t testing.TB) {
	tt, ok := t.(*testing.T)
	if !ok || consulfake.Binary() == "" || strings.Contains(t.Name(), "/") {
		return
	}
	if _, again := parallel.LoadOrStore(t.Name(), true); !again {
		tt.Parallel()
	}
}

func newLocker(t testing.TB, c *consulfake.Server, client *api.Client, name string, s Session, opts ...locks.Option) *Locker {
	t.Helper()
	if client == nil {
		client = c.Client()
	}
	l, err := NewWithSession(client, name, s, append(c.LockOptions(), opts...)...)
	if err != nil {
		t.Fatalf("NewWithSession: %v", err)
	}
	return l
}

func mustLock(t testing.TB, l *Locker) locks.Lease {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lease, err := l.Lock(ctx)
	if err != nil {
		t.Errorf("Lock: %v", err)
		return nil
	}
	return lease
}

func token(t testing.TB, lease locks.Lease) locks.Token {
	t.Helper()
	tok, ok := lease.Token()
	if !ok {
		t.Fatal("consullock lease has no fencing token")
	}
	return tok
}

// holder returns the session holding l's key and the key's ModifyIndex.
func holder(t testing.TB, c *consulfake.Server, l *Locker) (string, uint64) {
	t.Helper()
	p, _, err := c.Client().KV().Get(l.Key(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if p == nil {
		return "", 0
	}
	return p.Session, p.ModifyIndex
}

// waitDone waits (wall clock, bounded) for a lease's Done.
func waitDone(t testing.TB, lease locks.Lease, what string) {
	t.Helper()
	select {
	case <-lease.Done():
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// waitUntil polls cond on the wall clock; it waits for goroutines, never
// for a TTL.
func waitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// acquiredKey reports the key a request acquires: a KV PUT with ?acquire,
// or the lock of a transaction (the body is read and put back).
func acquiredKey(r *http.Request) (string, bool) {
	if r.Method != http.MethodPut {
		return "", false
	}
	if strings.HasPrefix(r.URL.Path, "/v1/kv/") && r.URL.Query().Has("acquire") {
		return strings.TrimPrefix(r.URL.Path, "/v1/kv/"), true
	}
	if r.URL.Path != "/v1/txn" || r.Body == nil {
		return "", false
	}
	body, err := io.ReadAll(r.Body)
	_ = r.Body.Close()
	r.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return "", false
	}
	var ops api.TxnOps
	if json.Unmarshal(body, &ops) != nil {
		return "", false
	}
	for _, op := range ops {
		if op.KV != nil && op.KV.Verb == api.KVLock {
			return op.KV.Key, true
		}
	}
	return "", false
}
