package etcdfake

import (
	"context"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
)

// RequireLeaderDialOptions are gRPC dial options that send every request
// and stream of a client with etcd's require-leader flag
// (clientv3.WithRequireLeader), as a client of a replicated etcd should:
// a member cut off from the majority then refuses at once with "etcdserver:
// no leader" (codes.Unavailable), which clientv3 retries on another member,
// instead of holding the request until the caller gives up. Every client
// the fake hands out has them.
func RequireLeaderDialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(requireLeaderUnary),
		grpc.WithChainStreamInterceptor(requireLeaderStream),
	}
}

func requireLeaderUnary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
	invoker grpc.UnaryInvoker, opts ...grpc.CallOption,
) error {
	return invoker(clientv3.WithRequireLeader(ctx), method, req, reply, cc, opts...)
}

func requireLeaderStream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string,
	streamer grpc.Streamer, opts ...grpc.CallOption,
) (grpc.ClientStream, error) {
	return streamer(clientv3.WithRequireLeader(ctx), desc, cc, method, opts...)
}
