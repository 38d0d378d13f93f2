package fakes_test

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind: every fake
// must stop what it started at cleanup.
//
// One allowance, for etcd: the members of an embedded multi-member cluster
// talk over HTTP connections (etcd's rafthttp) that outlive the members by
// up to five seconds, until their read timeout closes them; embed.Etcd gives
// no way to close them sooner. So the check waits for such connection
// goroutines to end (at most etcdPeerGrace) before it looks for leaks; it
// ignores nothing.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		awaitHTTPConns(etcdPeerGrace)
		// consulLeakIgnores (consul_test.go): sdk/testutil's port allocator.
		if err := goleak.Find(consulLeakIgnores...); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: Errors on successful test run: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// etcdPeerGrace is how long TestMain waits for HTTP connection goroutines:
// rafthttp's read timeout (5 s) and a margin.
const etcdPeerGrace = 7 * time.Second

// awaitHTTPConns returns once no goroutine serves or reads an HTTP
// connection, or after grace.
func awaitHTTPConns(grace time.Duration) {
	deadline := time.Now().Add(grace)
	for httpConnsOpen() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
}

// httpConnsOpen reports whether a goroutine serves or reads an HTTP
// connection.
func httpConnsOpen() bool {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			s := string(buf[:n])
			return strings.Contains(s, "net/http.(*persistConn).readLoop") || strings.Contains(s, "net/http.(*conn).serve")
		}
		buf = make([]byte, 2*len(buf))
	}
}
