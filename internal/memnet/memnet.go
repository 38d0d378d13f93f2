// Package memnet is an in-process network for the fakes: connections
// (Pipe) that are byte queues in memory, never sockets.
//
// It exists for the property suite's scheduler, which decides that a run is
// quiescent (nothing can move until the driver acts) by asking the Go
// runtime whether any goroutine is runnable. A request on a loopback socket
// is invisible to that question while it sits in the kernel between the
// client's write and the server's read, so over TCP the scheduler has to
// wait a while of wall time to be sure. Over memnet a write makes the
// reading goroutine runnable before the writer goes on, so the runtime's
// own counters are the whole truth and no waiting is needed.
//
// Writes never block (each direction is an unbounded queue, as a socket's
// buffers are large enough for the fakes' traffic): two peers that both
// write before they read, as pipelined protocols do, cannot deadlock the
// way they would on net.Pipe. Read and write deadlines are honoured with
// os.ErrDeadlineExceeded, so clients' timeouts work as on TCP.
package memnet

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"
)

// Addr is the address of one end of a connection.
type Addr string

// Network returns "memnet".
func (Addr) Network() string { return "memnet" }

// String returns the address's name.
func (a Addr) String() string { return string(a) }

// Refused returns the error of a dial to addr that nobody listens on: a
// TCP dial's error to a closed port, so that clients treat it as they
// treat a stopped server.
func Refused(addr string) error {
	return &net.OpError{Op: "dial", Net: "memnet", Addr: Addr(addr), Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
}

// Pipe returns the two ends of a new connection, a with address aAddr and
// b with bAddr.
func Pipe(aAddr, bAddr Addr) (a, b net.Conn) {
	ab, ba := newQueue(), newQueue()
	return &conn{in: ba, out: ab, local: aAddr, remote: bAddr},
		&conn{in: ab, out: ba, local: bAddr, remote: aAddr}
}

// queue is one direction of a connection: bytes written and not yet read.
type queue struct {
	mu     sync.Mutex
	buf    []byte
	eof    bool          // the writer closed: reads drain buf, then io.EOF
	gone   bool          // the reader closed: writes fail
	ready  chan struct{} // capacity 1: something changed for the reader
	rDead  deadline
	wDead  deadline
	closed bool // the reading end closed its own side (Read fails)
}

func newQueue() *queue { return &queue{ready: make(chan struct{}, 1)} }

// poke wakes the reader, if it waits.
func (q *queue) poke() {
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// deadline is one deadline of a connection end: passed once its time came.
type deadline struct {
	timer  *time.Timer
	gen    int // bumped by every set: a timer of an earlier one does nothing
	passed bool
}

// set arms d for t (the zero time: no deadline), calling wake when it
// passes. The caller holds the queue's lock; wake takes it.
func (d *deadline) set(t time.Time, mu *sync.Mutex, wake func()) {
	if d.timer != nil {
		d.timer.Stop()
		d.timer = nil
	}
	d.passed = false
	d.gen++
	gen := d.gen
	switch {
	case t.IsZero():
	case !time.Now().Before(t):
		d.passed = true
		wake()
	default:
		d.timer = time.AfterFunc(time.Until(t), func() {
			mu.Lock()
			mine := d.gen == gen
			if mine {
				d.passed = true
			}
			mu.Unlock()
			if mine {
				wake()
			}
		})
	}
}

// conn is one end of a connection: it reads in and writes out.
type conn struct {
	in, out       *queue
	local, remote Addr
	closeOnce     sync.Once
}

func (c *conn) Read(p []byte) (int, error) {
	q := c.in
	for {
		q.mu.Lock()
		switch {
		case q.closed:
			q.mu.Unlock()
			return 0, net.ErrClosed
		case q.rDead.passed: // as on a socket, before any data waiting
			q.mu.Unlock()
			return 0, os.ErrDeadlineExceeded
		case len(q.buf) > 0:
			n := copy(p, q.buf)
			q.buf = q.buf[n:]
			if len(q.buf) == 0 {
				q.buf = nil
			}
			q.mu.Unlock()
			return n, nil
		case q.eof:
			q.mu.Unlock()
			return 0, io.EOF
		case len(p) == 0:
			q.mu.Unlock()
			return 0, nil
		}
		q.mu.Unlock()
		<-q.ready
	}
}

func (c *conn) Write(p []byte) (int, error) {
	// A write's deadline belongs to the writing end, kept on its
	// outgoing queue.
	q := c.out
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case q.eof:
		return 0, net.ErrClosed // this end was closed
	case q.wDead.passed:
		return 0, os.ErrDeadlineExceeded
	case q.gone:
		return 0, &net.OpError{Op: "write", Net: "memnet", Err: os.NewSyscallError("write", syscall.EPIPE)}
	}
	q.buf = append(q.buf, p...)
	q.poke()
	return len(p), nil
}

// Close closes both directions of this end: the peer reads what was
// written, then io.EOF; its writes fail from now on.
func (c *conn) Close() error {
	c.closeOnce.Do(func() {
		c.out.mu.Lock()
		c.out.eof = true
		c.out.poke()
		c.out.mu.Unlock()
		c.in.mu.Lock()
		c.in.closed, c.in.gone, c.in.buf = true, true, nil
		c.in.rDead.set(time.Time{}, &c.in.mu, func() {})
		c.in.poke()
		c.in.mu.Unlock()
		c.out.mu.Lock()
		c.out.wDead.set(time.Time{}, &c.out.mu, func() {})
		c.out.mu.Unlock()
	})
	return nil
}

func (c *conn) LocalAddr() net.Addr  { return c.local }
func (c *conn) RemoteAddr() net.Addr { return c.remote }

func (c *conn) SetDeadline(t time.Time) error {
	return errors.Join(c.SetReadDeadline(t), c.SetWriteDeadline(t))
}

func (c *conn) SetReadDeadline(t time.Time) error {
	q := c.in
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return net.ErrClosed
	}
	q.rDead.set(t, &q.mu, q.poke)
	return nil
}

