package etcdlock

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/lockproof/lockproof/fakes/etcdfake"
	"github.com/lockproof/lockproof/locks"
)

// lyingKeepAlives makes the next lies keep-alive answers a client receives
// say "lease not found" (TTL 0), as an etcd leader cut off from its cluster
// answers for a lease granted through the majority since (etcd before
// 3.4.31; see renewOwn). told counts the answers changed.
type lyingKeepAlives struct {
	lies atomic.Int64
	told atomic.Int64
}

func (ly *lyingKeepAlives) dialOption() grpc.DialOption {
	return grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn,
		method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		cs, err := streamer(ctx, desc, cc, method, opts...)
		if err != nil || method != "/etcdserverpb.Lease/LeaseKeepAlive" {
			return cs, err
		}
		return &lyingStream{ClientStream: cs, ly: ly}, nil
	})
}

type lyingStream struct {
	grpc.ClientStream
	ly *lyingKeepAlives
}

func (s *lyingStream) RecvMsg(m any) error {
	if err := s.ClientStream.RecvMsg(m); err != nil {
		return err
	}
	if resp, ok := m.(*pb.LeaseKeepAliveResponse); ok && s.ly.lies.Add(-1) >= 0 {
		resp.TTL = 0
		s.ly.told.Add(1)
	}
	return nil
}

// heldBehindLiar returns a lease held through a client whose keep-alive
// answers ly can falsify; the TTL is long enough that the lease's own
// watchdog does not renew during the test.
func heldBehindLiar(t *testing.T) (*etcdfake.Server, *lyingKeepAlives, *Locker, locks.Lease) {
	t.Helper()
	s := etcdfake.New(t)
	ly := &lyingKeepAlives{}
	l, err := New(s.NewClient(ly.dialOption()), "stale", append(s.LockOptions(), locks.WithTTL(30*time.Second))...)
	if err != nil {
		t.Fatal(err)
	}
	return s, ly, l, mustLock(t, l)
}

// TestRenewDoubtsALeaseNotFound: a member answers a holder's keep-alive
// with "lease not found" while the lease and its key are alive (the
// cluster's old leader, cut off; CI-13 saw it on etcd 3.4.23 as a grant
// followed at once by a Renew answered "not held"). Renew must not report
// the lease lost on that answer alone.
func TestRenewDoubtsALeaseNotFound(t *testing.T) {
	t.Parallel()
	_, ly, _, lease := heldBehindLiar(t)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	ly.lies.Store(1)
	if err := lease.Renew(ctx); err != nil {
		t.Fatalf("Renew after one member's false \"lease not found\": %v", err)
	}
	if ly.told.Load() != 1 {
		t.Fatalf("the false answer was given %d times, want 1", ly.told.Load())
	}
	select {
	case <-lease.Done():
		t.Fatalf("lease ended: %v", lease.Err())
	default:
	}
	if err := lease.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
}

// TestRenewWhenEveryMemberSaysGone: when every answer says the lease is
// gone while a read finds its key, Renew fails without claiming the lock
// lost (the members disagree with the key-value store: not a loss the
// lock can prove); when the key is really gone, the loss is reported.
func TestRenewWhenEveryMemberSaysGone(t *testing.T) {
	t.Parallel()
	t.Run("key there", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		_, ly, _, lease := heldBehindLiar(t)
		ly.lies.Store(1 << 20)
		err := lease.Renew(ctx)
		if err == nil || errors.Is(err, locks.ErrNotHeld) {
			t.Fatalf("Renew = %v, want an error that is not ErrNotHeld", err)
		}
		if got := ly.told.Load(); got != maxDoubts {
			t.Fatalf("%d keep-alives sent, want %d", got, maxDoubts)
		}
		ly.lies.Store(0)
		if err := lease.Unlock(ctx); err != nil {
			t.Fatalf("Unlock: %v", err)
		}
	})
	t.Run("lease revoked", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		s, _, l, lease := heldBehindLiar(t)
		kvs := waitContenders(t, s.Client(), l, 1)
		if err := s.RevokeLease(ctx, clientv3.LeaseID(kvs[0].Lease)); err != nil {
			t.Fatal(err)
		}
		if err := lease.Renew(ctx); !errors.Is(err, locks.ErrNotHeld) || !errors.Is(err, ErrSessionLost) {
			t.Fatalf("Renew after the lease was revoked = %v, want ErrSessionLost and ErrNotHeld", err)
		}
	})
}
