package backends

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/lockproof/lockproof/chaos"
	"github.com/lockproof/lockproof/fakes"
	"github.com/lockproof/lockproof/propertytest"
)

// DeployOption changes a factory of a user's deployment (ZKLockOnAll,
// ConsulLockOnAll, MySQLLockOnAll, RedisLockViaSentinel).
type DeployOption func(*deployConfig)

type deployConfig struct {
	noLinks bool
	dial    fakes.DialFunc // WithDialer; nil: TCP
}

// WithoutLinkFaults takes the client-side network faults out of a
// deployment factory: its clients dial the nodes directly. Default: every
// client-to-node link goes through a chaos.Proxy of its own (see
// LinkFaultNames), and the run injects faults on them.
func WithoutLinkFaults() DeployOption { return func(c *deployConfig) { c.noLinks = true } }

// WithDialer makes a deployment factory reach the nodes through dial, for
// nodes that only a special dialer reaches, such as servers in network
// namespaces of their own: the links' proxies dial their nodes with it, and
// so do the clients under WithoutLinkFaults. ZKLockOnAll takes it; the
// other deployment factories refuse it, with an error, at a run's start.
func WithDialer(dial func(ctx context.Context, network, addr string) (net.Conn, error)) DeployOption {
	return func(c *deployConfig) { c.dial = dial }
}

// noDialer is the error of a deployment factory that does not take
// WithDialer, when given one; nil otherwise.
func (c deployConfig) noDialer(factory string) error {
	if c.dial == nil {
		return nil
	}
	return fmt.Errorf("backends: %s does not take WithDialer (ZKLockOnAll does): its clients would dial the nodes directly", factory)
}

// links is the run's links to the nodes, or nil under WithoutLinkFaults
// (the clients then dial directly, and there are no link faults).
func (c deployConfig) links(env propertytest.Env) *links {
	if c.noLinks {
		return nil
	}
	l := newLinks(env)
	l.target = c.dial
	return l
}

func newDeployConfig(opts []DeployOption) deployConfig {
	var c deployConfig
	for _, o := range opts {
		o(&c)
	}
	return c
}

// The faults a deployment factory injects on its clients' links, all of
// kind FaultPartition (LinkFaultNames lists them).
const (
	linkCutClient   = "partition client 0 from every node"
	linkCutFirst    = "partition client 1 from the first node it dialed"
	linkDropReplies = "drop the replies to client 2"
)

// LinkFaultNames are the names of the faults that a deployment factory
// (ZKLockOnAll, ConsulLockOnAll, MySQLLockOnAll, RedisLockViaSentinel)
// injects on the links between its clients and the nodes, unless
// WithoutLinkFaults: client 0 cut off from every node, its bytes held and
// delivered when the partition heals; client 1 cut off from the first node
// it dialed only, so that a client of several nodes can go on through
// another; and client 2's requests reaching the nodes while their replies
// are lost. The clients are the run's lockers, in the order it makes them.
func LinkFaultNames() []string { return []string{linkCutClient, linkCutFirst, linkDropReplies} }

// links is the network between a run's clients and the nodes of a
// deployment: each client's connections to each node go through a
// chaos.Proxy of their own, started on the first dial of that link. A
// link whose client is cut off when it starts is cut from the start.
type links struct {
	mu      sync.Mutex
	proxies map[linkKey]*chaos.Proxy
	first   map[int]string                 // the node each client dialed first
	cuts    map[linkKey]func(*chaos.Proxy) // faults in force; target "" is every node
	closed  bool
	target  fakes.DialFunc // how the proxies reach their nodes; nil: TCP
}

// linkKey names one client's link to one node (its host:port as dialed).
type linkKey struct {
	client int
	target string
}

func newLinks(env propertytest.Env) *links {
	l := &links{proxies: map[linkKey]*chaos.Proxy{}, first: map[int]string{}, cuts: map[linkKey]func(*chaos.Proxy){}}
	env.Cleanup(l.close)
	return l
}

