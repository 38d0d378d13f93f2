package peers

import (
	"context"
	"sync/atomic"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
)

// EtcdCounter counts, over every etcd client dialled with its
// DialOptions, the requests sent (each unary RPC, and each message sent on
// a stream: a watch's create and cancel requests, a lease's keep-alives)
// and the watch events received (each event of each WatchResponse; one
// that only confirms a watch's creation or cancellation carries none). It
// counts at the client, in the gRPC interceptors, so what it reports is
// what went over the wire, not an estimate. Safe for concurrent use.
type EtcdCounter struct {
	requests, events atomic.Int64
}

// Requests returns the requests counted so far.
func (c *EtcdCounter) Requests() int64 { return c.requests.Load() }

// Events returns the watch events counted so far.
func (c *EtcdCounter) Events() int64 { return c.events.Load() }

// DialOptions returns the gRPC options that install the counter on a
// client (clientv3.Config.DialOptions).
func (c *EtcdCounter) DialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any,
			cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption,
		) error {
			c.requests.Add(1)
			return invoker(ctx, method, req, reply, cc, opts...)
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn,
			method string, streamer grpc.Streamer, opts ...grpc.CallOption,
		) (grpc.ClientStream, error) {
			s, err := streamer(ctx, desc, cc, method, opts...)
			if err != nil {
				return s, err
			}
			return &countedStream{ClientStream: s, c: c}, nil
		}),
	}
}

// countedStream counts what one client stream sends and the watch events
// it receives.
type countedStream struct {
	grpc.ClientStream
	c *EtcdCounter
}

func (s *countedStream) SendMsg(m any) error {
	s.c.requests.Add(1)
	return s.ClientStream.SendMsg(m)
}

func (s *countedStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if wr, ok := m.(*pb.WatchResponse); ok && err == nil {
		s.c.events.Add(int64(len(wr.Events)))
	}
	return err
}
