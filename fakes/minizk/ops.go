package minizk

// dispatch serves a decoded request; s.mu is held. It reports false if the
// connection is to be closed once the replies are written.
func (c *conn) dispatch(h header, o op) bool {
	s := c.s
	switch o.opcode {
	case opPing:
		c.send(replyHeader(xidPing, s.st.zxid, CodeOK).b)
	case opAuth:
		return c.auth(h, o)
	case opCloseSession:
		s.closeSessionLocked(c.sess, false)
		c.send(replyHeader(h.xid, s.st.zxid, CodeOK).b)
		c.finish()
		return false
	case opCreate, opCreate2, opCreateContainer, opCreateTTL, opDelete, opSetData, opSetACL, opCheck:
		c.write(h, o)
	case opMulti:
		c.multi(h, o)
	case opSetWatches:
		c.setWatches(h, o)
	default:
		c.read(h, o)
	}
	return true
}

// auth serves an addAuth: the digest and ip schemes accept any
// credentials (ZooKeeper's providers do): digest adds the identity the
// credentials name to the connection's, ip adds nothing (every connection
// is already its address's). Any other scheme fails and the connection is
// closed.
func (c *conn) auth(h header, o op) bool {
	switch o.authScheme {
	case "digest", "ip":
		if id := digestOf(o.data); o.authScheme == "digest" && !containsID(c.ids, id) {
			c.ids = append(c.ids, id)
		}
		c.send(replyHeader(h.xid, 0, CodeOK).b)
		return true
	}
	c.send(replyHeader(h.xid, 0, CodeAuthFailed).b)
	c.finish()
	return false
}

// newTxn starts a transaction of c's session at the next zxid.
func (c *conn) newTxn() *txn {
	s := c.s
	s.st.zxid++
	return &txn{t: s.st, zxid: s.st.zxid, now: s.now(), sess: c.sess.id, ids: c.ids, super: s.superLocked(c.ids),
		extended: s.cfg.extended}
}

// apply applies one write of a transaction and encodes its result body.
func (x *txn) apply(o op, w *writer) Code {
	switch o.opcode {
	case opCreate, opCreate2, opCreateContainer, opCreateTTL:
		// createContainer is applied as a create with the flags it
		// carries (go-zookeeper's CreateContainer sends the container
		// flag) and answered as a create2: the path and the stat.
		p, code := x.create(o)
		if code == CodeOK {
			w.string(p)
			if o.opcode != opCreate {
				w.stat(x.t.nodes[p].statOut())
			}
		}
		return code
	case opDelete:
		return x.remove(o)
	case opSetData, opSetACL:
		set := x.setData
		if o.opcode == opSetACL {
			set = x.setACL
		}
		st, code := set(o)
		if code == CodeOK {
			w.stat(st)
		}
		return code
	case opCheck:
		return x.check(o)
	}
	return CodeUnimplemented
}

// write serves a single write request.
func (c *conn) write(h header, o op) {
	x := c.newTxn()
	var body writer
	code := x.apply(o, &body)
	if code != CodeOK {
		x.rollback()
		c.send(replyHeader(h.xid, x.zxid, code).b)
		return
	}
	c.s.fireLocked(x.events)
	w := replyHeader(h.xid, x.zxid, CodeOK)
	w.b = append(w.b, body.b...)
	c.send(w.b)
}

// multi serves a multi: every op or none. On failure each op's result is
// an error result: 0 for those before the one that failed, its code for
// it, RUNTIMEINCONSISTENCY for those after; the reply header says OK.
func (c *conn) multi(h header, o op) {
	x := c.newTxn()
	bodies := make([]writer, len(o.ops))
	failed, code := -1, CodeOK
	for i, sub := range o.ops {
		if code = x.apply(sub, &bodies[i]); code != CodeOK {
			failed = i
			break
		}
	}
	w := replyHeader(h.xid, x.zxid, CodeOK)
	if failed >= 0 {
		x.rollback()
	} else {
		c.s.fireLocked(x.events)
	}
	for i, sub := range o.ops {
		if failed < 0 {
			w.int32(sub.opcode)
			w.bool(false)
			w.int32(0)
			w.b = append(w.b, bodies[i].b...)
			continue
		}
		ec := CodeRuntimeInconsistency
		switch {
		case i < failed:
			ec = CodeOK
		case i == failed:
			ec = code
		}
		w.int32(opError)
		w.bool(false)
		w.int32(int32(ec))
		w.int32(int32(ec))
	}
	w.int32(-1)
	w.bool(true)
	w.int32(-1)
	c.send(w.b)
}

