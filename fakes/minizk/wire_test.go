package minizk_test

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/lockproof/lockproof/fakes/minizk"
)

// The opcodes and codes these tests send and expect, as on the wire.
const (
	opCreate  = 1
	opDelete  = 2
	opGetData = 4
	opSetData = 5
	opMulti   = 14
	opAuth    = 100
	opSetW    = 101
)

func TestMalformedPackets(t *testing.T) {
	s, _ := start(t)
	prefixed := func(n uint32) []byte { return binary.BigEndian.AppendUint32(nil, n) }
	packet := func(xid, op int32, body []byte) []byte {
		b := new(enc).i32(xid).i32(op).b
		b = append(b, body...)
		return append(prefixed(uint32(len(b))), b...)
	}
	for _, tc := range []struct {
		name     string
		raw      []byte
		code     int32 // 0: no reply expected
		takeZxid bool  // the failed request is a transaction
		closes   bool
	}{
		{name: "length 0", raw: prefixed(0), closes: true},
		{name: "negative length", raw: prefixed(0xffffffff), closes: true},
		{name: "length above jute.maxbuffer", raw: prefixed(0x100000), closes: true},
		{name: "short header", raw: append(prefixed(3), 0, 0, 1), closes: true},
		{name: "unknown opcode", raw: packet(1, 999, nil), code: -6, closes: true},
		{name: "truncated create", raw: packet(1, opCreate, new(enc).str("/q").b), code: -5, takeZxid: true},
		{name: "truncated getData", raw: packet(1, opGetData, new(enc).str("/q").b), code: -5},
		{name: "string longer than packet", raw: packet(1, opGetData, new(enc).i32(1000).b), code: -5},
		{name: "negative acl count", raw: packet(1, opCreate, new(enc).str("/q").buf(nil).i32(-7).i32(0).b),
			code: -5, takeZxid: true},
		{name: "relative path", raw: packet(1, opCreate, new(enc).str("q").buf(nil).openACL().i32(0).b),
			code: -8, takeZxid: true},
		{name: "delete with empty component", raw: packet(1, opDelete, new(enc).str("/a//b").i32(-1).b),
			code: -101, takeZxid: true},
		{name: "create with empty component", raw: packet(1, opCreate, new(enc).str("//b").buf(nil).openACL().i32(0).b),
			code: -8, takeZxid: true},
		{name: "create under missing parent with trailing slash", raw: packet(1, opCreate,
			new(enc).str("/a/").buf(nil).openACL().i32(0).b), code: -101, takeZxid: true},
		{name: "delete /zookeeper", raw: packet(1, opDelete, new(enc).str("/zookeeper").i32(-1).b),
			code: -8, takeZxid: true},
		{name: "invalid create flags", raw: packet(1, opCreate, new(enc).str("/q").buf(nil).openACL().i32(9).b),
			code: -8, takeZxid: true},
		{name: "read op in multi", raw: packet(1, opMulti, new(enc).i32(opGetData).boolean(false).i32(-1).
			str("/").boolean(false).i32(-1).boolean(true).i32(-1).b), code: -5, takeZxid: true},
		{name: "unknown auth scheme", raw: packet(1, opAuth, new(enc).i32(0).str("bogus").buf([]byte("x")).b),
			code: -115, closes: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dialRaw(t, s.Addr())
			c.mustConnect()
			before := s.Zxid()
			if err := c.writeRaw(tc.raw); err != nil {
				t.Fatal(err)
			}
			if tc.code != 0 {
				r, err := c.next()
				if err != nil {
					t.Fatalf("no reply: %v", err)
				}
				if r.Err != tc.code || r.Xid != 1 {
					t.Fatalf("reply %+v, want error %d for xid 1", r, tc.code)
				}
			}
			if tc.closes && !c.closed() {
				t.Fatal("connection left open")
			}
			if !tc.closes {
				if _, err := c.request(-2, 11, nil); err != nil {
					t.Fatalf("connection closed: a ping after it got %v", err)
				}
			}
			want := before
			if tc.takeZxid {
				want++
			}
			if s.Zxid() != want {
				t.Fatalf("zxid %d -> %d, want %d", before, s.Zxid(), want)
			}
		})
	}
}

func TestMalformedConnect(t *testing.T) {
	s, _ := start(t)
	c := dialRaw(t, s.Addr())
	if err := c.writePacket(new(enc).i32(0).i64(0).i32(100).b); err != nil {
		t.Fatal(err)
	}
	if !c.closed() {
		t.Fatal("a truncated connect request left the connection open")
	}
	if n := len(s.Sessions()); n != 0 {
		t.Fatalf("%d sessions", n)
	}
}

