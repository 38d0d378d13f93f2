package backends

import (
	"context"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/locks/etcdlock"
	"github.com/lockproof/lockproof/propertytest"
	"github.com/lockproof/lockproof/propertytest/suitemain"
)

// One run by default, in real time on three embedded members (about 10 s:
// the start, the run, and a leader killed before the end probe); more
// runs and the broken lock below run with LOCKPROOF_DEEP=1.
func TestEtcdLeaderKillsKeepsItsProperties(t *testing.T) {
	etcdRuns(t, 1)
	rep := propertytest.Run(t, EtcdLockLeaderKills(), EtcdLeaderKillsOptions())
	checkedEveryRun(t, rep, propertytest.Exclusivity, propertytest.DeadlockFreedom)
	noExpected(t, rep)
}

// leaderKillRuns sets up a deep test of etcdlock under leader kills: up to
// n runs of 7 steps on average, shrinking cut short; skipped without
// LOCKPROOF_DEEP=1 (each run takes 10 to 20 s of real time).
func leaderKillRuns(t *testing.T, n int) propertytest.Options {
	if !suitemain.Deep() {
		t.Skip("leader kills on a 3-member embedded etcd take 10-20 s a run: run with LOCKPROOF_DEEP=1")
	}
	suitemain.SetFlag(t, "rapid.checks", fmt.Sprint(n))
	suitemain.SetFlag(t, "rapid.steps", "7")
	o := EtcdLeaderKillsOptions()
	// Half a second of Slack covers a lease's revocation on one member
	// (the lessor's tick), and leaves the election's half second, which
	// the new leader adds to every lease, to Recovery alone.
	o.Slack, o.ShrinkRuns = 500*time.Millisecond, 2
	return o
}

// More runs of EtcdLockLeaderKills with its Recovery, and a Slack of half
// a second: a holder's key outlives a new leader's election by about
// 1.6 s, which that Slack alone would not cover.
func TestEtcdLeaderKillsDeep(t *testing.T) {
	o := leaderKillRuns(t, 6)
	rep := propertytest.Run(t, EtcdLockLeaderKills(), o)
	checkedEveryRun(t, rep, propertytest.Exclusivity, propertytest.DeadlockFreedom)
	noExpected(t, rep)
}

// The recovery bound hides no real bug: an etcdlock whose holder rewrites
// its key without clientv3.WithIgnoreLease, which detaches the key from
// its session's lease (etcd's documented Put semantics), leaves a crashed
// holder's lock taken forever, and is caught with Recovery in place.
func TestEtcdLeaderKillsCatchesADetachedKey(t *testing.T) {
	o := leaderKillRuns(t, 10)
	rep := propertytest.Check(t, etcdLeaderKillsWith(newDetachingLock), o)
	caughtAs(t, rep, propertytest.DeadlockFreedom)
}

// detachingLock is etcdlock with the bug TestEtcdLeaderKillsCatchesADetachedKey
// catches: once granted, it writes its key again without a lease.
type detachingLock struct {
	locks.Locker
	c   *clientv3.Client
	key string // the contenders' key prefix (etcdlock.Locker.Key)
}

func newDetachingLock(c *clientv3.Client, name string, opts ...locks.Option) (locks.Locker, error) {
	l, err := etcdlock.New(c, name, opts...)
	if err != nil {
		return nil, err
	}
	return detachingLock{Locker: l, c: c, key: l.Key()}, nil
}

func (l detachingLock) Lock(ctx context.Context) (locks.Lease, error) {
	return l.detach(ctx)(l.Locker.Lock(ctx))
}

func (l detachingLock) TryLock(ctx context.Context) (locks.Lease, error) {
	return l.detach(ctx)(l.Locker.TryLock(ctx))
}

// detach rewrites the holder's key (the contender with the smallest
// create revision: the caller, once granted) with no lease. A rewrite that
// fails leaves the key on its lease: the bug does not strike that time.
func (l detachingLock) detach(ctx context.Context) func(locks.Lease, error) (locks.Lease, error) {
	return func(lease locks.Lease, err error) (locks.Lease, error) {
		if err != nil {
			return lease, err
		}
		resp, gerr := l.c.Get(ctx, l.key, clientv3.WithPrefix(),
			clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend), clientv3.WithLimit(1))
		if gerr == nil && len(resp.Kvs) == 1 {
			_, _ = l.c.Put(ctx, string(resp.Kvs[0].Key), "")
		}
		return lease, nil
	}
}
