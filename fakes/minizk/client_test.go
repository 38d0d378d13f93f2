package minizk_test

import (
	"errors"
	"net"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/lockproof/lockproof/fakes/minizk"
)

func TestCreateModes(t *testing.T) {
	s, _ := start(t)
	c, _ := client(t, s.Addr())
	for _, tc := range []struct {
		path, want string
		flags      int32
		ephemeral  bool
	}{
		{"/persistent", "/persistent", 0, false},
		{"/ephemeral", "/ephemeral", zk.FlagEphemeral, true},
		{"/seq-", "/seq-0000000002", zk.FlagSequence, false},
		{"/seq-", "/seq-0000000003", zk.FlagSequence, false},
		{"/eseq-", "/eseq-0000000004", zk.FlagEphemeral | zk.FlagSequence, true},
	} {
		got, err := c.Create(tc.path, []byte("v"), tc.flags, acl)
		if err != nil || got != tc.want {
			t.Fatalf("Create(%s, %d) = %q, %v; want %q", tc.path, tc.flags, got, err, tc.want)
		}
		_, st, err := c.Get(got)
		if err != nil {
			t.Fatal(err)
		}
		if owner := st.EphemeralOwner == c.SessionID(); owner != tc.ephemeral || st.DataLength != 1 {
			t.Errorf("%s: stat %+v, session %d", got, st, c.SessionID())
		}
	}
	kids, st, err := c.Children("/")
	slices.Sort(kids)
	want := []string{"ephemeral", "eseq-0000000004", "persistent", "seq-0000000002", "seq-0000000003", "zookeeper"}
	if err != nil || !slices.Equal(kids, want) {
		t.Fatalf("Children(/) = %v, %v; want %v", kids, err, want)
	}
	// Five creates beside /zookeeper (which ZooKeeper adds without
	// counting it): cversion is reported as 2×creates - children.
	if st.NumChildren != 6 || st.Cversion != 4 {
		t.Errorf("root stat %+v: want 6 children, cversion 4", st)
	}
	// createContainer (opcode 19), as go-zookeeper's CreateContainer
	// sends it: a persistent node, answered with its path.
	if got, err := c.CreateContainer("/box", nil, zk.FlagContainer, acl); err != nil || got != "/box" {
		t.Fatalf("CreateContainer(/box) = %q, %v", got, err)
	}
	if _, st, err := c.Get("/box"); err != nil || st.EphemeralOwner != 0 {
		t.Fatalf("Get(/box): stat %+v, %v", st, err)
	}
}

func TestSequenceFollowsParentCversion(t *testing.T) {
	s, _ := start(t)
	c, _ := client(t, s.Addr())
	must[string](t)(c.Create("/q", nil, 0, acl))
	must[string](t)(c.Create("/q/a", nil, 0, acl))
	if err := c.Delete("/q/a", -1); err != nil {
		t.Fatal(err)
	}
	// One child created so far: the next sequence number is 1, whatever
	// the deletes (ZooKeeper numbers by creates).
	got := must[string](t)(c.Create("/q/n-", nil, zk.FlagSequence, acl))
	if got != "/q/n-0000000001" {
		t.Fatalf("sequential create = %s, want /q/n-0000000001", got)
	}
	_, st, _ := c.Exists("/q")
	if st.Cversion != 3 || st.NumChildren != 1 {
		t.Fatalf("stat %+v: want cversion 3 (two creates, one delete)", st)
	}
}

