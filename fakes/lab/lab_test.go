package lab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startHelpers runs the greeting server in every member and waits until
// each answers.
func startHelpers(t *testing.T, l *Lab) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range l.Members() {
		if err := m.Start(Command{Args: []string{self}, Env: []string{envServe + "=" + helperAddr(l, i)}}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range l.Members() {
		awaitGreeting(t, l, i)
	}
}

// awaitGreeting waits up to 10 s for member i's greeting.
func awaitGreeting(t *testing.T, l *Lab, i int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := greet(context.Background(), l.Dialer(), helperAddr(l, i))
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("member %d never greeted: %v\n%s", i, err, l.Member(i).LogTail(10))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// reaches reports whether member from gets member to's greeting, probing
// from inside from's namespace.
func reaches(t *testing.T, l *Lab, from, to int) bool {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("nsenter", "--net="+netnsPath(l.Member(from).Namespace()), "--", self)
	cmd.Env = append(os.Environ(), envProbe+"="+helperAddr(l, to))
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("probe %d->%d: %v: %s", from, to, err, out)
	}
	return err == nil
}

// wantReach checks every ordered pair of members against want.
func wantReach(t *testing.T, l *Lab, what string, want func(i, j int) bool) {
	t.Helper()
	n := len(l.Members())
	for i := range n {
		for j := range n {
			if i != j && reaches(t, l, i, j) != want(i, j) {
				t.Errorf("%s: member %d reaches %d: %v, want %v", what, i, j, !want(i, j), want(i, j))
			}
		}
	}
}

// TestLabControls drives every node control on three members running the
// greeting server, then checks that Close leaves nothing behind.
func TestLabControls(t *testing.T) {
	l := newLab(t, 3)
	ctx := context.Background()
	if err := CheckIsolation(ctx); err != nil {
		t.Fatalf("with a lab up: %v", err)
	}
	startHelpers(t, l)
	wantReach(t, l, "no partition", func(i, j int) bool { return true })
	for _, c := range []struct {
		name string
		g    func() (Grudge, error)
	}{
		{"isolate 0", func() (Grudge, error) { return Isolate(3, 0) }},
		{"split 2", func() (Grudge, error) { return Split(3, 2) }},
		{"bridge", func() (Grudge, error) { return Bridge(3) }},
	} {
		g, err := c.g()
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Apply(ctx, g); err != nil {
			t.Fatal(err)
		}
		wantReach(t, l, c.name, g.Reaches)
		for i := range 3 {
			awaitGreeting(t, l, i) // the test process still reaches all
		}
	}
	if err := l.Heal(ctx); err != nil {
		t.Fatal(err)
	}
	wantReach(t, l, "healed", func(i, j int) bool { return true })

	if err := l.Disconnect(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := greet(ctx, l.Dialer(), helperAddr(l, 1)); err == nil {
		t.Error("a disconnected member greeted")
	}
	if reaches(t, l, 0, 1) {
		t.Error("member 0 reaches a disconnected member")
	}
	if err := l.Heal(ctx); err != nil {
		t.Fatal(err)
	}
	awaitGreeting(t, l, 1)

	m := l.Member(1)
	if err := m.Pause(); err != nil {
		t.Fatal(err)
	}
	if err := greet(ctx, l.Dialer(), helperAddr(l, 1)); err == nil || !m.Paused() {
		t.Errorf("a paused member greeted (%v) or is not paused (%v)", err, m.Paused())
	}
	if err := m.Resume(); err != nil {
		t.Fatal(err)
	}
	awaitGreeting(t, l, 1)

	m = l.Member(2)
	old := m.Pid()
	marker := filepath.Join(m.DataDir(), "marker")
	if err := os.WriteFile(marker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := m.Kill(); err != nil {
		t.Fatal(err)
	}
	if m.Running() || m.Pid() != 0 || alive(old) {
		t.Fatalf("killed member: running %v, pid %d, old pid %d alive %v", m.Running(), m.Pid(), old, alive(old))
	}
	if err := greet(ctx, l.Dialer(), helperAddr(l, 2)); err == nil {
		t.Error("a killed member greeted")
	}
	if err := m.Restart(false); err != nil {
		t.Fatal(err)
	}
	awaitGreeting(t, l, 2)
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("restart without wiping lost the data: %v", err)
	}
	if err := m.Restart(true); err != nil {
		t.Fatal(err)
	}
	awaitGreeting(t, l, 2)
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("restart with wiping kept the data: %v", err)
	}
	if m.Pid() == old || m.Pid() == 0 {
		t.Errorf("restarted member's pid %d (was %d)", m.Pid(), old)
	}
	// A partition in place at Close: its rules go with the namespaces.
	g, err := Isolate(3, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Apply(ctx, g); err != nil {
		t.Fatal(err)
	}
	wantNothingLeft(t, l)
}

// alive reports whether process pid exists.
func alive(pid int) bool {
	return pid > 0 && syscall.Kill(pid, 0) == nil
}

// wantNothingLeft closes l and checks that no member process, namespace,
// bridge, nftables table or directory of it remains.
func wantNothingLeft(t *testing.T, l *Lab) {
	t.Helper()
	var pids []int
	for _, m := range l.Members() {
		pids = append(pids, m.Pid())
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		if alive(pid) {
			t.Errorf("pid %d is alive after Close", pid)
		}
	}
	labNamespacesLeft(t, l.num)
	if _, err := os.Stat(l.dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the lab's directory %s: %v", l.dir, err)
	}
}

// labNamespacesLeft fails t if a namespace or the bridge of lab number num
// exists, or a lab nftables table in the sandbox.
func labNamespacesLeft(t *testing.T, num int) {
	t.Helper()
	ctx := context.Background()
	out, err := output(ctx, "ip", "netns", "list")
	if err != nil {
		t.Fatal(err)
	}
	if prefix := fmt.Sprintf("%sl%dm", nsPrefix(), num); strings.Contains(string(out), prefix) {
		t.Errorf("namespaces of lab %d left:\n%s", num, out)
	}
	if err := run(ctx, "ip", "link", "show", fmt.Sprintf("lpbr%d", num)); err == nil {
		t.Errorf("bridge of lab %d left", num)
	}
	tables, err := output(ctx, "nft", "list", "tables")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(tables), "lockproof_lab") {
		t.Errorf("nftables tables left: %s", tables)
	}
}

// TestNewCleansUpOnFailure makes New fail half-way (a namespace of the
// name its second member would get already exists) and checks that it
// removed what it had made.
func TestNewCleansUpOnFailure(t *testing.T) {
	needLab(t)
	ctx := context.Background()
	num := int(labs.Load()) + 1
	squatter := fmt.Sprintf("%sl%dm1", nsPrefix(), num)
	if err := run(ctx, "ip", "netns", "add", squatter); err != nil {
		t.Fatal(err)
	}
	l, err := New(ctx, Options{Members: 3})
	if err := run(ctx, "ip", "netns", "del", squatter); err != nil {
		t.Error(err)
	}
	if err == nil {
		l.Close()
		t.Fatal("New succeeded beside a namespace of its own name")
	}
	labNamespacesLeft(t, num)
}

func TestGrudges(t *testing.T) {
	cases := []struct {
		name  string
		g     func() (Grudge, error)
		reach string // row i: which j member i reaches, 1 or 0
	}{
		{"isolate 1 of 3", func() (Grudge, error) { return Isolate(3, 1) }, "101 010 101"},
		{"split {0,4} of 5", func() (Grudge, error) { return Split(5, 0, 4) }, "10001 01110 01110 01110 10001"},
		{"bridge of 3", func() (Grudge, error) { return Bridge(3) }, "110 111 011"},
		{"bridge of 5", func() (Grudge, error) { return Bridge(5) }, "11100 11100 11111 00111 00111"},
		{"groups", func() (Grudge, error) { return Partition(4, []int{0, 2}, []int{1}, []int{3}) }, "1010 0100 1010 0001"},
	}
	for _, c := range cases {
		g, err := c.g()
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var rows []string
		n := strings.Index(c.reach+" ", " ")
		for i := range n {
			row := ""
			for j := range n {
				if i == j || g.Reaches(i, j) {
					row += "1"
				} else {
					row += "0"
				}
			}
			rows = append(rows, row)
		}
		if got := strings.Join(rows, " "); got != c.reach {
			t.Errorf("%s: reaches %s, want %s", c.name, got, c.reach)
		}
	}
	bad := map[string]func() (Grudge, error){
		"half is no minority": func() (Grudge, error) { return Split(4, 0, 1) },
		"empty minority":      func() (Grudge, error) { return Split(3) },
		"bridge of 2":         func() (Grudge, error) { return Bridge(2) },
		"member in no group":  func() (Grudge, error) { return Partition(3, []int{0}, []int{1}) },
		"member twice":        func() (Grudge, error) { return Partition(2, []int{0, 1}, []int{1}) },
		"member out of range": func() (Grudge, error) { return Partition(2, []int{0, 1, 2}) },
	}
	for name, f := range bad {
		if _, err := f(); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := (Grudge{0: {3}}).symmetric(3); err == nil {
		t.Error("a grudge naming member 3 of 3: no error")
	}
}
