package zk

// lockproof's stand-in for go-zookeeper's server_java_test.go: the same
// names (server, NewIntegrationTestServer, ServerConfig and the rest that
// server_help_test.go uses), but a server is a minizk on the client port
// the configuration names, not a ZooKeeper process. tools/peersuites
// copies this file in place of the original at run time.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
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
const superDigest = "super:D/InIHSb7yEEbrWz8b9l71RjZJU="

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
// back by the next Start, and closed when the test ends.
type server struct {
	port int
	tick time.Duration
	fake *minizk.Server
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
	})
	return srv, sc.Err()
}

// restartTime is how long a server stopped by Stop takes to start again.
// A ZooKeeper process takes seconds; minizk none, and go-zookeeper fails
// with ErrConnectionClosed a request sent while it is still tearing down
// the connection the stop ended, a moment a JVM's start-up always covers.
const restartTime = 500 * time.Millisecond

func (srv *server) Start() error {
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
	if srv.fake == nil {
		return nil
	}
	return srv.fake.Down()
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
