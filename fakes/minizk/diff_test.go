package minizk_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/go-zookeeper/zk"
)

// envZKAddr names the real server the differential tests compare minizk
// with (host:port). Spelled here because minizk cannot import package fakes,
// which exports it as zkfake.EnvAddr.
const envZKAddr = "LOCKPROOF_ZK_ADDR"

// How a reply's body is decoded for comparison.
const (
	bodyNone = iota
	bodyPath
	bodyStat
	bodyDataStat
	bodyChildren
	bodyChildrenStat
	bodyACLStat
	bodyMulti
	bodyPathStat
)

// step is one raw request of the recorded sequence: sent on connection
// conn (0 or 1, two sessions), its body built from the test's root path.
type step struct {
	name string
	conn int
	op   int32
	body func(root string) []byte
	kind int
}

func createBody(rel string, data []byte, flags int32) func(string) []byte {
	return func(root string) []byte { return new(enc).str(root + rel).buf(data).openACL().i32(flags).b }
}

func pathWatch(rel string, watch bool) func(string) []byte {
	return func(root string) []byte { return new(enc).str(root + rel).boolean(watch).b }
}

func pathVersion(rel string, version int32) func(string) []byte {
	return func(root string) []byte { return new(enc).str(root + rel).i32(version).b }
}

func setDataBody(rel, data string, version int32) func(string) []byte {
	return func(root string) []byte { return new(enc).str(root + rel).buf([]byte(data)).i32(version).b }
}

func fixed(b []byte) func(string) []byte { return func(string) []byte { return b } }

// createACLBody creates root+rel with one ACL entry.
func createACLBody(rel string, perms int32, scheme, id string) func(string) []byte {
	return func(root string) []byte {
		return new(enc).str(root + rel).buf([]byte("s")).i32(1).i32(perms).str(scheme).str(id).i32(0).b
	}
}

func pathOnly(rel string) func(string) []byte {
	return func(root string) []byte { return new(enc).str(root + rel).b }
}

// digestUser is the digest id of user:password, as go-zookeeper makes it.
var digestUser = zk.DigestACL(zk.PermAll, "user", "password")[0].ID

// multiBody builds a multi from (opcode, body) pairs.
func multiBody(ops ...any) func(string) []byte {
	return func(root string) []byte {
		e := new(enc)
		for i := 0; i < len(ops); i += 2 {
			e.i32(ops[i].(int32)).boolean(false).i32(-1)
			e.b = append(e.b, ops[i+1].(func(string) []byte)(root)...)
		}
		return e.i32(-1).boolean(true).i32(-1).b
	}
}

