package zklock

import (
	"errors"
	"net"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/lockproof/lockproof/internal/zkrace"
)

// silentServer listens and never accepts: the kernel completes each TCP
// handshake and nothing answers, as a stopped ZooKeeper process.
func silentServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	return ln.Addr().String()
}

// silentFirst is a zk.HostProvider that tries first first, then the
// others in turn, round after round (go-zookeeper shuffles the servers
// before Init).
type silentFirst struct {
	first   string
	mu      sync.Mutex
	servers []string
	tries   int
}

func (p *silentFirst) Init(servers []string) error {
	if !slices.Contains(servers, p.first) {
		return errors.New("silentFirst: the first server is not in the list")
	}
	p.servers = append([]string{p.first}, slices.DeleteFunc(slices.Clone(servers), func(s string) bool { return s == p.first })...)
	return nil
}

func (p *silentFirst) Len() int { return len(p.servers) }

// Next starts a new round, after go-zookeeper's pause, every Len tries.
func (p *silentFirst) Next() (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	i := p.tries % len(p.servers)
	p.tries++
	return p.servers[i], i == 0 && p.tries > 1
}

func (p *silentFirst) Connected() {}

// A read on a silent server ends at the bound, whatever deadline the
// client set; once the server answered, the client's deadlines stand.
func TestHandshakeDialerCapsTheFirstRead(t *testing.T) {
	c, err := HandshakeDialer(nil, 20*time.Millisecond)("tcp", silentServer(t), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.SetReadDeadline(time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	read := make(chan error, 1)
	go func() { _, err := c.Read(make([]byte, 4)); read <- err }()
	select {
	case err := <-read:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("the read ended with %v, want its deadline capped", err)
		}
	case <-time.After(testTimeout): // a guard against a hang, far above the bound
		t.Fatal("the read on the silent server was not capped")
	}
	h := c.(*handshakeConn)
	far := time.Now().Add(time.Hour)
	if got := h.cap(far); !got.Equal(h.until) {
		t.Fatalf("before the reply a deadline of an hour became %v, want the bound %v", got, h.until)
	}
	if got := h.cap(time.Time{}); !got.IsZero() {
		t.Fatalf("no deadline became %v before the reply", got)
	}
	h.shook.Store(true)
	if got := h.cap(far); !got.Equal(far) {
		t.Fatalf("after the reply a deadline of an hour became %v", got)
	}
}

// A client whose first server is silent (the ensemble's paused leader)
// reaches the next one, which serves, within the bound instead of after
// go-zookeeper's ten read timeouts (here 10 s sessions: 66 s).
func TestHandshakeDialerMovesOnFromASilentServer(t *testing.T) {
	live := server(t)
	session := 10 * time.Second
	up := make(chan struct{})
	var once sync.Once
	silent := silentServer(t)
	conn, _, err := zk.Connect([]string{silent, live.addr}, session, zk.WithLogger(quiet{}),
		zk.WithHostProvider(&silentFirst{first: silent}), zk.WithDialer(HandshakeDialer(nil, 100*time.Millisecond)),
		zk.WithEventCallback(func(e zk.Event) {
			if e.State == zk.StateHasSession {
				once.Do(func() { close(up) })
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	select {
	case <-up:
		zkrace.Settle(testTimeout)
	case <-time.After(testTimeout): // a guard: the unbounded handshake takes 66 s
		t.Fatalf("no session within %v: the client waited on the silent server", testTimeout)
	}
	if conn.Server() != live.addr {
		t.Fatalf("the session is on %s, want the live server %s", conn.Server(), live.addr)
	}
}

// HandshakeBound is go-zookeeper's read timeout.
func TestHandshakeBound(t *testing.T) {
	if got := HandshakeBound(3 * time.Second); got != 2*time.Second {
		t.Fatalf("HandshakeBound(3s) = %v, want 2s", got)
	}
}
