package redislock

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/locks"
)

// subscription is a Locker's pub/sub connection, open while any of its
// goroutines waits. Hand-over messages ("<owner> <fence>") are routed to the
// waiting goroutine by owner.
type subscription struct {
	ps      *redis.PubSub
	refs    int
	closing atomic.Bool   // set by leave before it closes ps
	ready   chan struct{} // closed once SUBSCRIBE is confirmed or failed
	err     error         // set before ready is closed
	done    chan struct{} // closed when the reader goroutine exits
}

// join registers owner as a waiter and returns the channel its hand-over
// arrives on, once the subscription is confirmed (so no hand-over published
// after this returns can be missed).
func (l *Locker) join(ctx context.Context, owner string) (chan locks.Token, error) {
	ch := make(chan locks.Token, 1)
	l.mu.Lock()
	l.waiters[owner] = ch
	s := l.sub
	if s == nil {
		s = &subscription{ready: make(chan struct{}), done: make(chan struct{})}
		l.sub = s
		go l.subscribe(s)
	}
	s.refs++
	l.mu.Unlock()

	select {
	case <-s.ready:
		if s.err != nil {
			l.leave(owner)
			return nil, l.errorf("subscribe: %w", s.err)
		}
		return ch, nil
	case <-ctx.Done():
		l.leave(owner)
		return nil, l.errorf("lock: %w", ctx.Err())
	}
}

// leave unregisters owner and closes the subscription after the last waiter.
func (l *Locker) leave(owner string) {
	l.mu.Lock()
	delete(l.waiters, owner)
	s := l.sub
	s.refs--
	if s.refs > 0 {
		l.mu.Unlock()
		return
	}
	l.sub = nil
	l.mu.Unlock()
	<-s.ready
	if s.ps != nil {
		s.closing.Store(true)
		_ = s.ps.Close() // closing the connection ends the subscription
	}
	<-s.done
}

// subscribe opens the pub/sub connection, confirms the subscription, then
// reads hand-over messages until the subscription is closed.
func (l *Locker) subscribe(s *subscription) {
	defer close(s.done)
	ctx, cancel := context.WithTimeout(context.Background(), l.opt.TTL)
	s.ps = l.client.Subscribe(ctx, l.chPfx+l.id)
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
			// on the next Receive. Hand-overs published meanwhile found
			// nobody listening and skipped us: every waiter re-checks.
			l.recheckAll()
			l.pause()
			continue
		}
		switch m := msg.(type) {
		case *redis.Message:
			l.route(m.Payload)
		case *redis.Subscription:
			l.recheckAll()
		}
	}
}

// pause waits a little before the reader tries the connection again.
func (l *Locker) pause() {
	t := time.NewTimer(20 * time.Millisecond)
	defer t.Stop()
	<-t.C
}

// route delivers a hand-over to the waiter it names. A hand-over to a waiter
// that already left is dropped here: the waiter's own leave releases it.
func (l *Locker) route(payload string) {
	owner, f, ok := strings.Cut(payload, " ")
	if !ok {
		return
	}
	fence, err := strconv.ParseUint(f, 10, 64)
	if err != nil {
		return
	}
	l.mu.Lock()
	ch := l.waiters[owner]
	l.mu.Unlock()
	if ch != nil {
		select {
		case ch <- locks.Token(fence):
		default:
		}
	}
}

// recheckAll wakes every waiter to re-check the lock; a zero fence means
// "look again", not a hand-over.
func (l *Locker) recheckAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, ch := range l.waiters {
		select {
		case ch <- 0:
		default:
		}
	}
}
