package zklock_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/lockproof/lockproof/fakes/zkfake"
	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/locks/zklock"
)

// Two acquisitions one after the other; the fencing token, the czxid of
// the holder's node, travels with each write, so the store refuses a stale
// holder. The TTL is the session timeout the connection was granted. (It
// needs a ZooKeeper server, at LOCKPROOF_ZK_ADDR here, so it is compiled
// but not run.)
func Example() {
	const sessionTimeout = 10 * time.Second
	conn, _, err := zk.Connect([]string{os.Getenv("LOCKPROOF_ZK_ADDR")}, sessionTimeout,
		zk.WithDialer(zklock.HandshakeDialer(nil, zklock.HandshakeBound(sessionTimeout)))) // a paused server must not hold it
	if err != nil {
		panic(err)
	}
	defer conn.Close()

	locker, err := zklock.New(conn, "orders/42", locks.WithTTL(sessionTimeout))
	if err != nil {
		panic(err) // nil connection, empty name, bad prefix: a clear error
	}
	ctx := context.Background()
	var store locks.Fence[string]
	for _, who := range []string{"first", "second"} {
		lease, err := locker.Lock(ctx)
		if err != nil {
			panic(err)
		}
		tok, _ := lease.Token()
		if err := store.Write(tok, who); err != nil {
			panic(err)
		}
		fmt.Println(who, "held the lock")
		if err := lease.Unlock(ctx); err != nil {
			panic(err)
		}
	}
	fmt.Println("stored:", store.Value())
}

// Readers share the read-write mutex and keep a writer out; the writer
// holds once they are gone, with a fencing token above theirs. It runs on
// minizk, the module's in-process ZooKeeper.
func ExampleNewRWMutex() {
	z, err := zkfake.Start(zkfake.ForceMinizk())
	if err != nil {
		panic(err)
	}
	defer z.Close()
	const sessionTimeout = 10 * time.Second
	ctx := context.Background()
	var readers []locks.Lease
	var writer locks.Locker
	for i := range 3 {
		conn, _, err := z.Connect(sessionTimeout)
		if err != nil {
			panic(err)
		}
		m, err := zklock.NewRWMutex(conn, "config", append(z.LockOptions(), locks.WithTTL(sessionTimeout))...)
		if err != nil {
			panic(err)
		}
		if i == 2 {
			writer = m.Locker()
			break
		}
		lease, err := m.RLocker().Lock(ctx)
		if err != nil {
			panic(err)
		}
		readers = append(readers, lease)
		fmt.Println("reader", i+1, "holds")
	}
	_, err = writer.TryLock(ctx)
	fmt.Println("writer refused while they read:", errors.Is(err, locks.ErrLocked))
	var last locks.Token
	for _, r := range readers {
		last, _ = r.Token()
		if err := r.Unlock(ctx); err != nil {
			panic(err)
		}
	}
	w, err := writer.Lock(ctx)
	if err != nil {
		panic(err)
	}
	tok, _ := w.Token()
	fmt.Println("writer holds, token above the readers':", tok > last)
	if err := w.Unlock(ctx); err != nil {
		panic(err)
	}
	// Output:
	// reader 1 holds
	// reader 2 holds
	// writer refused while they read: true
	// writer holds, token above the readers': true
}
