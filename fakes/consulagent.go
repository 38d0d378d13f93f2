package fakes

import (
	"errors"
	"fmt"
	"net"
	"os/exec"
	"testing"
	"time"

	"github.com/hashicorp/consul/sdk/testutil"
)

// consulAgent is a real agent run by sdk/testutil.
type consulAgent struct {
	srv           *testutil.TestServer
	addr          string
	advanceSleeps bool
}

// quietTB hands sdk/testutil a test whose logs go to the agent's buffer
// instead of the test output.
type quietTB struct {
	testing.TB
	logs *consulLogs
}

// Log writes to the agent's buffer.
func (q quietTB) Log(args ...any) { fmt.Fprintln(q.logs, args...) }

// Logf writes to the agent's buffer.
func (q quietTB) Logf(format string, args ...any) {
	fmt.Fprintf(q.logs, format+"\n", args...)
}

// startAgent starts a one-server agent from bin on loopback ports chosen by
// the kernel, accepting session TTLs from ttlMin, and waits until it has a leader and its node is registered
// (sessions need it). sdk/testutil's port allocator (freeport) also reserves
// ports of its own and prints a line per test to stderr; its choice is
// replaced here.
func startAgent(t testing.TB, bin string, ttlMin time.Duration) *consulAgent {
	t.Helper()
	if err := useConsulBinary(bin); err != nil {
		t.Fatalf("fakes: %v", err)
	}
	logs := &consulLogs{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("fakes: consul agent output:\n%s", logs.String())
		}
	})
	ports := kernelPorts(t, 8)
	srv, err := testutil.NewTestServerConfigT(quietTB{TB: t, logs: logs}, func(c *testutil.TestServerConfig) {
		c.Stdout, c.Stderr = logs, logs
		c.LogLevel = "warn"
		c.Ports.DNS, c.Ports.HTTP, c.Ports.HTTPS = ports[0], ports[1], ports[2]
		c.Ports.SerfLan, c.Ports.SerfWan, c.Ports.Server = ports[3], ports[4], ports[5]
		c.Ports.GRPC, c.Ports.GRPCTLS = ports[6], ports[7]
		c.Connect = nil
		c.Peering = nil
		c.Args = append(c.Args, "-hcl", fmt.Sprintf("session_ttl_min = %q", ttlMin.String()))
	})
	if err != nil {
		t.Fatalf("fakes: cannot start the consul agent %s: %v\n%s", bin, err, logs.String())
	}
	t.Cleanup(func() {
		// The agent exits with status 1 on the interrupt Stop sends; any
		// other error (it had to be killed) is reported.
		var exit *exec.ExitError
		if err := srv.Stop(); err != nil && !errors.As(err, &exit) {
			t.Errorf("fakes: stopping the consul agent: %v", err)
		}
	})
	srv.WaitForSerfCheck(t)
	return &consulAgent{srv: srv, addr: srv.HTTPAddr}
}

// kernelPorts returns n distinct free loopback ports chosen by the kernel.
// They are released before the agent binds them, a window in which another
// process could take one (the agent then fails to start, and the test with
// it).
func kernelPorts(t testing.TB, n int) []int {
	t.Helper()
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			_ = ln.Close()
		}
	}()
	ports := make([]int, 0, n)
	for i := 0; i < n; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("fakes: no free loopback port: %v", err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports
}
