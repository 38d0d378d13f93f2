// Package thirdparty runs the propertytest suite on other people's locks:
// go-redsync/redsync and bsm/redislock on miniredis in manual time, the
// Mutex of etcd's client/v3/concurrency on an embedded etcd, the Lock of
// hashicorp/consul/api on miniconsul, and the Lock of go-zookeeper/zk on
// minizk in manual time. The package is its tests: each library gets a
// test-only adapter to locks.Locker and locks.Lease that neither fixes nor
// worsens what the library does, one run with the claims the library makes
// for itself (it must pass), and one holding it to pause safety without a
// fencing token, which the suite must report as broken.
//
//	go test ./propertytest/thirdparty/ -v
//	LOCKPROOF_DEEP=1 go test ./propertytest/thirdparty/ -timeout 30m -v
//
// Every test logs its seed and the command that replays it.
//
// kvtools/consul v1.0.2 (kvconsul_test.go): its store.Locker's Lock(ctx)
// returns (nil, nil) when ctx ends while another client holds the lock
// (api.Lock, given ctx.Done() as its stop channel, returns nothing at all
// once it sees the channel closed between two reads of a held key). A
// caller that takes the nil error for the lock, as valkeyrie documents it,
// holds nothing, and its nil lost-lock channel never tells it so: another
// client is granted the lock while it acts. The suite reports exclusivity
// (TestThirdPartyKVConsulNilLockCaught); TestThirdPartyKVConsulNilLock
// shows it in a few calls. A careful caller, who takes a nil channel for no
// lock, passes (TestThirdPartyKVConsul).
//
// consul/api v1.34.5's Semaphore (semaphore_test.go): its one-shot mode
// (SemaphoreTryOnce) gives up when another contender's compare-and-set of
// the holders' record landed first, though a permit may still be free: a
// spurious refusal, which the suite counts (Report.SpuriousRefusals) and
// tolerates once, rather than calling it a deadlock
// (TestThirdPartyConsulSemaphoreSpuriousRefusal shows one).
//
// go-mysql-lock v0.0.7 (mysqllock_test.go) holds its lock as long as the
// holder's connection, with no TTL; a crash severs the connection and
// MySQL frees the lock at once, which the suite's lease model, holding a
// crashed holder's lease to TTL after its call, reports as exclusivity.
// Its own-claims test is skipped until the model knows leases that end
// with their holder's connection (LOCKPROOF_MYSQLLOCK=1 runs it).
package thirdparty
