package zk

// lockproof's stand-in for go-zookeeper's server_java_test.go: the same
// names (server, NewIntegrationTestServer, ServerConfig and the rest that
// server_help_test.go uses), but a server is a minizk on the client port
// the configuration names, not a ZooKeeper process. tools/peersuites
// copies this file in place of the original at run time.
//
// When LOCKPROOF_PEERSUITE_ADDR names a real ZooKeeper (tools/peersuites
// -zk), a server is a relay on that client port to the real one instead:
// its first Start empties the real server's tree (as a fresh server's),
// Stop closes the relay's listener and every connection through it (the
// server is cut off, not stopped), and the next Start opens it again.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockproof/lockproof/fakes/minizk"
)

// ErrMissingServerConfigField is a configuration field left empty.
type ErrMissingServerConfigField string

func (e ErrMissingServerConfigField) Error() string {
	return fmt.Sprintf("zk: missing server config field '%s'", string(e))
}

// The defaults a configuration falls back to, as in the original helper.
const (
	DefaultServerTickTime                 = 500
	DefaultServerInitLimit                = 10
	DefaultServerSyncLimit                = 5
	DefaultServerAutoPurgeSnapRetainCount = 3
	DefaultPeerPort                       = 2888
	DefaultLeaderElectionPort             = 3888
)

// superDigest is the digest the original helper gives the server's
// super user (password "test").
const (
	superDigest = "super:D/InIHSb7yEEbrWz8b9l71RjZJU="
	superAuth   = "super:test"
)

// realAddr is the real ZooKeeper the tests run against; "": minizk.
var realAddr = os.Getenv("LOCKPROOF_PEERSUITE_ADDR")

// ServerConfigServer is one member of an ensemble in a configuration.
type ServerConfigServer struct {
	ID                 int
	Host               string
	PeerPort           int
	LeaderElectionPort int
}

// ServerConfig is what a test's server is started with.
type ServerConfig struct {
	TickTime                 int
	InitLimit                int
	SyncLimit                int
	DataDir                  string
	ClientPort               int
	AutoPurgeSnapRetainCount int
	AutoPurgePurgeInterval   int
	Servers                  []ServerConfigServer
}

// Marshall writes the configuration as key=value lines, the two keys the
// fake reads among them.
func (sc ServerConfig) Marshall(w io.Writer) error {
	if sc.DataDir == "" {
		return ErrMissingServerConfigField("dataDir")
	}
	if sc.TickTime <= 0 {
		sc.TickTime = DefaultServerTickTime
	}
	if sc.ClientPort <= 0 {
		sc.ClientPort = DefaultPort
	}
	_, err := fmt.Fprintf(w, "dataDir=%s\ntickTime=%d\nclientPort=%d\nservers=%d\n",
		sc.DataDir, sc.TickTime, sc.ClientPort, len(sc.Servers))
	return err
}

// server is one minizk: started by the first Start, taken down by Stop
// with its data kept (as a ZooKeeper process keeps its snapshot), brought
// back by the next Start, and closed when the test ends. On a real
// ZooKeeper it is a relay to it, opened by Start and closed by Stop.
type server struct {
	port    int
	tick    time.Duration
	fake    *minizk.Server
	relay   *relay
	started bool
}

// NewIntegrationTestServer reads the client port and the tick time from
// the configuration at configPath.
func NewIntegrationTestServer(t *testing.T, configPath string, stdout, stderr io.Writer) (*server, error) {
	f, err := os.Open(configPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	srv := &server{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		key, value, _ := strings.Cut(sc.Text(), "=")
		n, err := strconv.Atoi(value)
		switch {
		case key != "clientPort" && key != "tickTime":
			continue
		case err != nil:
			return nil, fmt.Errorf("%s: %s: %w", configPath, key, err)
		case key == "clientPort":
			srv.port = n
		default:
			srv.tick = time.Duration(n) * time.Millisecond
		}
	}
	if srv.port == 0 || srv.tick == 0 {
		return nil, fmt.Errorf("%s: no clientPort or tickTime", configPath)
	}
	t.Cleanup(func() {
		if srv.fake != nil {
			srv.fake.Close()
		}
		_ = srv.Stop()
	})
	return srv, sc.Err()
}

// restartTime is how long a server stopped by Stop takes to start again.
// A ZooKeeper process takes seconds; minizk none, and go-zookeeper fails
// with ErrConnectionClosed a request sent while it is still tearing down
// the connection the stop ended, a moment a JVM's start-up always covers.
const restartTime = 500 * time.Millisecond

func (srv *server) Start() error {
	if realAddr != "" {
		return srv.startRelay()
	}
	if srv.fake != nil {
		time.Sleep(restartTime)
		return srv.fake.Up()
	}
	fake, err := minizk.Start(
		minizk.WithAddr(fmt.Sprintf("127.0.0.1:%d", srv.port)),
		minizk.WithTickTime(srv.tick),
		minizk.WithSuperDigest(superDigest),
		minizk.WithExtendedTypes(),
	)
	srv.fake = fake
	return err
}

func (srv *server) Stop() error {
	if srv.relay != nil {
		r := srv.relay
		srv.relay = nil
		return r.close()
	}
	if srv.fake == nil {
		return nil
	}
	return srv.fake.Down()
}

// startRelay opens the relay, after emptying the real server's tree on
// the first start.
func (srv *server) startRelay() error {
	if srv.relay != nil {
		return nil
	}
	if srv.started {
		time.Sleep(restartTime)
	} else if err := emptyTree(realAddr); err != nil {
		return fmt.Errorf("emptying the tree of ZooKeeper at %s: %w", realAddr, err)
	}
	r, err := listenRelay(fmt.Sprintf("127.0.0.1:%d", srv.port), realAddr)
	if err != nil {
		return err
	}
	srv.relay, srv.started = r, true
	return nil
}

// emptyTree deletes every node of the server at addr but /zookeeper's,
// as the super user.
func emptyTree(addr string) error {
	conn, events, err := Connect([]string{addr}, 10*time.Second, WithLogger(quiet{}))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for conn.State() != StateHasSession {
		if err := waitForSession(ctx, events); err != nil {
			return err
		}
	}
	if err := conn.AddAuth("digest", []byte(superAuth)); err != nil {
		return err
	}
	return deleteChildren(conn, "/")
}

func deleteChildren(conn *Conn, path string) error {
	children, _, err := conn.Children(path)
	if errors.Is(err, ErrNoNode) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("children of %s: %w", path, err)
	}
	for _, name := range children {
		child := strings.TrimSuffix(path, "/") + "/" + name
		if child == "/zookeeper" {
			continue
		}
		if err := deleteChildren(conn, child); err != nil {
			return err
		}
		if err := conn.Delete(child, -1); err != nil && !errors.Is(err, ErrNoNode) {
			return fmt.Errorf("deleting %s: %w", child, err)
		}
	}
	return nil
}