// dial is client's dial function: it reaches addr through the proxy of the
// link between client and addr.
func (l *links) dial(client int) fakes.DialFunc {
	var d net.Dialer
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		p, err := l.proxy(client, addr)
		if err != nil {
			return nil, err
		}
		return d.DialContext(ctx, network, p.Addr())
	}
}

// dialFor is how client reaches the nodes: through its links, or, with
// no links (l nil), with the deployment's dialer (WithDialer; nil: the
// default).
func (c deployConfig) dialFor(l *links, client int) fakes.DialFunc {
	if l != nil {
		return l.dial(client)
	}
	return c.dial
}

// zkDial is dial in go-zookeeper's shape; nil for nil (go-zookeeper's
// default).
func zkDial(dial fakes.DialFunc) zk.Dialer {
	if dial == nil {
		return nil
	}
	return func(network, address string, timeout time.Duration) (net.Conn, error) {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		return dial(ctx, network, address)
	}
}

// proxy returns the proxy of the link from client to target, starting it
// (with the faults in force on the link) on first use.
func (l *links) proxy(client int, target string) (*chaos.Proxy, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("backends: the run's links are closed")}
	}
	k := linkKey{client, target}
	if p, ok := l.proxies[k]; ok {
		return p, nil
	}
	var opts []chaos.ProxyOption
	if l.target != nil {
		opts = append(opts, chaos.DialTargetWith(l.target))
	}
	p, err := chaos.StartProxy(target, uint64(len(l.proxies))+1, opts...)
	if err != nil {
		return nil, fmt.Errorf("backends: the proxy from client %d to %s: %w", client, target, err)
	}
	l.proxies[k] = p
	if _, ok := l.first[client]; !ok {
		l.first[client] = target
	}
	if f := l.cutLocked(k); f != nil {
		f(p)
	}
	return p, nil
}

// cutLocked is the fault in force on link k, or nil.
func (l *links) cutLocked(k linkKey) func(*chaos.Proxy) {
	if f, ok := l.cuts[linkKey{k.client, ""}]; ok {
		return f
	}
	return l.cuts[k]
}

// set puts fault f in force on client's links: to target, or to every node
// if target is "" (including links the client dials later); a nil f heals
// them.
func (l *links) set(client int, target string, f func(*chaos.Proxy)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := linkKey{client, target}
	if f == nil {
		delete(l.cuts, k)
	} else {
		l.cuts[k] = f
	}
	for pk, p := range l.proxies {
		if pk.client != client || (target != "" && pk.target != target) {
			continue
		}
		if g := l.cutLocked(pk); g != nil {
			g(p)
		} else {
			p.Heal()
		}
	}
}

// faults are the run's faults on the links (LinkFaultNames), none on no
// links (l nil). Client 1's cut strikes nothing before its first dial.
func (l *links) faults() []propertytest.Fault {
	if l == nil {
		return nil
	}
	partition := (*chaos.Proxy).Partition
	return []propertytest.Fault{
		{Name: linkCutClient, Kind: propertytest.FaultPartition,
			Inject: func() error { l.set(0, "", partition); return nil },
			Heal:   func() error { l.set(0, "", nil); return nil }},
		{Name: linkCutFirst, Kind: propertytest.FaultPartition,
			Inject: func() error {
				if t := l.firstOf(1); t != "" {
					l.set(1, t, partition)
				}
				return nil
			},
			Heal: func() error {
				if t := l.firstOf(1); t != "" {
					l.set(1, t, nil)
				}
				return nil
			}},
		{Name: linkDropReplies, Kind: propertytest.FaultPartition,
			Inject: func() error { l.set(2, "", (*chaos.Proxy).DropReplies); return nil },
			Heal:   func() error { l.set(2, "", nil); return nil }},
	}
}

// firstOf is the node client dialed first, or "" before its first dial.
func (l *links) firstOf(client int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.first[client]
}

// close closes every proxy; later dials fail.
func (l *links) close() {
	l.mu.Lock()
	l.closed = true
	proxies := make([]*chaos.Proxy, 0, len(l.proxies))
	for _, p := range l.proxies {
		proxies = append(proxies, p)
	}
	l.mu.Unlock()
	for _, p := range proxies {
		_ = p.Close()
	}
}
