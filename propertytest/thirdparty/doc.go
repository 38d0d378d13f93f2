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
package thirdparty
