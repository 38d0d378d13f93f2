package lab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
)

// EnvLab is the environment variable that turns the lab's tests on: they
// run only when it is "1" (CI's cluster step sets it), since they need root,
// ip, nft, unshare and the servers' binaries.
const EnvLab = "LOCKPROOF_LAB"

// envSandbox marks a process that SandboxMain re-ran inside a sandbox; its
// value is the network namespace SandboxMain left (as /proc/self/ns/net
// names it), which the sandbox's must differ from.
const envSandbox = "LOCKPROOF_LAB_SANDBOX"

// ErrNotSandboxed is the error of every call that would touch the network
// outside a sandbox: the lab refuses to start in a namespace with a way out.
var ErrNotSandboxed = errors.New("lab: not inside a sandbox network namespace")

// tools are the programs the lab runs; lookPath checks them all up front.
var tools = []string{"ip", "nft", "unshare", "nsenter"}

// InSandbox reports whether this process runs inside a lab sandbox: it was
// started by SandboxMain (the marker variable is set), and its network
// namespace differs from the one SandboxMain left and from process 1's
// (when this process may read that). CheckIsolation is the proof that the
// sandbox has no way out; New runs it.
func InSandbox() bool { return sandboxed() == nil }

// sandboxed returns nil if this process is in a sandbox, else why not.
func sandboxed() error {
	outer := os.Getenv(envSandbox)
	if outer == "" {
		return fmt.Errorf("%w: not started by SandboxMain (%s is unset)", ErrNotSandboxed, envSandbox)
	}
	self, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		return fmt.Errorf("%w: reading this process's network namespace: %w", ErrNotSandboxed, err)
	}
	if self == outer {
		return fmt.Errorf("%w: still in the namespace %s that SandboxMain left", ErrNotSandboxed, self)
	}
	if root, err := os.Readlink("/proc/1/ns/net"); err == nil && root == self {
		return fmt.Errorf("%w: in process 1's network namespace %s", ErrNotSandboxed, self)
	}
	return nil
}

// Unavailable says why the lab cannot run here, or "" when it can: EnvLab
// must be "1", the process must be root, and ip, nft, unshare and nsenter
// must be installed. Tests skip with this reason.
func Unavailable() string {
	if os.Getenv(EnvLab) != "1" {
		return "the cluster lab runs only with " + EnvLab + "=1 (it needs root, network namespaces and the servers' binaries)"
	}
	if os.Geteuid() != 0 {
		return "the cluster lab needs root to create network namespaces"
	}
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Sprintf("the cluster lab needs %s: %v", tool, err)
		}
	}
	return ""
}

// SandboxMain is for a TestMain (or a program, once it knows it needs the
// lab and has checked its arguments) that uses the lab:
// when the lab is available (Unavailable returns "") and this process is
// not yet in a sandbox, it runs this same binary with the same arguments
// again under `unshare --net --mount` (a fresh network namespace with only
// a loopback link and no route anywhere, and a mount namespace of its own
// for the lab's named namespaces) and exits with that run's status. Inside
// the sandbox, or when the lab is unavailable, it brings the loopback link
// up if it can and returns, and the caller goes on.
func SandboxMain() {
	if Unavailable() != "" {
		return
	}
	if os.Getenv(envSandbox) != "" {
		// Re-run by SandboxMain already: never re-run again.
		if err := sandboxed(); err != nil {
			fmt.Fprintf(os.Stderr, "lab: %v\n", err)
			os.Exit(2)
		}
		if err := run(context.Background(), "ip", "link", "set", "lo", "up"); err != nil {
			fmt.Fprintf(os.Stderr, "lab: bringing up the sandbox's loopback: %v\n", err)
			os.Exit(2)
		}
		return
	}
	outer, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		fmt.Fprintf(os.Stderr, "lab: reading this process's network namespace: %v\n", err)
		os.Exit(2)
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(os.Stderr, "lab: finding this program to run it in a sandbox: %v\n", err)
		os.Exit(2)
	}
	args := append([]string{"--net", "--mount", "--propagation", "private", "--", self}, os.Args[1:]...)
	cmd := exec.Command("unshare", args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), envSandbox+"="+outer)
	// Ctrl-C reaches the run in the sandbox too (one process group): this
	// process waits for it to clean up and exit, and exits with its status.
	signal.Notify(make(chan os.Signal, 1), os.Interrupt)
	err = cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		os.Exit(0)
	case errors.As(err, &exit) && exit.ExitCode() > 0:
		os.Exit(exit.ExitCode())
	default:
		fmt.Fprintf(os.Stderr, "lab: running the tests in a sandbox: %v\n", err)
		os.Exit(2)
	}
}

// run runs a program and returns its error with its standard error output.
func run(ctx context.Context, name string, args ...string) error {
	_, err := output(ctx, name, args...)
	return err
}

// output runs a program and returns its standard output; its error quotes
// the command line and what the program wrote on standard error.
func output(ctx context.Context, name string, args ...string) ([]byte, error) {
	return outputIn(ctx, nil, name, args...)
}

// outputIn is output with a standard input.
func outputIn(ctx context.Context, stdin []byte, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if stdin != nil {
		cmd.Stdin = strings.NewReader(string(stdin))
	}
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}
