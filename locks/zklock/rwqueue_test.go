package zklock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/lockproof/lockproof/internal/locktest"
	"github.com/lockproof/lockproof/locks"
)

// queued is one contender of TestRWMutexServesWhomTheQueueSays: its Lock
// running (res), or its lease once granted.
type queued struct {
	write  bool
	res    <-chan locktest.Result
	cancel context.CancelFunc
	lease  locks.Lease
}

// holds reports whether q[i] holds by the queue's rule: a writer at the
// head, a reader with no writer ahead.
func holds(q []*queued, i int) bool {
	for _, e := range q[:i] {
		if q[i].write || e.write {
			return false
		}
	}
	return true
}

// TestRWMutexServesWhomTheQueueSays: for each seed, a random run of
// readers and writers queueing, holders unlocking and waiters giving up,
// on minizk in manual time. After every step the contenders that the
// queue's rule says hold (a writer at the head, a reader with no writer
// ahead) must have been granted, and the others must still wait. The
// suite sees safety; this is liveness among waiters, which it does not
// see (its clients are all crashed before its deadlock check, and a
// waiter that waits for one who waits for it is freed by that): a reader
// that counted a writer behind it (python-zk/kazoo#649) waits here for
// good, and so does a waiter that watches a node whose deletion does not
// let it in while the one that does goes unwatched.
func TestRWMutexServesWhomTheQueueSays(t *testing.T) {
	for seed := range uint64(12) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) { servesWhomTheQueueSays(t, seed, 40) })
	}
}

// receive is locktest.Receive that names the run's steps so far and the
// contender at index i when the Lock does not return.
func receive(t *testing.T, ch <-chan locktest.Result, trail []string, i int) locktest.Result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(locktest.LockTimeout):
		t.Fatalf("%s: contender %d's Lock did not return within %v", strings.Join(trail, " "), i, locktest.LockTimeout)
		return locktest.Result{}
	}
}

func servesWhomTheQueueSays(t *testing.T, seed uint64, steps int) {
	z := manualZK(t)
	rng := rand.New(rand.NewPCG(seed, 1))
	m := newRWClient(t, z).m // only to read the queue
	var q []*queued
	var trail []string
	defer func() {
		for _, e := range q {
			if e.lease != nil {
				_ = e.lease.Unlock(context.Background())
			} else {
				e.cancel()
				if r := <-e.res; r.Lease != nil {
					_ = r.Lease.Unlock(context.Background())
				}
			}
		}
	}()
	for range steps {
		var held, waiting []int
		for i, e := range q {
			if e.lease != nil {
				held = append(held, i)
			} else {
				waiting = append(waiting, i)
			}
		}
		switch op := rng.IntN(6); {
		case op <= 2 && len(q) < 8 || len(held)+len(waiting) == 0:
			write := rng.IntN(2) == 0
			c := newRWClient(t, z)
			l := c.m.RLocker()
			if write {
				l = c.m.Locker()
			}
			ctx, cancel := context.WithCancel(context.Background())
			q = append(q, &queued{write: write, res: locktest.LockAsync(ctx, l), cancel: cancel})
			trail = append(trail, map[bool]string{false: "+r", true: "+w"}[write])
			queue(t, z, m, len(q)) // its node is in, in arrival order
		case op == 3 && len(held) > 0:
			i := held[rng.IntN(len(held))]
			if err := q[i].lease.Unlock(context.Background()); err != nil {
				t.Fatalf("%s: unlock %d: %v", strings.Join(trail, " "), i, err)
			}
			q[i].cancel()
			q = append(q[:i], q[i+1:]...)
			trail = append(trail, fmt.Sprint("unlock ", i))
		case len(waiting) > 0:
			i := waiting[rng.IntN(len(waiting))]
			q[i].cancel()
			if r := receive(t, q[i].res, trail, i); !errors.Is(r.Err, context.Canceled) {
				t.Fatalf("%s: the waiter %d given up: %v, want context.Canceled", strings.Join(trail, " "), i, r.Err)
			}
			q = append(q[:i], q[i+1:]...)
			trail = append(trail, fmt.Sprint("cancel ", i))
		default:
			continue
		}
		for i, e := range q {
			if e.lease == nil && holds(q, i) {
				r := receive(t, e.res, trail, i)
				if r.Err != nil {
					t.Fatalf("%s: contender %d: %v", strings.Join(trail, " "), i, r.Err)
				}
				e.lease = r.Lease
			}
		}
		for i, e := range q {
			if e.lease == nil {
				stillWaiting(t, fmt.Sprintf("%s: contender %d", strings.Join(trail, " "), i), e.res)
			}
		}
		queue(t, z, m, len(q)) // nothing left behind by a cancel or an unlock
	}
	t.Logf("%s", strings.Join(trail, " "))
}
