package adapter_test

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/propertytest/adapter"
)

// errToyTaken and errToyNotOwner are the toy library's own answers.
var (
	errToyTaken    = errors.New("toy: taken")
	errToyNotOwner = errors.New("toy: not the owner")
)

// toyServer is an in-memory lock server on a manual clock: one holder,
// whose claim ends at its expiry. Every request passes
// locks.GateRequest and, as the fakes' hooks do, is not sent once its
// context ended.
type toyServer struct {
	clock *fakes.Clock
	ttl   time.Duration

	mu     sync.Mutex
	owner  string
	expiry time.Time
	sets   int           // SET requests that reached the server
	freed  chan struct{} // closed when the holder goes; replaced on a grant
	during func()        // called inside each request, before it acts
}

func newToyServer(clock *fakes.Clock, ttl time.Duration) *toyServer {
	return &toyServer{clock: clock, ttl: ttl, freed: make(chan struct{})}
}

// request gates a request named what and, unless its context ended, runs
// f on the server.
func (s *toyServer) request(ctx context.Context, what string, f func() error) error {
	done := locks.GateRequest(ctx, what)
	defer done()
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.during != nil {
		s.during()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.owner != "" && !s.clock.Now().Before(s.expiry) {
		s.freeLocked()
	}
	return f()
}

func (s *toyServer) freeLocked() {
	s.owner = ""
	close(s.freed)
	s.freed = make(chan struct{})
}

// set is SET NX PX: it grants owner the lock if it is free.
func (s *toyServer) set(ctx context.Context, owner string) (<-chan struct{}, error) {
	var freed <-chan struct{}
	err := s.request(ctx, "toy SET", func() error {
		s.sets++
		freed = s.freed
		if s.owner != "" {
			return errToyTaken
		}
		s.owner, s.expiry = owner, s.clock.Now().Add(s.ttl)
		return nil
	})
	return freed, err
}

// owned runs f if owner holds the lock.
func (s *toyServer) owned(ctx context.Context, what, owner string, f func()) error {
	return s.request(ctx, what, func() error {
		if s.owner != owner {
			return errToyNotOwner
		}
		f()
		return nil
	})
}

func (s *toyServer) renew(ctx context.Context, owner string) error {
	return s.owned(ctx, "toy PEXPIRE", owner, func() { s.expiry = s.clock.Now().Add(s.ttl) })
}

func (s *toyServer) release(ctx context.Context, owner string) error {
	return s.owned(ctx, "toy DEL", owner, s.freeLocked)
}

func (s *toyServer) holder() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.owner
}

func (s *toyServer) setCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sets
}

// wait is a blocking query: it returns once freed is closed (the holder
// went) or ctx ends.
func (s *toyServer) wait(ctx context.Context, freed <-chan struct{}) error {
	done := locks.GateRequest(ctx, "toy WAIT")
	defer done()
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case <-freed:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// toyClient is one client of the toy library. Its Lock waits for the
// holder to go with a blocking query (toy WAIT) and tries again; with
// poll, it tries again at once instead, as a poller with no delay.
type toyClient struct {
	s     *toyServer
	owner string
	poll  bool
}

func (c *toyClient) grant() (g adapter.Grant) {
	g.Release = func(ctx context.Context) error { return c.s.release(ctx, c.owner) }
	g.Renew = func(ctx context.Context) error { return c.s.renew(ctx, c.owner) }
	return g
}

// tryLock is the library's single attempt.
func (c *toyClient) tryLock(ctx context.Context) (adapter.Grant, error) {
	if _, err := c.s.set(ctx, c.owner); err != nil {
		return adapter.Grant{}, err
	}
	return c.grant(), nil
}

// lock tries until granted or ctx ends.
func (c *toyClient) lock(ctx context.Context) (adapter.Grant, error) {
	for {
		freed, err := c.s.set(ctx, c.owner)
		switch {
		case err == nil:
			return c.grant(), nil
		case !errors.Is(err, errToyTaken):
			return adapter.Grant{}, err
		case c.poll:
			continue
		}
		if err := c.s.wait(ctx, freed); err != nil {
			return adapter.Grant{}, err
		}
	}
}
