package etcdfake

import (
	"context"
	"strings"
	"sync"

	"google.golang.org/grpc"

	"github.com/lockproof/lockproof/fakes/internal/gatehook"
)

// GateDialOptions returns the gRPC dial options (for
// clientv3.Config.DialOptions) that pass the requests of an etcd client
// through the locks.Gate of their context (see locks.GateRequest): every
// unary call, named "etcd " and its service and method ("etcd KV/Txn",
// "etcd Lease/LeaseGrant"), and the opening of every stream but Watch's
// ("etcd Lease/LeaseKeepAlive", which KeepAliveOnce opens), held until the
// stream's first reply or its end. Every etcd client the fakes hand out has
// them, on embedded members and on a real cluster alike.
//
// Watch streams are not gated: clientv3 opens them on a goroutine of its
// own, shares one stream among all the watches of a client, and opens it
// again after a failure with the context of the watch that first opened
// it, so whether (and for whom) a stream is opened depends on the other
// watches, not on the operation. The watch's events follow from other
// clients' requests, which are gated.
//
// clientv3 retries a failed unary call in an interceptor of its own, around
// these: each attempt is a request of its own.
func GateDialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(GateUnaryInterceptor),
		grpc.WithChainStreamInterceptor(GateStreamInterceptor),
	}
}

// GateUnaryInterceptor gates a unary call; see GateDialOptions.
func GateUnaryInterceptor(ctx context.Context, method string, req, reply any,
	cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption,
) error {
	ctx, done := gatehook.Gate(ctx, etcdRequestName(method))
	defer done()
	return invoker(ctx, method, req, reply, cc, opts...)
}

// etcdWatchMethod is the method of the stream that is not gated.
const etcdWatchMethod = "/etcdserverpb.Watch/Watch"

// GateStreamInterceptor gates the opening of a stream until its first
// reply (or its end); see GateDialOptions.
func GateStreamInterceptor(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn,
	method string, streamer grpc.Streamer, opts ...grpc.CallOption,
) (grpc.ClientStream, error) {
	if method == etcdWatchMethod || !gatehook.Gated(ctx) {
		return streamer(ctx, desc, cc, method, opts...)
	}
	gctx, done := gatehook.Gate(ctx, etcdRequestName(method))
	cs, err := streamer(gctx, desc, cc, method, opts...)
	if err != nil {
		done()
		return nil, err
	}
	s := &gatedStream{ClientStream: cs, done: done}
	// The caller ends a stream by receiving until an error or by ending
	// ctx: either way the gate hears of it.
	s.stop = context.AfterFunc(ctx, s.end)
	return s, nil
}

// gatedStream tells its gate that the request is over at its first reply,
// or when the caller's context ends.
type gatedStream struct {
	grpc.ClientStream
	done func()
	stop func() bool // stops the context's call of end
	once sync.Once
}

// end tells the gate, once.
func (s *gatedStream) end() { s.once.Do(s.done) }

// RecvMsg receives a message; the first one, or the first error, ends the
// gated request.
func (s *gatedStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	s.stop()
	s.end()
	return err
}

// etcdRequestName is "etcd " and the service and method of a gRPC method
// name, without the package: "/etcdserverpb.KV/Txn" is "etcd KV/Txn".
func etcdRequestName(method string) string {
	m := strings.TrimPrefix(method, "/")
	if dot := strings.IndexByte(m, '.'); dot >= 0 && dot < strings.IndexByte(m, '/') {
		m = m[dot+1:]
	}
	return "etcd " + m
}
