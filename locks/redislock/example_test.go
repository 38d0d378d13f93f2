package redislock_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/locks/redislock"
)

func Example() {
	srv, err := miniredis.Run() // in a test, use redisfake.New(t)
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

func ExampleNewSemaphore() {
	srv, err := miniredis.Run() // in a test, use redisfake.New(t)
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	client := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer client.Close()

	// At most two workers call the rate-limited API at once.
	pool, err := redislock.NewSemaphore(client, "api-quota", 2)
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	first, _ := pool.TryLock(ctx)
	second, _ := pool.TryLock(ctx)
	if _, err := pool.TryLock(ctx); errors.Is(err, locks.ErrLocked) {
		fmt.Println("third refused: both permits held")
	}
	for _, lease := range []locks.Lease{first, second} {
		tok, _ := lease.Token()
		fmt.Println("permit with token", tok)
		_ = lease.Unlock(ctx)
	}
	third, err := pool.TryLock(ctx)
	if err != nil {
		panic(err)
	}
	tok, _ := third.Token()
	fmt.Println("after the unlocks: token", tok)
	_ = third.Unlock(ctx)
	// Output:
	// third refused: both permits held
	// permit with token 1
	// permit with token 2
	// after the unlocks: token 3
}

func ExampleNewRWMutex() {
	srv, err := miniredis.Run() // in a test, use redisfake.New(t)
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	client := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer client.Close()

	// Many request handlers read the config at once; a reload writes it alone.
	config, err := redislock.NewRWMutex(client, "config")
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	r1, err := config.RLocker().Lock(ctx)
	if err != nil {
		panic(err)
	}
	r2, err := config.RLocker().Lock(ctx)
	if err != nil {
		panic(err)
	}
	if _, err := config.Locker().TryLock(ctx); errors.Is(err, locks.ErrLocked) {
		fmt.Println("reload refused while two readers hold")
	}
	for _, r := range []locks.Lease{r1, r2} {
		if err := r.Unlock(ctx); err != nil {
			panic(err)
		}
	}
	w, err := config.Locker().Lock(ctx)
	if err != nil {
		panic(err)
	}
	tok, _ := w.Token()
	fmt.Println("reload holds token", tok)
	if err := w.Unlock(ctx); err != nil {
		panic(err)
	}
	// Output:
	// reload refused while two readers hold
	// reload holds token 3
}
