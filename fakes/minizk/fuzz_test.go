package minizk

import (
	"bytes"
	"encoding/binary"
	"net"
	"testing"

	"github.com/lockproof/lockproof/fakes/internal/anyclock"
)

// packet builds a request packet body: header, then the fields.
func packet(xid, opcode int32, fields func(*writer)) []byte {
	var w writer
	w.int32(xid)
	w.int32(opcode)
	if fields != nil {
		fields(&w)
	}
	return w.b
}

// fuzzSeeds are well-formed requests of every opcode the decoder knows,
// and a few broken ones.
func fuzzSeeds() [][]byte {
	create := func(p string, flags int32) func(*writer) {
		return func(w *writer) { w.string(p); w.buffer([]byte("d")); w.acls(openACL); w.int32(flags) }
	}
	pathWatch := func(p string) func(*writer) { return func(w *writer) { w.string(p); w.bool(true) } }
	pathVersion := func(p string, v int32) func(*writer) { return func(w *writer) { w.string(p); w.int32(v) } }
	multi := func(w *writer) {
		w.int32(opCreate)
		w.bool(false)
		w.int32(-1)
		create("/m", 0)(w)
		w.int32(opSetData)
		w.bool(false)
		w.int32(-1)
		w.string("/m")
		w.buffer(nil)
		w.int32(-1)
		w.int32(opCheck)
		w.bool(false)
		w.int32(-1)
		pathVersion("/m", 1)(w)
		w.int32(opDelete)
		w.bool(false)
		w.int32(-1)
		pathVersion("/m", -1)(w)
		w.int32(-1)
		w.bool(true)
		w.int32(-1)
	}
	return [][]byte{
		packet(1, opCreate, create("/a", 0)),
		packet(2, opCreate, create("/a/s-", 3)),
		packet(3, opCreate2, create("/b", 1)),
		packet(4, opDelete, pathVersion("/a", -1)),
		packet(5, opExists, pathWatch("/a")),
		packet(6, opGetData, pathWatch("/zookeeper")),
		packet(7, opSetData, func(w *writer) { w.string("/a"); w.buffer([]byte("x")); w.int32(0) }),
		packet(8, opGetChildren2, pathWatch("/")),
		packet(9, opGetChildren, pathWatch("/")),
		packet(10, opSync, func(w *writer) { w.string("/") }),
		packet(11, opGetACL, func(w *writer) { w.string("/") }),
		packet(12, opSetACL, func(w *writer) { w.string("/a"); w.acls(openACL); w.int32(-1) }),
		packet(13, opCheck, pathVersion("/a", 2)),
		packet(14, opMulti, multi),
		packet(15, opSetWatches, func(w *writer) {
			w.int64(3)
			w.strings([]string{"/a"})
			w.strings([]string{"/b"})
			w.strings([]string{"/"})
		}),
		packet(16, opAuth, func(w *writer) { w.int32(0); w.string("digest"); w.buffer([]byte("u:p")) }),
		packet(-2, opPing, nil),
		packet(17, opCloseSession, nil),
		packet(18, 999, nil),
		{0, 0, 0, 1, 0},
		packet(19, opCreate, func(w *writer) { w.int32(0x7fffffff) }),
		packet(20, opMulti, func(w *writer) { w.int32(opGetData); w.bool(false); w.int32(-1) }),
	}
}

// FuzzDecodeRequest feeds arbitrary packets to the request decoder and
// applies what decodes to a data tree, as the server would: nothing may
// panic, a decoded path is no longer than the packet, and the tree keeps
// its invariants (every node's parent exists and lists it, the child
// counts match, ephemerals are indexed by owner).
func FuzzDecodeRequest(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		if _, err := decodeConnect(p); err != nil && len(p) >= 28 {
			// 28 bytes hold every fixed field; only the password's length
			// can make it fail.
			r := reader{b: p[24:]}
			if r.buffer(); r.err == nil {
				t.Fatalf("decodeConnect failed on a well-formed record: %v", err)
			}
		}
		r := reader{b: p}
		h := header{xid: r.int32(), opcode: r.int32()}
		if r.err != nil {
			return
		}
		o, known, err := decodeOp(h.opcode, r.b)
		if !known || err != nil {
			return
		}
		if len(o.path) > len(p) {
			t.Fatalf("path of %d bytes from a %d-byte packet", len(o.path), len(p))
		}
		st := newTree()
		seed := &txn{t: st, zxid: 1, sess: 7}
		seed.create(op{opcode: opCreate, path: "/a", acl: openACL})
		seed.create(op{opcode: opCreate, path: "/a/e", acl: openACL, flags: flagEphemeral})
		st.zxid = 1
		x := &txn{t: st, zxid: 2, sess: 7}
		ops := o.ops
		if h.opcode != opMulti {
			ops = []op{o}
		}
		for _, sub := range ops {
			var w writer
			if x.apply(sub, &w) != CodeOK {
				x.rollback()
				break
			}
		}
		checkTree(t, st)
	})
}

