package lab

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"strconv"

	"github.com/hashicorp/consul/api"
)

// ConsulBinary is the Consul agent the lab runs: the one tools/consul
// builds, found where $LOCKPROOF_CONSUL_BIN says (as for fakes/consulfake)
// or else at /tmp/lockproof-consul (`cd tools/consul && go build -o
// /tmp/lockproof-consul .`).
var ConsulBinary = cmp.Or(os.Getenv("LOCKPROOF_CONSUL_BIN"), "/tmp/lockproof-consul")

// consulHTTPPort is Consul's HTTP API port on every member's own address.
const consulHTTPPort = 8500

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
// timing (raft_multiplier 1) and no DNS or gRPC ports, and returns once a
// server leads. Close the cluster to end it. It offers no clock skew, for
// the reason the package comment gives for etcd: Consul is a Go program.
func StartConsul(ctx context.Context, opts Options) (*Cluster, error) {
	if opts.Members == 0 {
		opts.Members = 3
	}
	c := &Cluster{Kind: "consul", port: consulHTTPPort, ask: askConsul}
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
