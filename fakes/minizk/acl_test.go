package minizk_test

import (
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/lockproof/lockproof/fakes/minizk"
)

// TestACLsAreEnforced: a node whose ACL names a digest user is closed to
// a connection without that user's credentials (NOAUTH for reads, for
// writes and for children) and open once it adds them.
func TestACLsAreEnforced(t *testing.T) {
	s, _ := start(t)
	owner, _ := client(t, s.Addr())
	other, _ := client(t, s.Addr())
	closed := zk.DigestACL(zk.PermAll, "user", "password")
	must[string](t)(owner.Create("/secret", []byte("x"), 0, closed))
	must[string](t)(owner.Create("/public", []byte("y"), 0, zk.WorldACL(zk.PermRead)))

	for name, err := range map[string]error{
		"Get":         third(other.Get("/secret")),
		"Children":    third(other.Children("/secret")),
		"GetACL":      third(other.GetACL("/secret")),
		"Set":         second(other.Set("/secret", nil, -1)),
		"SetACL":      second(other.SetACL("/secret", acl, -1)),
		"Create kid":  second(other.Create("/secret/kid", nil, 0, acl)),
		"Set public":  second(other.Set("/public", nil, -1)),
		"Kid, public": second(other.Create("/public/kid", nil, 0, acl)),
	} {
		if !errors.Is(err, zk.ErrNoAuth) {
			t.Errorf("%s without credentials: %v, want %v", name, err, zk.ErrNoAuth)
		}
	}
	if _, err := other.Multi(&zk.CheckVersionRequest{Path: "/secret", Version: -1}); !errors.Is(err, zk.ErrNoAuth) {
		t.Errorf("check without credentials: %v, want %v", err, zk.ErrNoAuth)
	}
	// exists needs no permission; a world-readable node is readable.
	if ok, _, err := other.Exists("/secret"); !ok || err != nil {
		t.Errorf("Exists(/secret) = %v, %v", ok, err)
	}
	if data, _, err := other.Get("/public"); err != nil || string(data) != "y" {
		t.Errorf("Get(/public) = %q, %v", data, err)
	}
	// The wrong password is no one.
	must[struct{}](t)(struct{}{}, other.AddAuth("digest", []byte("user:wrong")))
	if _, _, err := other.Get("/secret"); !errors.Is(err, zk.ErrNoAuth) {
		t.Errorf("Get with a wrong password: %v, want %v", err, zk.ErrNoAuth)
	}
	must[struct{}](t)(struct{}{}, other.AddAuth("digest", []byte("user:password")))
	if data, _, err := other.Get("/secret"); err != nil || string(data) != "x" {
		t.Fatalf("Get with credentials = %q, %v", data, err)
	}
	must[string](t)(other.Create("/secret/kid", nil, 0, acl))
	if err := other.Delete("/secret/kid", -1); err != nil {
		t.Errorf("Delete with credentials: %v", err)
	}
}

// TestAuthSchemeACL: an "auth" entry is refused without credentials
// (INVALIDACL) and stored as the connection's digest identity with them,
// which getACL shows only to a reader with ADMIN.
func TestAuthSchemeACL(t *testing.T) {
	s, _ := start(t)
	c, _ := client(t, s.Addr())
	if _, err := c.Create("/a", nil, 0, zk.AuthACL(zk.PermAll)); !errors.Is(err, zk.ErrInvalidACL) {
		t.Fatalf("auth ACL without credentials: %v, want %v", err, zk.ErrInvalidACL)
	}
	must[struct{}](t)(struct{}{}, c.AddAuth("digest", []byte("ann:pw")))
	must[string](t)(c.Create("/a", nil, 0, zk.AuthACL(zk.PermAll)))
	got, _, err := c.GetACL("/a")
	want := zk.DigestACL(zk.PermAll, "ann", "pw")
	if err != nil || len(got) != 1 || got[0] != want[0] {
		t.Fatalf("GetACL(/a) = %+v, %v; want %+v", got, err, want)
	}
	// Without ADMIN on the node, the digest's hash is hidden.
	must[string](t)(c.Create("/r", nil, 0, zk.AuthACL(zk.PermRead)))
	got, _, err = c.GetACL("/r")
	if err != nil || len(got) != 1 || got[0].ID != "ann:x" || got[0].Perms != zk.PermRead {
		t.Fatalf("GetACL(/r) without ADMIN = %+v, %v; want ann:x, read", got, err)
	}
}

