package minizk

import (
	"fmt"
	"sort"
	"strings"
)

// versionLine is what srvr, stat and mntr give as the server's version.
// The build date is in the layout of ZooKeeper before 3.5
// ("MM/dd/yyyy HH:mm z"), the one go-zookeeper's FLWSrvr parses.
const versionLine = "3.8.0-minizk, built on 01/01/2022 00:00 GMT"

// fourLetterWords are the words minizk answers, as ZooKeeper with
// 4lw.commands.whitelist=ruok,srvr,stat,mntr,conf: sent instead of the
// first packet's length, they get a text answer and the connection is
// closed.
var fourLetterWords = map[string]func(s *Server) string{
	"ruok": func(*Server) string { return "imok" },
	"srvr": func(s *Server) string { return s.srvr(false) },
	"stat": func(s *Server) string { return s.srvr(true) },
	"mntr": (*Server).mntr,
	"conf": (*Server).conf,
}

// unlistedWords are ZooKeeper 3.8's other four-letter words: it knows them
// but, not whitelisted, answers that it does not run them. Four bytes that
// are no word are a packet length.
var unlistedWords = map[string]bool{
	"cons": true, "crst": true, "dump": true, "envi": true, "gtmk": true, "stmk": true, "srst": true,
	"wchc": true, "wchp": true, "wchs": true, "isro": true, "dirs": true, "hash": true,
}

// fourLetterAnswer returns the answer to the four-letter word w, and false
// if w is none.
func fourLetterAnswer(s *Server, w string) (string, bool) {
	if f := fourLetterWords[w]; f != nil {
		return f(s), true
	}
	if unlistedWords[w] {
		return w + " is not executed because it is not in the whitelist.\n", true
	}
	return "", false
}

// nodeCount is the node count ZooKeeper reports: its data tree keys the
// root under both "" and "/", so the root counts twice.
func (s *Server) nodeCountLocked() int { return len(s.st.nodes) + 1 }

// srvr is the answer to srvr, or with clients to stat (which lists the
// connections too). Latencies are not measured: minizk reports 0.
func (s *Server) srvr(clients bool) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "Zookeeper version: %s\n", versionLine)
	if clients {
		b.WriteString("Clients:\n")
		for _, c := range s.connsSorted() {
			recv, sent := c.counts()
			fmt.Fprintf(&b, " /%s[1](queued=0,recved=%d,sent=%d)\n", c.nc.RemoteAddr(), recv, sent)
		}
		b.WriteString("\n")
	}
	recv, sent := s.countsLocked()
	fmt.Fprintf(&b, "Latency min/avg/max: 0/0.0/0\nReceived: %d\nSent: %d\nConnections: %d\nOutstanding: 0\n",
		recv, sent, len(s.conns))
	fmt.Fprintf(&b, "Zxid: 0x%x\nMode: standalone\nNode count: %d\n", s.st.zxid, s.nodeCountLocked())
	return b.String()
}

// mntr is the answer to mntr: tab-separated keys and values, a subset of
// ZooKeeper's.
func (s *Server) mntr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	recv, sent := s.countsLocked()
	watches, size, ephemerals := 0, 0, 0
	for _, m := range []map[string]map[*conn]struct{}{s.dataW, s.childW} {
		for _, w := range m {
			watches += len(w)
		}
	}
	for p, n := range s.st.nodes {
		size += len(p) + len(n.data)
	}
	for _, e := range s.st.ephemerals {
		ephemerals += len(e)
	}
	var b strings.Builder
	for _, kv := range []struct {
		k string
		v any
	}{
		{"zk_version", versionLine},
		{"zk_server_state", "standalone"},
		{"zk_packets_received", recv},
		{"zk_packets_sent", sent},
		{"zk_num_alive_connections", len(s.conns)},
		{"zk_outstanding_requests", 0},
		{"zk_znode_count", s.nodeCountLocked()},
		{"zk_watch_count", watches},
		{"zk_ephemerals_count", ephemerals},
		{"zk_approximate_data_size", size},
		{"zk_global_sessions", len(s.sessions)},
	} {
		fmt.Fprintf(&b, "%s\t%v\n", kv.k, kv.v)
	}
	return b.String()
}

// conf is the answer to conf: the server's settings, as key=value lines.
func (s *Server) conf() string {
	port := s.addr[strings.LastIndexByte(s.addr, ':')+1:]
	tick := s.cfg.tick.Milliseconds()
	return fmt.Sprintf("clientPort=%s\nclientPortAddress=%s\ntickTime=%d\nmaxClientCnxns=0\n"+
		"minSessionTimeout=%d\nmaxSessionTimeout=%d\nserverId=0\n", port, s.addr, tick, 2*tick, 20*tick)
}

// countsLocked sums the packets received and sent, over the connections
// gone and those open.
func (s *Server) countsLocked() (recv, sent int64) {
	recv, sent = s.recvGone, s.sentGone
	for c := range s.conns {
		r, w := c.counts()
		recv += r
		sent += w
	}
	return recv, sent
}

// connsSorted returns the open connections in the order of their remote
// addresses.
func (s *Server) connsSorted() []*conn {
	out := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].nc.RemoteAddr().String() < out[j].nc.RemoteAddr().String() })
	return out
}
