package fakes

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// EtcdPeerGrace is how long VerifyNoLeaks waits for HTTP connection
// goroutines to end: rafthttp's read timeout (5 s) and a margin.
const EtcdPeerGrace = 7 * time.Second

// VerifyNoLeaks is goleak.VerifyTestMain for packages whose tests run the
// fakes: call it from TestMain. It runs the tests and, if they passed,
// fails the package when a goroutine is left behind.
//
// One allowance, for etcd: the members of an embedded multi-member cluster
// talk over HTTP connections (etcd's rafthttp) that outlive the members by
// up to five seconds, until their read timeout closes them; embed.Etcd gives
// no way to close them sooner. So it first waits for HTTP connection
// goroutines to end, at most EtcdPeerGrace.
//
// Two goroutines are ignored, each wedged for ever inside a dependency:
// go-zookeeper v1.0.4's connection loop in flushRequests (ZKFlushWedge)
// and etcd's peer /version handler on a stopped member (EtcdVersionWedge).
// It ignores nothing else beyond opts.
func VerifyNoLeaks(m *testing.M, opts ...goleak.Option) {
	code := m.Run()
	if code == 0 {
		awaitHTTPConns(EtcdPeerGrace)
		if err := goleak.Find(append(opts, ZKFlushWedge(), EtcdVersionWedge())...); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: Errors on successful test run: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// awaitHTTPConns returns once no goroutine serves or reads an HTTP
// connection, or after grace.
func awaitHTTPConns(grace time.Duration) {
	deadline := time.Now().Add(grace)
	for httpConnsOpen() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
}

// httpConnsOpen reports whether a goroutine serves or reads an HTTP
// connection, apart from one wedged in etcd's version handler, which never
// ends.
func httpConnsOpen() bool {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	return httpConnsIn(string(buf))
}

// httpConnsIn is httpConnsOpen on a dump of every goroutine's stack, as
// runtime.Stack writes it.
func httpConnsIn(dump string) bool {
	for _, g := range strings.Split(dump, "\n\n") {
		if strings.Contains(g, etcdVersionHandler) {
			continue
		}
		if strings.Contains(g, "net/http.(*persistConn).readLoop") || strings.Contains(g, "net/http.(*conn).serve") {
			return true
		}
	}
	return false
}

// etcdVersionHandler is the function of etcd v3.6's peer /version handler.
const etcdVersionHandler = "go.etcd.io/etcd/server/v3/etcdserver/api/etcdhttp.newPeerHandler.versionHandler.func1"

// EtcdVersionWedge is the goleak option for a goroutine that etcd v3.6 (the
// version this module embeds) can leave behind when a member of a
// multi-member cluster stops. embed.Etcd.Close stops the server, closing
// its storage backend, before it stops serving peers. A peer's GET /version
// in that window reads the storage version from the closed backend: the
// backend's shared read transaction is nil by then, so the read panics
// while holding the transaction's mutex. net/http recovers the panic, the
// mutex stays locked, and the next /version request blocks on it for ever
// (etcd-io/etcd#22189, open, reports the same read from a closed backend).
// CI's race step met it once, in etcdlock's cluster tests.
func EtcdVersionWedge() goleak.Option {
	return goleak.IgnoreAnyFunction(etcdVersionHandler)
}

// ZKFlushWedge is the goleak option for a goroutine that go-zookeeper
// v1.0.4 (the version this module uses) can leave behind when a
// connection closes: when a request's write fails, sendData answers the
// request on its channel of capacity 1 and leaves it among the pending
// requests, and flushRequests, closing the connection, then sends it a
// second answer, which blocks for ever (go-zookeeper/zk#163, open, names
// the same path). The connection's loop goroutine is lost; nothing else
// is. CI's real-ZooKeeper step met it once, in zklock's tests.
func ZKFlushWedge() goleak.Option {
	return goleak.IgnoreTopFunction("github.com/go-zookeeper/zk.(*Conn).flushRequests")
}

// IgnoreConsulPorts is the goleak option for the one goroutine that
// sdk/testutil's port allocator (freeport) starts when a real Consul agent
// is first started and keeps for the life of the process. Pass it to
// VerifyNoLeaks in packages whose tests may start an agent.
func IgnoreConsulPorts() goleak.Option {
	return goleak.IgnoreTopFunction("github.com/hashicorp/consul/sdk/freeport.checkFreedPorts")
}
