package zkfake

import (
	"encoding/binary"
	"io"
	"net"
	"slices"
	"testing"
)

// zkPacket is a packet as go-zookeeper writes it: the length prefix, then
// the body (xid and opcode for a request, and a byte of payload).
func zkPacket(xid, op int32) []byte {
	p := make([]byte, 13)
	binary.BigEndian.PutUint32(p[0:4], 9)
	binary.BigEndian.PutUint32(p[4:8], uint32(xid))
	binary.BigEndian.PutUint32(p[8:12], uint32(op))
	return p
}

func TestManualConnDropsPingsAndReportsRequests(t *testing.T) {
	client, server := net.Pipe()
	defer server.Close()
	var ops []int32
	c := &zkManualConn{Conn: client, onRequest: func(op int32) { ops = append(ops, op) }}
	handshake := zkPacket(0, 0)
	handshake[8] = 0x0b // reads as opcode 11 were it a request: it is not one
	packets := [][]byte{handshake, zkPacket(1, 3), zkPacket(zkXidPing, zkOpPing), zkPacket(2, 4)}
	got := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(server)
		got <- b
	}()
	for _, p := range packets {
		if n, err := c.Write(p); n != len(p) || err != nil {
			t.Fatalf("Write = %d, %v; want %d, nil", n, err, len(p))
		}
	}
	_ = client.Close()
	want := slices.Concat(handshake, zkPacket(1, 3), zkPacket(2, 4))
	if b := <-got; !slices.Equal(b, want) {
		t.Fatalf("the server read % x, want % x (the ping dropped, the rest passed)", b, want)
	}
	if want := []int32{3, zkOpPing, 4}; !slices.Equal(ops, want) {
		t.Fatalf("onRequest saw %v, want %v", ops, want)
	}
}

func TestRedialerPausesFromTheThirdDial(t *testing.T) {
	h := &zkRedialer{}
	if err := h.Init([]string{"a:1", "b:2"}); err == nil {
		t.Fatal("Init took two servers")
	}
	if err := h.Init([]string{"a:1"}); err != nil {
		t.Fatal(err)
	}
	var pauses []bool
	for range 4 {
		s, pause := h.Next()
		if s != "a:1" {
			t.Fatalf("Next gave %q", s)
		}
		pauses = append(pauses, pause)
	}
	h.Connected()
	_, again := h.Next()
	if want := []bool{false, false, true, true}; !slices.Equal(pauses, want) || again {
		t.Fatalf("pauses %v then %v after a session, want %v then false", pauses, again, want)
	}
}
