package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"time"
)

// Direction is one way through a Proxy.
type Direction uint8

const (
	// Up is client to server: requests.
	Up Direction = iota
	// Down is server to client: replies.
	Down
)

func (d Direction) String() string {
	if d == Up {
		return "up"
	}
	return "down"
}

// Blackhole is what a Proxy does with the bytes of a direction it cuts.
type Blackhole uint8

const (
	// Open lets bytes through.
	Open Blackhole = iota
	// Hold keeps the bytes and delivers them, in order, once the direction
	// heals: a partition without RST that ends before TCP gives up.
	Hold
	// Drop discards the bytes. The stream is then broken (a request or reply
	// went missing mid-stream), so when the direction heals every connection
	// that lost bytes is reset rather than resumed.
	Drop
)

func (b Blackhole) String() string {
	switch b {
	case Hold:
		return "hold"
	case Drop:
		return "drop"
	}
	return "open"
}

// fault is the state of one direction.
type fault struct {
	latency, jitter time.Duration
	hole            Blackhole
}

// Proxy is an in-process TCP proxy for one client↔server link: point the
// client at Addr instead of the server. Its faults can change while traffic
// flows; each applies to the bytes read after the change. It is safe for
// concurrent use.
type Proxy struct {
	ln     net.Listener
	target string
	dial   func(ctx context.Context, network, addr string) (net.Conn, error)

	mu      sync.Mutex
	mirror  *mirror // set by Replicate, nil otherwise
	faults  [2]fault
	refuse  bool
	changed chan struct{} // closed and replaced on every change
	rng     *rand.Rand
	conns   map[*link]struct{}
	closed  bool
	wg      sync.WaitGroup
}

// ProxyOption changes how StartProxy sets a proxy up.
type ProxyOption func(*Proxy)

// DialTargetWith makes the proxy reach its target through dial instead of
// a TCP dial from this process's network: for a target only a special
// dialer reaches, such as a server in a network namespace of its own.
func DialTargetWith(dial func(ctx context.Context, network, addr string) (net.Conn, error)) ProxyOption {
	return func(p *Proxy) { p.dial = dial }
}

// targetDialTimeout bounds the proxy's dial of its target for each
// connection it accepts.
const targetDialTimeout = 5 * time.Second

// StartProxy starts a proxy to target on a loopback port chosen by the
// kernel; Close stops it. seed drives the latency jitter.
func StartProxy(target string, seed uint64, opts ...ProxyOption) (*Proxy, error) {
	if target == "" {
		return nil, errors.New("proxy: empty target address")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("proxy: listen: %w", err)
	}
	p := &Proxy{
		ln:      ln,
		target:  target,
		changed: make(chan struct{}),
		rng:     rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		conns:   map[*link]struct{}{},
	}
	for _, o := range opts {
		if o != nil {
			o(p)
		}
	}
	if p.dial == nil {
		d := &net.Dialer{}
		p.dial = d.DialContext
	}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the address clients dial instead of the server's.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Target is the server's address (the replica's, after Promote).
func (p *Proxy) Target() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.target
}

// SetLatency delays every byte of direction d by latency plus a uniform
// random extra in [0, jitter), keeping their order. Negative values are an
// error.
func (p *Proxy) SetLatency(d Direction, latency, jitter time.Duration) error {
	if latency < 0 || jitter < 0 {
		return fmt.Errorf("proxy: negative latency %v or jitter %v", latency, jitter)
	}
	p.update(func() {
		p.faults[d].latency, p.faults[d].jitter = latency, jitter
	})
	return nil
}

// Cut blackholes direction d: Hold keeps its bytes until it heals, Drop
// discards them. Open heals it.
func (p *Proxy) Cut(d Direction, how Blackhole) {
	var broken []*link
	p.update(func() {
		p.faults[d].hole = how
		if how != Drop {
			broken = p.brokenLocked()
		}
	})
	for _, l := range broken {
		l.reset()
	}
}

// Partition cuts both directions, holding the bytes: a network partition
// without RST. Heal ends it.
func (p *Proxy) Partition() {
	p.Cut(Up, Hold)
	p.Cut(Down, Hold)
}

// DropReplies lets requests reach the server but discards its replies: the
// client times out on operations that took effect. Heal ends it (resetting
// the connections whose replies were lost).
func (p *Proxy) DropReplies() { p.Cut(Down, Drop) }

// Refuse makes new connections fail at once (accepted, then reset) while on
// is true; existing connections are untouched.
func (p *Proxy) Refuse(on bool) { p.update(func() { p.refuse = on }) }

// ResetAll resets every open connection, as a crashed middlebox or server
// would; clients see "connection reset" and reconnect.
func (p *Proxy) ResetAll() {
	p.mu.Lock()
	links := make([]*link, 0, len(p.conns))
	for l := range p.conns {
		links = append(links, l)
	}
	p.mu.Unlock()
	for _, l := range links {
		l.reset()
	}
}

// Heal removes every fault: no latency, both directions open (held bytes
// are delivered, connections that lost bytes are reset), new connections
// accepted.
func (p *Proxy) Heal() {
	var broken []*link
	p.update(func() {
		p.faults = [2]fault{}
		p.refuse = false
		broken = p.brokenLocked()
	})
	for _, l := range broken {
		l.reset()
	}
}

// Conns returns how many client connections are open through the proxy.
func (p *Proxy) Conns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

// Close stops accepting, resets every connection and waits for the proxy's
// goroutines. Later calls do nothing.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	err := p.ln.Close()
	p.ResetAll()
	p.update(func() {}) // wake pumps waiting on a held direction
	p.wg.Wait()
	return err
}