// checkTree fails t if the tree's invariants do not hold.
func checkTree(t *testing.T, st *tree) {
	t.Helper()
	for p, n := range st.nodes {
		if int(n.stat.NumChildren) != len(n.children) {
			t.Fatalf("%s: numChildren %d, %d children", p, n.stat.NumChildren, len(n.children))
		}
		for c := range n.children {
			if st.nodes[childPath(p, c)] == nil {
				t.Fatalf("%s lists child %q that does not exist", p, c)
			}
		}
		if ephemeral(n.stat.EphemeralOwner) {
			if _, ok := st.ephemerals[n.stat.EphemeralOwner][p]; !ok {
				t.Fatalf("ephemeral %s not indexed", p)
			}
		}
		if p == rootPath {
			continue
		}
		parent, name := parentOf(p)
		pn := st.nodes[parent]
		if pn == nil {
			t.Fatalf("%s has no parent", p)
		}
		if _, ok := pn.children[name]; !ok {
			t.Fatalf("%s not listed by its parent", p)
		}
	}
	for sess, paths := range st.ephemerals {
		for p := range paths {
			if n := st.nodes[p]; n == nil || n.stat.EphemeralOwner != sess {
				t.Fatalf("ephemeral index lists %s for %d", p, sess)
			}
		}
	}
}

func TestSessionPasswordIsZooKeepers(t *testing.T) {
	// A session id and the password ZooKeeper 3.8 gave it.
	want := []byte{144, 40, 199, 77, 221, 214, 146, 29, 238, 213, 76, 230, 238, 50, 245, 71}
	if got := sessionPassword(72058445962805248); !bytes.Equal(got, want) {
		t.Fatalf("password %v, want %v", got, want)
	}
}

// FuzzHandlePackets feeds a session arbitrary packets, as its connection's
// reader would, through the server's whole request path (decoding, reads,
// writes, multi, watches, setWatches, close): nothing may panic, every
// answer is a well-formed packet, and the tree keeps its invariants. The
// input is a sequence of packets, each after a 2-byte little-endian length.
func FuzzHandlePackets(f *testing.F) {
	var all []byte
	for _, s := range fuzzSeeds() {
		f.Add(frame(s))
		all = append(all, frame(s)...)
	}
	f.Add(all)
	f.Fuzz(func(t *testing.T, in []byte) {
		s := &Server{cfg: config{clock: anyclock.System{}, tick: DefaultTickTime}, changed: make(chan struct{})}
		s.resetLocked()
		c, other := pipeConn(t, s), pipeConn(t, s) // other: a second session, whose watches fire too
		for _, cn := range []*conn{c, other} {
			var w writer
			w.int32(0)
			w.int64(0)
			w.int32(10000)
			w.int64(0)
			w.buffer(make([]byte, 16))
			if !cn.handshake(w.b) {
				t.Fatal("handshake refused")
			}
		}
		other.handle(packet(1, opGetChildren2, func(w *writer) { w.string("/"); w.bool(true) }))
		for len(in) >= 2 {
			n := min(int(in[0])|int(in[1])<<8, len(in)-2)
			p := in[2 : 2+n]
			in = in[2+n:]
			if len(p) == 0 {
				continue // readPacket refuses a length of 0 before handle
			}
			if !c.handle(p) {
				break
			}
		}
		checkTree(t, s.st)
		for _, cn := range []*conn{c, other} {
			for _, out := range cn.out {
				if len(out) < 4 || int(binary.BigEndian.Uint32(out)) != len(out)-4 {
					t.Fatalf("malformed answer %x", out)
				}
			}
		}
		for sess := range s.st.ephemerals {
			if s.sessions[sess] == nil {
				t.Fatalf("ephemerals of closed session %d", sess)
			}
		}
	})
}

// pipeConn returns a connection of s on one end of a pipe, both ends
// closed at the end of the test. Nothing reads the pipe: the tests look at
// what the server queued.
func pipeConn(t *testing.T, s *Server) *conn {
	a, b := net.Pipe()
	t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
	return newConn(s, a)
}

// frame prefixes p with its length, two bytes little-endian, as
// FuzzHandlePackets reads its input.
func frame(p []byte) []byte { return append([]byte{byte(len(p)), byte(len(p) >> 8)}, p...) }
