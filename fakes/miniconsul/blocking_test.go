package miniconsul_test

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
)

type got struct {
	pair *api.KVPair
	meta *api.QueryMeta
	err  error
}

func blockingGet(c *api.Client, key string, index uint64, wait time.Duration) <-chan got {
	ch := make(chan got, 1)
	go func() {
		p, m, err := c.KV().Get(key, &api.QueryOptions{WaitIndex: index, WaitTime: wait})
		ch <- got{p, m, err}
	}()
	return ch
}

// TestBlockingWakeUp: a query at the key's index parks until the key
// changes, then answers the new entry and index; the clock never moves.
func TestBlockingWakeUp(t *testing.T) {
	s, c, _ := start(t)
	if _, err := c.KV().Put(&api.KVPair{Key: "k", Value: []byte("1")}, nil); err != nil {
		t.Fatal(err)
	}
	p, meta := mustGet(t, c, "k")
	ch := blockingGet(c, "k", meta.LastIndex, time.Minute)
	waitBlocked(t, s, 1)
	ctx, cancel := context.WithTimeout(bg(), 5*time.Second)
	defer cancel()
	if err := s.WaitParked(ctx, "k", meta.LastIndex, 1); err != nil {
		t.Fatal(err)
	}
	short, cancelShort := context.WithTimeout(bg(), 10*time.Millisecond)
	defer cancelShort()
	if err := s.WaitParked(short, "k", meta.LastIndex+1, 1); err == nil {
		t.Fatal("WaitParked found a query parked at an index above the one it sent")
	}
	// A write to another key does not wake a single-key query.
	if _, err := c.KV().Put(&api.KVPair{Key: "other", Value: []byte("x")}, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-ch:
		t.Fatalf("woken by another key: %+v", r)
	default:
	}
	if _, err := c.KV().Put(&api.KVPair{Key: "k", Value: []byte("2")}, nil); err != nil {
		t.Fatal(err)
	}
	r := <-ch
	if r.err != nil || r.pair == nil || string(r.pair.Value) != "2" || r.meta.LastIndex <= p.ModifyIndex ||
		r.meta.LastIndex != r.pair.ModifyIndex {
		t.Fatalf("woken query: %+v %+v %v", r.pair, r.meta, r.err)
	}
	if s.Blocked() != 0 {
		t.Fatalf("%d queries still parked", s.Blocked())
	}
}

// TestBlockingTimeout: with no change the query answers the same index once
// its wait has passed on the server's clock, not before.
func TestBlockingTimeout(t *testing.T) {
	s, c, clock := start(t)
	if _, err := c.KV().Put(&api.KVPair{Key: "k", Value: []byte("1")}, nil); err != nil {
		t.Fatal(err)
	}
	_, meta := mustGet(t, c, "k")
	ch := blockingGet(c, "k", meta.LastIndex, 30*time.Second)
	waitBlocked(t, s, 1)
	clock.Advance(30*time.Second - time.Millisecond)
	select {
	case r := <-ch:
		t.Fatalf("answered before its wait: %+v", r)
	case <-time.After(20 * time.Millisecond): // give a wrong early answer a chance to arrive
	}
	clock.Advance(time.Millisecond)
	r := <-ch
	if r.err != nil || r.meta.LastIndex != meta.LastIndex || string(r.pair.Value) != "1" {
		t.Fatalf("timed-out query: %+v %+v %v", r.pair, r.meta, r.err)
	}
}

// TestBlockingImmediate: index 0, or an index below the current one,
// answers at once.
func TestBlockingImmediate(t *testing.T) {
	s, c, _ := start(t)
	if _, err := c.KV().Put(&api.KVPair{Key: "k", Value: []byte("1")}, nil); err != nil {
		t.Fatal(err)
	}
	_, meta := mustGet(t, c, "k")
	for _, idx := range []uint64{0, meta.LastIndex - 1} {
		r := <-blockingGet(c, "k", idx, time.Hour)
		if r.err != nil || r.meta.LastIndex != meta.LastIndex {
			t.Fatalf("index %d: %+v %v", idx, r.meta, r.err)
		}
	}
	if s.Blocked() != 0 {
		t.Fatal("an immediate query parked")
	}
}

