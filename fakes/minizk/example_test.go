package minizk_test

import (
	"fmt"
	"io"
	"log"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/lockproof/lockproof/fakes/minizk"
)

func Example() {
	srv, err := minizk.Start() // in a test, use zkfake.New(t)
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	conn, _, err := zk.Connect([]string{srv.Addr()}, 10*time.Second, zk.WithLogger(log.New(io.Discard, "", 0)))
	if err != nil {
		panic(err)
	}
	defer conn.Close()

	acl := zk.WorldACL(zk.PermAll)
	if _, err := conn.Create("/election", nil, 0, acl); err != nil {
		panic(err)
	}
	me, err := conn.Create("/election/n-", []byte("me"), zk.FlagEphemeral|zk.FlagSequence, acl)
	if err != nil {
		panic(err)
	}
	fmt.Println("created", me)

	// Expire the session as its timeout would (with WithClock(manual), an
	// Advance past the timeout does the same): its ephemeral node goes.
	if err := srv.ExpireSession(conn.SessionID()); err != nil {
		panic(err)
	}
	kids, _ := srv.Children("/election")
	fmt.Println("children after expiry:", kids)
	// Output:
	// created /election/n-0000000000
	// children after expiry: []
}
