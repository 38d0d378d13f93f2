package lab

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"time"

	"github.com/hashicorp/consul/api"
)

// ConsulBinary is the Consul agent the lab runs: the one tools/consul
// builds, found where $LOCKPROOF_CONSUL_BIN says (as for fakes/consulfake)
// or else at /tmp/lockproof-consul (`cd tools/consul && go build -o
// /tmp/lockproof-consul .`).
var ConsulBinary = cmp.Or(os.Getenv("LOCKPROOF_CONSUL_BIN"), "/tmp/lockproof-consul")

// consulHTTPPort is Consul's HTTP API port on every member's own address.
const consulHTTPPort = 8500

// ConsulSessionTTLMin is the shortest session TTL the lab's Consul servers
// accept (their session_ttl_min; Consul's default is 10s).
const ConsulSessionTTLMin = time.Second

// consulTiming is the lab's Consul timing, Consul's own at
// raft_multiplier 1: the leader sends Raft heartbeats every 100ms, and a
// follower that hears none for its heartbeat_timeout of 1s (randomized up
// to 2s) stands for election.
var consulTiming = Timing{Tick: 100 * time.Millisecond, Election: time.Second}

// ConsulUnavailable says why StartConsul cannot run here, or "".
func ConsulUnavailable() string {
	if reason := Unavailable(); reason != "" {
		return reason
	}
	if _, err := os.Stat(ConsulBinary); err != nil {
		return fmt.Sprintf("no Consul agent (build it: cd tools/consul && go build -o %s .): %v", ConsulBinary, err)
	}
	return ""
}

// StartConsul starts opts.Members Consul servers (3 if 0) that expect each
// other (bootstrap-expect), one per namespace, with Consul's fastest Raft
// timing (raft_multiplier 1), sessions from ConsulSessionTTLMin, and no
// DNS or gRPC ports, and returns once a server leads. Close the cluster to
// end it. It offers no clock skew, for the reason the package comment
// gives for etcd: Consul is a Go program.
//
// The servers are a fixed set of voters, as etcd's and ZooKeeper's are:
// autopilot's cleanup_dead_servers is off. With it on, the leader removes
// a server the gossip declares failed from the Raft configuration, and
// takes it back after a repair as a non-voter for autopilot's
// stabilization time (10s), so that a fault of the leader in between
// leaves one voter of two and no leader.
//
// A member back from a partition or a pause is declared failed in the
// gossip of the others (and they in its), and serf's reconnector tries a
// failed member only every 30s: until then it refuses sessions (its
// serfHealth check is critical) and cannot forward to a leader it takes
// for failed. So AwaitJoined has it join the others' gossip (PUT
// /v1/agent/join), as the reconnector would, and waits until every
// running member sees every other alive and the leader's catalog has its
// serfHealth passing.
func StartConsul(ctx context.Context, opts Options) (*Cluster, error) {
	if opts.Members == 0 {
		opts.Members = 3
	}
	c := &Cluster{Kind: "consul", port: consulHTTPPort, ask: askConsul, rejoin: rejoinConsul, Timing: consulTiming}
	return startCluster(ctx, opts, c, consulCommand)
}

// consulCommand is member i's Consul server.
func consulCommand(c *Cluster, i int) Command {
	m := c.Member(i)
	ip := m.IP().String()
	args := []string{ConsulBinary, "agent", "-server",
		"-bootstrap-expect=" + strconv.Itoa(len(c.Members())),
		"-node=" + fmt.Sprintf("m%d", i),
		"-data-dir=" + m.DataDir(),
		"-bind=" + ip, "-advertise=" + ip, "-client=" + ip,
		"-http-port=" + strconv.Itoa(consulHTTPPort),
		"-dns-port=-1", "-grpc-port=-1", "-grpc-tls-port=-1",
		"-retry-interval=1s",
		"-disable-host-node-id",
		"-log-level=warn",
		"-hcl=performance { raft_multiplier = 1 }",
		"-hcl=session_ttl_min = " + strconv.Quote(ConsulSessionTTLMin.String()),
		"-hcl=autopilot { cleanup_dead_servers = false }",
	}
	for j, peer := range c.Members() {
		if j != i {
			args = append(args, "-retry-join="+peer.IP().String())
		}
	}
	return Command{Args: args}
}

// consulServerPort is Consul's server RPC port, by which its Raft names
// the leader.
const consulServerPort = 8300

// askConsul reads member i's status from the running members' views of the
// leader (/v1/status/leader, which each server answers from its own Raft
// state): i is joined when it names the server a majority of all members
// name, and leads when that server is itself. Consul gives no term here,
// so a resumed leader that still names itself is neither until the others
// name it too.
//
// /v1/agent/self, which has the Raft state and term, cannot serve: it reads
// the agent's local state under the lock that the anti-entropy sync holds
// across its RPC to the leader, so while the leader is paused a server may
// not answer it until that RPC times out (a minute by default).
func askConsul(ctx context.Context, c *Cluster, i int) (status, error) {
	views := map[int]string{}
	for j, m := range c.Members() {
		if !m.Running() || m.Paused() {
			continue
		}
		v, err := consulLeaderView(ctx, c, j)
		switch {
		case err != nil && j == i:
			return status{}, err
		case err == nil:
			views[j] = v
		}
	}
	if _, ok := views[i]; !ok {
		return status{}, fmt.Errorf("lab: Consul member %d is not running", i)
	}
	self := netip.AddrPortFrom(c.Member(i).IP(), consulServerPort).String()
	return consulStatus(views, i, self, len(c.Members())), nil
}

