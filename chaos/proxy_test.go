package chaos

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// echoServer answers every line with the same line; it counts the lines it
// received, so a test can tell a lost request from a lost reply.
type echoServer struct {
	ln    net.Listener
	lines atomic.Int64
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns []net.Conn
}

func startEcho(t testing.TB) *echoServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &echoServer{ln: ln}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			e.mu.Lock()
			e.conns = append(e.conns, c)
			e.mu.Unlock()
			e.wg.Add(1)
			go func() {
				defer e.wg.Done()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					e.lines.Add(1)
					if _, err := c.Write([]byte(line)); err != nil {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		e.mu.Lock()
		for _, c := range e.conns {
			_ = c.Close()
		}
		e.mu.Unlock()
		e.wg.Wait()
	})
	return e
}

// client is one connection through the proxy.
type client struct {
	c net.Conn
	r *bufio.Reader
}

func dial(t testing.TB, addr string) *client {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &client{c: c, r: bufio.NewReader(c)}
}

// ask sends line and waits up to wait for the echo.
func (c *client) ask(line string, wait time.Duration) (string, error) {
	_ = c.c.SetDeadline(time.Now().Add(wait))
	if _, err := c.c.Write([]byte(line + "\n")); err != nil {
		return "", err
	}
	got, err := c.r.ReadString('\n')
	if err != nil {
		return "", err
	}
	return got[:len(got)-1], nil
}

// refusedErr dials addr and asks once; it returns the error of whichever
// step failed (a reset can reach the dial or the first read), or nil.
func refusedErr(addr string) error {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = (&client{c: c, r: bufio.NewReader(c)}).ask("x", 5*time.Second)
	return err
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func TestProxyPassesThrough(t *testing.T) {
	e := startEcho(t)
	p := testProxy(t, e.ln.Addr().String())
	c := dial(t, p.Addr())
	for _, line := range []string{"a", "bb", "ccc"} {
		if got, err := c.ask(line, 5*time.Second); err != nil || got != line {
			t.Fatalf("ask %q: %q, %v", line, got, err)
		}
	}
	if p.Conns() != 1 {
		t.Fatalf("Conns = %d, want 1", p.Conns())
	}
}

// With DialTargetWith, the proxy reaches its target through the given
// dialer only: a loopback address nothing listens on works when the dialer
// maps it to a server, and a dialer's refusal resets the client's
// connection.
func TestProxyDialsTargetWith(t *testing.T) {
	e := startEcho(t)
	var dialed atomic.Int32
	through := func(ctx context.Context, network, addr string) (net.Conn, error) {
		if addr != "127.0.0.2:1" {
			return nil, fmt.Errorf("no route to %s", addr)
		}
		dialed.Add(1)
		var d net.Dialer
		return d.DialContext(ctx, network, e.ln.Addr().String())
	}
	p, err := StartProxy("127.0.0.2:1", 1, DialTargetWith(through))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	c := dial(t, p.Addr())
	if got, err := c.ask("a", 5*time.Second); err != nil || got != "a" {
		t.Fatalf("ask through the dialer: %q, %v", got, err)
	}
	if dialed.Load() != 1 {
		t.Fatalf("the dialer was called %d times, want 1", dialed.Load())
	}
	q, err := StartProxy("127.0.0.3:1", 1, DialTargetWith(through))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.Close() })
	if err := refusedErr(q.Addr()); err == nil {
		t.Fatal("a target the dialer refuses answered")
	}
}

