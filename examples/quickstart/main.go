// Quickstart is the README's quick start as a program: takeOrder, word for
// word as the README shows it, run on an embedded miniredis (or the Redis
// at -redis), writing through a locks.Fence.
//
//	go run ./examples/quickstart
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/locks/redislock"
)

// takeOrder writes row for order 42 while it holds the lock orders/42.
func takeOrder(ctx context.Context, client *redis.Client, store *locks.Fence[string], row string) error {
	locker, err := redislock.New(client, "orders/42", locks.WithTTL(10*time.Second))
	if err != nil {
		return err // empty name, TTL ≤ 0, nil client: a clear error, never a panic
	}
	lease, err := locker.Lock(ctx) // waits by notification; honours ctx and WithWaitBudget
	if err != nil {
		return err
	}
	defer lease.Unlock(ctx) // owner-checked: never releases someone else's lock

	tok, _ := lease.Token()      // strictly increasing per lock name
	return store.Write(tok, row) // let the storage refuse stale tokens (here a locks.Fence)
}

func main() {
	addr := flag.String("redis", "", "a Redis host:port (default: an embedded miniredis)")
	flag.Parse()
	if *addr == "" {
		srv, err := miniredis.Run()
		if err != nil {
			log.Fatal(err)
		}
		defer srv.Close()
		*addr = srv.Addr()
	}
	ctx := context.Background()
	client := redis.NewClient(&redis.Options{Addr: *addr})
	defer client.Close()
	var store locks.Fence[string]
	for _, row := range []string{"picked", "packed", "shipped"} {
		if err := takeOrder(ctx, client, &store, row); err != nil {
			log.Fatal(err)
		}
	}
	tok, _ := store.Highest()
	fmt.Printf("order 42: %s (last token %d)\n", store.Value(), tok)
}
