package lab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/lockproof/lockproof/internal/zkrace"
)

func TestParseSrvr(t *testing.T) {
	good := map[string]status{
		"Zookeeper version: 3.8.0\nZxid: 0x300000002\nMode: leader\nNode count: 5\n": {leader: true, joined: true, term: 3},
		"Zookeeper version: 3.8.0\nZxid: 0x200000000\nMode: follower\n":              {joined: true, term: 2},
		"This ZooKeeper instance is not currently serving requests\n":                {},
	}
	for out, want := range good {
		if got, err := parseSrvr(out); err != nil || got != want {
			t.Errorf("parseSrvr(%q) = %+v, %v; want %+v", out, got, err, want)
		}
	}
	for _, out := range []string{"", "Mode: observer\n", "Zxid: 0xzz\nMode: leader\n"} {
		if got, err := parseSrvr(out); err == nil {
			t.Errorf("parseSrvr(%q) = %+v, want an error", out, got)
		}
	}
}

func TestZKEpoch(t *testing.T) {
	dir := t.TempDir()
	if e, err := zkEpoch(dir); e != 0 || err != nil {
		t.Errorf("zkEpoch of a server never elected = %d, %v; want 0, nil", e, err)
	}
	if err := os.Mkdir(filepath.Join(dir, "version-2"), 0o700); err != nil {
		t.Fatal(err)
	}
	for text, want := range map[string]uint64{"3": 3, "12\n": 12} {
		if err := os.WriteFile(filepath.Join(dir, "version-2", "currentEpoch"), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		if e, err := zkEpoch(dir); e != want || err != nil {
			t.Errorf("zkEpoch with %q = %d, %v; want %d, nil", text, e, err, want)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "version-2", "currentEpoch"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if e, err := zkEpoch(dir); err == nil {
		t.Errorf("zkEpoch of a malformed file = %d, want an error", e)
	}
}

// TestZooKeeperCluster starts 3 ZooKeeper servers, writes through
// go-zookeeper (dialing through the lab's Dialer), and fails the leader
// three ways; it also restarts a follower without its data.
func TestZooKeeperCluster(t *testing.T) {
	needLab(t)
	if reason := ZooKeeperUnavailable(); reason != "" {
		t.Skip(reason)
	}
	c := newCluster(t, StartZooKeeper)
	n := 0
	write := func(ctx context.Context) error {
		n++
		return zkCreate(ctx, c, fmt.Sprintf("/lab-%d", n))
	}
	exerciseFailovers(t, c, write)

	ctx, cancel := context.WithTimeout(context.Background(), faultBudget)
	defer cancel()
	leader, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// With no write since the election, the restarted member's last zxid
	// is of the old epoch: it rejoined all the same.
	if err := c.Member(leader).Kill(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AwaitLeader(ctx, leader); err != nil {
		t.Fatal(err)
	}
	if err := c.Member(leader).Restart(false); err != nil {
		t.Fatal(err)
	}
	if err := c.AwaitJoined(ctx, leader); err != nil {
		t.Fatalf("old leader %d, restarted with no write since, did not rejoin: %v", leader, err)
	}
	if leader, err = c.Leader(ctx); err != nil {
		t.Fatal(err)
	}
	follower := (leader + 1) % 3
	if err := c.Member(follower).Restart(true); err != nil {
		t.Fatal(err)
	}
	if err := c.AwaitJoined(ctx, follower); err != nil {
		t.Fatalf("follower %d restarted without its data did not rejoin: %v", follower, err)
	}
	awaitWrite(t, c, write)
	wantNothingLeft(t, c.Lab)
}

// zkCreate creates node path through a session of its own on the current
// leader, dialed through the lab's Dialer. A session per write keeps the
// test about the ensemble, not about go-zookeeper's choice of server to
// reconnect to (it kept trying a paused one).
func zkCreate(ctx context.Context, c *Cluster, path string) error {
	leader, err := c.Leader(ctx)
	if err != nil {
		return err
	}
	conn, events, err := zk.Connect([]string{c.ClientAddr(leader)}, 2*time.Second,
		zk.WithDialer(c.Dialer().DialTimeout), zk.WithLogger(quiet{}))
	if err != nil {
		return err
	}
	defer conn.Close()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case e := <-events:
			if e.State != zk.StateHasSession {
				continue
			}
			zkrace.Settle(10 * time.Second)
			_, err := conn.Create(path, nil, 0, zk.WorldACL(zk.PermAll))
			if errors.Is(err, zk.ErrNodeExists) {
				return nil // a create sent again after a reconnection
			}
			return err
		}
	}
}

// quiet is a go-zookeeper logger that drops its reconnection chatter.
type quiet struct{}

func (quiet) Printf(string, ...any) {}
