package mysqllock_test

import (
	"context"
	"fmt"

	"github.com/lockproof/lockproof/fakes/mysqlfake"
	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/locks/mysqllock"
)

func Example() {
	srv, err := mysqlfake.Start() // in a test, mysqlfake.New(t); in production, sql.Open("mysql", dsn)
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	ctx := context.Background()
	if err := mysqllock.CreateTable(ctx, srv.DB(), ""); err != nil {
		panic(err)
	}

	locker, err := mysqllock.New(srv.DB(), "orders/42")
	if err != nil {
		panic(err)
	}
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
	lease, err := locker.TryLock(ctx)
	fmt.Println("free again:", err == nil)
	if err == nil {
		_ = lease.Unlock(ctx)
	}
	fmt.Println("stored:", store.Value())
	// Output:
	// first held token 1
	// second held token 2
	// free again: true
	// stored: second
}