func TestNotificationBeforeReply(t *testing.T) {
	s, _ := start(t)
	c := dialRaw(t, s.Addr())
	c.mustConnect()
	if _, err := c.request(1, opCreate, new(enc).str("/x").buf(nil).openACL().i32(0).b); err != nil {
		t.Fatal(err)
	}
	if _, err := c.request(2, opGetData, new(enc).str("/x").boolean(true).b); err != nil {
		t.Fatal(err)
	}
	rs, err := c.request(3, opSetData, new(enc).str("/x").buf([]byte("v")).i32(-1).b)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 || rs[0].Xid != -1 || rs[0].Zxid != -1 || rs[1].Xid != 3 {
		t.Fatalf("replies %+v: want the notification (xid -1, zxid -1), then the reply", rs)
	}
	d := dec{b: rs[0].Body}
	if typ, state, path := d.i32(), d.i32(), d.str(); typ != 3 || state != 3 || path != "/x" {
		t.Fatalf("notification %d %d %q, want NodeDataChanged, SyncConnected, /x", typ, state, path)
	}
}

func TestSetWatchesReportsMissedChanges(t *testing.T) {
	s, _ := start(t)
	a := dialRaw(t, s.Addr())
	sess := a.mustConnect()
	rs, err := a.request(1, opCreate, new(enc).str("/x").buf(nil).openACL().i32(0).b)
	if err != nil {
		t.Fatal(err)
	}
	seen := rs[0].Zxid
	_ = a.nc.Close()
	b := dialRaw(t, s.Addr())
	b.mustConnect()
	if _, err := b.request(1, opSetData, new(enc).str("/x").buf([]byte("v")).i32(-1).b); err != nil {
		t.Fatal(err)
	}
	a2 := dialRaw(t, s.Addr())
	if r, err := a2.connect(10000, sess.Session, sess.Passwd, seen); err != nil || r.Session != sess.Session {
		t.Fatalf("reconnect: %+v %v", r, err)
	}
	rs, err = a2.request(2, opSetW, new(enc).i64(seen).i32(1).str("/x").i32(1).str("/y").i32(0).b)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 || rs[0].Xid != -1 || rs[1].Xid != 2 || rs[1].Err != 0 {
		t.Fatalf("replies %+v: want one notification, then the reply", rs)
	}
	d := dec{b: rs[0].Body}
	if typ, _, path := d.i32(), d.i32(), d.str(); typ != 3 || path != "/x" {
		t.Fatalf("notification %d %q, want NodeDataChanged on /x", typ, path)
	}
	// The exists watch on the missing /y was set again.
	if data, _ := s.Watches("/y"); data != 1 {
		t.Fatalf("%d watches on /y", data)
	}
}

func TestSessionTimeoutNegotiation(t *testing.T) {
	for _, tc := range []struct {
		tick      time.Duration
		asked     int32
		negotiate int32
	}{
		{minizk.DefaultTickTime, 1, 4000},
		{minizk.DefaultTickTime, 15000, 15000},
		{minizk.DefaultTickTime, 1 << 30, 40000},
		{100 * time.Millisecond, -5, 200},
		{100 * time.Millisecond, 60000, 2000},
	} {
		s, _ := start(t, minizk.WithTickTime(tc.tick))
		c := dialRaw(t, s.Addr())
		r, err := c.connect(tc.asked, 0, nil, 0)
		if err != nil || r.Timeout != tc.negotiate {
			t.Errorf("tick %v, asked %d ms: got %d ms (%v), want %d", tc.tick, tc.asked, r.Timeout, err, tc.negotiate)
		}
		got, err := s.SessionTimeout(r.Session)
		if err != nil || got != time.Duration(tc.negotiate)*time.Millisecond {
			t.Errorf("SessionTimeout = %v, %v", got, err)
		}
	}
}

func TestReconnectRefused(t *testing.T) {
	s, _ := start(t)
	a := dialRaw(t, s.Addr())
	sess := a.mustConnect()
	wrong := append([]byte(nil), sess.Passwd...)
	wrong[0]++
	for _, tc := range []struct {
		name    string
		id      int64
		passwd  []byte
		refused bool
	}{
		{"wrong password", sess.Session, wrong, true},
		{"unknown session", sess.Session + 100, sess.Passwd, true},
		{"right password", sess.Session, sess.Passwd, false},
	} {
		c := dialRaw(t, s.Addr())
		r, err := c.connect(10000, tc.id, tc.passwd, 0)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if tc.refused {
			if r.Session != 0 || r.Timeout != 0 || len(r.Passwd) != 16 || !c.closed() {
				t.Errorf("%s: %+v: want session 0, timeout 0 and the connection closed", tc.name, r)
			}
		} else if r.Session != sess.Session || r.Timeout != 10000 {
			t.Errorf("%s: %+v", tc.name, r)
		}
	}
	// The reconnect moved the session: its first connection was closed.
	if !a.closed() {
		t.Error("the session's old connection is still open")
	}
}

