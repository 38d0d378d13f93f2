package memnet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Both ends write everything before either reads: on net.Pipe this
// deadlocks, on a socket (and here) it does not.
func TestWritesDoNotWaitForTheReader(t *testing.T) {
	a, b := Pipe("a", "b")
	defer a.Close()
	defer b.Close()
	big := make([]byte, 1<<20)
	for i := range big {
		big[i] = byte(i)
	}
	if n, err := a.Write(big); n != len(big) || err != nil {
		t.Fatalf("a.Write = %d, %v", n, err)
	}
	if n, err := b.Write([]byte("pong")); n != 4 || err != nil {
		t.Fatalf("b.Write = %d, %v", n, err)
	}
	got := make([]byte, len(big))
	if _, err := io.ReadFull(b, got); err != nil {
		t.Fatal(err)
	}
	for i := range got {
		if got[i] != big[i] {
			t.Fatalf("byte %d: got %d, want %d", i, got[i], big[i])
		}
	}
	small := make([]byte, 4)
	if _, err := io.ReadFull(a, small); err != nil || string(small) != "pong" {
		t.Fatalf("a read %q, %v; want pong", small, err)
	}
}

func TestCloseDrainsThenEOF(t *testing.T) {
	a, b := Pipe("a", "b")
	if _, err := a.Write([]byte("last words")); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(b)
	if err != nil || string(got) != "last words" {
		t.Fatalf("ReadAll = %q, %v; want the bytes written before Close, then EOF", got, err)
	}
	if _, err := b.Write([]byte("x")); !errors.Is(err, syscall.EPIPE) {
		t.Errorf("write to a closed peer: %v, want EPIPE", err)
	}
	if _, err := a.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
		t.Errorf("read on a closed end: %v, want net.ErrClosed", err)
	}
	if _, err := a.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Errorf("write on a closed end: %v, want net.ErrClosed", err)
	}
	b.Close()
}

// A reader blocked in Read is woken by its end's Close.
func TestCloseWakesABlockedRead(t *testing.T) {
	a, b := Pipe("a", "b")
	defer b.Close()
	errc := make(chan error)
	go func() {
		_, err := a.Read(make([]byte, 1))
		errc <- err
	}()
	a.Close()
	if err := <-errc; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Read = %v, want net.ErrClosed", err)
	}
}

func TestReadDeadline(t *testing.T) {
	a, b := Pipe("a", "b")
	defer a.Close()
	defer b.Close()
	// A deadline in the past fails at once, and is a timeout as on TCP.
	if err := a.SetReadDeadline(time.Now().Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	_, err := a.Read(make([]byte, 1))
	var ne net.Error
	if !errors.Is(err, os.ErrDeadlineExceeded) || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("Read past the deadline = %v, want a timeout", err)
	}
	// As on a socket, a passed deadline wins over data waiting.
	b.Write([]byte("x"))
	if _, err := a.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read with data waiting past the deadline = %v, want a timeout", err)
	}
	if err := a.SetReadDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	if n, err := a.Read(make([]byte, 1)); n != 1 || err != nil {
		t.Fatalf("Read with data waiting, no deadline = %d, %v", n, err)
	}
	// A deadline that passes while the reader waits wakes it.
	if err := a.SetReadDeadline(time.Now().Add(time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read = %v, want the deadline's error", err)
	}
	// Clearing the deadline makes reads wait again.
	if err := a.SetReadDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	go b.Write([]byte("y"))
	if n, err := a.Read(make([]byte, 1)); n != 1 || err != nil {
		t.Fatalf("Read after the deadline was cleared = %d, %v", n, err)
	}
}

// A timer of an earlier deadline that fires after a new one was set does
// not end the new one.
func TestResetDeadlineIgnoresTheOldTimer(t *testing.T) {
	a, b := Pipe("a", "b")
	defer a.Close()
	defer b.Close()
	for range 100 {
		if err := a.SetReadDeadline(time.Now().Add(time.Microsecond)); err != nil {
			t.Fatal(err)
		}
		if err := a.SetReadDeadline(time.Time{}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(5 * time.Millisecond) // let the stopped timers' callbacks run, if any slipped through
	go b.Write([]byte("z"))
	if n, err := a.Read(make([]byte, 1)); n != 1 || err != nil {
		t.Fatalf("Read = %d, %v; an old deadline's timer ended the read", n, err)
	}
}

func TestWriteDeadline(t *testing.T) {
	a, b := Pipe("a", "b")
	defer a.Close()
	defer b.Close()
	if err := a.SetWriteDeadline(time.Now().Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Write([]byte("x")); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Write past the deadline = %v, want a timeout", err)
	}
}

// Refused is what a client takes for a stopped server: a dial refused
// as by a closed port.
func TestRefused(t *testing.T) {
	err := Refused("fake:1")
	var op *net.OpError
	if !errors.Is(err, syscall.ECONNREFUSED) || !errors.As(err, &op) || op.Addr.String() != "fake:1" {
		t.Errorf("Refused = %v, want ECONNREFUSED dialing fake:1", err)
	}
}

// A Listener hands Accept the server end of each Dial; once closed, it
// refuses dials as a closed port, and a dial nobody accepts ends with its
// context.
func TestListener(t *testing.T) {
	l := Listen("srv:1")
	accepted := make(chan net.Conn)
	go func() {
		c, err := l.Accept()
		if err != nil {
			t.Error(err)
		}
		accepted <- c
	}()
	client, err := l.Dial(context.Background(), "tcp", "ignored")
	if err != nil {
		t.Fatal(err)
	}
	server := <-accepted
	if _, err := client.Write([]byte("hi")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 2)
	if _, err := io.ReadFull(server, buf); err != nil || string(buf) != "hi" || server.LocalAddr().String() != "srv:1" {
		t.Fatalf("server read %q, %v at %v", buf, err, server.LocalAddr())
	}
	client.Close()
	server.Close()

	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	if _, err := l.Dial(ctx, "tcp", ""); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a dial nobody accepts: %v, want its context's error", err)
	}
	l.Close()
	if _, err := l.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Accept after Close: %v, want net.ErrClosed", err)
	}
	if _, err := l.Dial(context.Background(), "tcp", ""); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("Dial after Close: %v, want ECONNREFUSED", err)
	}
}

func Example() {
	client, server := Pipe("client", "server")
	go func() {
		buf := make([]byte, 4)
		io.ReadFull(server, buf)
		server.Write([]byte("pong"))
		server.Close()
	}()
	client.Write([]byte("ping"))
	reply, _ := io.ReadAll(client)
	fmt.Printf("%s from %v\n", reply, client.RemoteAddr())
	// Output: pong from server
}
