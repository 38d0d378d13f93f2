package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ZooKeeperJars are the jars of ZooKeeper's class path, as Debian's
// zookeeper (3.8) package installs them in /usr/share/java.
var ZooKeeperJars = []string{"zookeeper", "zookeeper-jute", "slf4j-api", "slf4j-simple", "netty-handler",
	"netty-common", "netty-buffer", "netty-transport", "netty-codec", "netty-resolver",
	"netty-transport-native-epoll", "netty-transport-native-unix-common", "metrics-core", "commons-cli",
	"snappy-java", "commons-io"}

// JavaDir is where ZooKeeperJars are looked for.
var JavaDir = "/usr/share/java"

// ZooKeeper's ports on every member's own address, and its timing: a
// 200 ms tick, so a follower gives up on a silent leader after syncLimit
// ticks (1 s) rather than ZooKeeper's default 10 s.
const (
	zkClientPort = 2181
	zkPeerPort   = 2888
	zkVotePort   = 3888
	zkTick       = 200 * time.Millisecond
	zkSyncLimit  = 5
	zkInitLimit  = 10
)

// ZooKeeperUnavailable says why StartZooKeeper cannot run here, or "".
func ZooKeeperUnavailable() string {
	if reason := Unavailable(); reason != "" {
		return reason
	}
	if _, err := exec.LookPath("java"); err != nil {
		return fmt.Sprintf("no java for ZooKeeper: %v", err)
	}
	if _, err := zkClassPath(); err != nil {
		return err.Error()
	}
	return ""
}

// zkClassPath is ZooKeeper's class path, or an error naming a missing jar.
func zkClassPath() (string, error) {
	var jars []string
	for _, jar := range ZooKeeperJars {
		path := filepath.Join(JavaDir, jar+".jar")
		if _, err := os.Stat(path); err != nil {
			return "", fmt.Errorf("ZooKeeper's class path: %w", err)
		}
		jars = append(jars, path)
	}
	return strings.Join(jars, ":"), nil
}

// StartZooKeeper starts a ZooKeeper ensemble of opts.Members servers (3 if
// 0), one per namespace, each a JVM with a 64 MiB heap and a 200 ms tick,
// and returns once a server leads. Close the cluster to end it.
func StartZooKeeper(ctx context.Context, opts Options) (*Cluster, error) {
	if opts.Members == 0 {
		opts.Members = 3
	}
	cp, err := zkClassPath()
	if err != nil {
		return nil, fmt.Errorf("lab: %w", err)
	}
	c := &Cluster{Kind: "zookeeper", port: zkClientPort, ask: askZooKeeper,
		Timing: Timing{Tick: zkTick, Election: zkSyncLimit * zkTick, Sync: zkInitLimit * zkTick}}
	return startCluster(ctx, opts, c, func(c *Cluster, i int) Command { return zkCommand(c, i, cp) })
}

// zkCommand is member i's ZooKeeper server; its Prepare writes zoo.cfg and
// myid into the data directory, again after a wipe.
func zkCommand(c *Cluster, i int, classPath string) Command {
	m := c.Member(i)
	cfg := filepath.Join(m.DataDir(), "zoo.cfg")
	lines := []string{
		fmt.Sprintf("tickTime=%d", zkTick.Milliseconds()),
		fmt.Sprintf("initLimit=%d", zkInitLimit),
		fmt.Sprintf("syncLimit=%d", zkSyncLimit),
		"dataDir=" + m.DataDir(),
		fmt.Sprintf("clientPortAddress=%s", m.IP()),
		fmt.Sprintf("clientPort=%d", zkClientPort),
		"admin.enableServer=false",
		"4lw.commands.whitelist=srvr,ruok",
		"maxClientCnxns=0",
	}
	for j, peer := range c.Members() {
		lines = append(lines, fmt.Sprintf("server.%d=%s:%d:%d", j+1, peer.IP(), zkPeerPort, zkVotePort))
	}
	return Command{
		Args: []string{"java", "-Xmx64m", "-Xms64m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xss512k",
			"-Djava.net.preferIPv4Stack=true", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
			"-cp", classPath, "org.apache.zookeeper.server.quorum.QuorumPeerMain", cfg},
		Prepare: func(dir string) error {
			if err := os.WriteFile(cfg, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(dir, "myid"), []byte(strconv.Itoa(i+1)+"\n"), 0o600)
		},
	}
}

// askZooKeeper sends member i the four-letter word srvr and reads its mode
// and its epoch (see zkEpoch).
func askZooKeeper(ctx context.Context, c *Cluster, i int) (status, error) {
	ctx, cancel := context.WithTimeout(ctx, askTimeout)
	defer cancel()
	conn, err := c.Dialer().DialContext(ctx, "tcp", c.ClientAddr(i))
	if err != nil {
		return status{}, fmt.Errorf("lab: ZooKeeper member %d: %w", i, err)
	}
	defer conn.Close()
	if deadline, ok := ctx.Deadline(); ok {
		if err := conn.SetDeadline(deadline); err != nil {
			return status{}, fmt.Errorf("lab: %w", err)
		}
	}
	if _, err := io.WriteString(conn, "srvr"); err != nil {
		return status{}, fmt.Errorf("lab: ZooKeeper member %d: %w", i, err)
	}
	out, err := io.ReadAll(conn)
	if err != nil {
		return status{}, fmt.Errorf("lab: ZooKeeper member %d's srvr: %w", i, err)
	}
	s, err := parseSrvr(string(out))
	if err != nil {
		return status{}, err
	}
	epoch, err := zkEpoch(c.Member(i).DataDir())
	if err != nil {
		return status{}, fmt.Errorf("lab: ZooKeeper member %d: %w", i, err)
	}
	s.term = max(s.term, epoch)
	return s, nil
}

// zkEpoch reads the epoch a ZooKeeper server with data directory dir last
// took part in: its currentEpoch file, which a follower writes when it
// accepts a new leader and a leader when a quorum accepted it (0 before the
// first election). srvr's last zxid (its high 32 bits) is no substitute: a
// follower keeps the old epoch's zxid until a write is made in the new
// one, so an idle ensemble would never show a restarted member as joined.
func zkEpoch(dir string) (uint64, error) {
	b, err := os.ReadFile(filepath.Join(dir, "version-2", "currentEpoch"))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	epoch, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("the epoch in %s: %w", dir, err)
	}
	return epoch, nil
}

// parseSrvr reads a srvr answer: the mode, and the epoch of the last zxid
// (its high 32 bits). A server out of a quorum answers that it is not
// serving: not joined, no error.
func parseSrvr(out string) (status, error) {
	var s status
	mode := ""
	for _, line := range strings.Split(out, "\n") {
		key, value, ok := strings.Cut(line, ": ")
		switch {
		case !ok:
		case key == "Mode":
			mode = strings.TrimSpace(value)
		case key == "Zxid":
			zxid, err := strconv.ParseUint(strings.TrimPrefix(strings.TrimSpace(value), "0x"), 16, 64)
			if err != nil {
				return status{}, fmt.Errorf("lab: srvr's zxid %q: %w", value, err)
			}
			s.term = zxid >> 32
		}
	}
	switch {
	case mode == "leader":
		s.leader, s.joined = true, true
	case mode == "follower":
		s.joined = true
	case mode == "" && strings.Contains(out, "not currently serving"):
	default:
		return status{}, fmt.Errorf("lab: srvr answered %q", out)
	}
	return s, nil
}
