package mysqlfake

import (
	"io"
	"net"
	"strings"
	"sync"
)

// The in-process server's side of each client connection, between the
// listener and go-mysql-server: it reads the client's packets ahead (so
// that the server learns the client went away while a statement of its
// waits, in GET_LOCK) and rewrites the DO statement, which go-mysql-server
// cannot parse.
//
// DO: a COM_QUERY or COM_STMT_PREPARE whose statement starts with DO
// becomes "SET @lockproof_do = JSON_ARRAY(<the expressions>)": the
// expressions are evaluated in order, any errors surface, and the answer
// is an OK packet with no rows, as DO's. The rewrite is made on the wire,
// before go-mysql-server's handler, because the vitess layer beneath it
// parses a statement to prepare by itself (DO RELEASE_LOCK(?) sent
// without interpolateParams); a rewrite in the handler would serve only
// plain queries, and registering DO in the parser would mean a fork of it.
// Only the first statement of a multi-statement packet is rewritten; the
// session's @lockproof_do is overwritten by each DO.

// mysqlMaxPacket is the payload length of a packet that another continues.
const mysqlMaxPacket = 1<<24 - 1

// Commands whose text the rewrite reads.
const (
	mysqlComQuery   = 0x03
	mysqlComPrepare = 0x16
)

// mysqlClientConn is a server-side connection whose client's packets are
// read ahead by a goroutine of its own: Read returns them, and gone is
// closed once the client's stream ended (closed, broken).
type mysqlClientConn struct {
	net.Conn
	gone chan struct{}

	mu    sync.Mutex
	buf   []byte
	err   error         // the stream's end, returned once buf is drained
	ready chan struct{} // capacity 1: something changed for Read
}

// newMySQLClientConn wraps c and starts its reader.
func newMySQLClientConn(c net.Conn) *mysqlClientConn {
	m := &mysqlClientConn{Conn: c, gone: make(chan struct{}), ready: make(chan struct{}, 1)}
	go m.pump()
	return m
}

// pump reads the client's packets, rewrites a DO, and queues them for
// Read until the stream ends.
func (m *mysqlClientConn) pump() {
	defer close(m.gone)
	for {
		head := make([]byte, 4)
		if _, err := io.ReadFull(m.Conn, head); err != nil {
			m.put(nil, err)
			return
		}
		n := int(head[0]) | int(head[1])<<8 | int(head[2])<<16
		packet := make([]byte, 4+n)
		copy(packet, head)
		if _, err := io.ReadFull(m.Conn, packet[4:]); err != nil {
			m.put(nil, err)
			return
		}
		// A command is a packet of sequence 0 that no other continues.
		if n > 1 && n < mysqlMaxPacket && head[3] == 0 && (packet[4] == mysqlComQuery || packet[4] == mysqlComPrepare) {
			if text, ok := mysqlRewriteDo(string(packet[5:])); ok && len(text)+1 < mysqlMaxPacket {
				size := len(text) + 1
				packet = append([]byte{byte(size), byte(size >> 8), byte(size >> 16), 0, packet[4]}, text...)
			}
		}
		m.put(packet, nil)
	}
}

// put queues data, or the end of the stream, and wakes Read.
func (m *mysqlClientConn) put(data []byte, err error) {
	m.mu.Lock()
	m.buf = append(m.buf, data...)
	if err != nil {
		m.err = err
	}
	m.mu.Unlock()
	select {
	case m.ready <- struct{}{}:
	default:
	}
}

// Read returns what the client sent, then the error that ended its stream.
func (m *mysqlClientConn) Read(p []byte) (int, error) {
	for {
		m.mu.Lock()
		switch {
		case len(m.buf) > 0:
			n := copy(p, m.buf)
			m.buf = m.buf[n:]
			m.mu.Unlock()
			return n, nil
		case m.err != nil:
			err := m.err
			m.mu.Unlock()
			return 0, err
		}
		m.mu.Unlock()
		<-m.ready
	}
}

// mysqlRewriteDo returns query rewritten as a SET when its first
// statement is DO, and whether it was.
func mysqlRewriteDo(query string) (string, bool) {
	start := mysqlSkipSpace(query, 0)
	if len(query)-start < 2 || !strings.EqualFold(query[start:start+2], "DO") {
		return "", false
	}
	if after := start + 2; after < len(query) && mysqlIdentChar(query[after]) {
		return "", false // DOUBLE, a name
	}
	end := mysqlStatementEnd(query, start+2)
	// The newline ends a trailing -- or # comment before the parenthesis.
	return query[:start] + "SET @lockproof_do = JSON_ARRAY(" + query[start+2:end] + "\n)" + query[end:], true
}

// mysqlSkipSpace returns the index of the first byte of s from i that is
// neither space nor inside a comment.
func mysqlSkipSpace(s string, i int) int {
	for i < len(s) {
		switch {
		case s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r':
			i++
		case strings.HasPrefix(s[i:], "/*"):
			end := strings.Index(s[i+2:], "*/")
			if end < 0 {
				return len(s)
			}
			i += 2 + end + 2
		case s[i] == '#' || strings.HasPrefix(s[i:], "-- "):
			end := strings.IndexByte(s[i:], '\n')
			if end < 0 {
				return len(s)
			}
			i += end + 1
		default:
			return i
		}
	}
	return i
}

// mysqlStatementEnd returns the index of the first semicolon of s from i
// outside quotes and comments, or len(s).
func mysqlStatementEnd(s string, i int) int {
	for i < len(s) {
		switch c := s[i]; {
		case c == ';':
			return i
		case c == '\'' || c == '"' || c == '`':
			i++
			for i < len(s) && s[i] != c {
				if s[i] == '\\' && c != '`' {
					i++
				}
				i++
			}
			i++
		case c == '/' || c == '#' || c == '-':
			if j := mysqlSkipSpace(s, i); j > i {
				i = j
			} else {
				i++
			}
		default:
			i++
		}
	}
	return len(s)
}

// mysqlIdentChar reports whether c may continue a name.
func mysqlIdentChar(c byte) bool {
	return c == '_' || c == '$' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}
