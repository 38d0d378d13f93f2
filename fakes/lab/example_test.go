package lab_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/lockproof/lockproof/fakes/lab"
)

// Example starts a 3-member etcd cluster, isolates its leader and waits for
// another member to lead. It needs root and a sandbox: a program calls
// lab.SandboxMain first (a test, from its TestMain), so it is not run.
func Example() {
	lab.SandboxMain()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := lab.StartEtcd(ctx, lab.Options{Members: 3})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	leader, err := c.Leader(ctx)
	if err != nil {
		log.Fatal(err)
	}
	alone, err := lab.Isolate(len(c.Members()), leader)
	if err != nil {
		log.Fatal(err)
	}
	if err := c.Apply(ctx, alone); err != nil {
		log.Fatal(err)
	}
	next, err := c.AwaitLeader(ctx, leader)
	if err != nil {
		log.Fatal(err)
	}
	if err := c.Heal(ctx); err != nil {
		log.Fatal(err)
	}
	// A client dials the members through the lab's Dialer, for example
	// clientv3 with grpc.WithContextDialer(c.Dialer().DialTCP).
	fmt.Println("new leader", next, "at", c.ClientAddr(next))
}
