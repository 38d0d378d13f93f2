package minizk_test

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/lockproof/lockproof/fakes/minizk"
	"github.com/lockproof/lockproof/locks"
)

// transcript records go-zookeeper calls and events, normalized as the raw
// differential test's replies are.
type transcript struct {
	t     *testing.T
	n     normalizer
	lines []string
}

func (tr *transcript) add(format string, args ...any) {
	tr.lines = append(tr.lines, tr.n.path(fmt.Sprintf(format, args...)))
}

func (tr *transcript) stat(st *zk.Stat) string {
	if st == nil {
		return "nil"
	}
	return tr.n.stat(rawStat{Czxid: st.Czxid, Mzxid: st.Mzxid, Pzxid: st.Pzxid, Ctime: st.Ctime, Mtime: st.Mtime,
		Version: st.Version, Cversion: st.Cversion, Aversion: st.Aversion, EphemeralOwner: st.EphemeralOwner,
		DataLength: st.DataLength, NumChildren: st.NumChildren})
}

// event waits for a watch's event and records it.
func (tr *transcript) event(name string, ch <-chan zk.Event) {
	select {
	case e := <-ch:
		tr.add("%s: event %v %s err %v", name, e.Type, e.Path, e.Err)
	case <-time.After(5 * time.Second):
		tr.add("%s: no event within 5s", name)
	}
}

// runClientScript runs go-zookeeper's calls, its lock recipe included,
// against the server at addr under root.
func runClientScript(t *testing.T, addr, root string) []string {
	c1, _ := client(t, addr)
	c2, _ := client(t, addr)
	tr := &transcript{t: t, n: normalizer{root: root, sessions: [2]int64{c1.SessionID(), c2.SessionID()}}}
	p, err := c1.Create(root, []byte("root"), 0, acl)
	tr.n.base = zxidOf(c1, root) - 1 // zxids print relative to the one before the root's
	tr.add("create root: %s %v", p, err)
	for i := 0; i < 2; i++ {
		p, err := c1.Create(root+"/lock-", nil, zk.FlagEphemeral|zk.FlagSequence, acl)
		tr.add("create ephemeral sequential: %s %v", p, err)
	}
	kids, st, kidsW, err := c2.ChildrenW(root)
	slices.Sort(kids)
	tr.add("ChildrenW: %v %s %v", kids, tr.stat(st), err)
	data, st, dataW, err := c2.GetW(root + "/lock-0000000000")
	tr.add("GetW: %q %s %v", data, tr.stat(st), err)
	ok, st, existW, err := c2.ExistsW(root + "/x")
	tr.add("ExistsW missing: %v %s %v", ok, tr.stat(st), err)
	st, err = c1.Set(root, []byte("v"), 0)
	tr.add("Set: %s %v", tr.stat(st), err)
	_, err = c1.Set(root, []byte("v"), 0)
	tr.add("Set stale: %v", err)
	p, err = c1.Create(root+"/x", []byte("x"), 0, acl)
	tr.add("create watched: %s %v", p, err)
	tr.event("child watch", kidsW)
	tr.event("exists watch", existW)
	res, err := c1.Multi(
		&zk.CreateRequest{Path: root + "/m", Data: []byte("m"), Acl: acl},
		&zk.SetDataRequest{Path: root + "/m", Data: []byte("n"), Version: 0},
		&zk.CheckVersionRequest{Path: root + "/m", Version: 1},
		&zk.DeleteRequest{Path: root + "/x", Version: 0},
	)
	tr.multi("multi", res, err)
	res, err = c1.Multi(
		&zk.CreateRequest{Path: root + "/y", Acl: acl},
		&zk.CheckVersionRequest{Path: root + "/m", Version: 0},
		&zk.DeleteRequest{Path: root + "/m", Version: -1},
	)
	tr.multi("multi failing", res, err)
	tr.add("delete not empty: %v", c2.Delete(root, -1))
	tr.add("delete missing: %v", c2.Delete(root+"/nope", -1))
	_, err = c2.Create(root+"/lock-0000000000/c", nil, 0, acl)
	tr.add("create under ephemeral: %v", err)
	c1.Close()
	tr.event("data watch on the closed session's ephemeral", dataW)
	kids, st, err = c2.Children(root)
	slices.Sort(kids)
	tr.add("children after close: %v %s %v", kids, tr.stat(st), err)

	// go-zookeeper's lock recipe, two clients.
	c3, _ := client(t, addr)
	l2, l3 := zk.NewLock(c2, root+"/lock", acl), zk.NewLock(c3, root+"/lock", acl)
	tr.add("first Lock: %v", l2.Lock())
	got := make(chan error, 1)
	go func() { got <- l3.Lock() }()
	select {
	case err := <-got:
		tr.add("second Lock returned while held: %v", err)
	case <-time.After(300 * time.Millisecond):
		tr.add("second Lock waits")
	}
	tr.add("first Unlock: %v", l2.Unlock())
	select {
	case err := <-got:
		tr.add("second Lock: %v", err)
	case <-time.After(5 * time.Second):
		tr.add("second Lock still waits 5s after Unlock")
	}
	kids, _, err = c3.Children(root + "/lock")
	tr.add("lock nodes: %d %v", len(kids), err)
	tr.add("second Unlock: %v", l3.Unlock())
	return tr.lines
}

