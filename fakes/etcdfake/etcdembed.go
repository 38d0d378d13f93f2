package etcdfake

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Timing of the embedded members: a 50 ms heartbeat and a 500 ms election
// timeout elect a leader fast and let etcd grant leases of one second (it
// raises shorter TTLs to 1.5 election timeouts, rounded up to whole seconds).
const (
	etcdTickMs     = 50
	etcdElectionMs = 500
	// etcdStartTries is how many times a member start is tried with fresh
	// ports when another process took one of them in between.
	etcdStartTries = 5
	// etcdReadyTimeout bounds the wait for a started cluster to elect a leader.
	etcdReadyTimeout = 20 * time.Second
)

// etcdMember is one embedded member: its configuration outlives a Stop so
// that Restart brings it back on the same URLs with the same data.
type etcdMember struct {
	name      string
	dir       string
	clientURL url.URL
	peerURL   url.URL
	e         *embed.Etcd // nil while stopped
}

// startMembers starts n members that form one new cluster, with their data
// under a new temporary directory (s.dir, which Close removes), and waits
// until every one of them is ready. A port taken by another process
// between its reservation and the start is retried with fresh ports.
func (s *Server) startMembers(n int) error {
	dir, err := os.MkdirTemp("", "lockproof-etcd-")
	if err != nil {
		return fmt.Errorf("etcd: %w", err)
	}
	s.dir = dir
	for try := 0; try < etcdStartTries; try++ {
		s.members = make([]*etcdMember, n)
		ports, perr := freePorts(2 * n)
		if perr != nil {
			err = fmt.Errorf("etcd: no free loopback port: %w", perr)
			break
		}
		for i := range s.members {
			s.members[i] = &etcdMember{
				name:      "m" + strconv.Itoa(i),
				dir:       filepath.Join(dir, strconv.Itoa(try), "m"+strconv.Itoa(i)),
				clientURL: url.URL{Scheme: "http", Host: "127.0.0.1:" + strconv.Itoa(ports[2*i])},
				peerURL:   url.URL{Scheme: "http", Host: "127.0.0.1:" + strconv.Itoa(ports[2*i+1])},
			}
		}
		if err = s.startAll(); err == nil {
			return nil
		}
		s.stopMembers()
		if !errors.Is(err, syscall.EADDRINUSE) && !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	s.members = nil
	_ = os.RemoveAll(dir)
	s.dir = ""
	return fmt.Errorf("cannot start an embedded etcd of %d member(s): %w", n, err)
}

// startAll starts every member, then waits for all to be ready.
func (s *Server) startAll() error {
	for _, m := range s.members {
		if err := s.start(m); err != nil {
			return err
		}
	}
	for _, m := range s.members {
		if err := s.ready(m); err != nil {
			return err
		}
	}
	return nil
}

// freePorts returns n distinct loopback ports the kernel had free: each is
// held open until all are chosen, then released for etcd to bind.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// initialCluster is the --initial-cluster of the members.
func (s *Server) initialCluster() string {
	parts := make([]string, len(s.members))
	for i, m := range s.members {
		parts[i] = m.name + "=" + m.peerURL.String()
	}
	return strings.Join(parts, ",")
}

// config is member m's configuration: loopback URLs, no fsync, logs into
// the fake's buffer, no gRPC gateway or metrics listener.
func (s *Server) config(m *etcdMember) *embed.Config {
	cfg := embed.NewConfig()
	cfg.Name = m.name
	cfg.Dir = m.dir
	cfg.ListenClientUrls = []url.URL{m.clientURL}
	cfg.AdvertiseClientUrls = []url.URL{m.clientURL}
	cfg.ListenPeerUrls = []url.URL{m.peerURL}
	cfg.AdvertisePeerUrls = []url.URL{m.peerURL}
	cfg.InitialCluster = s.initialCluster()
	cfg.InitialClusterToken = "lockproof-" + s.prefix
	cfg.TickMs = etcdTickMs
	cfg.ElectionMs = etcdElectionMs
	// Durability across a crash of the machine is not what these tests
	// are about, and fsync makes a lock hand-off many times slower.
	cfg.UnsafeNoFsync = true
	cfg.EnableGRPCGateway = false
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(s.log.Named(m.name))
	return cfg
}

// start starts member m (its data directory decides whether it is new).
func (s *Server) start(m *etcdMember) error {
	e, err := embed.StartEtcd(s.config(m))
	if err != nil {
		return fmt.Errorf("member %s (client %s, peer %s): %w", m.name, m.clientURL.Host, m.peerURL.Host, err)
	}
	m.e = e
	return nil
}

// ready waits until member m has joined a cluster with a leader.
func (s *Server) ready(m *etcdMember) error {
	t := time.NewTimer(etcdReadyTimeout)
	defer t.Stop()
	select {
	case <-m.e.Server.ReadyNotify():
		return nil
	case err := <-m.e.Err():
		return fmt.Errorf("member %s failed: %w", m.name, err)
	case <-t.C:
		return fmt.Errorf("member %s: no leader elected within %v", m.name, etcdReadyTimeout)
	}
}

// stopMembers stops every running member. The clients must be closed first
// (the cleanups are ordered so): a member waits up to seven seconds for
// clients' open streams before it closes them.
func (s *Server) stopMembers() {
	var wg sync.WaitGroup
	for _, m := range s.members {
		if m != nil && m.e != nil {
			wg.Go(func() { stopMember(m) })
		}
	}
	wg.Wait()
}

// stopMember stops m abruptly, as a crash would: no leadership transfer
// first (which waits seconds for a transferee that may be stopping too).
// Close still takes up to a second while other members hold peer
// connections to it.
func stopMember(m *etcdMember) {
	m.e.Server.HardStop()
	m.e.Close()
	<-m.e.Server.StopNotify()
	m.e = nil
}

// Stop stops member i as a crash would (no leadership transfer), keeping
// its data for Restart. Stopping a stopped member does nothing. When the
// members still running are a majority, Stop returns once they have
// elected a leader among themselves, so the cluster serves again: a write
// sent while the followers still follow a dead leader would wait seconds
// for the server's request timeout. Embedded members only: on a real
// cluster the test is skipped.
func (s *Server) Stop(i int) {
	s.owner.Helper()
	m := s.member(i, "Stop")
	if m.e == nil {
		return
	}
	stopMember(m)
	if err := s.awaitLeader(); err != nil {
		s.owner.Fatalf("etcdfake: etcd Stop(%d): %v", i, err)
	}
}

// Restart starts member i again on the same URLs with its data, after Stop.
// Restarting a running member does nothing. When the running members,
// this one included, are a majority, Restart returns once the member is
// ready and all running members agree on a running leader. It fails the
// test if the member cannot start (another process took its port
// meanwhile).
func (s *Server) Restart(i int) {
	s.owner.Helper()
	m := s.member(i, "Restart")
	if m.e != nil {
		return
	}
	if err := s.start(m); err != nil {
		s.owner.Fatalf("etcdfake: etcd Restart(%d): %v", i, err)
	}
	if !s.quorum() {
		return
	}
	if err := s.ready(m); err != nil {
		s.owner.Fatalf("etcdfake: etcd Restart(%d): %v", i, err)
	}
	if err := s.awaitLeader(); err != nil {
		s.owner.Fatalf("etcdfake: etcd Restart(%d): %v", i, err)
	}
}

// running returns the members that run.
func (s *Server) running() []*etcdMember {
	var up []*etcdMember
	for _, m := range s.members {
		if m.e != nil {
			up = append(up, m)
		}
	}
	return up
}

// quorum reports whether the running members are a majority.
func (s *Server) quorum() bool { return 2*len(s.running()) > len(s.members) }

// awaitLeader waits, when the running members are a majority, until each
// of them follows a leader that runs. It waits on leader-change
// notifications, never on a timer alone.
func (s *Server) awaitLeader() error {
	if !s.quorum() {
		return nil
	}
	up := s.running()
	ids := map[uint64]bool{}
	for _, m := range up {
		ids[uint64(m.e.Server.MemberID())] = true
	}
	t := time.NewTimer(etcdReadyTimeout)
	defer t.Stop()
	for {
		var changed <-chan struct{}
		for _, m := range up {
			ch := m.e.Server.LeaderChangedNotify() // before reading the leader: no change is missed
			if !ids[uint64(m.e.Server.Leader())] {
				changed = ch
				break
			}
		}
		if changed == nil {
			return nil
		}
		select {
		case <-changed:
		case <-t.C:
			return fmt.Errorf("the %d running members elected no leader among them within %v", len(up), etcdReadyTimeout)
		}
	}
}

// Running reports whether member i runs (always true on a real cluster).
func (s *Server) Running(i int) bool {
	s.owner.Helper()
	if s.members == nil {
		s.Endpoint(i)
		return true
	}
	return s.member(i, "Running").e != nil
}

// Embedded returns member i's embedded server, or nil while it is stopped
// or on a real cluster.
func (s *Server) Embedded(i int) *embed.Etcd {
	s.owner.Helper()
	if s.members == nil {
		return nil
	}
	return s.member(i, "Embedded").e
}

func (s *Server) member(i int, what string) *etcdMember {
	s.owner.Helper()
	if s.members == nil {
		s.owner.Skipf("etcdfake: %s needs embedded etcd members: a test cannot stop a real one (unset %s)", what, EnvEndpoints)
	}
	if i < 0 || i >= len(s.members) {
		s.owner.Fatalf("etcdfake: no etcd member %d in a cluster of %d", i, len(s.members))
	}
	return s.members[i]
}

// logBuffer keeps the members' and clients' logs in memory, up to
// logBufferMax bytes (the rest is counted, not kept).
type logBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	dropped int
}

const logBufferMax = 4 << 20

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.buf.Len()+len(p) > logBufferMax {
		b.dropped += len(p)
		return len(p), nil
	}
	return b.buf.Write(p)
}

func (b *logBuffer) Sync() error { return nil }

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.buf.String()
	if b.dropped > 0 {
		s += fmt.Sprintf("[%d more bytes of logs dropped]\n", b.dropped)
	}
	return s
}

// logger returns a zap logger writing into b at info level and above.
func (b *logBuffer) logger() *zap.Logger {
	enc := zap.NewDevelopmentEncoderConfig()
	core := zapcore.NewCore(zapcore.NewConsoleEncoder(enc), zapcore.AddSync(b), zapcore.InfoLevel)
	return zap.New(core)
}
