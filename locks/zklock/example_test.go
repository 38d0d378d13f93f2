package zklock_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/go-zookeeper/zk"

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
	conn, _, err := zk.Connect([]string{os.Getenv("LOCKPROOF_ZK_ADDR")}, sessionTimeout)
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