// TestBlockingIndexAhead: an index above the server's (a client that saw a
// server with more history) parks until the wait ends and then answers the
// lower index: the client must reset.
func TestBlockingIndexAhead(t *testing.T) {
	s, c, clock := start(t)
	if _, err := c.KV().Put(&api.KVPair{Key: "k", Value: []byte("1")}, nil); err != nil {
		t.Fatal(err)
	}
	_, meta := mustGet(t, c, "k")
	ch := blockingGet(c, "k", meta.LastIndex+100, 10*time.Second)
	waitBlocked(t, s, 1)
	clock.Advance(10 * time.Second)
	if r := <-ch; r.err != nil || r.meta.LastIndex != meta.LastIndex {
		t.Fatalf("index ahead: %+v %v", r.meta, r.err)
	}
}

// TestBlockingMissingKey: a query on a missing key answers only once the
// key appears, even when other keys move the table index.
func TestBlockingMissingKey(t *testing.T) {
	s, c, _ := start(t)
	p, meta := mustGet(t, c, "later")
	if p != nil {
		t.Fatal("key exists")
	}
	ch := blockingGet(c, "later", meta.LastIndex, time.Minute)
	waitBlocked(t, s, 1)
	if _, err := c.KV().Put(&api.KVPair{Key: "later-not", Value: []byte("x")}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.KV().Put(&api.KVPair{Key: "later", Value: []byte("now")}, nil); err != nil {
		t.Fatal(err)
	}
	r := <-ch
	if r.err != nil || r.pair == nil || string(r.pair.Value) != "now" {
		t.Fatalf("missing key query: %+v %v", r.pair, r.err)
	}
}

// TestBlockingSessionExpiryWakes: a query on a lock key wakes when the
// holder's session expires on the clock, with the lock released.
func TestBlockingSessionExpiryWakes(t *testing.T) {
	s, c, clock := start(t)
	id := mustSession(t, c, &api.SessionEntry{TTL: "10s"})
	mustAcquire(t, c, "lock", id)
	p, meta := mustGet(t, c, "lock")
	ch := blockingGet(c, "lock", meta.LastIndex, time.Hour)
	waitBlocked(t, s, 1)
	clock.Advance(20 * time.Second)
	r := <-ch
	if r.err != nil || r.pair == nil || r.pair.Session != "" || r.meta.LastIndex <= p.ModifyIndex {
		t.Fatalf("after expiry: %+v %+v %v", r.pair, r.meta, r.err)
	}
}

// TestBlockingSessions: session info blocks on the sessions table.
func TestBlockingSessions(t *testing.T) {
	s, c, _ := start(t)
	id := mustSession(t, c, nil)
	_, meta, err := c.Session().Info(id, nil)
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan *api.SessionEntry, 1)
	go func() {
		e, _, _ := c.Session().Info(id, &api.QueryOptions{WaitIndex: meta.LastIndex, WaitTime: time.Minute})
		ch <- e
	}()
	waitBlocked(t, s, 1)
	if _, err := c.Session().Destroy(id, nil); err != nil {
		t.Fatal(err)
	}
	if e := <-ch; e != nil {
		t.Fatalf("destroyed session still reported: %+v", e)
	}
}

// TestCloseEndsBlockingQueries: Close answers parked queries and returns
// once their handlers are gone (goleak checks the rest).
func TestCloseEndsBlockingQueries(t *testing.T) {
	s, c, _ := start(t)
	ch := blockingGet(c, "k", 5, time.Hour)
	waitBlocked(t, s, 1)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatal("blocking query still running after Close")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := s.WaitBlocked(ctx, 0); err != nil {
		t.Fatal(err)
	}
}
