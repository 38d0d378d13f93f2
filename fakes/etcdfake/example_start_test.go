package etcdfake_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/lockproof/lockproof/fakes/etcdfake"
	"github.com/lockproof/lockproof/fakes/redisfake"
	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/locks/etcdlock"
	"github.com/lockproof/lockproof/locks/redislock"
)

// A program, not a test: it starts miniredis and a one-member embedded
// etcd with the Start functions (no testing.T anywhere), takes a lock on
// each, unlocks it, and closes both fakes. Pass redisfake.At or
// etcdfake.At to run the same program on real servers.
func Example_withoutATest() {
	ctx := context.Background()
	r, err := redisfake.Start()
	if err != nil {
		fmt.Println("start redis:", err)
		return
	}
	e, err := etcdfake.Start()
	if err != nil {
		fmt.Println("start etcd:", err, r.Close())
		return
	}
	rl, rerr := redislock.New(r.Client(), "orders", r.LockOptions()...)
	el, eerr := etcdlock.New(e.Client(), "orders", e.LockOptions()...)
	if err := errors.Join(rerr, eerr); err != nil {
		fmt.Println(err, r.Close(), e.Close())
		return
	}
	for _, b := range []struct {
		name string
		lock locks.Locker
		fake interface{ Close() error }
	}{{"redis", rl, r}, {"etcd", el, e}} {
		lockAndUnlock(ctx, b.name, b.lock)
		fmt.Printf("%s closed: %v\n", b.name, b.fake.Close())
	}

	// Output:
	// redis: locked, fenced: true
	// redis: unlocked: <nil>
	// redis closed: <nil>
	// etcd: locked, fenced: true
	// etcd: unlocked: <nil>
	// etcd closed: <nil>
}

// lockAndUnlock takes l, says whether the lease carries a fencing token,
// and unlocks it.
func lockAndUnlock(ctx context.Context, backend string, l locks.Locker) {
	lease, err := l.Lock(ctx)
	if err != nil {
		fmt.Println(backend+":", err)
		return
	}
	_, fenced := lease.Token()
	fmt.Printf("%s: locked, fenced: %v\n", backend, fenced)
	fmt.Printf("%s: unlocked: %v\n", backend, lease.Unlock(ctx))
}