// update changes the faults under the lock and wakes every pump.
func (p *Proxy) update(change func()) {
	p.mu.Lock()
	change()
	close(p.changed)
	p.changed = make(chan struct{})
	p.mu.Unlock()
}

// brokenLocked returns the links that lost bytes to a Drop and takes them
// out of the set; the caller resets them.
func (p *Proxy) brokenLocked() []*link {
	var out []*link
	for l := range p.conns {
		if l.lost {
			out = append(out, l)
		}
	}
	return out
}

// state returns direction d's fault, the channel closed at the next change,
// and whether the proxy is closed.
func (p *Proxy) state(d Direction) (fault, <-chan struct{}, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.faults[d], p.changed, p.closed
}

// delay draws the delay of one chunk in direction d.
func (p *Proxy) delay(f fault) time.Duration {
	if f.jitter <= 0 {
		return f.latency
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return f.latency + time.Duration(p.rng.Int64N(int64(f.jitter)))
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.mu.Lock()
		refuse, closed := p.refuse, p.closed
		p.mu.Unlock()
		if refuse || closed {
			resetConn(client)
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), targetDialTimeout)
		server, err := p.dial(ctx, "tcp", p.Target())
		cancel()
		if err != nil {
			resetConn(client) // the server is down: so is the link
			continue
		}
		l := &link{p: p, client: client, server: server}
		if err := l.attachMirror(); err != nil {
			resetConn(client)
			resetConn(server)
			continue
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			l.reset()
			continue
		}
		p.conns[l] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go l.pump(Up, client, server)
		go l.pump(Down, server, client)
	}
}

// resetConn closes c with an RST rather than a FIN.
func resetConn(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

// link is one proxied connection.
type link struct {
	p              *Proxy
	client, server net.Conn
	lost           bool // guarded by p.mu: a Drop discarded some of its bytes
	once           sync.Once
	copyTo         *replicaConn // the replica's copy of the requests, if any
}

func (l *link) reset() {
	l.once.Do(func() {
		l.p.mu.Lock()
		delete(l.p.conns, l)
		l.p.mu.Unlock()
		resetConn(l.client)
		resetConn(l.server)
		if l.copyTo != nil {
			l.copyTo.stop()
		}
	})
}

// chunk is bytes read from one side, with when they are due at the other.
type chunk struct {
	b   []byte
	due time.Time
}

// pump copies src to dst in direction d, applying its faults. A reader
// goroutine stamps each chunk with its due time, so latency delays bytes
// without slowing the stream down.
func (l *link) pump(d Direction, src, dst net.Conn) {
	defer l.p.wg.Done()
	defer l.reset()
	chunks := make(chan chunk, 256)
	go func() {
		defer close(chunks)
		for {
			buf := make([]byte, 32<<10)
			n, err := src.Read(buf)
			if n > 0 {
				f, _, _ := l.p.state(d)
				chunks <- chunk{b: buf[:n], due: time.Now().Add(l.p.delay(f))}
			}
			if err != nil {
				return
			}
		}
	}()
	defer func() {
		for range chunks { // let the reader finish once src is closed
		}
	}()
	for c := range chunks {
		if wait := time.Until(c.due); wait > 0 {
			t := time.NewTimer(wait)
			<-t.C
		}
		if !l.pass(d) {
			continue
		}
		if d == Up && l.copyTo != nil {
			l.copyTo.send(c.b) // the replica follows what the primary receives
		}
		if _, err := dst.Write(c.b); err != nil {
			return // dst is gone; the deferred reset closes src too
		}
	}
}

// pass waits while direction d holds, then says whether the chunk goes
// through (false: dropped, the link is marked broken).
func (l *link) pass(d Direction) bool {
	for {
		f, changed, closed := l.p.state(d)
		switch {
		case closed:
			return false
		case f.hole == Open:
			return true
		case f.hole == Drop:
			l.p.mu.Lock()
			l.lost = true
			l.p.mu.Unlock()
			return false
		}
		<-changed // Hold: wait for the next change
	}
}
