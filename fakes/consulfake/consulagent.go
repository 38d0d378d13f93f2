package consulfake

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/hashicorp/consul/sdk/testutil"
)

// consulAgentReady bounds the wait for a started agent to register its
// node's serfHealth check (sessions need it).
const consulAgentReady = 30 * time.Second

// consulAgent is a real agent run by sdk/testutil.
type consulAgent struct {
	srv           *testutil.TestServer
	host          *agentHost
	addr          string
	advanceSleeps bool
}

// agentHost is the testutil.TestingTB that sdk/testutil runs an agent for,
// without a test: its logs go to the agent's buffer, its cleanups run when
// the agent stops, its temporary directories are removed then, and a fatal
// failure ends the start with an error (startAgent recovers it) instead of
// a test.
type agentHost struct {
	name string
	logs *consulLogs

	mu       sync.Mutex
	failed   bool
	cleanups []func()
	dirs     []string
}

var _ testutil.TestingTB = (*agentHost)(nil)

// agentFatal is the panic value of agentHost's fatal failures.
type agentFatal struct{ msg string }

// Cleanup registers f to run when the agent stops, last registered first.
func (h *agentHost) Cleanup(f func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.cleanups = append(h.cleanups, f)
}

// Error logs args and marks the start failed.
func (h *agentHost) Error(args ...any) { h.Log(args...); h.Fail() }

// Errorf logs the message and marks the start failed.
func (h *agentHost) Errorf(format string, args ...any) { h.Logf(format, args...); h.Fail() }

// Fail marks the start failed.
func (h *agentHost) Fail() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failed = true
}

// FailNow ends the start with an error.
func (h *agentHost) FailNow() { h.Fail(); panic(agentFatal{"sdk/testutil failed"}) }

// Failed reports whether anything failed.
func (h *agentHost) Failed() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.failed
}

// Fatal ends the start with args as its error.
func (h *agentHost) Fatal(args ...any) { h.Fail(); panic(agentFatal{fmt.Sprint(args...)}) }

// Fatalf ends the start with the message as its error.
func (h *agentHost) Fatalf(format string, args ...any) {
	h.Fail()
	panic(agentFatal{fmt.Sprintf(format, args...)})
}

// Helper does nothing: there is no test output to attribute lines in.
func (h *agentHost) Helper() {}

// Log writes to the agent's buffer.
func (h *agentHost) Log(args ...any) { fmt.Fprintln(h.logs, args...) }

// Logf writes to the agent's buffer.
func (h *agentHost) Logf(format string, args ...any) { fmt.Fprintf(h.logs, format+"\n", args...) }

// Name names the agent in sdk/testutil's logs and directory names.
func (h *agentHost) Name() string { return h.name }

// Setenv is refused: the process environment is not the agent's to
// change. sdk/testutil does not call it for the configuration used here.
func (h *agentHost) Setenv(key, _ string) {
	panic(agentFatal{"consulfake: sdk/testutil asked to set " + key + " in the environment"})
}

