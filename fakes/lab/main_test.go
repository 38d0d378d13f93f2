package lab

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/lockproof/lockproof/fakes"
)

// The test binary doubles as a tiny server and a probe run inside members'
// namespaces: these variables pick the role.
const (
	envServe = "LOCKPROOF_LAB_TEST_SERVE" // listen here and greet each client
	envProbe = "LOCKPROOF_LAB_TEST_PROBE" // read one greeting from here
)

// TestMain runs a helper role if asked; otherwise it re-runs the tests
// inside a sandbox network namespace when the lab is available
// (LOCKPROOF_LAB=1, root), and fails the package if a test leaves a
// goroutine behind.
func TestMain(m *testing.M) {
	if addr := os.Getenv(envServe); addr != "" {
		serve(addr)
	}
	if addr := os.Getenv(envProbe); addr != "" {
		d := NewDialer(Supernet)
		if err := greet(context.Background(), d, addr); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	SandboxMain()
	fakes.VerifyNoLeaks(m)
}

// serve greets every client at addr with its own address, for ever.
func serve(addr string) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			os.Exit(1)
		}
		fmt.Fprintf(c, "hello from %s\n", addr)
		c.Close()
	}
}

// greet reads one greeting from addr through d within half a second.
func greet(ctx context.Context, d *Dialer, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	deadline, _ := ctx.Deadline()
	if err := c.SetDeadline(deadline); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return fmt.Errorf("reading the greeting of %s: %w", addr, err)
	}
	if line != "hello from "+addr+"\n" {
		return fmt.Errorf("greeting %q from %s", line, addr)
	}
	return nil
}

// needLab skips t unless the lab can run, and fails it if the lab is
// available but this process is not in a sandbox (SandboxMain must have
// put it there).
func needLab(t *testing.T) {
	t.Helper()
	if reason := Unavailable(); reason != "" {
		t.Skip(reason)
	}
	if !InSandbox() {
		t.Fatal("the lab is available but the tests are not in a sandbox: SandboxMain did not run")
	}
}

// newLab makes a lab of n members closed at t's cleanup, pass or fail.
func newLab(t *testing.T, n int) *Lab {
	t.Helper()
	needLab(t)
	l, err := New(context.Background(), Options{Members: n, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("closing the lab: %v", err)
		}
	})
	return l
}

// helperPort is where the helper servers listen in the members.
const helperPort = 7000

// helperAddr is member i's helper server.
func helperAddr(l *Lab, i int) string {
	return netip.AddrPortFrom(l.Member(i).IP(), helperPort).String()
}
