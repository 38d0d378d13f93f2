package mutants

import (
	"github.com/lockproof/lockproof/fakes/redisfake"
	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/locks/redislock"
	"github.com/lockproof/lockproof/propertytest"
	"github.com/lockproof/lockproof/propertytest/backends"
)

func init() {
	register(Mutant{Name: "single-node-posing-as-three", Breaks: propertytest.Availability,
		Bug:     "a lock sold as running on three nodes keeps its key on node 0 alone, so losing that one node (a minority) takes the lock down",
		Factory: singleNodeAsThree(), Fixed: backends.Redlock(3),
		// It claims what a three-node lock claims: a minority of nodes down.
		Options: claiming(propertytest.FaultCrash, propertytest.FaultNodeDown)})
}

// singleNodeAsThree is the Factory of redislock on node 0 of three
// miniredis nodes, presented as a three-node backend.
func singleNodeAsThree() propertytest.Factory {
	return func(env propertytest.Env) (*propertytest.Backend, error) {
		g, err := redisfake.StartCluster(3, redisfake.ManualTime(epoch), redisfake.ForceMiniredis())
		if err != nil {
			return nil, err
		}
		propertytest.CloseAtCleanup(env, "the RedisCluster fake", g)
		return &propertytest.Backend{
			NewLocker: func(name string, opts ...locks.Option) (locks.Locker, error) {
				return redislock.New(g.Node(0).NewClient(), name, append(g.LockOptions(), opts...)...)
			},
			Clock: g.Clock(), Advance: g.Advance, Nodes: 3,
			StopNode: g.Stop, StartNode: func(i int) { g.Restart(i, true) },
			InProcess: true,
		}, nil
	}
}
