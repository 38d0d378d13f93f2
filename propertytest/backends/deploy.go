package backends

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lockproof/lockproof/propertytest"
)

// Nemesis is a user's command that strikes the nodes of a real deployment,
// run as `Path <action> <node>` where the suite injects or heals one of
// WithNemesis's faults: kill/start (FaultNodeDown), pause/resume
// (FaultNodePause), partition/heal (FaultPartition), skew/unskew
// (FaultClockSkew), on a node from 0 to Nodes-1 in the order the servers
// were listed, with LOCKPROOF_NEMESIS_NODES and LOCKPROOF_NEMESIS_TARGET
// in its environment. Exit status 0 means done; another, a timeout or a
// failure to start fails the run with its stderr. Its stdout is logged.
type Nemesis struct {
	// Path is the command (an executable's path, or a name on PATH).
	Path string
	// Nodes is the number of nodes the command may be given.
	Nodes int
	// Target names the deployment for the command (a lock's name, such as
	// "zklock", when one command serves several).
	Target string
	// Timeout bounds each call (0: NemesisTimeout).
	Timeout time.Duration
}

// NemesisTimeout is the default bound on one call of a Nemesis command.
const NemesisTimeout = 30 * time.Second

// nemesisActions are the pairs of actions of a Nemesis, each with the
// kind of fault it is and the word that names it in the fault's name.
var nemesisActions = []struct {
	inject, heal string
	kind         propertytest.FaultKind
}{
	{"kill", "start", propertytest.FaultNodeDown},
	{"pause", "resume", propertytest.FaultNodePause},
	{"partition", "heal", propertytest.FaultPartition},
	{"skew", "unskew", propertytest.FaultClockSkew},
}

// NemesisKinds are the fault kinds a Nemesis injects, in the order of its
// actions.
func NemesisKinds() []propertytest.FaultKind {
	var out []propertytest.FaultKind
	for _, a := range nemesisActions {
		out = append(out, a.kind)
	}
	return out
}

// Check reports what is wrong with n before any run: no command, one
// that is not an executable found as exec.LookPath finds it, or no node.
func (n Nemesis) Check() error {
	if n.Path == "" {
		return errors.New("backends: a Nemesis needs a command")
	}
	if _, err := exec.LookPath(n.Path); err != nil {
		return fmt.Errorf("backends: nemesis command: %w", err)
	}
	if n.Nodes < 1 {
		return fmt.Errorf("backends: a Nemesis needs at least one node, got %d", n.Nodes)
	}
	return nil
}

// maxStderr is how much of a failed call's stderr its error keeps (the end).
const maxStderr = 2048

// call runs the command once for action on node; logf gets its stdout.
func (n Nemesis) call(action string, node int, logf func(string, ...any)) error {
	timeout := n.Timeout
	if timeout <= 0 {
		timeout = NemesisTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, n.Path, action, strconv.Itoa(node))
	cmd.Env = append(os.Environ(), "LOCKPROOF_NEMESIS_NODES="+strconv.Itoa(n.Nodes), "LOCKPROOF_NEMESIS_TARGET="+n.Target)
	// Children that keep the pipes open must not hold the call past its bound.
	cmd.WaitDelay = time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if out := strings.TrimSpace(stdout.String()); out != "" {
		logf("nemesis %s %d: %s", action, node, out)
	}
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		err = fmt.Errorf("%w after %v", ctx.Err(), timeout)
	}
	msg := strings.TrimSpace(stderr.String())
	if len(msg) > maxStderr {
		msg = "…" + msg[len(msg)-maxStderr:]
	}
	return fmt.Errorf("backends: nemesis %s %s %d: %w; stderr: %q", n.Path, action, node, err, msg)
}

// WithNemesis is the Factory f with the faults of n added to its Backend:
// per node, one per pair of actions ("nemesis kill node 1", …), of the
// pair's kind, claimed or not by the run's Options.Claims. They are
// injected and healed at points drawn from the seed, as any Backend fault;
// one still active at the end of the run is healed then.
func WithNemesis(f propertytest.Factory, n Nemesis) propertytest.Factory {
	return func(env propertytest.Env) (*propertytest.Backend, error) {
		if err := n.Check(); err != nil {
			return nil, err
		}
		be, err := f(env)
		if err != nil {
			return nil, err
		}
		// Registered after f's clean-ups, so run before them: the
		// deployment is whole again before the factory closes its clients.
		var mu sync.Mutex
		active := map[string]func() error{}
		env.Cleanup(func() {
			mu.Lock()
			defer mu.Unlock()
			for name, heal := range active {
				if err := heal(); err != nil {
					env.Logf("healing %s at the end of the run: %v", name, err)
				}
			}
		})
		for node := range n.Nodes {
			for _, a := range nemesisActions {
				name := fmt.Sprintf("nemesis %s node %d", a.inject, node)
				heal := func() error { return n.call(a.heal, node, env.Logf) }
				be.Faults = append(be.Faults, propertytest.Fault{
					Name: name,
					Kind: a.kind,
					Inject: func() error {
						mu.Lock()
						defer mu.Unlock()
						active[name] = heal
						return n.call(a.inject, node, env.Logf)
					},
					Heal: func() error {
						mu.Lock()
						defer mu.Unlock()
						delete(active, name)
						return heal()
					},
				})
			}
		}
		return be, nil
	}
}
