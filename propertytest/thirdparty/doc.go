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
// # Bugs found
//
// kvtools/redis v1.1.0, whole-second renewals: the valkeyrie lock's
// heartbeat renews its key through a script that sets it with EX and the
// TTL cut to whole seconds, while the grant set it to the millisecond
// (PX). With a TTL of 1.5 s the key dies 0.5 s before the holder's TTL
// from its grant has run out (up to 0.999 s for other TTLs) and a second
// client takes it while the first one's lockHeld channel is still open:
// two holders. TestKVToolsRedisRenewsInWholeSeconds shows it in a few
// calls; TestThirdPartyKVToolsRedisWholeSeconds is the suite catching it
// as exclusivity, its Renew making the heartbeat's request on the run's
// clock (with a TTL of 60.999 s, whose wall-time heartbeat never runs
// within a run).
//
// kvtools/redis v1.1.0 built as valkeyrie.NewStore builds it (New, the raw
// codec): Unlock's compare-and-delete script decodes the stored value as
// JSON, which the raw codec did not write, so every Unlock fails with a
// script error (and every heartbeat too): the lock is only ever freed by
// its TTL. TestKVToolsRedisRawCodecUnlockFails shows it;
// TestThirdPartyKVToolsRedisRawCodec is the suite catching it as
// progress. Also, in both codecs: once the heartbeat has ended (a failed
// renewal, or the context given to Lock ended), Unlock blocks forever on
// an unbuffered channel nobody reads; the adapter does not call it then.
//
// redsync over a redigo pool on loopback TCP, with its default wall-time
// retry delay, ends within 60 s (TestThirdPartyRedsyncRedigoTCP) and
// passes in memory; amyangfei/redlock-go v3.0.0 on three nodes shows no
// bug of its own (TestThirdPartyRedlockGo).
//
// kvtools/etcdv3 v1.0.2: its Locker's Lock(ctx) returns (nil, nil), no
// error and no lost channel, when Mutex.Lock fails with context.Canceled,
// as it does when a caller gives up waiting while another client holds the
// lock. A Go caller that checks the error goes on as a holder it is not,
// and its key may even stay queued (a Txn cut short is not cleaned up), so
// it becomes the holder later without knowing. Shown by
// TestKvtoolsEtcdv3CancelledLockReturnsNoError (two clients, a cancelled
// wait) and, through the suite with an OpTimeout that cancels a queued
// TryLock, as exclusivity by TestThirdPartyKvtoolsEtcdv3CancelledIsGranted
// (LOCKPROOF_DEEP=1). Scalingo/go-etcd-lock v5.0.8 passes its own claims.
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
// holder's connection, with no TTL. On the MySQL fake it keeps
// exclusivity, symmetry and progress (TestThirdPartyMySQLLock); a crash
// severs the connection and MySQL frees the lock at once, which the suite
// allows for a Crasher's lease. It has no deadlock freedom, by design: a
// holder that stops acting without releasing, its connection alive, keeps
// the lock for ever, and the suite says so.
//
// kvtools/zookeeper v1.0.2 passes its own claims
// (TestThirdPartyKvtoolsZooKeeper), but its Lock returns the error of the
// setData it makes on the lock's node after zk.Lock granted, without
// releasing: a caller that reads the error as "not locked" holds the lock
// unknowingly, and every other client waits for as long as its Store (its
// session) lives; a retry on the same Locker gets zk.ErrDeadlock.
// TestKvtoolsZooKeeperFailedLockHolds shows it with that setData's
// connection dropped (the client keeps its session). The suite's faults
// (crashes only) do not reach that moment.
package thirdparty