func TestErrorsAndVersions(t *testing.T) {
	s, _ := start(t)
	c, _ := client(t, s.Addr())
	must[string](t)(c.Create("/a", []byte("1"), 0, acl))
	must[string](t)(c.Create("/a/b", nil, 0, acl))
	must[string](t)(c.Create("/e", nil, zk.FlagEphemeral, acl))
	st, err := c.Set("/a", []byte("2"), 0)
	if err != nil || st.Version != 1 || st.DataLength != 1 {
		t.Fatalf("Set version 0 = %+v, %v", st, err)
	}
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"set stale version", second(c.Set("/a", []byte("3"), 0)), zk.ErrBadVersion},
		{"set missing", second(c.Set("/nope", nil, -1)), zk.ErrNoNode},
		{"delete stale version", c.Delete("/a/b", 5), zk.ErrBadVersion},
		{"delete with children", c.Delete("/a", -1), zk.ErrNotEmpty},
		{"delete missing", c.Delete("/nope", -1), zk.ErrNoNode},
		{"create existing", second(c.Create("/a", nil, 0, acl)), zk.ErrNodeExists},
		{"create without parent", second(c.Create("/x/y", nil, 0, acl)), zk.ErrNoNode},
		{"child of ephemeral", second(c.Create("/e/c", nil, 0, acl)), zk.ErrNoChildrenForEphemerals},
		{"empty acl", second(c.Create("/f", nil, 0, nil)), zk.ErrInvalidACL},
		{"delete /zookeeper", c.Delete("/zookeeper", -1), zk.ErrBadArguments},
	} {
		if !errors.Is(tc.err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, tc.err, tc.want)
		}
	}
	if err := c.Delete("/a/b", 0); err != nil {
		t.Fatal(err)
	}
	data, st, err := c.Get("/a")
	if err != nil || string(data) != "2" || st.NumChildren != 0 || st.Version != 1 {
		t.Fatalf("Get = %q %+v %v", data, st, err)
	}
	if p, err := c.Sync("/a"); err != nil || p != "/a" {
		t.Fatalf("Sync = %q, %v", p, err)
	}
}

func second[T any](_ T, err error) error { return err }

func TestWatchesFireOnce(t *testing.T) {
	s, _ := start(t)
	c, _ := client(t, s.Addr())
	other, _ := client(t, s.Addr())
	must[string](t)(c.Create("/w", []byte("0"), 0, acl))

	_, _, data, err := c.GetW("/w")
	if err != nil {
		t.Fatal(err)
	}
	_, _, kids, err := c.ChildrenW("/w")
	if err != nil {
		t.Fatal(err)
	}
	_, _, created, err := c.ExistsW("/w/new")
	if err != nil {
		t.Fatal(err)
	}
	if d, ch := s.Watches("/w"); d != 1 || ch != 1 {
		t.Fatalf("watches on /w: %d data, %d child; want 1, 1", d, ch)
	}
	must[*zk.Stat](t)(other.Set("/w", []byte("1"), -1))
	if e := waitEvent(t, data); e.Type != zk.EventNodeDataChanged || e.Path != "/w" {
		t.Fatalf("data watch: %+v", e)
	}
	must[string](t)(other.Create("/w/new", nil, 0, acl))
	if e := waitEvent(t, created); e.Type != zk.EventNodeCreated || e.Path != "/w/new" {
		t.Fatalf("exists watch: %+v", e)
	}
	if e := waitEvent(t, kids); e.Type != zk.EventNodeChildrenChanged || e.Path != "/w" {
		t.Fatalf("child watch: %+v", e)
	}
	// One-shot: the server forgot them.
	if d, ch := s.Watches("/w"); d != 0 || ch != 0 {
		t.Fatalf("watches left on /w: %d data, %d child", d, ch)
	}
	_, _, gone, err := c.GetW("/w/new")
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Delete("/w/new", -1); err != nil {
		t.Fatal(err)
	}
	if e := waitEvent(t, gone); e.Type != zk.EventNodeDeleted || e.Path != "/w/new" {
		t.Fatalf("delete: %+v", e)
	}
}