// quiet is a Logger that drops everything.
type quiet struct{}

func (quiet) Printf(string, ...interface{}) {}

// relay accepts connections on a port of its own and joins each to a new
// connection to the real server.
type relay struct {
	target string
	ln     net.Listener
	wg     sync.WaitGroup

	mu    sync.Mutex
	conns map[net.Conn]bool
}

func listenRelay(addr, target string) (*relay, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("relay to %s: %w", target, err)
	}
	r := &relay{target: target, ln: ln, conns: map[net.Conn]bool{}}
	r.wg.Add(1)
	go r.serve()
	return r, nil
}

func (r *relay) serve() {
	defer r.wg.Done()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		r.wg.Add(1)
		go r.join(c)
	}
}

// track records c as open, or closes it and reports false once the relay
// has closed.
func (r *relay) track(c net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.conns == nil {
		c.Close()
		return false
	}
	r.conns[c] = true
	return true
}

func (r *relay) join(client net.Conn) {
	defer r.wg.Done()
	if !r.track(client) {
		return
	}
	server, err := net.DialTimeout("tcp", r.target, 5*time.Second)
	if err != nil {
		client.Close()
		return
	}
	if !r.track(server) {
		client.Close()
		return
	}
	done := make(chan struct{}, 2)
	copyThenClose := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		dst.Close()
		src.Close()
		done <- struct{}{}
	}
	go copyThenClose(server, client)
	go copyThenClose(client, server)
	<-done
	<-done
}

// close stops accepting, closes every connection and waits for the
// relay's goroutines.
func (r *relay) close() error {
	err := r.ln.Close()
	r.mu.Lock()
	for c := range r.conns {
		c.Close()
	}
	r.conns = nil
	r.mu.Unlock()
	r.wg.Wait()
	return err
}

// waitForStart waits until every server answers srvr with a Mode line. It
// replaces go-zookeeper's own (upstreamWaitForStart), which also parses the
// version line, and Debian's ZooKeeper writes one it cannot parse
// ("3.8.0-${mvngit.commit.id}, built on 2024-12-29 17:54 UTC"). On minizk
// the upstream check runs.
func (tc *TestCluster) waitForStart(maxRetry int, interval time.Duration) error {
	if realAddr == "" {
		return tc.upstreamWaitForStart(maxRetry, interval)
	}
	mode := regexp.MustCompile(`(?m)^Mode: (standalone|leader|follower)$`)
	for i := 0; i < maxRetry; i++ {
		up := 0
		for _, s := range tc.Servers {
			out, err := fourLetterWord(fmt.Sprintf("127.0.0.1:%d", s.Port), "srvr", time.Second)
			if err == nil && mode.Match(out) {
				up++
			}
		}
		if up == len(tc.Servers) {
			return nil
		}
		time.Sleep(interval)
	}
	return fmt.Errorf("unable to verify health of servers: no Mode line in their srvr")
}

// waitForSession waits for the first event on eventChan: nil if it says
// the connection has a session (or says anything else), an error if the
// channel closes or ctx ends first.
func waitForSession(ctx context.Context, eventChan <-chan Event) error {
	select {
	case event, ok := <-eventChan:
		if !ok {
			return fmt.Errorf("connection closed before state reached")
		}
		if event.State == StateHasSession {
			return nil
		}
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}