// consulLeaderView asks member i which server it takes for the leader
// (host:port of its server RPC), "" for none.
func consulLeaderView(ctx context.Context, c *Cluster, i int) (string, error) {
	body, err := c.askHTTP(ctx, i, http.MethodGet, "/v1/status/leader", nil, "Consul member %d's leader")
	if err != nil {
		return "", err
	}
	return parseConsulLeader(body)
}

// parseConsulLeader reads a /v1/status/leader answer: a JSON string.
func parseConsulLeader(body []byte) (string, error) {
	var leader string
	if err := json.Unmarshal(body, &leader); err != nil {
		return "", fmt.Errorf("lab: Consul's status/leader %.200q: %w", body, err)
	}
	return leader, nil
}

// consulStatus is member i's status from views, each member's leader by
// member index (only those that answered), where self is i's own server
// address and n the number of members.
func consulStatus(views map[int]string, i int, self string, n int) status {
	view := views[i]
	if view == "" {
		return status{}
	}
	votes := 0
	for _, v := range views {
		if v == view {
			votes++
		}
	}
	if votes <= n/2 {
		return status{}
	}
	return status{joined: true, leader: view == self}
}

// ConsulClient returns a consul/api client of member i's HTTP API that
// dials through the lab's Dialer. Its transport keeps no idle connection,
// so a test that drops the client leaves no goroutine behind.
func (c *Cluster) ConsulClient(i int) (*api.Client, error) {
	if _, err := c.member(i); err != nil {
		return nil, err
	}
	cfg := api.DefaultNonPooledConfig()
	cfg.Address = c.ClientAddr(i)
	cfg.Scheme = "http"
	cfg.Transport = &http.Transport{DialContext: c.Dialer().DialContext, DisableKeepAlives: true}
	client, err := api.NewClient(cfg)
	if err != nil {
		return nil, fmt.Errorf("lab: %w", err)
	}
	return client, nil
}

// rejoinConsul has member i join the other running members' gossip and
// waits until it serves sessions again (see StartConsul).
func rejoinConsul(ctx context.Context, c *Cluster, i int) error {
	var up []int
	for j, m := range c.Members() {
		if m.Running() && !m.Paused() {
			up = append(up, j)
		}
	}
	for _, j := range up {
		if j != i {
			path := "/v1/agent/join/" + c.Member(j).IP().String()
			if _, err := c.askHTTP(ctx, i, http.MethodPut, path, nil, "Consul member %d's join"); err != nil {
				return err
			}
		}
	}
	return poll(ctx, fmt.Sprintf("Consul member %d in the gossip", i), func(ctx context.Context) error {
		for _, j := range up {
			body, err := c.askHTTP(ctx, j, http.MethodGet, "/v1/agent/members", nil, "Consul member %d's members")
			if err != nil {
				return err
			}
			if err := consulAllAlive(body, c, up); err != nil {
				return fmt.Errorf("lab: Consul member %d: %w", j, err)
			}
		}
		path := fmt.Sprintf("/v1/health/node/m%d?consistent", i)
		body, err := c.askHTTP(ctx, i, http.MethodGet, path, nil, "Consul member %d's health")
		if err != nil {
			return err
		}
		return consulSerfPassing(body)
	})
}

// consulAllAlive reads a /v1/agent/members answer and says which of the
// members up it does not show alive in the gossip.
func consulAllAlive(body []byte, c *Cluster, up []int) error {
	var members []struct {
		Addr   string
		Status int
	}
	if err := json.Unmarshal(body, &members); err != nil {
		return fmt.Errorf("lab: Consul's agent/members %.200q: %w", body, err)
	}
	alive := map[string]bool{}
	for _, m := range members {
		alive[m.Addr] = m.Status == serfAlive
	}
	for _, j := range up {
		if ip := c.Member(j).IP().String(); !alive[ip] {
			return fmt.Errorf("member %d (%s) is not alive in its gossip", j, ip)
		}
	}
	return nil
}

// serfAlive is serf's status of a member it hears from.
const serfAlive = 1

// consulSerfPassing reads a /v1/health/node answer: nil when the node's
// serfHealth check passes.
func consulSerfPassing(body []byte) error {
	var checks []struct{ CheckID, Status string }
	if err := json.Unmarshal(body, &checks); err != nil {
		return fmt.Errorf("lab: Consul's health/node %.200q: %w", body, err)
	}
	for _, ch := range checks {
		if ch.CheckID == "serfHealth" {
			if ch.Status != "passing" {
				return fmt.Errorf("lab: its serfHealth check is %s", ch.Status)
			}
			return nil
		}
	}
	return errors.New("lab: no serfHealth check in the catalog yet")
}
