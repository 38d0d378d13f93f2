// Package backends is propertytest's catalogue: a Factory for each of
// lockproof's locks, on its in-process fake in manual time, on real
// servers, and with backend faults.
//
//	rep := propertytest.Run(t, backends.RedisLock(), propertytest.Options{})
//
// The index:
//
//   - RedisLock, RedisSemaphore, RedisRWMutex, Redlock, EtcdLock,
//     EtcdSemaphore, EtcdRWMutex, ConsulLock, ConsulSemaphore,
//     ConsulRWMutex, MySQLLock (MySQLLockWith for another lock on the
//     same table), ZKLock, ZKSemaphore, ZKRWMutex, MemLock: the locks on
//     their fakes (fakes.Start*), every connection in memory where the
//     fake allows it.
//   - RedisLockWithFailover, RedisLockWithNetworkFaults,
//     ZKLockWithNetworkFaults: the same with backend faults (a replica's
//     promotion, partitions through chaos proxies).
//   - RedisLockOn, RedlockOn, EtcdLockOn, ConsulLockOn, MySQLLockOn,
//     ZKLockOn, ZKRWMutexOn: the locks on real servers, in real time.
//   - EtcdLockOptions, EtcdLockOnOptions, ConsulLockOptions,
//     ConsulLockOnOptions, ZKLockNetworkOptions, ZKLockOnOptions: the
//     Options those factories need.
//
// Each factory is also a worked example of the rules propertytest.Backend
// states for a Factory of one's own.
package backends