func TestPauseResume(t *testing.T) {
	s, _ := start(t)
	c, _ := client(t, s.Addr())
	must[string](t)(c.Create("/p", []byte("v"), 0, acl))
	s.Pause()
	got := make(chan error, 1)
	go func() {
		_, _, err := c.Get("/p")
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("Get answered while paused: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	s.Resume()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no answer after Resume")
	}
}

func TestRestart(t *testing.T) {
	t.Parallel() // the client waits 1s before it reconnects
	s, _ := start(t)
	c, events := client(t, s.Addr())
	must[string](t)(c.Create("/keep", []byte("v"), 0, acl))
	must[string](t)(c.Create("/eph", nil, zk.FlagEphemeral, acl))
	id, zxid := c.SessionID(), s.Zxid()
	if err := s.Restart(true); err != nil {
		t.Fatal(err)
	}
	waitState(t, events, zk.StateDisconnected)
	waitState(t, events, zk.StateHasSession)
	if c.SessionID() != id || s.Zxid() != zxid {
		t.Fatalf("after Restart(true): session %#x (was %#x), zxid %d (was %d)", c.SessionID(), id, s.Zxid(), zxid)
	}
	if data, _, err := c.Get("/keep"); err != nil || string(data) != "v" {
		t.Fatalf("Get after restart: %q %v", data, err)
	}
	c.Close()
	if err := s.Restart(false); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Get("/keep"); !errors.Is(err, minizk.ErrNoNode) || s.Zxid() != 0 || len(s.Sessions()) != 0 {
		t.Fatalf("after Restart(false): %v, zxid %d, sessions %v", err, s.Zxid(), s.Sessions())
	}
	// A client that saw a later zxid is refused, as ZooKeeper does.
	r := dialRaw(t, s.Addr())
	if _, err := r.connect(10000, 0, nil, zxid); err == nil {
		t.Fatal("a client ahead of the server got a session")
	}
	fresh := dialRaw(t, s.Addr())
	fresh.mustConnect()
}

func TestControls(t *testing.T) {
	s, _ := start(t)
	c := dialRaw(t, s.Addr())
	r := c.mustConnect()
	if err := s.DropSession(r.Session); err != nil {
		t.Fatal(err)
	}
	if !c.closed() {
		t.Fatal("DropSession left the connection open")
	}
	if got := s.Sessions(); len(got) != 1 || got[0] != r.Session {
		t.Fatalf("sessions %v: DropSession must keep the session", got)
	}
	for name, err := range map[string]error{
		"DropSession":    s.DropSession(1),
		"ExpireSession":  s.ExpireSession(1),
		"SessionTimeout": second(s.SessionTimeout(1)),
	} {
		if !errors.Is(err, minizk.ErrNoSession) {
			t.Errorf("%s(unknown) = %v", name, err)
		}
	}
	if _, err := s.Children("/nope"); !errors.Is(err, minizk.ErrNoNode) {
		t.Errorf("Children(/nope) = %v", err)
	}
	if kids, err := s.Children("/zookeeper"); err != nil || len(kids) != 2 {
		t.Errorf("Children(/zookeeper) = %v, %v", kids, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := s.WaitFor(ctx, func(v minizk.View) bool { return v.Exists("/nope") }); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WaitFor that never holds = %v", err)
	}
	wall, err := minizk.Start()
	if err != nil {
		t.Fatal(err)
	}
	if err := wall.Advance(time.Second); !errors.Is(err, minizk.ErrNotManual) {
		t.Errorf("Advance on the system clock = %v", err)
	}
	if err := wall.Close(); err != nil {
		t.Fatal(err)
	}
	if err := wall.Restart(true); !errors.Is(err, minizk.ErrClosed) {
		t.Errorf("Restart after Close = %v", err)
	}
	if _, err := minizk.Start(minizk.WithClock[minizk.Timer](nil)); err == nil {
		t.Error("Start with a nil clock succeeded")
	}
	if _, err := minizk.Start(minizk.WithTickTime(0)); err == nil {
		t.Error("Start with a zero tick succeeded")
	}
}

func TestPauseLongerThanTheClientWaits(t *testing.T) {
	t.Parallel() // the client waits 1s before it reconnects
	// 200 ms sessions (2 ticks of 100 ms): go-zookeeper gives up on a
	// silent server after 2/3 of that and reconnects. The manual clock
	// stands still, so the session outlives the pause.
	s, _ := start(t, minizk.WithTickTime(100*time.Millisecond))
	c, events := clientTimeout(t, s.Addr(), 200*time.Millisecond)
	id := c.SessionID()
	s.Pause()
	waitState(t, events, zk.StateDisconnected)
	s.Resume()
	waitState(t, events, zk.StateHasSession)
	if c.SessionID() != id {
		t.Fatalf("session %#x after the pause, want %#x", c.SessionID(), id)
	}
	if _, err := c.Create("/after", nil, 0, acl); err != nil {
		t.Fatal(err)
	}
}
