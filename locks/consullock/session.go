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

// acquire acquires key with the attempt's session once; false when Consul
// refuses (another session holds key, or a lock-delay is on it).
// errSessionGone says the session no longer exists.
func (a *attempt) acquire(ctx context.Context, key string) (bool, error) {
	l := a.l
	rctx, cancel := l.request(ctx)
	defer cancel()
	ok, _, err := l.client.KV().Acquire(&api.KVPair{Key: key, Session: a.session}, writeOpts(rctx))
	switch {
	case invalidSession(err):
		return false, errSessionGone
	case err != nil:
		return false, l.errorf("acquire: %w", l.cause(ctx, err))
	}
	return ok, nil
}

// invalidSession reports Consul's refusal of an acquire with a session it
// does not know.
func invalidSession(err error) bool {
	var se api.StatusError
	return errors.As(err, &se) && se.Code == http.StatusInternalServerError &&
		strings.Contains(se.Body, "invalid session")
}

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