func (c *conn) SetWriteDeadline(t time.Time) error {
	q := c.out
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.eof {
		return net.ErrClosed
	}
	q.wDead.set(t, &q.mu, func() {})
	return nil
}

// Listener is a net.Listener of in-memory connections, for a server that
// serves a listener (an http.Server): each Dial makes a Pipe, hands one
// end to Accept and returns the other. A dial waits until the server
// accepts it, as a full backlog would make it, or until its context ends
// or the listener closes; once the listener is closed dials are Refused,
// as a closed port refuses them.
type Listener struct {
	addr    Addr
	conns   chan net.Conn // the server ends, handed from Dial to Accept
	done    chan struct{} // closed by Close
	closing sync.Once
}

// Listen returns a Listener whose connections' server ends have the
// address addr.
func Listen(addr Addr) *Listener {
	return &Listener{addr: addr, conns: make(chan net.Conn), done: make(chan struct{})}
}

// Accept returns the server end of the next connection dialled, or
// net.ErrClosed once the listener is closed.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close stops the listener: Accept and Dial fail from now on. Connections
// already accepted are left to their owners. Closing twice does nothing.
func (l *Listener) Close() error {
	l.closing.Do(func() { close(l.done) })
	return nil
}

// Addr returns the listener's address.
func (l *Listener) Addr() net.Addr { return l.addr }

// Dial connects to the listener and returns the client end, once the
// server has accepted the connection. It has http.Transport.DialContext's
// signature; network and address are not used. It fails with ctx's error
// if ctx ends first, and with Refused once the listener is closed.
func (l *Listener) Dial(ctx context.Context, _, _ string) (net.Conn, error) {
	select {
	case <-l.done:
		return nil, Refused(string(l.addr))
	default:
	}
	client, server := Pipe(Addr("client of "+string(l.addr)), l.addr)
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
		return nil, Refused(string(l.addr))
	case <-ctx.Done():
		return nil, &net.OpError{Op: "dial", Net: "memnet", Addr: l.addr, Err: ctx.Err()}
	}
}
