package miniconsul_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
)

// txn runs ops and fails the test on a transport error.
func txn(t *testing.T, c *api.Client, ops api.KVTxnOps) (bool, *api.KVTxnResponse) {
	t.Helper()
	ok, resp, _, err := c.KV().Txn(ops, nil)
	if err != nil {
		t.Fatalf("txn: %v", err)
	}
	return ok, resp
}

// whats returns the errors of a transaction as "index: what" lines.
func whats(resp *api.KVTxnResponse) string {
	var b strings.Builder
	for _, e := range resp.Errors {
		fmt.Fprintf(&b, "%d: %s\n", e.OpIndex, e.What)
	}
	return b.String()
}

// TestTxnLockAndGet: a lock without a session and a get of a missing key
// both fail, with the agent's messages and no result; with a session the
// same transaction locks and reads, every write at one index.
func TestTxnLockAndGet(t *testing.T) {
	s, c, _ := start(t)
	ops := api.KVTxnOps{
		{Verb: api.KVLock, Key: "k", Value: []byte("v")},
		{Verb: api.KVGet, Key: "k"},
	}
	before := s.Index()
	ok, resp := txn(t, c, ops)
	want := "0: missing session\n1: key \"k\" doesn't exist\n"
	if ok || len(resp.Results) != 0 || whats(resp) != want {
		t.Fatalf("txn without a session: %v, %d results, errors\n%s; want\n%s", ok, len(resp.Results), whats(resp), want)
	}
	if s.Index() != before+1 {
		t.Errorf("a failed transaction took %d indexes, want 1 (one raft entry)", s.Index()-before)
	}
	sess := mustSession(t, c, nil)
	ops[0].Session = sess
	ok, resp = txn(t, c, ops)
	if !ok || len(resp.Results) != 2 || len(resp.Errors) != 0 {
		t.Fatalf("txn with a session: %v, %+v", ok, resp)
	}
	lock, get := resp.Results[0], resp.Results[1]
	if lock.Value != nil || string(get.Value) != "v" || lock.LockIndex != 1 || get.Session != sess ||
		lock.ModifyIndex != s.Index() || get.ModifyIndex != s.Index() {
		t.Errorf("results %+v and %+v at index %d", lock, get, s.Index())
	}
	// A transaction of reads alone is not a write.
	before = s.Index()
	if ok, resp := txn(t, c, api.KVTxnOps{{Verb: api.KVGet, Key: "k"}}); !ok || len(resp.Results) != 1 || s.Index() != before {
		t.Errorf("read-only txn: %v, %+v, index %d -> %d", ok, resp, before, s.Index())
	}
}