func TestMulti(t *testing.T) {
	s, _ := start(t)
	c, _ := client(t, s.Addr())
	must[string](t)(c.Create("/m", []byte("x"), 0, acl))
	res, err := c.Multi(
		&zk.CreateRequest{Path: "/m/a", Data: []byte("a"), Acl: acl},
		&zk.SetDataRequest{Path: "/m", Data: []byte("y"), Version: 0},
		&zk.CheckVersionRequest{Path: "/m", Version: 1},
		&zk.CreateRequest{Path: "/m/s-", Acl: acl, Flags: zk.FlagSequence},
	)
	if err != nil || len(res) != 4 || res[0].String != "/m/a" || res[1].Stat.Version != 1 ||
		res[3].String != "/m/s-0000000001" {
		t.Fatalf("Multi = %+v, %v", res, err)
	}
	zxid := s.Zxid()
	res, err = c.Multi(
		&zk.DeleteRequest{Path: "/m/a", Version: -1},
		&zk.SetDataRequest{Path: "/m", Data: []byte("z"), Version: 0},
		&zk.CreateRequest{Path: "/m/b", Acl: acl},
	)
	if !errors.Is(err, zk.ErrBadVersion) || len(res) != 3 || res[0].Error != nil ||
		!errors.Is(res[1].Error, zk.ErrBadVersion) || res[2].Error == nil {
		t.Fatalf("failing Multi = %+v, %v", res, err)
	}
	if s.Zxid() != zxid+1 {
		t.Errorf("a failed multi takes one zxid: %d -> %d", zxid, s.Zxid())
	}
	kids := must[[]string](t)(s.Children("/m"))
	if !slices.Equal(kids, []string{"a", "s-0000000001"}) {
		t.Fatalf("after failed multi, children %v: the delete was not undone", kids)
	}
}

func TestEphemeralsGoWithClose(t *testing.T) {
	s, _ := start(t)
	owner, _ := client(t, s.Addr())
	watcher, _ := client(t, s.Addr())
	must[string](t)(owner.Create("/eph", nil, zk.FlagEphemeral, acl))
	_, _, ch, err := watcher.ExistsW("/eph")
	if err != nil {
		t.Fatal(err)
	}
	id := owner.SessionID()
	owner.Close()
	if e := waitEvent(t, ch); e.Type != zk.EventNodeDeleted || e.Path != "/eph" {
		t.Fatalf("event %+v", e)
	}
	if slices.Contains(s.Sessions(), id) {
		t.Fatalf("session %#x still live after close", id)
	}
}

