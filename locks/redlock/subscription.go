package redlock

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// subscription listens to the lock's release channel on every node that
// confirmed SUBSCRIBE. A Locker opens one for its goroutines waiting in Lock
// and closes it after the last one leaves. Only the goroutine holding the
// Locker's gate waits on it, so it has one wake-up channel.
//
// A node that refuses or later drops the subscription is left out: a release
// is published on every node that held the key, so any node of the holder's
// majority that is listened to delivers it, and waiting falls back to the
// holder's TTL otherwise.
type subscription struct {
	refs   int           // goroutines in Lock using it; guarded by Locker.mu
	ready  chan struct{} // closed once every node confirmed or failed
	subs   []*redis.PubSub
	pumps  sync.WaitGroup
	closed atomic.Bool

	mu   sync.Mutex
	want string        // owner whose release wakes the waiter; "" for any
	wake chan struct{} // capacity 1
	// The waiter's own recent attempts, whose clean-up releases on a
	// minority of nodes must not wake it (it would retry for as long as the
	// holder keeps its majority). A ring: a release is delivered
	// asynchronously and may arrive after the next attempt began.
	mine [4]string
	next int
}

// subscribed reports whether a subscription is open, meaning that other
// goroutines of this Locker are waiting.
func (l *Locker) subscribed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sub != nil
}

// join returns the Locker's subscription, opening it if needed, once every
// node has confirmed or refused: a release published after join returns
// reaches it.
func (l *Locker) join(ctx context.Context) (*subscription, error) {
	l.mu.Lock()
	s := l.sub
	first := s == nil
	if first {
		s = &subscription{ready: make(chan struct{}), wake: make(chan struct{}, 1)}
		l.sub = s
	}
	s.refs++
	l.mu.Unlock()
	if first {
		l.open(ctx, s)
		return s, nil
	}
	select {
	case <-s.ready:
		return s, nil
	case <-ctx.Done():
		l.leave(s)
		return nil, l.errorf("lock: %w", ctx.Err())
	}
}

// leave gives up the subscription, closing it after the last user.
func (l *Locker) leave(s *subscription) {
	l.mu.Lock()
	s.refs--
	last := s.refs == 0
	if last {
		l.sub = nil
	}
	l.mu.Unlock()
	if last {
		s.close()
	}
}

// open subscribes on every node at once, each bounded by the request
// timeout, and starts a reader per confirmed subscription.
func (l *Locker) open(ctx context.Context, s *subscription) {
	defer close(s.ready)
	rs := fanOut(context.WithoutCancel(ctx), l.nodes, l.opt.RequestTimeout,
		func(ctx context.Context, c redis.UniversalClient) (*redis.PubSub, error) {
			ps := c.Subscribe(ctx, l.channel)
			msg, err := ps.Receive(ctx)
			if _, ok := msg.(*redis.Subscription); err == nil && !ok {
				err = fmt.Errorf("SUBSCRIBE answered %T", msg)
			}
			if err != nil {
				_ = ps.Close() // the subscription failed; closing cannot add to that
				return nil, err
			}
			return ps, nil
		})
	for _, r := range rs {
		if r.err != nil {
			l.opt.Logger.Warn("lockproof: redlock waits without this node's release notifications",
				"lock", l.name, "err", r.nodeErr())
			continue
		}
		s.subs = append(s.subs, r.val)
		s.pumps.Go(func() { l.pump(s, r.node.index, r.val) })
	}
}

// pump reads one node's release messages until the subscription closes or
// the node's connection fails.
func (l *Locker) pump(s *subscription, index int, ps *redis.PubSub) {
	for {
		msg, err := ps.ReceiveMessage(context.Background())
		if err != nil {
			if !s.closed.Load() {
				l.opt.Logger.Warn("lockproof: redlock lost a node's release notifications",
					"lock", l.name, "err", &NodeError{Node: index, Err: err})
			}
			return
		}
		s.notify(msg.Payload)
	}
}

// close ends every node's subscription and waits for the readers.
func (s *subscription) close() {
	<-s.ready
	s.closed.Store(true)
	for _, ps := range s.subs {
		_ = ps.Close() // closing the connection is all that is left to do
	}
	s.pumps.Wait()
}

// notify wakes the waiter if owner's release is one it waits for.
func (s *subscription) notify(owner string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.want != "" && owner != s.want {
		return
	}
	for _, m := range s.mine {
		if m != "" && owner == m {
			return
		}
	}
	select {
	case s.wake <- struct{}{}:
	default: // a wake-up is already pending
	}
}

// reset forgets earlier wake-ups and accepts any release but those of
// owner, before an attempt as owner: a release during the attempt may be
// one the attempt missed, unless the attempt made it.
func (s *subscription) reset(owner string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.want = ""
	s.mine[s.next] = owner
	s.next = (s.next + 1) % len(s.mine)
	select {
	case <-s.wake:
	default:
	}
}

// won takes owner, whose attempt won the lock, out of the waiter's own
// attempts: its release, when the lease ends, must wake this Locker's next
// waiter.
func (s *subscription) won(owner string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, m := range s.mine {
		if m == owner {
			s.mine[i] = ""
		}
	}
}

// expect makes only owner's release wake the waiter from now on ("" for any
// release). A wake-up already pending stays.
func (s *subscription) expect(owner string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.want = owner
}
