package backends

import (
	"context"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockproof/lockproof/fakes/zkfake"
	"github.com/lockproof/lockproof/locks"
)

func TestRoundRobinSpreadsClients(t *testing.T) {
	var rr roundRobin
	var got []int
	for range 7 {
		got = append(got, rr.next(3))
	}
	if want := []int{0, 1, 2, 0, 1, 2, 0}; !slices.Equal(got, want) {
		t.Fatalf("servers of clients 0..6 over 3: %v, want %v", got, want)
	}
}

// The i-th client starts at server i mod n, goes round the others in
// order, and reports a full round without a connection (go-zookeeper then
// waits before the next).
func TestInOrderHostProvider(t *testing.T) {
	p := &inOrder{first: 4}
	if err := p.Init([]string{"a:1", "b:1", "c:1"}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for range 4 {
		s, retry := p.Next()
		got = append(got, s+map[bool]string{true: "!", false: ""}[retry])
	}
	if want := "b:1 c:1 a:1 b:1!"; strings.Join(got, " ") != want {
		t.Fatalf("tries %q, want %q", strings.Join(got, " "), want)
	}
	p.Connected()
	s, retry := p.Next()
	if s != "c:1" || retry {
		t.Fatalf("after a connection to b: %s %v, want c:1 false", s, retry)
	}
	if err := (&inOrder{}).Init(nil); err == nil {
		t.Fatal("no server accepted")
	}
}

// go-zookeeper shuffles the servers before Init: the order given to
// newInOrder still decides, and a list of other servers is refused.
func TestInOrderKeepsTheGivenOrder(t *testing.T) {
	addrs := []string{"10.0.0.1:2181", "10.0.0.2:2181", "10.0.0.3:2181"}
	p := newInOrder(addrs, 1)
	if err := p.Init([]string{addrs[2], addrs[0], addrs[1]}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for range 3 {
		s, _ := p.Next()
		got = append(got, s)
	}
	if want := []string{addrs[1], addrs[2], addrs[0]}; !slices.Equal(got, want) {
		t.Fatalf("tries %q, want %q", got, want)
	}
	if err := newInOrder(addrs, 0).Init([]string{addrs[0], addrs[1], "10.0.0.9:2181"}); err == nil {
		t.Fatal("a list of other servers accepted")
	}
}

func TestNodeDSNs(t *testing.T) {
	got, err := nodeDSNs("root@tcp(10.0.0.1:3306)/lockproof_x?parseTime=true",
		[]string{"root@tcp(10.0.0.1:3306)/", "app:pw@tcp(10.0.0.2:3307)/"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !strings.Contains(got[1], "app:pw@tcp(10.0.0.2:3307)/lockproof_x") || !strings.Contains(got[1], "parseTime=true") {
		t.Fatalf("node DSNs %q", got)
	}
	for _, bad := range []string{"root@tcp(h:1)/somedb", "no slash"} {
		if _, err := nodeDSNs("root@tcp(h:1)/x", []string{"root@tcp(h:1)/", bad}); err == nil {
			t.Errorf("DSN %q accepted", bad)
		}
	}
}

func TestListFactoriesRefuseNoServer(t *testing.T) {
	env := &recordingEnv{}
	defer env.done()
	for name, f := range map[string]func() error{
		"consul":                func() error { _, err := ConsulLockOnAll([]string{"h:1", ""})(env); return err },
		"zk":                    func() error { _, err := ZKLockOnAll(nil)(env); return err },
		"mysql":                 func() error { _, err := MySQLLockOnAll(nil)(env); return err },
		"sentinel, no master":   func() error { _, err := RedisLockViaSentinel("", []string{"h:1"})(env); return err },
		"sentinel, no sentinel": func() error { _, err := RedisLockViaSentinel("m", nil)(env); return err },
	} {
		if f() == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// recordingEnv is a propertytest.Env outside any run: it keeps its
// clean-ups, run by done, and drops the log.
type recordingEnv struct{ cleanups []func() }

func (e *recordingEnv) Cleanup(f func())    { e.cleanups = append(e.cleanups, f) }
func (e *recordingEnv) Logf(string, ...any) {}
func (e *recordingEnv) done() {
	for i := len(e.cleanups) - 1; i >= 0; i-- {
		e.cleanups[i]()
	}
}

// A client whose own server refuses connections moves on to the next in
// the list: with a dead second server, client 1 (which starts there) is
// served by the first, and the two lockers exclude each other.
func TestZKLockOnAllMovesOnFromADeadServer(t *testing.T) {
	z, err := zkfake.Start(zkfake.ForceMinizk())
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	env := &recordingEnv{}
	defer env.done()
	be, err := ZKLockOnAll([]string{z.Addr(), dead})(env)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var held []locks.Lease
	for i := range 2 {
		l, err := be.NewLocker("L", locks.WithTTL(5*time.Second))
		if err != nil {
			t.Fatalf("locker %d: %v", i, err)
		}
		lease, err := l.TryLock(ctx)
		if (err == nil) != (i == 0) {
			t.Fatalf("locker %d's TryLock: %v, want the lock to the first only", i, err)
		}
		if lease != nil {
			held = append(held, lease)
		}
	}
	for _, l := range held {
		if err := l.Unlock(ctx); err != nil {
			t.Error(err)
		}
	}
}
