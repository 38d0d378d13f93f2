// Package gatehook is where the backend fakes' clients meet a locks.Gate:
// each fake's hook (redisfake.GateHook, consulfake.GateTransport,
// mysqlfake.GatedConnector, etcdfake.GateDialOptions) calls Gate or Send
// with a request's name, which holds no value that changes from run to run.
//
// A hook gates the request the client was asked to send, not a dial or a
// handshake it makes on the way: whether a pool has an idle connection
// depends on other goroutines, and gating those would let the Go scheduler
// choose the sequence of requests again.
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
// context's error. A client would notice that end or not as goroutines
// happen to run (a locks.RequestContext's Done closes on a goroutine of
// its own). Without a Gate it returns ctx, a no-op and no error.
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
