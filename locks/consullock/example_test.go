package consullock_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/hashicorp/consul/api"

	"github.com/lockproof/lockproof/fakes/miniconsul"
	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/locks/consullock"
)

func Example() {
	srv, err := miniconsul.Start() // in a test, use consulfake.New(t)
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client, err := api.NewClient(&api.Config{Address: srv.Addr(), HttpClient: &http.Client{Transport: tr}})
	if err != nil {
		panic(err)
	}

	locker, err := consullock.New(client, "orders/42")
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	var store locks.Fence[string]
	var last locks.Token
	for _, who := range []string{"first", "second"} {
		lease, err := locker.Lock(ctx)
		if err != nil {
			panic(err)
		}
		tok, _ := lease.Token()
		if err := store.Write(tok, who); err != nil { // the token travels with the write
			panic(err)
		}
		fmt.Println(who, "holds a token above the last one:", tok > last)
		last = tok
		if err := lease.Unlock(ctx); err != nil {
			panic(err)
		}
	}
	fmt.Println("stored:", store.Value())
	// Output:
	// first holds a token above the last one: true
	// second holds a token above the last one: true
	// stored: second
}

func ExampleNewRWMutex() {
	srv, err := miniconsul.Start() // in a test, use consulfake.New(t)
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client, err := api.NewClient(&api.Config{Address: srv.Addr(), HttpClient: &http.Client{Transport: tr}})
	if err != nil {
		panic(err)
	}

	m, err := consullock.NewRWMutex(client, "config")
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	r1, err := m.RLocker().Lock(ctx)
	if err != nil {
		panic(err)
	}
	r2, err := m.RLocker().Lock(ctx) // readers share
	if err != nil {
		panic(err)
	}
	_, err = m.Locker().TryLock(ctx)
	fmt.Println("a writer while two read:", errors.Is(err, locks.ErrLocked))
	for _, r := range []locks.Lease{r1, r2} {
		if err := r.Unlock(ctx); err != nil {
			panic(err)
		}
	}
	w, err := m.Locker().Lock(ctx)
	if err != nil {
		panic(err)
	}
	wt, _ := w.Token()
	rt, _ := r2.Token()
	fmt.Println("the writer's token is above the readers':", wt > rt)
	if err := w.Unlock(ctx); err != nil {
		panic(err)
	}
	// Output:
	// a writer while two read: true
	// the writer's token is above the readers': true
}
