package zklock

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/lockproof/lockproof/internal/locktest"
	"github.com/lockproof/lockproof/locks"
)

// recorder is a locks.Gate that records the requests passing it, in
// order, and signals on after the n-th is done (n > 0).
type recorder struct {
	mu   sync.Mutex
	seen []string
	n    int
	on   chan struct{}
}

func (r *recorder) Request(_ context.Context, what string) func() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen = append(r.seen, what)
	nth := len(r.seen)
	return func() {
		if nth == r.n {
			close(r.on)
		}
	}
}

func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.seen
	r.seen = nil
	return out
}

// TestRequestPaths: the requests an acquisition sends on its caller's
// behalf. A free lock: the create and one listing, which finds the child
// alone and grants with no read (the lease keeps the watch on the lock
// node's children that listing set). A waiter: the create, a listing and
// the watch on its predecessor, then, once woken, one listing, which
// grants, its token and its lease's watch with it: no read of its own node.
func TestRequestPaths(t *testing.T) {
	s := server(t)
	l := s.newLocker(t, s.connect(t), "paths", locks.WithWatchdog(false))
	if err := l.ensureParents(context.Background()); err != nil {
		t.Fatal(err)
	}
	free := &recorder{}
	holder, err := l.Lock(locks.WithGate(context.Background(), free))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := free.take(), []string{"zk create", "zk getChildren"}; !slices.Equal(got, want) {
		t.Errorf("a free lock's requests %q, want %q", got, want)
	}

	waiter := &recorder{n: 3, on: make(chan struct{})}
	res := locktest.LockAsync(locks.WithGate(context.Background(), waiter), s.newLocker(t, s.connect(t), "paths"))
	select { // its predecessor watched: it waits
	case <-waiter.on:
	case <-time.After(testTimeout):
		t.Fatal("the waiter never watched its predecessor")
	}
	locktest.UnlockOnce(t, holder)
	r := locktest.Receive(t, res)
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	want := []string{"zk create", "zk getChildren", "zk getData", "zk getChildren"}
	if got := waiter.take(); !slices.Equal(got, want) {
		t.Errorf("a waiter's requests %q, want %q", got, want)
	}
	locktest.UnlockOnce(t, r.Lease)
}

// TestAloneTokenIsThePzxid: a contender that finds its child alone takes
// the lock node's pzxid for its token, with no read of its child. Here an
// older child (the earlier holder's) goes after its own was created, so
// that pzxid is the zxid of that deletion, above its child's czxid: the
// token is above the earlier holder's, the lease learns its czxid from a
// read of the node (Renew works, the lease stays), and the next holder's
// token is above it.
func TestAloneTokenIsThePzxid(t *testing.T) {
	s := server(t)
	conn, other := s.connect(t), s.connect(t)
	l := s.newLocker(t, conn, "alone", locks.WithWatchdog(false))
	next := s.newLocker(t, other, "alone")
	ctx := context.Background()
	earlier := locktest.MustLock(t, next)
	c, err := l.enqueue(ctx, newContender(l), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	locktest.UnlockOnce(t, earlier)
	lease, err := l.waitTurn(ctx, c, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	_, node, err := conn.Get(c.path)
	if err != nil {
		t.Fatal(err)
	}
	_, parent, err := conn.Exists(l.path)
	if err != nil {
		t.Fatal(err)
	}
	tok := locktest.Token(t, lease)
	if tok != locks.Token(parent.Pzxid) || tok <= locks.Token(node.Czxid) || tok <= locktest.Token(t, earlier) {
		t.Fatalf("token %v; want the lock node's pzxid %d, above the child's czxid %d and the earlier holder's token %v",
			tok, parent.Pzxid, node.Czxid, locktest.Token(t, earlier))
	}
	if err := lease.Renew(ctx); err != nil {
		t.Fatalf("Renew: %v", err)
	}
	if err := lease.Err(); err != nil {
		t.Fatalf("the lease ended: %v", err)
	}
	locktest.UnlockOnce(t, lease)
	again := locktest.MustLock(t, next)
	if got := locktest.Token(t, again); got <= tok {
		t.Fatalf("the next holder's token %v, not above %v", got, tok)
	}
	locktest.UnlockOnce(t, again)
}

// TestOwnsChecksTheNode: a lease whose token is a pzxid learns its node's
// czxid from the first read, which must not be above the token (a node
// created after the listing is not its node), and then holds every read to
// that czxid and to its session.
func TestOwnsChecksTheNode(t *testing.T) {
	const session = 7
	o := &leaseOps{token: 100, session: session}
	for _, c := range []struct {
		st   *zk.Stat
		want bool
	}{
		{nil, false},
		{&zk.Stat{Czxid: 101, EphemeralOwner: session}, false}, // above the token
		{&zk.Stat{Czxid: 90, EphemeralOwner: session + 1}, false},
		{&zk.Stat{Czxid: 90, EphemeralOwner: session}, true}, // learnt
		{&zk.Stat{Czxid: 90, EphemeralOwner: session}, true},
		{&zk.Stat{Czxid: 95, EphemeralOwner: session}, false}, // another node
	} {
		if got := o.owns(c.st); got != c.want {
			t.Errorf("owns(%+v) = %v, want %v", c.st, got, c.want)
		}
	}
	known := &leaseOps{token: 100, czxid: 100, session: session}
	if known.owns(&zk.Stat{Czxid: 99, EphemeralOwner: session}) || !known.owns(&zk.Stat{Czxid: 100, EphemeralOwner: session}) {
		t.Error("a lease whose czxid is known must own the node of that czxid alone")
	}
}

// TestLoneHolderWatchesThroughTheChildren: a holder that found its node
// alone watches the lock node's children, set by the listing that granted
// it; a change to them (here a child that is no contender, made and
// deleted) moves its watch to its own node, and the lease lives on; the
// deletion of its node then ends it.
func TestLoneHolderWatchesThroughTheChildren(t *testing.T) {
	s := server(t)
	conn, other := s.connect(t), s.connect(t)
	l := s.newLocker(t, conn, "lone", locks.WithWatchdog(false))
	lease := locktest.MustLock(t, l)
	kids := children(t, other, l)
	stranger := l.NodePath() + "/stranger"
	if _, err := other.Create(stranger, nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if err := other.Delete(stranger, -1); err != nil {
		t.Fatal(err)
	}
	if err := lease.Renew(context.Background()); err != nil {
		t.Fatalf("Renew after a stranger came and went: %v", err)
	}
	if err := other.Delete(l.NodePath()+"/"+kids[0], -1); err != nil {
		t.Fatal(err)
	}
	locktest.Closed(t, "Done after the child was deleted", lease.Done())
	if err := lease.Err(); !errors.Is(err, locks.ErrNotHeld) {
		t.Fatalf("Err = %v, want ErrNotHeld", err)
	}
}
