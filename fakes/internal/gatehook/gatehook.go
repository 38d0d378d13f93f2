// Package gatehook is where the backend fakes' clients meet a locks.Gate.
//
// Every client the fakes hand out passes its requests through
// locks.GateRequest, so that a locks.Gate in the context of a lock
// operation sees (and may hold) each round trip the operation makes:
//
//   - Redis: a go-redis hook (redisfake.GateHook), "redis node <i>: <COMMAND>";
//   - Consul: an http.RoundTripper (consulfake.GateTransport),
//     "consul <METHOD> <path>" with the variable parts of the path left out;
//   - MySQL: a database/sql connector (mysqlfake.GatedConnector),
//     "mysql <KEYWORD>";
//   - etcd: gRPC interceptors (etcdfake.GateDialOptions), "etcd <Service>/<Method>";
//   - MemLock calls locks.GateRequest itself: "memlock acquire", and so on.
//
// The names never hold a port, a key prefix, a session id or any other value
// that changes from run to run, so a scheduler may sort an operation's
// concurrent requests by them.
//
// A hook gates the request the client was asked to send, not the work the
// client does underneath to be able to send it: dialing a connection and its
// handshake (go-redis's HELLO, MySQL's login) happen inside the window of the
// request that needed them, when the pool had no idle connection. Whether a
// pool has one depends on what other goroutines did with it, not on the
// operation, so gating them would make the sequence of requests depend on the
// Go scheduler again.
package gatehook

import (
	"context"

	"github.com/lockproof/lockproof/locks"
)

// gatedKey marks a context whose request is already inside a gate's window;
// a hook seeing it lets the (nested) request through without asking again.
type gatedKey struct{}

// Gated reports whether a request sent with ctx is to be gated: ctx
// carries a Gate, and the request is not part of one gated already.
func Gated(ctx context.Context) bool {
	return ctx != nil && locks.GateOf(ctx) != nil && ctx.Value(gatedKey{}) == nil
}

// Gate asks ctx's Gate, if any, to let the request named what go. It
// returns the context to send the request with, marked so that the
// requests the client makes on the way (a connection's handshake) are not
// gated a second time, and the function to call once the reply is in.
// Without a Gate (or inside a gated request) it returns ctx and a no-op.
func Gate(ctx context.Context, what string) (context.Context, func()) {
	if !Gated(ctx) {
		return ctx, func() {}
	}
	done := locks.GateRequest(ctx, what)
	return context.WithValue(ctx, gatedKey{}, true), done
}

// Send is Gate for a request that must not be sent once its context
// ended while the gate held it (a crash, a timeout): err is then the
// context's error, and the request goes nowhere. Sent, a client could
// still write it before it noticed the end, or not, as goroutines happen
// to run: the end of a locks.RequestContext reaches its Done channel on a
// goroutine of context.AfterFunc's, though its Err knows at once. Without
// a Gate (or inside a gated request) it returns ctx, a no-op and no error.
func Send(ctx context.Context, what string) (context.Context, func(), error) {
	if !Gated(ctx) {
		return ctx, func() {}, nil
	}
	gctx, done := Gate(ctx, what)
	if err := gctx.Err(); err != nil {
		done()
		return ctx, func() {}, err
	}
	return gctx, done, nil
}