// TempDir returns a new temporary directory, removed when the agent stops.
func (h *agentHost) TempDir() string {
	dir, err := os.MkdirTemp("", "lockproof-consul-")
	if err != nil {
		panic(agentFatal{err.Error()})
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.dirs = append(h.dirs, dir)
	return dir
}

// close runs the cleanups, last first, and removes the directories.
func (h *agentHost) close() error {
	h.mu.Lock()
	cleanups, dirs := h.cleanups, h.dirs
	h.cleanups, h.dirs = nil, nil
	h.mu.Unlock()
	for i := len(cleanups) - 1; i >= 0; i-- {
		cleanups[i]()
	}
	var errs []error
	for _, d := range dirs {
		errs = append(errs, os.RemoveAll(d))
	}
	return errors.Join(errs...)
}

// startAgent starts a one-server agent from bin on loopback ports chosen by
// the kernel, accepting session TTLs from ttlMin, and waits until it has a
// leader and its node is registered (sessions need it). sdk/testutil's
// port allocator (freeport) also reserves ports of its own and prints a
// line per start to stderr; its choice is replaced here.
//
// The ports are free when the kernel names them and taken by the agent a
// moment later: another process may bind one in between, or take it as
// the local port of a connection it makes. The agent then exits with
// "address already in use" (CI saw it once, with a second program busy on
// the machine), and startAgent tries again on new ports, up to
// agentStartTries times.
func startAgent(bin string, ttlMin time.Duration) (*consulAgent, error) {
	var err error
	for range agentStartTries {
		var a *consulAgent
		if a, err = startAgentOnce(bin, ttlMin); err == nil || !strings.Contains(err.Error(), "address already in use") {
			return a, err
		}
	}
	return nil, err
}

// agentStartTries bounds startAgent's tries on ports another process took.
const agentStartTries = 3

// agentPorts picks the agent's ports: kernelPorts, which a test replaces
// to hand out a port that is taken.
var agentPorts = kernelPorts

// startAgentOnce is one try of startAgent.
func startAgentOnce(bin string, ttlMin time.Duration) (agent *consulAgent, err error) {
	if err := useConsulBinary(bin); err != nil {
		return nil, err
	}
	logs := &consulLogs{}
	host := &agentHost{name: "lockproof-consul", logs: logs}
	defer func() {
		if err != nil {
			_ = host.close()
		}
	}()
	defer func() {
		if p := recover(); p != nil {
			f, ok := p.(agentFatal)
			if !ok {
				panic(p)
			}
			err = fmt.Errorf("cannot start the consul agent %s: %s\n%s", bin, f.msg, logs.String())
		}
	}()
	ports, err := agentPorts(8)
	if err != nil {
		return nil, err
	}
	srv, err := testutil.NewTestServerConfigT(host, func(c *testutil.TestServerConfig) {
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
		return nil, fmt.Errorf("cannot start the consul agent %s: %w\n%s", bin, err, logs.String())
	}
	a := &consulAgent{srv: srv, host: host, addr: srv.HTTPAddr}
	if err := a.waitSerfHealth(); err != nil {
		_ = a.stop()
		return nil, fmt.Errorf("the consul agent %s: %w\n%s", bin, err, logs.String())
	}
	return a, nil
}

// waitSerfHealth waits until the agent's node is registered with its
// serfHealth check, as sdk/testutil's WaitForSerfCheck does (which needs a
// testing.TB): a blocking query on the node's checks, so it wakes on the
// change rather than on a timer.
func (a *consulAgent) waitSerfHealth() error {
	client, err := api.NewClient(&api.Config{Address: a.addr, Scheme: "http"})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), consulAgentReady)
	defer cancel()
	var index uint64
	for {
		node, err := client.Agent().NodeName()
		if err == nil {
			var checks api.HealthChecks
			var meta *api.QueryMeta
			checks, meta, err = client.Health().Node(node,
				(&api.QueryOptions{WaitIndex: index, WaitTime: time.Second}).WithContext(ctx))
			if err == nil {
				for _, c := range checks {
					if c.CheckID == "serfHealth" {
						return nil
					}
				}
				index = meta.LastIndex
			}
		}
		if ctx.Err() != nil {
			return fmt.Errorf("no serfHealth check registered within %v (last error: %v)", consulAgentReady, err)
		}
		if err != nil {
			// Not answering yet (leader election): try again shortly.
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// stop stops the agent and runs sdk/testutil's cleanups. The agent exits
// with status 1 on the interrupt Stop sends; any other error (it had to be
// killed) is returned.
func (a *consulAgent) stop() error {
	var exit *exec.ExitError
	err := a.srv.Stop()
	if errors.As(err, &exit) {
		err = nil
	}
	return errors.Join(err, a.host.close())
}

// kernelPorts returns n distinct free loopback ports chosen by the kernel.
// They are released before the agent binds them, a window in which another
// process could take one (the agent then fails to start).
func kernelPorts(n int) ([]int, error) {
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
			return nil, fmt.Errorf("no free loopback port: %w", err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
