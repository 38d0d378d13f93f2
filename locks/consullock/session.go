package consullock

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/lockproof/lockproof/locks"
)

// attempt is one Lock or TryLock call: the session it acquires with.
type attempt struct {
	l       *Locker
	key     string // the key it acquires: the lock's, or the permit's it tries
	session string
	entry   string    // the attempt's queue entry, once it may have been written
	reader  string    // a read-write mutex's reader key, once it may have been written
	renewed time.Time // when the request that created or last renewed the session was sent
	wait    *waiter   // the wait of the Lock call making the attempt; nil for TryLock
	// turnstile: the attempt acquired a read-write mutex's writer's key
	// (see RWMutex), so others' TryLocks may have been refused because of
	// it.
	turnstile bool
}

// newAttempt creates the attempt's session: TTL the lease TTL, Behavior
// release, the Locker's lock-delay. The body is sent as is (not through
// api.Session.Create, which drops a zero lock-delay, leaving Consul's 15s
// default).
func (l *Locker) newAttempt(ctx context.Context) (*attempt, error) {
	body := map[string]any{
		"Name":      "lockproof " + l.name,
		"TTL":       l.opt.TTL.String(),
		"Behavior":  api.SessionBehaviorRelease,
		"LockDelay": l.lockDelay.String(),
	}
	rctx, cancel := l.request(ctx)
	defer cancel()
	start := l.opt.Clock.Now()
	var out struct{ ID string }
	if _, err := l.client.Raw().Write("/v1/session/create", body, &out, writeOpts(rctx)); err != nil {
		return nil, l.errorf("create session: %w", l.cause(ctx, err))
	}
	if out.ID == "" {
		return nil, l.errorf("create session: the server returned no session ID")
	}
	return &attempt{l: l, key: l.key, session: out.ID, renewed: start}, nil
}

// cause returns ctx's error when ctx ended (so callers can test for
// cancellation with errors.Is), else err.
func (l *Locker) cause(ctx context.Context, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	return err
}

// renew renews the attempt's session; errSessionGone when it no longer
// exists.
func (a *attempt) renew(ctx context.Context) error {
	rctx, cancel := a.l.request(ctx)
	defer cancel()
	start := a.l.opt.Clock.Now()
	e, _, err := a.l.client.Session().Renew(a.session, writeOpts(rctx))
	if err != nil {
		return a.l.errorf("renew session: %w", a.l.cause(ctx, err))
	}
	if e == nil {
		return errSessionGone
	}
	a.renewed = start
	return nil
}

// keepAlive renews the session once half its TTL has passed since the last
// renewal, so that a waiting session never comes close to expiring.
func (a *attempt) keepAlive(ctx context.Context) error {
	if a.l.opt.Clock.Now().Sub(a.renewed) < a.l.opt.TTL/2 {
		return nil
	}
	return a.renew(ctx)
}

// renewDue is when keepAlive will next renew.
func (a *attempt) renewDue() time.Time { return a.renewed.Add(a.l.opt.TTL / 2) }

// try acquires once: a nil lease and nil error mean the key is held (or
// under lock-delay). errSessionGone and errLost say to retry with a new
// session.
func (a *attempt) try(ctx context.Context) (locks.Lease, error) {
	ok, err := a.acquire(ctx, a.key)
	switch {
	case err != nil:
		return nil, err
	case !ok:
		return nil, nil
	case a.l.admit != nil:
		a.turnstile = true
		return a.l.admit(ctx, a)
	}
	return a.grant(ctx)
}

// flagHeld is the Flags of a key acquired by consullock. A release writes
// flags 0, while Consul, invalidating a session, clears only the key's
// session: a key that reads free with flagHeld was freed by an
// invalidation, so its lock-delay may be on.
const flagHeld uint64 = 0x6c6f636b70726f66 // "lockprof"