// TestSuperDigest: the super user passes every ACL check; without
// WithSuperDigest the same credentials are an ordinary user's.
func TestSuperDigest(t *testing.T) {
	// "test"'s digest for the user "super", as go-zookeeper's tests give it.
	const super = "super:D/InIHSb7yEEbrWz8b9l71RjZJU="
	for _, withSuper := range []bool{false, true} {
		var opts []minizk.Option
		if withSuper {
			opts = append(opts, minizk.WithSuperDigest(super))
		}
		s, _ := start(t, opts...)
		owner, _ := client(t, s.Addr())
		root, _ := client(t, s.Addr())
		must[string](t)(owner.Create("/locked", nil, 0, zk.DigestACL(zk.PermAll, "user", "password")))
		must[struct{}](t)(struct{}{}, root.AddAuth("digest", []byte("super:test")))
		_, _, err := root.Get("/locked")
		if withSuper && err != nil {
			t.Errorf("the super user's Get: %v", err)
		}
		if !withSuper && !errors.Is(err, zk.ErrNoAuth) {
			t.Errorf("Get by super without WithSuperDigest: %v, want %v", err, zk.ErrNoAuth)
		}
	}
	if _, err := minizk.Start(minizk.WithSuperDigest("no-colon")); err == nil {
		t.Error("Start with a malformed super digest succeeded")
	}
}

// TestTTLNodes: TTL creates are UNIMPLEMENTED unless WithExtendedTypes;
// with it a TTL node is created with ZooKeeper's TTL owner mark, and a TTL
// out of range or a TTL mode without a TTL is BADARGUMENTS.
func TestTTLNodes(t *testing.T) {
	createTTL := new(enc).str("/t").buf(nil).openACL().i32(zk.FlagTTL).i64(60000).b
	off, _ := start(t)
	raw := dialRaw(t, off.Addr())
	raw.mustConnect()
	if rs, err := raw.request(1, 21, createTTL); err != nil || rs[len(rs)-1].Err != int32(minizk.CodeUnimplemented) {
		t.Fatalf("createTTL without extended types: %+v, %v; want UNIMPLEMENTED", rs, err)
	}
	on, _ := start(t, minizk.WithExtendedTypes())
	c, _ := client(t, on.Addr())
	must[string](t)(c.CreateTTL("/t", []byte("v"), zk.FlagTTL, acl, time.Minute))
	if p := must[string](t)(c.CreateTTL("/s-", nil, 6 /* persistent sequential with TTL */, acl, time.Second)); p != "/s-0000000001" {
		t.Errorf("sequential TTL node at %q", p)
	}
	_, st, err := c.Get("/t")
	if want := int64(-1<<56 | 60000); err != nil || st.EphemeralOwner != want {
		t.Fatalf("Get(/t): owner %#x, %v; want %#x", st.EphemeralOwner, err, want)
	}
	// A TTL node is not ephemeral: it may have children.
	must[string](t)(c.Create("/t/kid", nil, 0, acl))
	if _, err := c.CreateTTL("/u", nil, zk.FlagTTL, acl, time.Duration(1<<40)*time.Millisecond); !errors.Is(err, zk.ErrBadArguments) {
		t.Errorf("TTL of 2^40 ms: %v, want %v", err, zk.ErrBadArguments)
	}
	// A plain create (opcode 1) in a TTL mode carries no TTL.
	raw = dialRaw(t, on.Addr())
	raw.mustConnect()
	rs, err := raw.request(1, 1, new(enc).str("/v").buf(nil).openACL().i32(zk.FlagTTL).b)
	if err != nil || rs[len(rs)-1].Err != int32(minizk.CodeBadArguments) {
		t.Errorf("create in TTL mode: %+v, %v; want BADARGUMENTS", rs, err)
	}
}

// fourLetterWord sends word on a fresh connection and returns all the
// server wrote before closing it.
func fourLetterWord(t *testing.T, addr, word string) string {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(nc, word); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(nc)
	if err != nil {
		t.Fatalf("%s: %v", word, err)
	}
	return string(b)
}

