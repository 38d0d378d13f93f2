package backends

import (
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lockproof/lockproof/fakes/etcdfake"
	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/locks/etcdlock"
	"github.com/lockproof/lockproof/propertytest"
)

// EtcdLeaderKillsOptions are the Options to run EtcdLockLeaderKills with:
// EtcdLockOptions (TTL 1s, Slack 750ms, Settle 50ms, for the reasons given
// on EtcdLock), claiming FaultNodeDown besides the defaults.
func EtcdLeaderKillsOptions() propertytest.Options {
	o := EtcdLockOptions()
	o.Claims = []propertytest.FaultKind{propertytest.FaultCrash, propertytest.FaultPause, propertytest.FaultNodeDown}
	return o
}

// EtcdLockLeaderKills is the Factory of etcdlock on a 3-member etcd
// cluster embedded in the process (etcdfake.StartCluster with
// ForceEmbedded), in real time as EtcdLock. Its one fault, Ongoing, kills
// the current leader abruptly (no leadership transfer; FaultNodeDown) and
// returns once the other two have elected a new one; its heal restarts
// the member with its data. After every client crashed the nemesis kills a
// leader before each deadlock-freedom probe. Recovery is etcdRecovery of
// the members' election timeout: 1.5s. Run it with EtcdLeaderKillsOptions.
func EtcdLockLeaderKills() propertytest.Factory {
	return etcdLeaderKillsWith(func(c *clientv3.Client, name string, opts ...locks.Option) (locks.Locker, error) {
		return etcdlock.New(c, name, opts...)
	})
}

// etcdClusterMembers is the size of EtcdLockLeaderKills' cluster: the
// least that survives the loss of its leader.
const etcdClusterMembers = 3

// etcdLeaderKillsWith is EtcdLockLeaderKills for the lockers newLocker
// makes.
func etcdLeaderKillsWith(newLocker func(c *clientv3.Client, name string, opts ...locks.Option) (locks.Locker, error)) propertytest.Factory {
	return func(env propertytest.Env) (*propertytest.Backend, error) {
		s, err := etcdfake.StartCluster(etcdClusterMembers, etcdfake.ForceEmbedded())
		if err != nil {
			return nil, fmt.Errorf("backends: %w", err)
		}
		propertytest.CloseAtCleanup(env, "the embedded etcd cluster", s)
		election := time.Duration(s.Embedded(0).Config().ElectionMs) * time.Millisecond
		be := etcdBackendWith(s, newLocker)
		be.Recovery = etcdRecovery(election)
		killed := -1
		be.Faults = []propertytest.Fault{{
			Name: "kill the etcd leader", Kind: propertytest.FaultNodeDown, Ongoing: true,
			Inject: func() error {
				i, err := etcdLeader(s)
				if err != nil {
					return err
				}
				env.Logf("backends: killing etcd member %d, the leader", i)
				s.Stop(i)
				killed = i
				return nil
			},
			Heal: func() error {
				s.Restart(killed)
				return nil
			},
		}}
		return be.Backend, nil
	}
}

// etcdRecovery is how much longer than its TTL a dead holder's lease may
// live on an etcd cluster of election timeout et whose leader was just
// lost:
//
//   - the followers notice the loss after a randomized election timeout,
//     between et and 2 et, and elect a leader in one round of votes
//     (milliseconds on loopback): up to 2 et;
//   - the new leader restarts every lease's timer for its whole TTL plus
//     et (the lessor's Promote with the election timeout), wherever the
//     old leader's timer stood.
//
// What one member adds already, the server's TTL rounded up to whole
// seconds and the lessor's revocation up to half a second after expiry,
// is the Slack's (see EtcdLock and EtcdLockOn).
func etcdRecovery(et time.Duration) time.Duration { return 2*et + et }

// etcdLeader returns the index of the running member s's running members
// agree leads.
func etcdLeader(s *etcdfake.Server) (int, error) {
	var leader uint64
	for i := range s.Members() {
		if e := s.Embedded(i); e != nil {
			leader = uint64(e.Server.Leader())
			break
		}
	}
	for i := range s.Members() {
		if e := s.Embedded(i); e != nil && uint64(e.Server.MemberID()) == leader {
			return i, nil
		}
	}
	return 0, fmt.Errorf("backends: no running etcd member leads (leader id %x)", leader)
}
