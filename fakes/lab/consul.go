package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"

	"github.com/hashicorp/consul/api"
)

// ConsulBinary is the Consul agent the lab runs: the one tools/consul
// builds (`cd tools/consul && go build -o /tmp/lockproof-consul .`).
var ConsulBinary = "/tmp/lockproof-consul"

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

// consulSelf is the part of Consul's /v1/agent/self answer the lab reads:
// the Raft state and term, which Consul writes as strings.
type consulSelf struct {
	Stats struct {
		Raft struct {
			State string `json:"state"`
			Term  string `json:"term"`
		} `json:"raft"`
	} `json:"Stats"`
}

// askConsul asks member i for its Raft state through its HTTP API.
func askConsul(ctx context.Context, c *Cluster, i int) (status, error) {
	body, err := c.askHTTP(ctx, i, http.MethodGet, "/v1/agent/self", nil, "Consul member %d's state")
	if err != nil {
		return status{}, err
	}
	return parseConsulSelf(body)
}

// parseConsulSelf reads an /v1/agent/self answer. A server that is a
// candidate, or has no Raft state yet, is not joined; that is no error.
func parseConsulSelf(body []byte) (status, error) {
	var self consulSelf
	if err := json.Unmarshal(body, &self); err != nil {
		return status{}, fmt.Errorf("lab: Consul's agent/self %.200q: %w", body, err)
	}
	raft := self.Stats.Raft
	if raft.State == "" {
		return status{}, fmt.Errorf("lab: Consul's agent/self has no Raft state (not a server?): %.200q", body)
	}
	term, err := strconv.ParseUint(raft.Term, 10, 64)
	if err != nil {
		return status{}, fmt.Errorf("lab: Consul's Raft term %q: %w", raft.Term, err)
	}
	switch raft.State {
	case "Leader":
		return status{leader: true, joined: true, term: term}, nil
	case "Follower":
		return status{joined: true, term: term}, nil
	case "Candidate", "Shutdown":
		return status{term: term}, nil
	}
	return status{}, fmt.Errorf("lab: Consul's Raft state %q", raft.State)
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