// diffScript is the recorded sequence: every operation minizk serves, its
// errors, watches firing on the other session, and the end of a session.
func diffScript() []step {
	const (
		create, create2, del, exists, getData, setData = 1, 15, 2, 3, 4, 5
		getACL, setACL, children, sync, children2      = 6, 7, 8, 9, 12
		check, multi, closeSession                     = 13, 14, -11
		addAuth                                        = 100
	)
	setACLBody := func(id string, version int32) func(string) []byte {
		return func(root string) []byte {
			return new(enc).str(root).i32(1).i32(31).str("world").str(id).i32(version).b
		}
	}
	return []step{
		{"create root", 0, create, createBody("", []byte("root"), 0), bodyPath},
		{"create child, null data", 0, create, createBody("/a", nil, 0), bodyPath},
		{"getData null data", 0, getData, pathWatch("/a", false), bodyDataStat},
		{"create existing", 0, create, createBody("/a", nil, 0), bodyNone},
		{"create without parent", 0, create, createBody("/x/y", nil, 0), bodyNone},
		{"create relative path", 0, create, fixed(new(enc).str("rel").buf(nil).openACL().i32(0).b), bodyNone},
		{"create trailing slash", 0, create, createBody("/b/", nil, 0), bodyNone},
		{"create sequential", 0, create, createBody("/s-", []byte("1"), 2), bodyPath},
		{"create sequential again", 0, create, createBody("/s-", []byte("2"), 2), bodyPath},
		{"create ephemeral", 0, create, createBody("/e", nil, 1), bodyPath},
		{"create under ephemeral", 0, create, createBody("/e/c", nil, 0), bodyNone},
		{"create ephemeral sequential", 0, create, createBody("/es-", nil, 3), bodyPath},
		{"watch data", 1, getData, pathWatch("/a", true), bodyDataStat},
		{"watch children", 1, children2, pathWatch("", true), bodyChildrenStat},
		{"watch missing node", 1, exists, pathWatch("/new", true), bodyNone},
		{"setData version 0", 0, setData, setDataBody("/a", "v1", 0), bodyStat},
		{"setData stale version", 0, setData, setDataBody("/a", "v2", 0), bodyNone},
		{"setData missing", 0, setData, setDataBody("/nope", "v", -1), bodyNone},
		{"create watched node", 0, create, createBody("/new", []byte("n"), 0), bodyPath},
		{"delete stale version", 0, del, pathVersion("/a", 5), bodyNone},
		{"delete with children", 0, del, pathVersion("", -1), bodyNone},
		{"delete missing", 0, del, pathVersion("/nope", -1), bodyNone},
		{"delete", 0, del, pathVersion("/new", 0), bodyNone},
		{"exists", 0, exists, pathWatch("", false), bodyStat},
		{"exists missing", 0, exists, pathWatch("/nope", false), bodyNone},
		{"getChildren", 0, children, pathWatch("", false), bodyChildren},
		{"getChildren2", 0, children2, pathWatch("", false), bodyChildrenStat},
		{"getChildren missing", 0, children2, pathWatch("/nope", false), bodyNone},
		{"getData bad path", 0, getData, fixed(new(enc).str("bad").boolean(false).b), bodyNone},
		{"multi", 0, multi, multiBody(
			int32(create), createBody("/m", []byte("m"), 0),
			int32(setData), setDataBody("/m", "m2", 0),
			int32(check), pathVersion("/m", 1),
			int32(create), createBody("/m/s-", nil, 2),
			int32(del), pathVersion("/m/s-0000000000", -1),
			int32(create2), createBody("/m2", nil, 0)), bodyMulti},
		{"multi failing", 0, multi, multiBody(
			int32(create), createBody("/f", nil, 0),
			int32(del), pathVersion("/nope", -1),
			int32(create), createBody("/g", nil, 0)), bodyMulti},
		{"multi bad version", 0, multi, multiBody(
			int32(check), pathVersion("/m", 0),
			int32(setData), setDataBody("/m", "x", -1)), bodyMulti},
		{"multi empty", 0, multi, multiBody(), bodyMulti},
		{"multi with a read", 0, multi, multiBody(int32(getData), pathWatch("/m", false)), bodyNone},
		{"getData after multi", 0, getData, pathWatch("/m", false), bodyDataStat},
		{"create2", 0, create2, createBody("/c2", []byte("c"), 0), bodyPathStat},
		{"getACL", 0, getACL, fixed(nil), bodyNone},
		{"getACL root", 0, getACL, func(root string) []byte { return new(enc).str(root).b }, bodyACLStat},
		{"setACL", 0, setACL, setACLBody("anyone", 0), bodyStat},
		{"setACL stale version", 0, setACL, setACLBody("anyone", 0), bodyNone},
		{"setACL invalid id", 0, setACL, setACLBody("nobody", -1), bodyNone},
		{"check outside multi", 0, check, pathVersion("", 7), bodyNone},
		{"sync", 0, sync, func(root string) []byte { return new(enc).str(root).b }, bodyPath},
		{"create truncated", 0, create, func(root string) []byte { return new(enc).str(root + "/t").b }, bodyNone},
		{"getData truncated", 0, getData, func(root string) []byte { return new(enc).str(root).b }, bodyNone},
		{"create bad flags", 0, create, createBody("/bf", nil, 9), bodyNone},
		{"create container", 0, create, createBody("/ct", nil, 4), bodyPath},
		{"exists container", 0, exists, pathWatch("/ct", false), bodyStat},
		{"create empty ACL", 0, create, func(root string) []byte { return new(enc).str(root + "/na").buf(nil).i32(0).i32(0).b }, bodyNone},
		{"getData /zookeeper/quota", 0, getData, fixed(new(enc).str("/zookeeper/quota").boolean(false).b), bodyDataStat},
		{"getData /zookeeper/config", 0, getData, fixed(new(enc).str("/zookeeper/config").boolean(false).b), bodyDataStat},
		{"delete /zookeeper", 0, del, fixed(new(enc).str("/zookeeper").i32(-1).b), bodyNone},
		{"create digest-ACL node", 0, create, createACLBody("/acl", 31, "digest", digestUser), bodyPath},
		{"getData, no credentials", 1, getData, pathWatch("/acl", true), bodyDataStat},
		{"exists, no credentials", 1, exists, pathWatch("/acl", false), bodyStat},
		{"getChildren, no credentials", 1, children, pathWatch("/acl", false), bodyChildren},
		{"getACL, no credentials", 1, getACL, pathOnly("/acl"), bodyACLStat},
		{"setData, no credentials", 1, setData, setDataBody("/acl", "x", -1), bodyStat},
		{"create under, no credentials", 1, create, createBody("/acl/k", nil, 0), bodyPath},
		{"setACL, no credentials", 1, setACL, func(root string) []byte {
			return new(enc).str(root + "/acl").openACL().i32(-1).b
		}, bodyStat},
		{"auth ACL, no credentials", 1, create, createACLBody("/au", 31, "auth", ""), bodyPath},
		{"addAuth digest", 1, addAuth, fixed(new(enc).i32(0).str("digest").buf([]byte("user:password")).b), bodyNone},
		{"getData, credentials", 1, getData, pathWatch("/acl", false), bodyDataStat},
		{"create under, credentials", 1, create, createBody("/acl/k", nil, 0), bodyPath},
		{"delete under, credentials", 1, del, pathVersion("/acl/k", -1), bodyNone},
		{"auth ACL, credentials", 1, create, createACLBody("/au", 1, "auth", ""), bodyPath},
		{"getACL of auth ACL", 1, getACL, pathOnly("/au"), bodyACLStat},
		{"setData, read-only ACL", 1, setData, setDataBody("/au", "x", -1), bodyStat},
		{"getData read-only, other session", 0, getData, pathWatch("/au", false), bodyDataStat},
		{"watch ephemeral", 1, getData, pathWatch("/e", true), bodyDataStat},
		{"watch children again", 1, children, pathWatch("", true), bodyChildren},
		{"close session", 0, closeSession, fixed(nil), bodyNone},
		{"children after close", 1, children2, pathWatch("", false), bodyChildrenStat},
		{"unknown opcode", 1, 999, fixed(nil), bodyNone},
	}
}