// zxidOf returns the czxid of p.
func zxidOf(c *zk.Conn, p string) int64 {
	_, st, err := c.Exists(p)
	if err != nil || st == nil {
		return 0
	}
	return st.Czxid
}

func (tr *transcript) multi(name string, res []zk.MultiResponse, err error) {
	var parts []string
	for _, r := range res {
		parts = append(parts, fmt.Sprintf("{%s %s %v}", r.String, tr.stat(r.Stat), r.Error))
	}
	tr.add("%s: %s err %v", name, strings.Join(parts, " "), err)
}

// TestDifferentialClient runs go-zookeeper's calls, watches and lock recipe
// on minizk and on the real server of LOCKPROOF_ZK_ADDR and compares the
// transcripts, then lets a session expire on both (7s of wall time).
func TestDifferentialClient(t *testing.T) {
	real, s, root := diffServers(t)
	want := runClientScript(t, real, root)
	got := runClientScript(t, s.Addr(), root)
	compareLines(t, want, got)

	// Expiry: a session whose client is gone, on both servers at once.
	type probe struct {
		addr string
		sess connectReply
	}
	var probes []probe
	for _, addr := range []string{real, s.Addr()} {
		c := dialRaw(t, addr)
		r := c.mustConnectTimeout(4000)
		if _, err := c.request(1, opCreate, new(enc).str(root+"-eph").buf(nil).openACL().i32(1).b); err != nil {
			t.Fatal(err)
		}
		_ = c.nc.Close()
		probes = append(probes, probe{addr, r})
	}
	time.Sleep(7 * time.Second) // 4s of timeout, rounded up to ZooKeeper's 2s ticks, and a margin
	var lines [2][]string
	for i, p := range probes {
		c := dialRaw(t, p.addr)
		r, err := c.connect(4000, p.sess.Session, p.sess.Passwd, 0)
		lines[i] = append(lines[i], fmt.Sprintf("reconnect after expiry: session 0 %v, timeout %d, err %v, closed %v",
			r.Session == 0, r.Timeout, err, c.closed()))
		fresh := dialRaw(t, p.addr)
		fresh.mustConnect()
		rs, err := fresh.request(1, opGetData, new(enc).str(root+"-eph").boolean(false).b)
		if err == nil {
			lines[i] = append(lines[i], fmt.Sprintf("ephemeral after expiry: err %d", rs[len(rs)-1].Err))
		}
	}
	compareLines(t, lines[0], lines[1])
}

// diffServers returns the real server's address (skipping the test
// without one), a minizk closed at cleanup, and a root path unique to the
// test.
func diffServers(t *testing.T) (string, *minizk.Server, string) {
	t.Helper()
	real := os.Getenv(envZKAddr)
	if real == "" {
		t.Skipf("set %s=host:port of a ZooKeeper server to compare with", envZKAddr)
	}
	s, err := minizk.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return real, s, "/lockproof-" + strings.ToLower(t.Name()) + "-" + locks.NewOwner()[:8]
}

// compareLines fails t at each line where minizk's transcript differs
// from the real server's.
func compareLines(t *testing.T, want, got []string) {
	t.Helper()
	for i := 0; i < max(len(want), len(got)); i++ {
		if w, g := line(want, i), line(got, i); w != g {
			t.Errorf("line %d:\nreal:   %s\nminizk: %s", i, w, g)
		}
	}
	if testing.Verbose() {
		t.Logf("real server:\n%s", strings.Join(want, "\n"))
	}
}