func TestExpiryOnManualClock(t *testing.T) {
	t.Parallel() // the client waits 1s before it reconnects
	s, _ := start(t)
	owner, events := client(t, s.Addr())
	watcher, _ := clientTimeout(t, s.Addr(), 40*time.Second)
	must[string](t)(owner.Create("/eph", nil, zk.FlagEphemeral, acl))
	_, _, ch, err := watcher.ExistsW("/eph")
	if err != nil {
		t.Fatal(err)
	}
	timeout := must[time.Duration](t)(s.SessionTimeout(owner.SessionID()))
	if timeout != 10*time.Second {
		t.Fatalf("negotiated %v, want the 10s asked for", timeout)
	}
	// The clients ping on the wall clock, but a ping only moves a
	// session's deadline to the manual clock's now: stepping past the
	// owner's timeout expires it, not the watcher's 40s session.
	if err := s.Advance(timeout - time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if len(s.Sessions()) != 2 {
		t.Fatalf("expired before the timeout: %v", s.Sessions())
	}
	if err := s.Advance(time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if got := s.Sessions(); !slices.Equal(got, []int64{watcher.SessionID()}) {
		t.Fatalf("sessions %v, want only the watcher's %d", got, watcher.SessionID())
	}
	if e := waitEvent(t, ch); e.Type != zk.EventNodeDeleted || e.Path != "/eph" {
		t.Fatalf("event %+v", e)
	}
	waitState(t, events, zk.StateExpired)
	if _, _, err := s.Get("/eph"); !errors.Is(err, minizk.ErrNoNode) {
		t.Fatalf("ephemeral survived its session: %v", err)
	}
	if _, err := owner.Create("/after", nil, 0, acl); err == nil {
		// go-zookeeper keeps the Conn and opens a new session after an
		// expiry: the create goes through on it.
		if owner.SessionID() == 0 {
			t.Fatal("created without a session")
		}
	}
}

func TestExpireSessionControl(t *testing.T) {
	t.Parallel() // the client waits 1s before it reconnects
	s, _ := start(t)
	c, events := client(t, s.Addr())
	must[string](t)(c.Create("/eph", nil, zk.FlagEphemeral, acl))
	if err := s.ExpireSession(c.SessionID()); err != nil {
		t.Fatal(err)
	}
	waitState(t, events, zk.StateExpired)
	if _, _, err := s.Get("/eph"); !errors.Is(err, minizk.ErrNoNode) {
		t.Fatalf("ephemeral survived: %v", err)
	}
	if err := s.ExpireSession(12345); !errors.Is(err, minizk.ErrNoSession) {
		t.Fatalf("ExpireSession(unknown) = %v", err)
	}
}

func TestReconnectKeepsSession(t *testing.T) {
	t.Parallel() // the client waits 1s before it reconnects
	s, _ := start(t)
	c, events := client(t, s.Addr())
	other, _ := client(t, s.Addr())
	must[string](t)(c.Create("/eph", nil, zk.FlagEphemeral, acl))
	must[string](t)(other.Create("/w", nil, 0, acl))
	_, _, ch, err := c.GetW("/w")
	if err != nil {
		t.Fatal(err)
	}
	id := c.SessionID()
	s.DropConnections()
	waitState(t, events, zk.StateDisconnected)
	waitState(t, events, zk.StateHasSession)
	if c.SessionID() != id {
		t.Fatalf("session %#x after reconnect, want %#x", c.SessionID(), id)
	}
	if _, st, err := s.Get("/eph"); err != nil || st.EphemeralOwner != id {
		t.Fatalf("ephemeral after reconnect: %+v %v", st, err)
	}
	// The client re-registers its watch (setWatches) on the new connection.
	waitFor(t, s, "the watch to be re-registered", func(v minizk.View) bool {
		d, _ := v.Watches("/w")
		return d == 1
	})
	must[*zk.Stat](t)(other.Set("/w", []byte("x"), -1))
	if e := waitEvent(t, ch); e.Type != zk.EventNodeDataChanged {
		t.Fatalf("event %+v", e)
	}
}

func TestZKLock(t *testing.T) {
	s, _ := start(t)
	c1, _ := client(t, s.Addr())
	c2, _ := client(t, s.Addr())
	l1, l2 := zk.NewLock(c1, "/locks/a", acl), zk.NewLock(c2, "/locks/a", acl)
	if err := l1.Lock(); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() { got <- l2.Lock() }()
	// The second waits on a watch of the first's node.
	waitFor(t, s, "the second client to wait", func(v minizk.View) bool {
		return v.NumChildren("/locks/a") == 2 && v.WatchCount() == 1
	})
	select {
	case err := <-got:
		t.Fatalf("second Lock returned while the first holds it: %v", err)
	default:
	}
	if err := l1.Unlock(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("second Lock did not return after Unlock")
	}
	kids := must[[]string](t)(s.Children("/locks/a"))
	if len(kids) != 1 {
		t.Fatalf("lock nodes %v", kids)
	}
	if err := l2.Unlock(); err != nil {
		t.Fatal(err)
	}
}

// A client dialled in memory is served as one over TCP: it gets a
// session, shares the tree with a TCP client and loses its connection
// with DropConnections. A closed server refuses the dial as a closed port.
func TestDialInMemory(t *testing.T) {
	s, _ := start(t)
	c, events := clientDialing(t, s.Addr(), 10*time.Second,
		func(string, string, time.Duration) (net.Conn, error) { return s.DialInMemory() })
	must[string](t)(c.Create("/mem", []byte("x"), 0, acl))
	tcp, _ := client(t, s.Addr())
	if data, _, err := tcp.Get("/mem"); err != nil || string(data) != "x" {
		t.Fatalf("the TCP client reads %q, %v", data, err)
	}
	s.DropConnections()
	waitState(t, events, zk.StateDisconnected)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	_, err := s.DialInMemory()
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("DialInMemory after Close: %v, want ECONNREFUSED", err)
	}
}
