package lab

import (
	"context"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// TestEtcdCluster starts 3 etcd members, writes through clientv3 (dialing
// through the lab's Dialer), and fails the leader three ways.
func TestEtcdCluster(t *testing.T) {
	needLab(t)
	if reason := EtcdUnavailable(); reason != "" {
		t.Skip(reason)
	}
	c := newCluster(t, StartEtcd)
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   c.ClientAddrs(),
		DialTimeout: 2 * time.Second,
		DialOptions: []grpc.DialOption{grpc.WithContextDialer(c.Dialer().DialTCP)},
		Logger:      zap.NewNop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	n := 0
	exerciseFailovers(t, c, func(ctx context.Context) error {
		n++
		_, err := cli.Put(ctx, "lab", strings.Repeat("x", n))
		return err
	})
	resp, err := cli.Get(context.Background(), "lab")
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 1 || len(resp.Kvs[0].Value) == 0 {
		t.Fatalf("read back %v", resp.Kvs)
	}
	wantNothingLeft(t, c.Lab)
}
