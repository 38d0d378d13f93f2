package redlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/locks"
)

// NodeError is the failure of one node in a request sent to every node. The
// errors of a failed acquisition, renewal or release are joined (errors.Join)
// with the sentinel that says what failed; find them with errors.As.
type NodeError struct {
	// Node is the index of the node's client in the slice given to New.
	Node int
	// Err is what the client reported: a connection error, a server error,
	// or context.DeadlineExceeded when the node did not answer within the
	// request timeout. errors.Is sees it through the joined error, so test
	// your own ctx.Err() to tell whether your deadline passed.
	Err error
}

func (e *NodeError) Error() string { return fmt.Sprintf("redlock: node %d: %v", e.Node, e.Err) }

// Unwrap returns Err.
func (e *NodeError) Unwrap() error { return e.Err }

// node is one Redis server and its position in New's clients.
type node struct {
	index  int
	client redis.UniversalClient
}

// result is one node's answer to one request.
type result[T any] struct {
	node node
	val  T
	err  error
}

// nodeErr returns the result's error as a *NodeError.
func (r result[T]) nodeErr() error { return &NodeError{Node: r.node.index, Err: r.err} }

// fanOut sends op to every node at once and returns their answers once
// all are in or timeout has passed, whichever comes first. A node that has
// not answered by then gets context.DeadlineExceeded (or the caller's ctx
// error) as its result, whether or not its client honours ctx deadlines:
// go-redis only does with ContextTimeoutEnabled, and without it a lost
// reply would hold the whole request for the client's ReadTimeout. The
// unanswered request goes on in the background until its client gives up;
// its answer is dropped, and callers treat the node as unsure.
func fanOut[T any](ctx context.Context, nodes []node, timeout time.Duration,
	op func(ctx context.Context, c redis.UniversalClient) (T, error),
) []result[T] {
	ctx, cancel := locks.RequestContext(ctx, timeout)
	defer cancel()
	type answer struct {
		i int
		r result[T]
	}
	answers := make(chan answer, len(nodes)) // buffered: stragglers never block
	for i, n := range nodes {
		go func() {
			v, err := op(ctx, n.client)
			answers <- answer{i, result[T]{node: n, val: v, err: err}}
		}()
	}
	rs := make([]result[T], len(nodes))
	in := make([]bool, len(nodes))
	for range nodes {
		select {
		case a := <-answers:
			rs[a.i], in[a.i] = a.r, true
			continue
		case <-ctx.Done():
		}
		for i, n := range nodes {
			if !in[i] {
				rs[i] = result[T]{node: n, err: ctx.Err()}
			}
		}
		break
	}
	return rs
}

// votes counts the answers to an owner-checked request: yes when the node
// recorded the owner and acted, no when it did not record the owner.
type votes struct {
	yes, no int
	errs    []error // one *NodeError per node that did not answer
}

func countVotes(rs []result[bool]) votes {
	var v votes
	for _, r := range rs {
		switch {
		case r.err != nil:
			v.errs = append(v.errs, r.nodeErr())
		case r.val:
			v.yes++
		default:
			v.no++
		}
	}
	return v
}

// withNodeErrs joins err with the per-node errors behind it, err first.
func withNodeErrs(err error, errs []error) error {
	if len(errs) == 0 {
		return err
	}
	return errors.Join(append([]error{err}, errs...)...)
}