// TestFourLetterWords: ruok, srvr, stat, mntr and conf are answered on the
// client port (srvr as go-zookeeper's FLWSrvr parses it); ZooKeeper's
// other words are refused with its message; four bytes that are no word
// are a bad length prefix and get nothing.
func TestFourLetterWords(t *testing.T) {
	s, _ := start(t)
	c, _ := client(t, s.Addr())
	must[string](t)(c.Create("/n", nil, 0, acl))
	if got := fourLetterWord(t, s.Addr(), "ruok"); got != "imok" {
		t.Errorf("ruok = %q", got)
	}
	stats, ok := zk.FLWSrvr([]string{s.Addr()}, 10*time.Second)
	// Five nodes (the root, /zookeeper and two under it, /n), the root
	// counted twice as ZooKeeper counts it.
	if !ok || stats[0].Mode != zk.ModeStandalone || stats[0].NodeCount != 6 || int64(stats[0].Counter) != s.Zxid() {
		t.Errorf("FLWSrvr = %+v, %v; want standalone, 6 nodes, zxid %d", stats[0], ok, s.Zxid())
	}
	if got := fourLetterWord(t, s.Addr(), "stat"); !strings.Contains(got, "Clients:\n /127.0.0.1:") || !strings.Contains(got, "Mode: standalone\n") {
		t.Errorf("stat = %q", got)
	}
	if got := fourLetterWord(t, s.Addr(), "mntr"); !strings.Contains(got, "zk_server_state\tstandalone\n") || !strings.Contains(got, "zk_znode_count\t6\n") {
		t.Errorf("mntr = %q", got)
	}
	if got := fourLetterWord(t, s.Addr(), "conf"); !strings.Contains(got, "tickTime=2000\n") {
		t.Errorf("conf = %q", got)
	}
	if got := fourLetterWord(t, s.Addr(), "dump"); got != "dump is not executed because it is not in the whitelist.\n" {
		t.Errorf("dump (known, not whitelisted) = %q", got)
	}
	if got := fourLetterWord(t, s.Addr(), "kill"); got != "" {
		t.Errorf("kill (no word: a length) = %q", got)
	}
	// The client's own connection is untouched.
	if _, _, err := c.Get("/n"); err != nil {
		t.Errorf("Get after the words: %v", err)
	}
}

// TestDownAndUp: a server that is down refuses connections and keeps its
// data and sessions; once up, the client's session resumes.
func TestDownAndUp(t *testing.T) {
	s, _ := start(t)
	c, events := client(t, s.Addr())
	must[string](t)(c.Create("/kept", []byte("k"), zk.FlagEphemeral, acl))
	if err := s.Down(); err != nil {
		t.Fatal(err)
	}
	if err := s.Down(); err != nil {
		t.Fatalf("Down twice: %v", err)
	}
	if ok := zk.FLWRuok([]string{s.Addr()}, time.Second); ok[0] {
		t.Fatal("a server that is down answers ruok")
	}
	if err := s.Up(); err != nil {
		t.Fatal(err)
	}
	waitState(t, events, zk.StateHasSession)
	if data, _, err := c.Get("/kept"); err != nil || string(data) != "k" {
		t.Fatalf("Get(/kept) after Up = %q, %v", data, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Up(); !errors.Is(err, minizk.ErrClosed) {
		t.Errorf("Up after Close: %v, want %v", err, minizk.ErrClosed)
	}
}

// third is the error of a call that returns two values and an error.
func third[A, B any](_ A, _ B, err error) error { return err }

// TestReap: one pass of the container manager deletes a container whose
// children are gone and a TTL node unchanged past its TTL, and nothing
// else: not a container never used, not one with a child, not a TTL node
// with a child or within its TTL, not a persistent node.
func TestReap(t *testing.T) {
	s, _ := start(t, minizk.WithExtendedTypes())
	c, _ := client(t, s.Addr())
	for _, p := range []string{"/used", "/unused", "/busy"} {
		must[string](t)(c.CreateContainer(p, nil, zk.FlagContainer, acl))
	}
	must[string](t)(c.Create("/used/kid", nil, 0, acl))
	if err := c.Delete("/used/kid", -1); err != nil {
		t.Fatal(err)
	}
	must[string](t)(c.Create("/busy/kid", nil, 0, acl))
	must[string](t)(c.CreateTTL("/old", nil, zk.FlagTTL, acl, time.Second))
	must[string](t)(c.CreateTTL("/parent", nil, zk.FlagTTL, acl, time.Second))
	must[string](t)(c.Create("/parent/kid", nil, 0, acl))
	must[string](t)(c.Create("/plain", nil, 0, acl))
	if got := s.Reap(); len(got) != 1 || got[0] != "/used" {
		t.Fatalf("Reap before any TTL ran out = %v, want [/used]", got)
	}
	must[string](t)(c.CreateTTL("/young", nil, zk.FlagTTL, acl, time.Minute))
	_, _, watch, err := c.GetW("/old")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Advance(2 * time.Second); err != nil {
		t.Fatal(err)
	}
	zxid := s.Zxid()
	if got := s.Reap(); len(got) != 1 || got[0] != "/old" {
		t.Fatalf("Reap after 2s = %v, want [/old]", got)
	}
	if e := waitEvent(t, watch); e.Type != zk.EventNodeDeleted || e.Path != "/old" {
		t.Errorf("the watch on /old got %+v", e)
	}
	if s.Zxid() != zxid+1 {
		t.Errorf("the deletion took zxids %d -> %d, want one", zxid, s.Zxid())
	}
	for _, p := range []string{"/unused", "/busy", "/parent", "/young", "/plain"} {
		if ok, _, err := c.Exists(p); !ok || err != nil {
			t.Errorf("%s after Reap: exists %v, %v", p, ok, err)
		}
	}
}
