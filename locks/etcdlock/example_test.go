package etcdlock_test

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/locks/etcdlock"
)

// Two acquisitions one after the other; the fencing token, the key's create
// revision, travels with each write, so the store refuses a stale holder.
// (It needs an etcd server, so it is compiled but not run; in a test, use
// etcdfake.New(t).)
func Example() {
	client, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://127.0.0.1:2379"}, DialTimeout: 5 * time.Second})
	if err != nil {
		panic(err)
	}
	defer client.Close()

	locker, err := etcdlock.New(client, "orders/42", locks.WithTTL(10*time.Second))
	if err != nil {
		panic(err) // nil client, empty name, TTL under a second: a clear error
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
		fmt.Println(who, "held token", tok)
		if err := lease.Unlock(ctx); err != nil {
			panic(err)
		}
	}
	fmt.Println("stored:", store.Value())
}