// read serves a read request.
func (c *conn) read(h header, o op) {
	s := c.s
	n := s.st.nodes[o.path]
	if o.opcode == opSync {
		w := replyHeader(h.xid, s.st.zxid, CodeOK)
		w.string(o.path)
		c.send(w.b)
		return
	}
	if n == nil {
		if o.opcode == opExists && o.watch {
			addWatch(s.dataW, o.path, c)
		}
		c.send(replyHeader(h.xid, s.st.zxid, CodeNoNode).b)
		return
	}
	if perm := readPerm(o.opcode); perm != 0 && !allowed(n.acl, perm, c.ids, s.superLocked(c.ids)) {
		c.send(replyHeader(h.xid, s.st.zxid, CodeNoAuth).b)
		return
	}
	w := replyHeader(h.xid, s.st.zxid, CodeOK)
	switch o.opcode {
	case opExists:
		w.stat(n.statOut())
	case opGetData:
		w.buffer(n.data)
		w.stat(n.statOut())
	case opGetChildren:
		w.strings(n.childNames())
	case opGetChildren2:
		w.strings(n.childNames())
		w.stat(n.statOut())
	case opGetACL:
		if allowed(n.acl, permAdmin, c.ids, s.superLocked(c.ids)) {
			w.acls(n.acl)
		} else {
			w.acls(redacted(n.acl))
		}
		w.stat(n.statOut())
	}
	if o.watch {
		switch o.opcode {
		case opExists, opGetData:
			addWatch(s.dataW, o.path, c)
		case opGetChildren, opGetChildren2:
			addWatch(s.childW, o.path, c)
		}
	}
	c.send(w.b)
}

// setWatches re-registers a reconnected client's watches: a watch whose
// node changed after the zxid the client last saw fires at once instead.
func (c *conn) setWatches(h header, o op) {
	s := c.s
	mzxid := func(st Stat) int64 { return st.Mzxid }
	pzxid := func(st Stat) int64 { return st.Pzxid }
	for _, p := range o.dataW {
		c.rewatch(s.dataW, p, o.relZxid, mzxid, EventNodeDataChanged)
	}
	for _, p := range o.existW {
		if s.st.nodes[p] != nil {
			c.notify(event{EventNodeCreated, p})
		} else {
			addWatch(s.dataW, p, c)
		}
	}
	for _, p := range o.childW {
		c.rewatch(s.childW, p, o.relZxid, pzxid, EventNodeChildrenChanged)
	}
	s.changedLocked()
	c.send(replyHeader(h.xid, s.st.zxid, CodeOK).b)
}

// rewatch re-registers one data or child watch on p: NodeDeleted if p is
// gone, changed if the zxid of its last change (mzxid or pzxid) is after
// rel, else the watch is set again in m.
func (c *conn) rewatch(m map[string]map[*conn]struct{}, p string, rel int64, last func(Stat) int64, changed EventType) {
	switch n := c.s.st.nodes[p]; {
	case n == nil:
		c.notify(event{EventNodeDeleted, p})
	case last(n.stat) > rel:
		c.notify(event{changed, p})
	default:
		addWatch(m, p, c)
	}
}

func addWatch(m map[string]map[*conn]struct{}, p string, c *conn) {
	w := m[p]
	if w == nil {
		w = map[*conn]struct{}{}
		m[p] = w
	}
	w[c] = struct{}{}
	c.s.changedLocked()
}

// take removes and returns the watchers of p in m.
func take(m map[string]map[*conn]struct{}, p string) map[*conn]struct{} {
	w := m[p]
	delete(m, p)
	return w
}

// fireLocked delivers the notifications of a transaction's events, in
// order, each watch once: a created node or changed data fires the data
// and exists watches on it; a deleted node fires those and its child
// watches; a parent whose children changed fires its child watches.
func (s *Server) fireLocked(events []event) {
	for _, e := range events {
		var targets map[*conn]struct{}
		switch e.typ {
		case EventNodeCreated, EventNodeDataChanged:
			targets = take(s.dataW, e.path)
		case EventNodeChildrenChanged:
			targets = take(s.childW, e.path)
		case EventNodeDeleted:
			targets = take(s.dataW, e.path)
			for c := range take(s.childW, e.path) {
				if targets == nil {
					targets = map[*conn]struct{}{}
				}
				targets[c] = struct{}{}
			}
		}
		for c := range targets {
			c.notify(e)
		}
	}
	s.changedLocked()
}

// notify queues a watch notification.
func (c *conn) notify(e event) {
	w := replyHeader(xidNotification, -1, CodeOK) // ZooKeeper 3.8 sends no zxid with it
	w.int32(int32(e.typ))
	w.int32(stateSyncConnected)
	w.string(e.path)
	c.send(w.b)
}

// readPerm is the permission a read needs on its node: READ for data and
// children, READ or ADMIN for the ACL (ZooKeeper 3.6 and later), none for
// exists.
func readPerm(opcode int32) int32 {
	switch opcode {
	case opGetData, opGetChildren, opGetChildren2:
		return permRead
	case opGetACL:
		return permRead | permAdmin
	}
	return 0
}