// runScript runs the script on the server at addr under root and returns
// one normalized line per reply and notification, and for each step
// whether its connection was closed after it.
func runScript(t *testing.T, addr, root string) []string {
	t.Helper()
	var conns [2]*rawConn
	var sessions [2]int64
	for i := range conns {
		conns[i] = dialRaw(t, addr)
		sessions[i] = conns[i].mustConnect().Session
	}
	rs, err := conns[0].request(-2, 11, nil)
	if err != nil {
		t.Fatal(err)
	}
	n := normalizer{base: rs[len(rs)-1].Zxid, root: root, sessions: sessions}
	out := sessionChecks(t, addr, n, conns[0])
	for i, st := range diffScript() {
		xid := int32(i + 1)
		rs, err := conns[st.conn].request(xid, st.op, st.body(root))
		if err != nil {
			out = append(out, fmt.Sprintf("%s: %v", st.name, err))
			continue
		}
		// Notifications of one step come in no set order among themselves
		// (a session's ephemerals go in hash order on ZooKeeper): sorted.
		own := []string{}
		for _, r := range rs[:len(rs)-1] {
			own = append(own, n.reply(st, r))
		}
		slices.Sort(own)
		lines := append(own, n.reply(st, rs[len(rs)-1]))
		// The other session's notifications: a ping's reply comes after
		// every notification sent before it.
		var others []string
		if prs, err := conns[1-st.conn].request(-2, 11, nil); err == nil {
			for _, r := range prs[:len(prs)-1] {
				others = append(others, fmt.Sprintf("  conn %d %s", 1-st.conn, n.reply(st, r)))
			}
		}
		slices.Sort(others)
		lines = append(lines, others...)
		out = append(out, st.name+":")
		out = append(out, lines...)
		if st.op == -11 || st.op == 999 {
			out = append(out, fmt.Sprintf("  closed %v", conns[st.conn].closed()))
		}
	}
	return out
}