func TestProxyLatency(t *testing.T) {
	e := startEcho(t)
	p := testProxy(t, e.ln.Addr().String())
	if err := p.SetLatency(Up, 20*time.Millisecond, 5*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := p.SetLatency(Down, 10*time.Millisecond, 0); err != nil {
		t.Fatal(err)
	}
	c := dial(t, p.Addr())
	began := time.Now()
	if _, err := c.ask("x", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if rtt := time.Since(began); rtt < 30*time.Millisecond {
		t.Fatalf("round trip %v with 20 ms up and 10 ms down", rtt)
	}
	if err := p.SetLatency(Up, -time.Millisecond, 0); err == nil {
		t.Fatal("negative latency accepted")
	}
}

// A partition holds the bytes; healing delivers them in order.
func TestProxyPartitionHoldsThenDelivers(t *testing.T) {
	e := startEcho(t)
	p := testProxy(t, e.ln.Addr().String())
	c := dial(t, p.Addr())
	if _, err := c.ask("before", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	p.Partition()
	if _, err := c.ask("during", 50*time.Millisecond); !isTimeout(err) {
		t.Fatalf("ask through a partition: %v, want a timeout", err)
	}
	if n := e.lines.Load(); n != 1 {
		t.Fatalf("server got %d lines during the partition, want 1 (only the first)", n)
	}
	p.Heal()
	_ = c.c.SetDeadline(time.Now().Add(5 * time.Second))
	got, err := c.r.ReadString('\n')
	if err != nil || got != "during\n" {
		t.Fatalf("after heal: %q, %v; want the held line", got, err)
	}
}

// Dropped replies: the request takes effect, the client times out; after
// healing, the broken connection is reset and a new one works.
func TestProxyDropReplies(t *testing.T) {
	e := startEcho(t)
	p := testProxy(t, e.ln.Addr().String())
	c := dial(t, p.Addr())
	p.DropReplies()
	if _, err := c.ask("lost", 100*time.Millisecond); !isTimeout(err) {
		t.Fatalf("ask with replies dropped: %v, want a timeout", err)
	}
	if n := e.lines.Load(); n != 1 {
		t.Fatalf("server got %d lines, want 1: the request must arrive", n)
	}
	p.Heal()
	if _, err := c.ask("after", 5*time.Second); err == nil {
		t.Fatal("the connection that lost a reply still works after heal; want it reset")
	}
	fresh := dial(t, p.Addr())
	if got, err := fresh.ask("fresh", 5*time.Second); err != nil || got != "fresh" {
		t.Fatalf("new connection after heal: %q, %v", got, err)
	}
}

func TestProxyRefuseAndReset(t *testing.T) {
	e := startEcho(t)
	p := testProxy(t, e.ln.Addr().String())
	old := dial(t, p.Addr())
	if _, err := old.ask("x", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	p.Refuse(true)
	if err := refusedErr(p.Addr()); err == nil || isTimeout(err) {
		t.Fatalf("ask on a refused connection: %v, want a reset", err)
	}
	if _, err := old.ask("z", 5*time.Second); err != nil {
		t.Fatalf("existing connection while refusing new ones: %v", err)
	}
	p.ResetAll()
	if _, err := old.ask("w", 5*time.Second); err == nil || isTimeout(err) {
		t.Fatalf("ask after ResetAll: %v, want a reset", err)
	}
	p.Refuse(false)
	if _, err := dial(t, p.Addr()).ask("v", 5*time.Second); err != nil {
		t.Fatalf("after Refuse(false): %v", err)
	}
}

func TestProxyServerDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	p := testProxy(t, addr)
	if err := refusedErr(p.Addr()); err == nil || isTimeout(err) {
		t.Fatalf("ask with the server down: %v, want a reset", err)
	}
	if _, err := StartProxy("", 1); err == nil {
		t.Fatal("empty target accepted")
	}
}

func TestProxyCloseTwice(t *testing.T) {
	e := startEcho(t)
	p, err := StartProxy(e.ln.Addr().String(), 1)
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, p.Addr())
	p.Partition()
	_ = c.c.SetDeadline(time.Now().Add(5 * time.Second))
	_, _ = c.c.Write([]byte("held\n"))
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// BenchmarkProxyRoundTrip: one line echoed, directly and through a proxy
// with no fault. overhead-p50-us is the proxy's median cost per round trip.
func BenchmarkProxyRoundTrip(b *testing.B) {
	e := startEcho(b)
	p := testProxy(b, e.ln.Addr().String())
	direct, proxied := dial(b, e.ln.Addr().String()), dial(b, p.Addr())
	rtt := func(c *client) time.Duration {
		began := time.Now()
		if _, err := c.ask("ping", 5*time.Second); err != nil {
			b.Fatal(err)
		}
		return time.Since(began)
	}
	var d, v []time.Duration
	b.ResetTimer()
	for range b.N {
		d = append(d, rtt(direct))
		v = append(v, rtt(proxied))
	}
	b.StopTimer()
	slices.Sort(d)
	slices.Sort(v)
	b.ReportMetric(float64(d[len(d)/2].Microseconds()), "direct-p50-us")
	b.ReportMetric(float64(v[len(v)/2].Microseconds()), "proxied-p50-us")
	b.ReportMetric(float64((v[len(v)/2] - d[len(d)/2]).Microseconds()), "overhead-p50-us")
}
