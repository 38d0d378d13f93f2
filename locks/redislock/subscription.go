package redislock

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/locks"
)

// subscription is a listener's pub/sub connection, open while anyone
// waits.
type subscription struct {
	ps      *redis.PubSub
	refs    int
	closing atomic.Bool   // set by leave before it closes ps
	ready   chan struct{} // closed once SUBSCRIBE is confirmed or failed
	err     error         // set before ready is closed
	done    chan struct{} // closed when the reader goroutine exits
}

// listener holds one pub/sub channel open while any waiter needs it, for
// all the waiters of one line (a Locker, a Semaphore, a mode of an RWMutex): each message goes to route,
// and missed is called when messages may have been lost (the connection
// broke, or the subscription was made again).
type listener struct {
	client  redis.UniversalClient
	channel string
	timeout time.Duration // bounds the SUBSCRIBE
	route   func(payload string)
	missed  func()

	mu  sync.Mutex
	sub *subscription
}

// active reports whether the subscription is open or opening.
func (n *listener) active() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.sub != nil
}

// join takes a reference on the subscription, opening it if needed, and
// returns once it is confirmed (so that no message published after join
// returns can be missed). On an error the reference is dropped.
func (n *listener) join(ctx context.Context) error {
	n.mu.Lock()
	s := n.sub
	if s == nil {
		s = &subscription{ready: make(chan struct{}), done: make(chan struct{})}
		n.sub = s
		go n.subscribe(s)
	}
	s.refs++
	n.mu.Unlock()
	select {
	case <-s.ready:
		if s.err != nil {
			n.leave()
			return s.err
		}
		return nil
	case <-ctx.Done():
		n.leave()
		return ctx.Err()
	}
}

// leave drops a reference and closes the subscription after the last.
func (n *listener) leave() {
	n.mu.Lock()
	s := n.sub
	s.refs--
	if s.refs > 0 {
		n.mu.Unlock()
		return
	}
	n.sub = nil
	n.mu.Unlock()
	<-s.ready
	if s.ps != nil {
		s.closing.Store(true)
		_ = s.ps.Close() // closing the connection ends the subscription
	}
	<-s.done
}

// subscribe opens the pub/sub connection, confirms the subscription, then
// reads messages until the subscription is closed.
func (n *listener) subscribe(s *subscription) {
	defer close(s.done)
	ctx, cancel := context.WithTimeout(context.Background(), n.timeout)
	s.ps = n.client.Subscribe(ctx, n.channel)
	_, s.err = s.ps.Receive(ctx)
	cancel()
	close(s.ready)
	if s.err != nil {
		return
	}
	for {
		msg, err := s.ps.Receive(context.Background())
		if err != nil {
			if s.closing.Load() {
				return // leave closed it
			}
			// The connection broke; go-redis reconnects and re-subscribes
			// on the next Receive. Messages published meanwhile found
			// nobody listening: every waiter looks again.
			n.missed()
			pause()
			continue
		}
		switch m := msg.(type) {
		case *redis.Message:
			n.route(m.Payload)
		case *redis.Subscription:
			n.missed()
		}
	}
}

// pause waits a little before the reader tries the connection again.
func pause() {
	t := time.NewTimer(20 * time.Millisecond)
	defer t.Stop()
	<-t.C
}

// join registers owner as a waiter and returns the channel its hand-over
// arrives on, once the subscription is confirmed (so no hand-over published
// after this returns can be missed).
func (q *line) join(ctx context.Context, owner string) (chan locks.Token, error) {
	ch := make(chan locks.Token, 1)
	q.mu.Lock()
	q.waiters[owner] = ch
	q.mu.Unlock()
	if err := q.listen.join(ctx); err != nil {
		q.mu.Lock()
		delete(q.waiters, owner)
		q.mu.Unlock()
		if ctx.Err() != nil {
			return nil, q.errorf("lock: %w", err)
		}
		return nil, q.errorf("subscribe: %w", err)
	}
	return ch, nil
}

// rename registers a new owner, with a channel of its own, in place of
// old, keeping the subscription: a hand-over to old that is still on its
// way is dropped by route.
func (q *line) rename(old string) (string, chan locks.Token) {
	owner, ch := locks.NewOwner(), make(chan locks.Token, 1)
	q.mu.Lock()
	delete(q.waiters, old)
	q.waiters[owner] = ch
	q.mu.Unlock()
	return owner, ch
}

// leave unregisters owner and closes the subscription after the last waiter.
func (q *line) leave(owner string) {
	q.mu.Lock()
	delete(q.waiters, owner)
	q.mu.Unlock()
	q.listen.leave()
}

// route delivers a hand-over to the waiter it names. A hand-over to a waiter
// that already left is dropped here: the waiter's own leave releases it.
func (q *line) route(payload string) {
	owner, f, ok := strings.Cut(payload, " ")
	if !ok {
		return
	}
	fence, err := strconv.ParseUint(f, 10, 64)
	if err != nil {
		return
	}
	q.mu.Lock()
	ch := q.waiters[owner]
	q.mu.Unlock()
	if ch != nil {
		select {
		case ch <- locks.Token(fence):
		default:
		}
	}
}

// recheckAll wakes every waiter to re-check the lock; a zero fence means
// "look again", not a hand-over.
func (q *line) recheckAll() {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, ch := range q.waiters {
		select {
		case ch <- 0:
		default:
		}
	}
}
