// Package zkrace keeps the race detector's reports about go-zookeeper
// v1.0.4 out of tests that do not cause them.
//
// When a connection gets a session, go-zookeeper starts its receive loop
// and only then, on the connection's own loop goroutine, sends the watches
// it had (sendSetWatches), reading Conn.lastZxid without a lock while the
// receive loop writes it for every reply. On a first connection there are
// no watches and nothing is read, unless a watch was set through the new
// session, and its reply and another one read, before the loop goroutine
// got there: a window of a few instructions that a test running under the
// race detector on a loaded machine still falls into (CI saw it in
// zklock's TestSemaphorePermits). Settle closes it for the connections a
// goroutine has just opened, by waiting until their loops are past that
// point. A reconnection with watches is a different matter: the read comes
// with requests in flight, and tests that cause one skip under the race
// detector (Enabled).
package zkrace

import (
	"bytes"
	"runtime"
	"strconv"
	"time"
)

// Settle returns once every connection loop that the calling goroutine
// started with zk.Connect has either finished setting up its session
// (it waits on its receive and send loops) or is back to dialling, or
// when timeout has passed. Without the race detector it returns at once.
// Call it after the connection reported StateHasSession and before using
// the connection.
func Settle(timeout time.Duration) {
	if !Enabled {
		return
	}
	created := []byte("created by github.com/go-zookeeper/zk.Connect in goroutine " + strconv.FormatUint(goroutineID(), 10) + "\n")
	deadline := time.Now().Add(timeout)
	for !settled(allStacks(), created) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Microsecond)
	}
}

// loopFrame opens the frame of a connection's loop goroutine in a stack
// dump; parked and dialling are the calls above it where the loop is
// outside the window.
var (
	loopFrame = []byte("github.com/go-zookeeper/zk.(*Conn).loop(")
	parked    = []byte("sync.(*WaitGroup).Wait(")
	dialling  = []byte("github.com/go-zookeeper/zk.(*Conn).connect(")
)

// settled reports whether, in the stack dump dump, every goroutine whose
// creation line is created has its loop frame under one of parked or
// dialling.
func settled(dump, created []byte) bool {
	for g := range bytes.SplitSeq(dump, []byte("\n\n")) {
		if !bytes.Contains(g, created) {
			continue
		}
		// A goroutine's dump: a header line, then two lines a frame (the
		// call, then its file and line), then the creation lines.
		var above []byte
		for i, line := range bytes.Split(g, []byte("\n")) {
			if i == 0 || bytes.HasPrefix(line, []byte("\t")) {
				continue
			}
			if bytes.HasPrefix(line, loopFrame) {
				if !bytes.HasPrefix(above, parked) && !bytes.HasPrefix(above, dialling) {
					return false
				}
				break
			}
			above = line
		}
	}
	return true
}

// allStacks returns the stack dump of every goroutine.
func allStacks() []byte {
	buf := make([]byte, 1<<16)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return buf[:n]
		}
		buf = make([]byte, 2*len(buf))
	}
}

// goroutineID returns the calling goroutine's id, read from the header of
// its stack dump ("goroutine 7 [running]:").
func goroutineID() uint64 {
	var buf [64]byte
	head := buf[:runtime.Stack(buf[:], false)]
	head = bytes.TrimPrefix(head, []byte("goroutine "))
	if i := bytes.IndexByte(head, ' '); i > 0 {
		head = head[:i]
	}
	id, err := strconv.ParseUint(string(head), 10, 64)
	if err != nil {
		panic("zkrace: unreadable goroutine header: " + err.Error())
	}
	return id
}
