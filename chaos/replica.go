package chaos

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// Replicate feeds a replica from the proxy's traffic, asynchronously: every
// byte a client sends to the server through the proxy is also sent, lag
// later, to replica on a connection of its own (one per client
// connection, so pipelines, transactions and scripts replay in the order the
// primary saw them; the replica's replies are discarded). This is
// statement-based replication of a Redis-like protocol, enough for a
// replica that starts with the primary's data (both empty, typically).
// Connections open before the call are reset, so that every client
// connection from now on is mirrored. Promote ends it.
func (p *Proxy) Replicate(replica string, lag time.Duration) error {
	if replica == "" || lag < 0 {
		return fmt.Errorf("proxy: replicate to %q with lag %v", replica, lag)
	}
	p.mu.Lock()
	if p.mirror != nil {
		p.mu.Unlock()
		return errors.New("proxy: already replicating")
	}
	p.mirror = &mirror{addr: replica, lag: lag}
	p.mu.Unlock()
	p.ResetAll()
	return nil
}

// Promote fails over to the replica: what it has not received yet is lost
// (the writes of the last lag), the proxy's target becomes the replica, and
// every connection is reset so that clients reconnect to it. It returns how
// many bytes of requests never reached the replica.
func (p *Proxy) Promote() (lost int64, err error) {
	p.mu.Lock()
	m := p.mirror
	if m == nil {
		p.mu.Unlock()
		return 0, errors.New("proxy: not replicating")
	}
	p.mirror = nil
	p.target = m.addr
	links := make([]*link, 0, len(p.conns))
	for l := range p.conns {
		links = append(links, l)
	}
	p.mu.Unlock()
	for _, l := range links {
		if l.copyTo != nil {
			lost += l.copyTo.stop()
		}
	}
	p.ResetAll()
	return lost, nil
}

// mirror is where and how late the requests are copied.
type mirror struct {
	addr string
	lag  time.Duration
}

// attachMirror gives a new link its replica connection, if replicating.
func (l *link) attachMirror() error {
	l.p.mu.Lock()
	m := l.p.mirror
	l.p.mu.Unlock()
	if m == nil {
		return nil
	}
	c, err := net.DialTimeout("tcp", m.addr, 5*time.Second)
	if err != nil {
		return err
	}
	l.copyTo = newReplicaConn(c, m.lag, &l.p.wg)
	return nil
}

// replicaConn delivers copied requests to the replica, each lag after it was
// sent to the primary, and drains the replica's replies.
type replicaConn struct {
	c   net.Conn
	lag time.Duration

	mu      sync.Mutex
	queue   []chunk
	pending int64 // bytes queued, not yet written
	wake    chan struct{}
	stopped bool
}

func newReplicaConn(c net.Conn, lag time.Duration, wg *sync.WaitGroup) *replicaConn {
	r := &replicaConn{c: c, lag: lag, wake: make(chan struct{}, 1)}
	wg.Add(2)
	go func() { defer wg.Done(); _, _ = io.Copy(io.Discard, c) }()
	go func() { defer wg.Done(); r.deliver() }()
	return r
}

func (r *replicaConn) send(b []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return
	}
	r.queue = append(r.queue, chunk{b: append([]byte(nil), b...), due: time.Now().Add(r.lag)})
	r.pending += int64(len(b))
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

func (r *replicaConn) deliver() {
	for {
		r.mu.Lock()
		if r.stopped {
			r.mu.Unlock()
			return
		}
		if len(r.queue) == 0 {
			r.mu.Unlock()
			<-r.wake
			continue
		}
		c := r.queue[0]
		r.mu.Unlock()
		if wait := time.Until(c.due); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-r.wake: // more queued, or stopped: look again
				t.Stop()
				continue
			}
		}
		r.mu.Lock()
		if r.stopped {
			r.mu.Unlock()
			return
		}
		r.queue = r.queue[1:]
		r.pending -= int64(len(c.b))
		r.mu.Unlock()
		if _, err := r.c.Write(c.b); err != nil {
			return
		}
	}
}

// stop drops what is still queued, closes the replica connection and
// returns how many bytes were dropped. Later calls return 0.
func (r *replicaConn) stop() int64 {
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		return 0
	}
	r.stopped = true
	lost := r.pending
	r.queue, r.pending = nil, 0
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
	_ = r.c.Close()
	return lost
}
