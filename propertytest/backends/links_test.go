package backends

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/lockproof/lockproof/fakes/consulfake"
	"github.com/lockproof/lockproof/fakes/mysqlfake"
	"github.com/lockproof/lockproof/fakes/zkfake"
	"github.com/lockproof/lockproof/locks"
	"github.com/lockproof/lockproof/propertytest"
)

// echo is a TCP server on loopback that sends back every line it reads.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() { _, _ = io.Copy(c, c) })
		}
	})
	return ln.Addr().String()
}

// ask sends a line on c and reads the answer within wait.
func ask(c net.Conn, r *bufio.Reader, wait time.Duration) (string, error) {
	if err := c.SetDeadline(time.Now().Add(wait)); err != nil {
		return "", err
	}
	if _, err := io.WriteString(c, "ping\n"); err != nil {
		return "", err
	}
	return r.ReadString('\n')
}

// heldUp asks on c and wants no answer within 200ms: nil on a time-out,
// else what came back instead.
func heldUp(c net.Conn, r *bufio.Reader) error {
	got, err := ask(c, r, 200*time.Millisecond)
	var timeout net.Error
	if errors.As(err, &timeout) && timeout.Timeout() {
		return nil
	}
	if err == nil {
		return fmt.Errorf("answered %q", got)
	}
	return err
}