// acquire acquires key with the attempt's session; false when Consul
// refuses (another session holds key, or a lock-delay is on it).
// errSessionGone says the session no longer exists.
//
// Consul checks the lock-delay on its leader before the write goes to
// Raft (hashicorp/consul agent/consul/kvs_endpoint.go, kvsPreApply): an
// acquire checked just before an invalidation commits and applied just
// after it takes the key inside the lock-delay, while the holder that
// lost it may not know yet. Measured on a real agent (Consul 1.21, four
// clients acquiring in a loop while the holder's session is destroyed):
// the key was taken within 2–9 ms in 15 of 20 rounds. So the acquire is
// a transaction that also reads the key as it was just before: when an
// invalidation freed it, the attempt gives the key back (writing it as
// still freed by an invalidation, with its session as the value) and
// acquires again; that acquire is checked after the invalidation
// committed, so Consul's lock-delay check now holds. The second acquire
// finds the attempt's own give-back, which it trusts.
func (a *attempt) acquire(ctx context.Context, key string) (bool, error) {
	ok, prior, err := a.lockTxn(ctx, key)
	if err != nil || !ok {
		return ok, err
	}
	if prior.Session != "" || prior.Flags != flagHeld || string(prior.Value) == a.session {
		return true, nil
	}
	if err := a.giveBack(ctx, key); err != nil {
		return false, err
	}
	ok, _, err = a.lockTxn(ctx, key)
	return ok, err
}

// lockTxn acquires key with the attempt's session, marked flagHeld, in one
// transaction that first reads key (prior; zero when absent).
func (a *attempt) lockTxn(ctx context.Context, key string) (ok bool, prior api.KVPair, err error) {
	l := a.l
	rctx, cancel := l.request(ctx)
	defer cancel()
	ops := api.TxnOps{
		{KV: &api.KVTxnOp{Verb: api.KVGetOrEmpty, Key: key}},
		{KV: &api.KVTxnOp{Verb: api.KVLock, Key: key, Session: a.session, Flags: flagHeld}},
	}
	ok, resp, _, err := l.client.Txn().Txn(ops, (&api.QueryOptions{}).WithContext(rctx))
	switch {
	case invalidSession(err):
		return false, prior, errSessionGone
	case err != nil:
		return false, prior, l.errorf("acquire: %w", l.cause(ctx, err))
	case resp == nil:
		return false, prior, l.errorf("acquire: the server returned no transaction response")
	case !ok:
		for _, e := range resp.Errors {
			if strings.Contains(e.What, invalidSessionText) {
				return false, prior, errSessionGone
			}
		}
		return false, prior, nil // held, or under lock-delay
	case len(resp.Results) != 2 || resp.Results[0].KV == nil:
		return false, prior, l.errorf("acquire: the server returned %d transaction results, want 2", len(resp.Results))
	}
	return true, *resp.Results[0].KV, nil
}

// giveBack releases key, acquired by the attempt's session, leaving it
// marked as freed by an invalidation, with the session as its value.
func (a *attempt) giveBack(ctx context.Context, key string) error {
	l := a.l
	rctx, cancel := l.request(ctx)
	defer cancel()
	pair := &api.KVPair{Key: key, Session: a.session, Flags: flagHeld, Value: []byte(a.session)}
	ok, _, err := l.client.KV().Release(pair, writeOpts(rctx))
	switch {
	case invalidSession(err):
		return errSessionGone
	case err != nil:
		return l.errorf("acquire: give back a key freed by an invalidation: %w", l.cause(ctx, err))
	case !ok:
		return errSessionGone // the session was invalidated meanwhile
	}
	return nil
}

// invalidSession reports Consul's refusal of an acquire with a session it
// does not know.
func invalidSession(err error) bool {
	var se api.StatusError
	return errors.As(err, &se) && se.Code == http.StatusInternalServerError &&
		strings.Contains(se.Body, invalidSessionText)
}

// invalidSessionText is in Consul's refusal of an acquire, or of a
// transaction's lock, with a session it does not know.
const invalidSessionText = "invalid session"

// grant reads the token back and wraps the acquisition in a managed lease.
//
// The token is the key's ModifyIndex, read with a consistent read right
// after the acquire while the key still shows our session (see the package
// documentation for why it strictly increases). The lease's validity
// counts from the last session renewal, not from the acquire: Consul runs
// the session's TTL from there.
func (a *attempt) grant(ctx context.Context) (locks.Lease, error) {
	index, last, err := a.readBack(ctx, a.key)
	if err != nil {
		return nil, err
	}
	return a.hold(ctx, a.key, index, last, a.entry)
}

