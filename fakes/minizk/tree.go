package minizk

import (
	"fmt"
	"math"
	"net"
	"sort"
	"strings"
)

// znode is one node of the data tree.
type znode struct {
	data     []byte
	acl      []ACL
	stat     Stat
	children map[string]struct{}
}

// event is one watch notification to deliver: what happened, and where.
type event struct {
	typ  EventType
	path string
}

// tree is the data tree: znodes by path, the last zxid, and which session
// owns which ephemerals. Guarded by the Server's mutex.
type tree struct {
	nodes      map[string]*znode
	zxid       int64
	ephemerals map[int64]map[string]struct{}
}

// The nodes ZooKeeper creates itself; they cannot be deleted.
const (
	rootPath   = "/"
	procPath   = "/zookeeper"
	quotaPath  = "/zookeeper/quota"
	configPath = "/zookeeper/config"
)

// openACL is world:anyone with every permission (ZooDefs.Ids.OPEN_ACL_UNSAFE).
var openACL = []ACL{{Perms: 31, Scheme: "world", ID: "anyone"}}

// readACL is world:anyone read-only (ZooDefs.Ids.READ_ACL_UNSAFE).
var readACL = []ACL{{Perms: 1, Scheme: "world", ID: "anyone"}}

func newTree() *tree {
	t := &tree{nodes: map[string]*znode{}, ephemerals: map[int64]map[string]struct{}{}}
	t.nodes[rootPath] = &znode{data: []byte{}, acl: openACL, children: map[string]struct{}{}}
	for _, p := range []string{procPath, quotaPath} {
		t.addSystem(p, openACL)
	}
	t.addSystem(configPath, readACL)
	t.nodes[configPath].stat.Aversion = -1 // ZooKeeper sets its ACL with version -1
	return t
}

// addSystem adds one of ZooKeeper's own nodes, with zero zxids and times.
func (t *tree) addSystem(p string, acl []ACL) {
	parent, name := parentOf(p)
	t.nodes[p] = &znode{data: []byte{}, acl: acl, children: map[string]struct{}{}}
	pn := t.nodes[parent]
	pn.children[name] = struct{}{}
	pn.stat.NumChildren++
}

func special(p string) bool {
	return p == rootPath || p == procPath || p == quotaPath || p == configPath
}

// statOut is the Stat a client sees. The node keeps in Cversion the
// number of children ever created, which the next sequence number is; a
// client sees ZooKeeper's changes count, creates plus deletes: twice the
// creates minus the children left.
func (n *znode) statOut() Stat {
	st := n.stat
	st.Cversion = 2*n.stat.Cversion - n.stat.NumChildren
	if st.EphemeralOwner == containerOwner {
		st.EphemeralOwner = 0 // clients are not shown the container mark
	}
	return st
}

// ephemeral reports whether an ephemeralOwner is a session's (not 0, not a
// container's mark).
func ephemeral(owner int64) bool {
	return owner != 0 && owner != containerOwner && owner&ttlMark != ttlMark
}

// ttlMark is the top byte of a TTL node's ephemeralOwner, whose low 40
// bits are its TTL in ms (EphemeralType.TTL); session ids have 1 there.
const ttlMark = -1 << 56

// maxTTL is the longest TTL a node may have, in ms: 40 bits.
const maxTTL = 1<<40 - 1

// containerOwner is the ephemeralOwner of a container node
// (EphemeralType.CONTAINER_EPHEMERAL_OWNER).
const containerOwner = math.MinInt64