// A cut holds the bytes of every link of its client, those it dials later
// included, and leaves the other clients' links alone; the held bytes are
// delivered when it heals. A cut of one node leaves the client's other
// links open.
func TestLinksCutOneClient(t *testing.T) {
	a, b := echo(t), echo(t)
	env := &recordingEnv{}
	defer env.done()
	l := newLinks(env)
	dial := func(client int, addr string) (net.Conn, *bufio.Reader) {
		c, err := l.dial(client)(context.Background(), "tcp", addr)
		if err != nil {
			t.Fatalf("client %d dials %s: %v", client, addr, err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c, bufio.NewReader(c)
	}
	c0a, r0a := dial(0, a)
	c1a, r1a := dial(1, a)
	if got, err := ask(c0a, r0a, 5*time.Second); err != nil || got != "ping\n" {
		t.Fatalf("client 0 before the cut: %q, %v", got, err)
	}
	if first := l.firstOf(0); first != a {
		t.Fatalf("client 0 dialed %s first, links say %q", a, first)
	}

	faults := l.faults()
	if len(faults) != len(LinkFaultNames()) {
		t.Fatalf("%d faults, %d names", len(faults), len(LinkFaultNames()))
	}
	for i, f := range faults {
		if f.Name != LinkFaultNames()[i] || f.Kind != propertytest.FaultPartition {
			t.Fatalf("fault %d: %q of kind %v", i, f.Name, f.Kind)
		}
	}
	if err := faults[0].Inject(); err != nil {
		t.Fatal(err)
	}
	if err := heldUp(c0a, r0a); err != nil {
		t.Fatalf("client 0 cut off from a: %v, want a time-out", err)
	}
	c0b, r0b := dial(0, b) // a link dialed during the cut is cut too
	if err := heldUp(c0b, r0b); err != nil {
		t.Fatalf("client 0 cut off from b: %v, want a time-out", err)
	}
	if got, err := ask(c1a, r1a, 5*time.Second); err != nil || got != "ping\n" {
		t.Fatalf("client 1 during client 0's cut: %q, %v", got, err)
	}
	if err := faults[0].Heal(); err != nil {
		t.Fatal(err)
	}
	if err := c0b.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if got, err := r0b.ReadString('\n'); err != nil || got != "ping\n" {
		t.Fatalf("client 0's held line after the heal: %q, %v", got, err)
	}

	// Client 1's cut strikes the node it dialed first (a), not b.
	c1b, r1b := dial(1, b)
	if err := faults[1].Inject(); err != nil {
		t.Fatal(err)
	}
	if err := heldUp(c1a, r1a); err != nil {
		t.Fatalf("client 1 cut off from its first node: %v, want a time-out", err)
	}
	if got, err := ask(c1b, r1b, 5*time.Second); err != nil || got != "ping\n" {
		t.Fatalf("client 1 to its second node during the cut: %q, %v", got, err)
	}
	if err := faults[1].Heal(); err != nil {
		t.Fatal(err)
	}
}

// Client 1's cut before its first dial strikes nothing; after close every
// dial fails.
func TestLinksBeforeAndAfter(t *testing.T) {
	a := echo(t)
	env := &recordingEnv{}
	l := newLinks(env)
	if err := l.faults()[1].Inject(); err != nil {
		t.Fatal(err)
	}
	c, err := l.dial(1)(context.Background(), "tcp", a)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := ask(c, bufio.NewReader(c), 5*time.Second); err != nil || got != "ping\n" {
		t.Fatalf("client 1 after a cut that found no link: %q, %v", got, err)
	}
	_ = c.Close()
	env.done()
	if _, err := l.dial(0)(context.Background(), "tcp", a); err == nil {
		t.Fatal("a dial after the run's end went through")
	}
}

// On a ZooKeeper ensemble (here one minizk, in real time) the factory's
// clients go through their links: while client 0 is cut off, its lease
// ends by its TTL and client 1 gets the lock once the server expires the
// cut-off session. WithoutLinkFaults offers no fault.
func TestZKLockOnAllLinkFaults(t *testing.T) {
	z, err := zkfake.Start(zkfake.ForceMinizk())
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	env := &recordingEnv{}
	defer env.done()
	if be, err := ZKLockOnAll([]string{z.Addr()}, WithoutLinkFaults())(env); err != nil || len(be.Faults) != 0 {
		t.Fatalf("without link faults: %v faults, %v", be, err)
	}
	be, err := ZKLockOnAll([]string{z.Addr()})(env)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range be.Faults {
		names = append(names, f.Name)
	}
	if !slices.Equal(names, LinkFaultNames()) {
		t.Fatalf("faults %q, want %q", names, LinkFaultNames())
	}
	ttl := time.Second
	ctx := context.Background()
	l0, err := be.NewLocker("L", locks.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	l1, err := be.NewLocker("L", locks.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	lease, err := l0.TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := be.Faults[0].Inject(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-lease.Done():
	case <-time.After(time.Minute):
		t.Fatal("the cut-off holder's lease did not end")
	}
	deadline := time.Now().Add(time.Minute)
	for {
		l, err := l1.TryLock(ctx)
		if err == nil {
			_ = l.Unlock(ctx)
			break
		}
		if !errors.Is(err, locks.ErrLocked) || time.Now().After(deadline) {
			t.Fatalf("client 1 while client 0 is cut off: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := be.Faults[0].Heal(); err != nil {
		t.Fatal(err)
	}
}

// The Consul and MySQL deployment factories dial through the links too:
// with client 0 cut off, its first request gets no answer, while client
// 1's does. (One in-process server on loopback stands for the deployment.)
func TestDeploymentsDialThroughLinks(t *testing.T) {
	consul, err := consulfake.Start(consulfake.SessionTTLMin(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer consul.Close()
	mysql, err := mysqlfake.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer mysql.Close()
	base, err := gomysql.ParseDSN(mysql.DSN())
	if err != nil {
		t.Fatal(err)
	}
	base.DBName = ""
	for name, f := range map[string]propertytest.Factory{
		"consul": ConsulLockOnAll([]string{consul.Addr()}),
		"mysql":  MySQLLockOnAll([]string{base.FormatDSN()}),
	} {
		t.Run(name, func(t *testing.T) {
			env := &recordingEnv{}
			defer env.done()
			be, err := f(env)
			if err != nil {
				t.Fatal(err)
			}
			var lockers []locks.Locker
			for range 2 {
				l, err := be.NewLocker("L", locks.WithTTL(time.Second))
				if err != nil {
					t.Fatal(err)
				}
				lockers = append(lockers, l)
			}
			if err := be.Faults[0].Inject(); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			lease, err := lockers[0].TryLock(ctx)
			cancel()
			if err == nil {
				_ = lease.Unlock(context.Background())
				t.Fatal("client 0 took the lock while cut off from every node")
			}
			if err := be.Faults[0].Heal(); err != nil {
				t.Fatal(err)
			}
			l1 := lockers[1]
			ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			lease, err = l1.Lock(ctx)
			if err != nil {
				t.Fatalf("client 1 after the heal: %v", err)
			}
			if err := lease.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// WithDialer: ZKLockOnAll reaches a node only its dialer knows, through
// the links' proxies and, without link faults, directly; every other
// deployment factory refuses the option rather than dial past it.
func TestDeploymentWithDialer(t *testing.T) {
	z, err := zkfake.Start(zkfake.ForceMinizk())
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	// An address nothing listens on (loopback: never a name to resolve,
	// never a route out); only the dialer maps it to the server.
	const name = "127.0.0.2:1"
	var dialed atomic.Int32
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		if addr != name {
			return nil, fmt.Errorf("no route to %s", addr)
		}
		dialed.Add(1)
		var d net.Dialer
		return d.DialContext(ctx, network, z.Addr())
	}
	for _, links := range []bool{true, false} {
		opts := []DeployOption{WithDialer(dial)}
		if !links {
			opts = append(opts, WithoutLinkFaults())
		}
		env := &recordingEnv{}
		be, err := ZKLockOnAll([]string{name}, opts...)(env)
		if err != nil {
			env.done()
			t.Fatalf("links %v: %v", links, err)
		}
		before := dialed.Load()
		l, err := be.NewLocker("L", locks.WithTTL(time.Second))
		if err != nil {
			env.done()
			t.Fatalf("links %v: %v", links, err)
		}
		lease, err := l.TryLock(context.Background())
		if err != nil {
			env.done()
			t.Fatalf("links %v: TryLock: %v", links, err)
		}
		_ = lease.Unlock(context.Background())
		if dialed.Load() == before {
			t.Errorf("links %v: the locker's connection did not go through the dialer", links)
		}
		if got := len(be.Faults) > 0; got != links {
			t.Errorf("links %v: %d faults", links, len(be.Faults))
		}
		env.done()
	}
	for name, f := range map[string]propertytest.Factory{
		"ConsulLockOnAll":      ConsulLockOnAll([]string{"127.0.0.1:1"}, WithDialer(dial)),
		"MySQLLockOnAll":       MySQLLockOnAll([]string{"root@tcp(127.0.0.1:1)/"}, WithDialer(dial)),
		"RedisLockViaSentinel": RedisLockViaSentinel("mymaster", []string{"127.0.0.1:1"}, WithDialer(dial)),
	} {
		env := &recordingEnv{}
		_, err := f(env)
		env.done()
		if err == nil || !strings.Contains(err.Error(), "does not take WithDialer") {
			t.Errorf("%s with WithDialer: %v, want a refusal", name, err)
		}
	}
}