// readBack reads key with a consistent read and returns its ModifyIndex and
// the index a blocking query on it starts from; errLost when the key does
// not show the attempt's session.
func (a *attempt) readBack(ctx context.Context, key string) (modify, last uint64, err error) {
	l := a.l
	rctx, cancel := l.request(ctx)
	defer cancel()
	q := (&api.QueryOptions{RequireConsistent: true}).WithContext(rctx)
	pair, meta, err := l.client.KV().Get(key, q)
	if err != nil {
		return 0, 0, l.errorf("read token: %w", l.cause(ctx, err))
	}
	if pair == nil || pair.Session != a.session {
		return 0, 0, errLost
	}
	return pair.ModifyIndex, meta.LastIndex, nil
}

// hold wraps the acquisition of key, whose ModifyIndex is token, in a
// managed lease whose monitor watches key from index last; its release
// deletes entries (the queue entry, ...) besides releasing key.
func (a *attempt) hold(ctx context.Context, key string, token, last uint64, entries ...string) (locks.Lease, error) {
	l := a.l
	tok := locks.Token(token)
	ops := &leaseOps{l: l, key: key, session: a.session, entries: entries}
	lease := locks.NewLease(locks.LeaseSpec{Name: l.name, Token: tok, Fenced: true, Start: a.renewed}, ops, l.opt)
	if err := lease.GiveBackIfLate(ctx); err != nil { // releases the key and destroys the session
		return nil, l.errorf("acquired too late: %w", err)
	}
	ops.monitor(lease, last)
	locks.Observe(ctx, l.opt.Observer, locks.Event{Point: locks.PointAcquired, Name: l.name, Token: tok, Fenced: true})
	return lease, nil
}

// abandon releases the key (in case an acquire went through unseen) and
// destroys the session, on a context of its own bounded by the request
// timeout. The release comes first: destroying a session that holds the
// key would start the lock-delay for everybody.
func (a *attempt) abandon() {
	ctx, cancel := locks.RequestContext(context.Background(), a.l.opt.RequestTimeout)
	defer cancel()
	if err := a.l.releaseAndDestroy(ctx, a.key, a.session, a.entry, a.reader); err != nil && !errors.Is(err, locks.ErrNotHeld) {
		a.l.opt.Logger.Warn("lockproof: could not clean up a session; it will expire by its TTL",
			"lock", a.l.name, "session", a.session, "err", err)
	}
}

// leaveQueue deletes the attempt's queue entry, if it wrote one, once the
// attempt holds a permit of a semaphore or a read-write mutex's reader
// key: the next waiter in line, woken, moves to the head and looks at the
// permits or the writer's key. (A mutex's holder keeps its entry until it
// unlocks: the lock is not free before.) A deletion that fails is left to
// the lease's release, or to the next waiter's look after TTL/2; one that
// succeeds forgets the entry.
func (a *attempt) leaveQueue(ctx context.Context) {
	if a.entry == "" {
		return
	}
	rctx, cancel := a.l.request(ctx)
	defer cancel()
	if _, err := a.l.client.KV().Delete(a.entry, writeOpts(rctx)); err != nil {
		a.l.opt.Logger.Debug("lockproof: could not leave the queue; the next waiter looks after TTL/2",
			"lock", a.l.name, "entry", a.entry, "err", err)
		return
	}
	a.entry = ""
}

// releaseAndDestroy releases key if session holds it, deletes the
// session's other keys (entries: its queue entry, a reader's key; "" for
// none), then destroys the session whatever the release said. It returns
// locks.ErrNotHeld (wrapped) when session did not hold the key.
//
// The release comes before the deletions, of which the queue entry's wakes
// the next waiter in line: woken, it finds the lock free. A deletion that
// fails does no harm: destroying the session releases the entry, which
// wakes the next waiter as well, and a waiter that finds a released entry
// deletes it (a writer probes a released reader's key; see RWMutex).
func (l *Locker) releaseAndDestroy(ctx context.Context, key, session string, entries ...string) error {
	ok, _, relErr := l.client.KV().Release(&api.KVPair{Key: key, Session: session}, writeOpts(ctx))
	for _, entry := range entries {
		if entry != "" {
			_, _ = l.client.KV().Delete(entry, writeOpts(ctx))
		}
	}
	_, desErr := l.client.Session().Destroy(session, writeOpts(ctx))
	switch {
	case relErr != nil:
		return l.errorf("release: %w", relErr)
	case desErr != nil:
		return l.errorf("destroy session: %w", desErr)
	case !ok:
		return l.errorf("release: %w", locks.ErrNotHeld)
	}
	return nil
}