// childNames returns the names of p's children, sorted.
func (n *znode) childNames() []string {
	out := make([]string, 0, len(n.children))
	for c := range n.children {
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}

// txn applies the writes of one request (several for a multi) at one zxid,
// recording how to undo each so that a failed multi leaves no trace, and the
// notifications they trigger.
type txn struct {
	t        *tree
	zxid     int64
	now      int64 // ms since the epoch
	sess     int64
	ids      []identity // who the connection is (ACL checks, the "auth" scheme)
	super    bool       // the connection is the super user's
	extended bool       // TTL nodes are on (WithExtendedTypes)
	undo     []func()
	events   []event
}

func (x *txn) rollback() {
	for i := len(x.undo) - 1; i >= 0; i-- {
		x.undo[i]()
	}
	x.undo, x.events = nil, nil
}

// create applies a create; it returns the path created.
func (x *txn) create(o op) (string, Code) {
	if o.flags < 0 || o.flags > 6 {
		return "", CodeBadArguments
	}
	// A TTL needs TTL nodes on and a createTTL with a TTL in range; a
	// createTTL of another mode must carry a negative TTL.
	ttl := o.flags == flagTTL || o.flags == flagTTLSequential
	withTTL := o.opcode == opCreateTTL
	switch {
	case ttl && !x.extended:
		return "", CodeUnimplemented // TTL nodes are off by default on ZooKeeper too
	case ttl && (!withTTL || o.ttl <= 0 || o.ttl > maxTTL), !ttl && withTTL && o.ttl >= 0:
		return "", CodeBadArguments
	}
	seq := o.flags&flagSequential != 0
	// ZooKeeper's order: the parent is looked up before the whole path is
	// validated, so "/missing/" is NONODE and only a path without a slash
	// (or with a NUL) is BADARGUMENTS up front.
	if !strings.HasPrefix(o.path, "/") || strings.ContainsRune(o.path, 0) {
		return "", CodeBadArguments
	}
	acl, c := x.fixupACL(o.acl)
	if c != CodeOK {
		return "", c
	}
	parentPath := o.path[:strings.LastIndexByte(o.path, '/')]
	if parentPath == "" {
		parentPath = rootPath
	}
	parent := x.t.nodes[parentPath]
	if parent == nil {
		return "", CodeNoNode
	}
	if !x.may(parent.acl, permCreate) {
		return "", CodeNoAuth
	}
	p := o.path
	if seq {
		p += sequenceSuffix(parent.stat.Cversion)
	}
	if !validPath(p, false) {
		return "", CodeBadArguments
	}
	if x.t.nodes[p] != nil {
		return "", CodeNodeExists
	}
	if ephemeral(parent.stat.EphemeralOwner) {
		return "", CodeNoChildrenForEphem
	}
	var owner int64
	switch {
	case o.flags == flagContainer:
		owner = containerOwner
	case ttl:
		owner = ttlMark | o.ttl
	case o.flags&flagEphemeral != 0:
		owner = x.sess
	}
	n := &znode{data: o.data, acl: acl, children: map[string]struct{}{}, stat: Stat{
		Czxid: x.zxid, Mzxid: x.zxid, Pzxid: x.zxid, Ctime: x.now, Mtime: x.now,
		EphemeralOwner: owner, DataLength: int32(len(o.data)),
	}}
	_, name := parentOf(p)
	old := parent.stat
	x.t.nodes[p] = n
	parent.children[name] = struct{}{}
	parent.stat.NumChildren++
	parent.stat.Cversion++
	parent.stat.Pzxid = x.zxid
	if ephemeral(owner) {
		x.t.addEphemeral(owner, p)
	}
	x.undo = append(x.undo, func() {
		delete(x.t.nodes, p)
		delete(parent.children, name)
		parent.stat = old
		if ephemeral(owner) {
			x.t.removeEphemeral(owner, p)
		}
	})
	x.events = append(x.events, event{EventNodeCreated, p}, event{EventNodeChildrenChanged, parentPath})
	return p, CodeOK
}

// sequenceSuffix is the suffix of a sequential node: the parent's cversion
// as ZooKeeper formats it, %010d.
func sequenceSuffix(cversion int32) string { return fmt.Sprintf("%010d", cversion) }

// remove applies a delete. As on ZooKeeper, the path itself is not
// validated: one without a slash, with a NUL, or one of ZooKeeper's own is
// BADARGUMENTS; any other that names no node is NONODE.
func (x *txn) remove(o op) Code {
	if !strings.HasPrefix(o.path, "/") || strings.ContainsRune(o.path, 0) || special(o.path) {
		return CodeBadArguments
	}
	n := x.t.nodes[o.path]
	if n == nil {
		return CodeNoNode
	}
	if parentPath, _ := parentOf(o.path); !x.may(x.t.nodes[parentPath].acl, permDelete) {
		return CodeNoAuth
	}
	if o.version != -1 && o.version != n.stat.Version {
		return CodeBadVersion
	}
	if len(n.children) > 0 {
		return CodeNotEmpty
	}
	x.deleteNode(o.path)
	return CodeOK
}

// deleteNode deletes the childless node p and records its notifications.
func (x *txn) deleteNode(p string) {
	n := x.t.nodes[p]
	parentPath, name := parentOf(p)
	parent := x.t.nodes[parentPath]
	old := parent.stat
	delete(x.t.nodes, p)
	delete(parent.children, name)
	parent.stat.NumChildren--
	if x.zxid > parent.stat.Pzxid {
		parent.stat.Pzxid = x.zxid
	}
	owner := n.stat.EphemeralOwner
	if ephemeral(owner) {
		x.t.removeEphemeral(owner, p)
	}
	x.undo = append(x.undo, func() {
		x.t.nodes[p] = n
		parent.children[name] = struct{}{}
		parent.stat = old
		if ephemeral(owner) {
			x.t.addEphemeral(owner, p)
		}
	})
	x.events = append(x.events, event{EventNodeDeleted, p}, event{EventNodeChildrenChanged, parentPath})
}

// versioned finds the node a versioned write names: BADARGUMENTS for an
// invalid path, NONODE, NOAUTH unless the node's ACL grants perm, or
// BADVERSION unless version is -1 or the node's (its data version, or its
// ACL version with acl).
func (x *txn) versioned(o op, acl bool, perm int32) (*znode, Code) {
	if !validPath(o.path, false) {
		return nil, CodeBadArguments
	}
	n := x.t.nodes[o.path]
	if n == nil {
		return nil, CodeNoNode
	}
	if !x.may(n.acl, perm) {
		return nil, CodeNoAuth
	}
	have := n.stat.Version
	if acl {
		have = n.stat.Aversion
	}
	if o.version != -1 && o.version != have {
		return nil, CodeBadVersion
	}
	return n, CodeOK
}

// setData applies a setData and returns the node's new stat.
func (x *txn) setData(o op) (Stat, Code) {
	n, code := x.versioned(o, false, permWrite)
	if code != CodeOK {
		return Stat{}, code
	}
	oldData, oldStat := n.data, n.stat
	n.data = o.data
	n.stat.Version++
	n.stat.Mzxid, n.stat.Mtime = x.zxid, x.now
	n.stat.DataLength = int32(len(o.data))
	x.undo = append(x.undo, func() { n.data, n.stat = oldData, oldStat })
	x.events = append(x.events, event{EventNodeDataChanged, o.path})
	return n.statOut(), CodeOK
}

// check applies a version check.
func (x *txn) check(o op) Code {
	_, code := x.versioned(o, false, permRead)
	return code
}

// setACL applies a setACL and returns the node's new stat.
func (x *txn) setACL(o op) (Stat, Code) {
	acl := o.acl
	if validPath(o.path, false) {
		var c Code
		if acl, c = x.fixupACL(o.acl); c != CodeOK {
			return Stat{}, c
		}
	}
	n, code := x.versioned(o, true, permAdmin)
	if code != CodeOK {
		return Stat{}, code
	}
	oldACL, oldStat := n.acl, n.stat
	n.acl = acl
	n.stat.Aversion++
	x.undo = append(x.undo, func() { n.acl, n.stat = oldACL, oldStat })
	return n.statOut(), CodeOK
}

// checkACL validates an ACL list as ZooKeeper's fixupACL does: not empty,
// and every entry of a known scheme with a well-formed id.
func (x *txn) checkACL(acl []ACL) Code {
	if len(acl) == 0 {
		return CodeInvalidACL
	}
	for _, a := range acl {
		switch a.Scheme {
		case "world":
			if a.ID != "anyone" {
				return CodeInvalidACL
			}
		case "auth":
			if !x.hasDigest() {
				return CodeInvalidACL
			}
		case "digest":
			if strings.Count(a.ID, ":") != 1 {
				return CodeInvalidACL
			}
		case "ip":
			if !validIPID(a.ID) {
				return CodeInvalidACL
			}
		default:
			return CodeInvalidACL
		}
	}
	return CodeOK
}

// validIPID reports whether id is an address or address/bits, as the ip
// scheme takes.
func validIPID(id string) bool {
	if net.ParseIP(id) != nil {
		return true
	}
	_, _, err := net.ParseCIDR(id)
	return err == nil
}

func (t *tree) addEphemeral(sess int64, p string) {
	m := t.ephemerals[sess]
	if m == nil {
		m = map[string]struct{}{}
		t.ephemerals[sess] = m
	}
	m[p] = struct{}{}
}

func (t *tree) removeEphemeral(sess int64, p string) {
	delete(t.ephemerals[sess], p)
	if len(t.ephemerals[sess]) == 0 {
		delete(t.ephemerals, sess)
	}
}

// ephemeralsOf returns the paths of sess's ephemerals, sorted.
func (t *tree) ephemeralsOf(sess int64) []string {
	out := make([]string, 0, len(t.ephemerals[sess]))
	for p := range t.ephemerals[sess] {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// reapable reports whether ZooKeeper's container manager would delete the
// node at time now (ms): a container that has had children and has none
// left, or a TTL node without children unchanged for longer than its TTL.
func (n *znode) reapable(now int64) bool {
	owner := n.stat.EphemeralOwner
	switch {
	case n.stat.NumChildren != 0:
		return false
	case owner == containerOwner:
		return n.stat.Cversion > 0
	case owner&ttlMark == ttlMark:
		return now-n.stat.Mtime > owner&maxTTL
	}
	return false
}
