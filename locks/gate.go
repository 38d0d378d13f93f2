package locks

import "context"

// Gate is told of every request a lock's client is about to send to its
// backend, on behalf of the operation whose context carries the Gate (see
// WithGate). Request may block: the request then waits, exactly as if the
// client had stalled just before sending it. That is the seam a
// deterministic scheduler uses to decide which client's next request goes
// first (propertytest does), and where a test can stall one client between
// two round trips of a single Lock, Unlock or Renew.
//
// The hooks that call GateRequest live in the backends' clients, not in the
// locks: fakes installs them on every client it makes (a go-redis hook, a
// Consul RoundTripper, a database/sql connector, etcd's gRPC interceptors),
// so any lock on those clients is gated, third-party locks included. A
// request made without the operation's context (a background goroutine of
// the lock, a watchdog) is not gated.
//
// Implementations must be safe for concurrent use: one operation may send
// several requests at once (Redlock asks every node in parallel).
type Gate interface {
	// Request is called before a request is sent. what names the request
	// in a form that does not change from run to run (no ports, no random
	// ids): "redis node 0: EVALSHA", "consul PUT /v1/kv". The returned
	// function is called once the reply came back or the request failed.
	Request(ctx context.Context, what string) (done func())
}

// gateKey is the context key of the Gate.
type gateKey struct{}

// WithGate returns a copy of ctx that carries g: every request a backend
// client sends with the returned context (or one derived from it) passes
// through g.
func WithGate(ctx context.Context, g Gate) context.Context {
	return context.WithValue(ctx, gateKey{}, g)
}

// GateOf returns the Gate ctx carries, or nil.
func GateOf(ctx context.Context) Gate {
	if ctx == nil {
		return nil
	}
	g, _ := ctx.Value(gateKey{}).(Gate)
	return g
}

// GateRequest is what a backend client's hook calls before it sends a
// request: it calls the Gate that ctx carries, if any, and returns the
// function to call once the request is over. Without a Gate it returns at
// once, with a no-op function.
//
// The time g.Request takes does not count toward the bound of a
// RequestContext that ctx derives from.
func GateRequest(ctx context.Context, what string) (done func()) {
	g := GateOf(ctx)
	if g == nil {
		return noop
	}
	var held []*heldCtx
	for v := ctx.Value(heldKey{}); v != nil; v = v.(*heldCtx).parent.Value(heldKey{}) {
		held = append(held, v.(*heldCtx))
	}
	for _, c := range held {
		c.hold()
	}
	done = g.Request(ctx, what)
	for _, c := range held {
		c.unhold()
	}
	if done == nil {
		return noop
	}
	return done
}

func noop() {}