// sessionChecks compares the handshake: the connect response's length,
// timeout negotiation, reconnects with a right and a wrong password, and a
// client that has seen a zxid the server has not. a is a connected session;
// the others are opened and closed here.
func sessionChecks(t *testing.T, addr string, n normalizer, a *rawConn) []string {
	out := []string{fmt.Sprintf("connect response %d bytes", a.connectLen)}
	for _, asked := range []int32{1, 5000, 1 << 30} {
		c := dialRaw(t, addr)
		r, err := c.connect(asked, 0, nil, 0)
		out = append(out, fmt.Sprintf("asked %d ms: timeout %d, passwd %d bytes, %v", asked, r.Timeout, len(r.Passwd), err))
		if _, err := c.request(1, -11, nil); err != nil {
			out = append(out, fmt.Sprintf("  close: %v", err))
		}
	}
	b := dialRaw(t, addr)
	r, err := b.connect(8000, 0, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	wrong := append([]byte(nil), r.Passwd...)
	wrong[3] ^= 1
	for _, tc := range []struct {
		name   string
		passwd []byte
		zxid   int64
	}{{"wrong password", wrong, 0}, {"right password", r.Passwd, 0}, {"ahead of the server", r.Passwd, n.base + 1000}} {
		c := dialRaw(t, addr)
		got, err := c.connect(12000, r.Session, tc.passwd, tc.zxid)
		same := got.Session == r.Session
		out = append(out, fmt.Sprintf("reconnect %s: same session %v, id 0 %v, timeout %d, passwd %d bytes, err %v, closed %v",
			tc.name, same, got.Session == 0, got.Timeout, len(got.Passwd), err != nil, c.closed()))
	}
	return out
}

// normalizer renders replies so that two servers' can be compared: zxids
// relative to the zxid when the script began, times as "t", the root path
// as "R", session ids as which of the two sessions they are.
type normalizer struct {
	base     int64
	root     string
	sessions [2]int64
}

func (n normalizer) zxid(z int64) string {
	if z <= 0 || z < n.base {
		return fmt.Sprint(z)
	}
	return fmt.Sprintf("+%d", z-n.base)
}

func (n normalizer) path(p string) string { return strings.ReplaceAll(p, n.root, "R") }

func (n normalizer) stat(s rawStat) string {
	owner := fmt.Sprint(s.EphemeralOwner)
	for i, id := range n.sessions {
		if s.EphemeralOwner == id {
			owner = fmt.Sprintf("session%d", i)
		}
	}
	tm := func(v int64) string {
		if v == 0 {
			return "0"
		}
		return "t"
	}
	return fmt.Sprintf("{czxid %s mzxid %s pzxid %s ctime %s mtime %s version %d cversion %d aversion %d owner %s len %d children %d}",
		n.zxid(s.Czxid), n.zxid(s.Mzxid), n.zxid(s.Pzxid), tm(s.Ctime), tm(s.Mtime), s.Version, s.Cversion,
		s.Aversion, owner, s.DataLength, s.NumChildren)
}

func (n normalizer) reply(st step, r reply) string {
	d := dec{b: r.Body}
	head := fmt.Sprintf("  xid %d zxid %s err %d", r.Xid, n.zxid(r.Zxid), r.Err)
	if r.Xid == -1 {
		return fmt.Sprintf("%s event %d state %d %s", head, d.i32(), d.i32(), n.path(d.str()))
	}
	if r.Err != 0 {
		return head + fmt.Sprintf(" body %d bytes", len(r.Body))
	}
	strs := func() string {
		c := d.i32()
		var out []string
		for i := int32(0); i < c; i++ {
			out = append(out, n.path(d.str()))
		}
		slices.Sort(out)
		return fmt.Sprint(out)
	}
	var body string
	switch st.kind {
	case bodyNone:
		body = fmt.Sprintf("%d bytes", len(r.Body))
	case bodyPath:
		body = n.path(d.str())
	case bodyPathStat:
		body = n.path(d.str()) + " " + n.stat(d.stat())
	case bodyStat:
		body = n.stat(d.stat())
	case bodyDataStat:
		data := d.buf()
		body = fmt.Sprintf("data %q null %v %s", data, data == nil, n.stat(d.stat()))
	case bodyChildren:
		body = strs()
	case bodyChildrenStat:
		body = strs() + " " + n.stat(d.stat())
	case bodyACLStat:
		c := d.i32()
		for i := int32(0); i < c; i++ {
			body += fmt.Sprintf("acl %d %s:%s ", d.i32(), d.str(), d.str())
		}
		body += n.stat(d.stat())
	case bodyMulti:
		body = n.multi(&d)
	}
	if d.err != nil {
		body += " (undecodable: " + d.err.Error() + ")"
	}
	return head + " " + body
}

func (n normalizer) multi(d *dec) string {
	var parts []string
	for d.err == nil {
		typ, done, err := d.i32(), d.boolean(), d.i32()
		if done {
			parts = append(parts, fmt.Sprintf("done %d %d", typ, err))
			break
		}
		part := fmt.Sprintf("[%d err %d", typ, err)
		switch typ {
		case 1:
			part += " " + n.path(d.str())
		case 15:
			part += " " + n.path(d.str()) + " " + n.stat(d.stat())
		case 5:
			part += " " + n.stat(d.stat())
		case -1:
			part += fmt.Sprintf(" %d", d.i32())
		}
		parts = append(parts, part+"]")
	}
	return strings.Join(parts, " ")
}

// TestDifferentialRaw runs the recorded sequence on minizk and on the real
// server of LOCKPROOF_ZK_ADDR and compares every reply and notification,
// zxids relative to the start, times masked. Run it against a server no
// one else writes to (other clients' writes move the zxids).
func TestDifferentialRaw(t *testing.T) {
	real, s, root := diffServers(t)
	want := runScript(t, real, root)
	got := runScript(t, s.Addr(), root)
	t.Logf("compared %d calls: %s", len(diffScript()), stepNames())
	compareLines(t, want, got)
}

func line(lines []string, i int) string {
	if i < len(lines) {
		return lines[i]
	}
	return "(none)"
}

func stepNames() string {
	var names []string
	for _, s := range diffScript() {
		names = append(names, s.name)
	}
	return strings.Join(names, ", ")
}

// TestDifferentialFourLetterWords asks minizk and the real server of
// LOCKPROOF_ZK_ADDR the four-letter words CI's server whitelists (ruok,
// srvr, stat) and some it does not: the same answer for ruok and for the
// refused words, and for srvr and stat the same lines in the same order
// (the values differ: another server, other traffic).
func TestDifferentialFourLetterWords(t *testing.T) {
	real, s, _ := diffServers(t)
	keys := func(answer string) string {
		var out []string
		for _, l := range strings.Split(answer, "\n") {
			if k, _, ok := strings.Cut(l, ":"); ok && !strings.HasPrefix(l, " ") {
				out = append(out, k)
			}
			if strings.HasPrefix(l, "Mode:") {
				out = append(out, l)
			}
		}
		return strings.Join(out, "|")
	}
	for _, w := range []string{"ruok", "dump", "cons", "isro", "kill"} {
		if want, got := fourLetterWord(t, real, w), fourLetterWord(t, s.Addr(), w); want != got {
			t.Errorf("%s: real %q, minizk %q", w, want, got)
		}
	}
	for _, w := range []string{"srvr", "stat"} {
		if want, got := keys(fourLetterWord(t, real, w)), keys(fourLetterWord(t, s.Addr(), w)); want != got {
			t.Errorf("%s lines: real %s\nminizk %s", w, want, got)
		}
	}
}