// TestTxnRollsBack: when one operation fails, the writes before it are
// undone; each verb's refusal carries the agent's message.
func TestTxnRollsBack(t *testing.T) {
	s, c, clock := start(t)
	if _, err := c.KV().Put(&api.KVPair{Key: "a", Value: []byte("1")}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.KV().Put(&api.KVPair{Key: "t/1", Value: []byte("1")}, nil); err != nil {
		t.Fatal(err)
	}
	a, _ := mustGet(t, c, "a")
	holder := mustSession(t, c, nil)
	other := mustSession(t, c, nil)
	if !mustAcquire(t, c, "held", holder) {
		t.Fatal("acquire failed")
	}
	for _, tc := range []struct {
		op   *api.KVTxnOp
		want string
	}{
		{&api.KVTxnOp{Verb: api.KVCAS, Key: "a", Index: 1}, `failed to set key "a", index is stale`},
		{&api.KVTxnOp{Verb: api.KVDeleteCAS, Key: "a", Index: 1}, `failed to delete key "a", index is stale`},
		{&api.KVTxnOp{Verb: api.KVLock, Key: "held", Session: other}, `failed to lock key "held", lock is already held`},
		{&api.KVTxnOp{Verb: api.KVLock, Key: "x", Session: "00000000-0000-4000-8000-000000000000"},
			`invalid session "00000000-0000-4000-8000-000000000000"`},
		{&api.KVTxnOp{Verb: api.KVUnlock, Key: "held", Session: other},
			`failed to unlock key "held", lock isn't held, or is held by another session`},
		{&api.KVTxnOp{Verb: api.KVCheckIndex, Key: "a", Index: 1},
			fmt.Sprintf(`failed index check for key "a", current modify index %d != 1`, a.ModifyIndex)},
		{&api.KVTxnOp{Verb: api.KVCheckSession, Key: "held", Session: other},
			fmt.Sprintf(`failed session check for key "held", current session %q != %q`, holder, other)},
		{&api.KVTxnOp{Verb: api.KVCheckSession, Key: "none"}, `failed to check session, key "none" doesn't exist`},
		{&api.KVTxnOp{Verb: api.KVCheckNotExists, Key: "a"}, `key "a" exists`},
		{&api.KVTxnOp{Verb: "explode", Key: "a"}, `unknown KV operation: explode`},
		{&api.KVTxnOp{Verb: api.KVSet}, "Must provide key"},
	} {
		ok, resp := txn(t, c, api.KVTxnOps{
			{Verb: api.KVSet, Key: "new", Value: []byte("n")},
			{Verb: api.KVDeleteTree, Key: "t/"},
			tc.op,
		})
		if got := whats(resp); ok || got != "2: "+tc.want+"\n" {
			t.Errorf("%s: %v, errors\n%s; want 2: %s", tc.op.Verb, ok, got, tc.want)
		}
		if p, _ := mustGet(t, c, "new"); p != nil {
			t.Fatalf("%s: the set before the failure stayed: %+v", tc.op.Verb, p)
		}
		if p, _ := mustGet(t, c, "t/1"); p == nil {
			t.Fatalf("%s: the delete-tree before the failure stayed", tc.op.Verb)
		}
	}
	// The good cases of the same verbs.
	ok, resp := txn(t, c, api.KVTxnOps{
		{Verb: api.KVCheckIndex, Key: "a", Index: a.ModifyIndex},
		{Verb: api.KVCAS, Key: "a", Value: []byte("2"), Index: a.ModifyIndex},
		{Verb: api.KVCheckSession, Key: "held", Session: holder},
		{Verb: api.KVUnlock, Key: "held", Session: holder},
		{Verb: api.KVCheckNotExists, Key: "none"},
		{Verb: api.KVGetTree, Key: "a"},
	})
	if !ok || len(resp.Results) != 5 || string(resp.Results[4].Value) != "2" || resp.Results[1].Value != nil {
		t.Fatalf("the good cases: %v, %+v, errors\n%s", ok, resp, whats(resp))
	}
	// A lock on a key under lock-delay is refused before raft.
	if !mustAcquire(t, c, "held", holder) {
		t.Fatal("re-acquire failed")
	}
	s.InvalidateSession(holder)
	before := s.Index()
	ok, resp = txn(t, c, api.KVTxnOps{{Verb: api.KVLock, Key: "held", Session: other}})
	if ok || whats(resp) != "0: failed to lock key \"held\" due to lock delay\n" || s.Index() != before {
		t.Errorf("lock under lock-delay: %v, %s, index %d -> %d", ok, whats(resp), before, s.Index())
	}
	clock.Advance(16 * time.Second)
	if ok, resp := txn(t, c, api.KVTxnOps{{Verb: api.KVLock, Key: "held", Session: other}}); !ok {
		t.Errorf("lock after the lock-delay: %s", whats(resp))
	}
}

// TestTxnBadRequests: the agent's answers to bodies it refuses.
func TestTxnBadRequests(t *testing.T) {
	s, _, _ := start(t)
	many := "[" + strings.Repeat(`{"KV":{"Verb":"get","Key":"k"}},`, 128) + `{"KV":{"Verb":"get","Key":"k"}}]`
	big := fmt.Sprintf(`[{"KV":{"Verb":"set","Key":"k","Value":"%s"}}]`, strings.Repeat("A", 4*(512*1024/3+1)))
	for _, tc := range []struct {
		method, body string
		code         int
		msg          string
	}{
		{"GET", "", 405, "method GET not allowed"},
		{"PUT", "{", 400, "Failed to parse body: unexpected EOF"},
		{"PUT", `[{"KV":{"Verb":"set","Key":"k","Value":"!"}}]`, 400,
			"Failed to parse body: illegal base64 data at input byte 0"},
		{"PUT", many, 413, "Transaction contains too many operations (129 > 128)"},
		{"PUT", `[{"Node":{"Verb":"get"}}]`, 501, "miniconsul: /v1/txn serves KV operations only (no catalog)"},
		{"PUT", `[{}]`, 200, `{"Results":[],"Errors":null,"Index":1,"LastContact":0,"KnownLeader":true,` +
			`"ConsistencyLevel":"","NotModified":false,"Backend":0,"ResultsFilteredByACLs":false}`},
	} {
		code, body := raw(t, s, tc.method, "/v1/txn", tc.body)
		if code != tc.code || body != tc.msg {
			t.Errorf("%s %.40s: %d %q, want %d %q", tc.method, tc.body, code, body, tc.code, tc.msg)
		}
	}
	if code, body := raw(t, s, "PUT", "/v1/txn", big); code != http.StatusRequestEntityTooLarge ||
		!strings.HasPrefix(body, "Request body(") {
		t.Errorf("a body over 512 KiB: %d %.80q", code, body)
	}
}

// TestAfterLockDelayCheck: with the hook, an invalidation put between an
// acquire's lock-delay check and its apply lets that acquire take the key
// inside the lock-delay, as on a Consul leader, for a KV acquire and a
// transaction's lock alike; a later acquire is refused by the delay, and
// without the hook the check and the apply are one step.
func TestAfterLockDelayCheck(t *testing.T) {
	s, c, clock := start(t)
	for _, viaTxn := range []bool{false, true} {
		key := fmt.Sprintf("k%v", viaTxn)
		holder := mustSession(t, c, &api.SessionEntry{TTL: "30s", LockDelay: 10 * time.Second})
		racer := mustSession(t, c, &api.SessionEntry{TTL: "30s"})
		late := mustSession(t, c, &api.SessionEntry{TTL: "30s"})
		if !mustAcquire(t, c, key, holder) {
			t.Fatal("first acquire refused")
		}
		var ran []string
		s.AfterLockDelayCheck(func(k string) {
			ran = append(ran, k)
			if !s.InvalidateSession(holder) {
				t.Errorf("invalidate %s: no such session", holder)
			}
		})
		var won bool
		if viaTxn {
			won, _ = txn(t, c, api.KVTxnOps{{Verb: api.KVLock, Key: key, Session: racer}})
		} else {
			won = mustAcquire(t, c, key, racer)
		}
		s.AfterLockDelayCheck(nil)
		if len(ran) != 1 || ran[0] != key || !won {
			t.Fatalf("txn %v: hook ran for %q; racing acquire won: %v, want one run for %q and a win", viaTxn, ran, won, key)
		}
		if p, _ := mustGet(t, c, key); p.Session != racer {
			t.Fatalf("txn %v: key held by %q, want the racer %q", viaTxn, p.Session, racer)
		}
		if ok, _, err := c.KV().Release(&api.KVPair{Key: key, Session: racer}, nil); err != nil || !ok {
			t.Fatalf("txn %v: release: %v, %v", viaTxn, ok, err)
		}
		// A release sets no delay, and the holder's still runs: a new
		// acquire is refused.
		if mustAcquire(t, c, key, late) {
			t.Fatalf("txn %v: an acquire after the race was granted inside the holder's lock-delay", viaTxn)
		}
		clock.Advance(10 * time.Second)
		if !mustAcquire(t, c, key, late) {
			t.Fatalf("txn %v: acquire after the lock-delay refused", viaTxn)
		}
	}
}
