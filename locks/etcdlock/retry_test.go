package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/lockproof/lockproof/fakes/etcdfake"
	"github.com/lockproof/lockproof/locks"
)

func TestTransient(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{status.Error(codes.Unavailable, "error reading from server: EOF"), true},
		{fmt.Errorf("wrapped: %w", status.Error(codes.Unavailable, "connection refused")), true},
		{rpctypes.ErrNoLeader, true},
		{rpctypes.ErrTimeout, true},
		{rpctypes.ErrLeaseNotFound, false},
		{status.Error(codes.InvalidArgument, "bad"), false},
		{context.Canceled, false},
		{errors.New("other"), false},
	} {
		if got := transient(tc.err); got != tc.want {
			t.Errorf("transient(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// TestAdoptsOwnKey: an enqueue whose answer was lost (the key was put, the
// client saw an error) is sent again with the same session; it finds the
// key it put and takes the lock with that key's revision, in both modes.
func TestAdoptsOwnKey(t *testing.T) {
	t.Parallel()
	for _, naive := range []bool{false, true} {
		t.Run(fmt.Sprintf("naive=%v", naive), func(t *testing.T) {
			s := etcdfake.New(t)
			ctx := context.Background()
			l, err := build(s.Client(), "res", naive, DefaultPrefix, 1, s.LockOptions())
			if err != nil {
				t.Fatal(err)
			}
			sess, err := l.take(ctx)
			if err != nil {
				t.Fatal(err)
			}
			key := l.contenderKey(sess)
			put, err := s.Client().Put(ctx, key, "", clientv3.WithLease(sess.id))
			if err != nil {
				t.Fatal(err)
			}
			var lease locks.Lease
			if naive {
				lease, err = l.lockNaive(ctx, sess, time.Now())
			} else {
				lease, err = l.lockQueue(ctx, sess, time.Now())
			}
			if err != nil {
				t.Fatalf("lock with its key already put: %v", err)
			}
			if tok := token(t, lease); int64(tok) != put.Header.Revision {
				t.Fatalf("token %v, want the put's revision %d", tok, put.Header.Revision)
			}
			if err := lease.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			if resp, err := s.Client().Get(ctx, key); err != nil || len(resp.Kvs) != 0 {
				t.Fatalf("key after unlock: %v, %v", resp, err)
			}
		})
	}
}
