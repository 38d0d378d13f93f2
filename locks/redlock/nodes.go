package redlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
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

// fanOut sends op to every node at once, each bounded by timeout, and
// returns every answer once the last one is in.
func fanOut[T any](ctx context.Context, nodes []node, timeout time.Duration,
	op func(ctx context.Context, c redis.UniversalClient) (T, error),
) []result[T] {
	rs := make([]result[T], len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			v, err := op(ctx, n.client)
			rs[i] = result[T]{node: n, val: v, err: err}
		})
	}
	wg.Wait()
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
