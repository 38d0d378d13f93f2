package redislock_test

import (
	"context"
	"fmt"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/locks/redislock"
)

func Example() {
	srv, err := miniredis.Run() // in a test, use fakes.Redis(t)
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	client := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer client.Close()

	locker, err := redislock.New(client, "orders/42")
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	var store locks.Fence[string]
	for _, who := range []string{"first", "second"} {
		lease, err := locker.Lock(ctx)
		if err != nil {
			panic(err)
		}
		tok, _ := lease.Token()
		if err := store.Write(tok, who); err != nil { // the token travels with the write
			panic(err)
		}
		fmt.Println(who, "held token", tok)
		if err := lease.Unlock(ctx); err != nil {
			panic(err)
		}
	}
	fmt.Println("stored:", store.Value())
	// Output:
	// first held token 1
	// second held token 2
	// stored: second
}
