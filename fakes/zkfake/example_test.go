package zkfake_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/lockproof/lockproof/fakes/minizk"
	"github.com/lockproof/lockproof/fakes/zkfake"
)

func ExampleStart() {
	z, err := zkfake.Start(zkfake.ManualTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer z.Close()
	conn, _, err := z.Connect(4 * time.Second)
	if err != nil {
		fmt.Println(err)
		return
	}
	acl := zk.WorldACL(zk.PermAll)
	if _, err := conn.Create(z.Prefix(), nil, zk.FlagEphemeral, acl); err != nil {
		fmt.Println(err)
		return
	}
	if err := z.AdvanceTime(4 * time.Second); err != nil {
		fmt.Println(err)
		return
	}
	_, _, err = z.Minizk().Get(z.Prefix())
	fmt.Println("ephemeral gone:", errors.Is(err, minizk.ErrNoNode))
	// Output:
	// ephemeral gone: true
}
