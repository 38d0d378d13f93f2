package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// EtcdBinary is the etcd server the lab runs (Debian's is etcd 3.4).
var EtcdBinary = "/usr/bin/etcd"

// etcdClientPort and etcdPeerPort are etcd's usual ports, on every member's
// own address.
const (
	etcdClientPort = 2379
	etcdPeerPort   = 2380
)

// EtcdUnavailable says why StartEtcd cannot run here, or "".
func EtcdUnavailable() string {
	if reason := Unavailable(); reason != "" {
		return reason
	}
	if _, err := exec.LookPath(EtcdBinary); err != nil {
		return fmt.Sprintf("no etcd server: %v", err)
	}
	return ""
}

// StartEtcd starts an etcd cluster of opts.Members members (3 if 0), one
// per namespace, with etcd's default timing (100 ms heartbeats, 1 s
// elections), and returns once a member leads. Close the cluster to end it.
func StartEtcd(ctx context.Context, opts Options) (*Cluster, error) {
	if opts.Members == 0 {
		opts.Members = 3
	}
	c := &Cluster{Kind: "etcd", port: etcdClientPort, ask: askEtcd,
		Timing: Timing{Tick: 100 * time.Millisecond, Election: time.Second}}
	return startCluster(ctx, opts, c, etcdCommand)
}

// etcdCommand is member i's etcd.
func etcdCommand(c *Cluster, i int) Command {
	var initial []string
	for j, m := range c.Members() {
		initial = append(initial, fmt.Sprintf("m%d=http://%s:%d", j, m.IP(), etcdPeerPort))
	}
	m := c.Member(i)
	client := fmt.Sprintf("http://%s:%d", m.IP(), etcdClientPort)
	peer := fmt.Sprintf("http://%s:%d", m.IP(), etcdPeerPort)
	return Command{Args: []string{EtcdBinary,
		"--name", fmt.Sprintf("m%d", i),
		"--data-dir", m.DataDir(),
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", strings.Join(initial, ","),
		"--initial-cluster-state", "new",
		"--initial-cluster-token", fmt.Sprintf("lockproof-lab-%d", c.num),
		"--logger", "zap", "--log-level", "warn",
	}}
}

// etcdStatus is the part of etcd's /v3/maintenance/status answer the lab
// reads; the gateway writes 64-bit numbers as strings.
type etcdStatus struct {
	Header struct {
		MemberID string `json:"member_id"`
	} `json:"header"`
	Leader   string `json:"leader"`
	RaftTerm string `json:"raftTerm"`
}

// askEtcd asks member i for its status through etcd's JSON gateway.
func askEtcd(ctx context.Context, c *Cluster, i int) (status, error) {
	body, err := c.askHTTP(ctx, i, http.MethodPost, "/v3/maintenance/status", []byte("{}"), "etcd member %d's status")
	if err != nil {
		return status{}, err
	}
	var s etcdStatus
	if err := json.Unmarshal(body, &s); err != nil {
		return status{}, fmt.Errorf("lab: etcd member %d's status %q: %w", i, body, err)
	}
	term, _ := strconv.ParseUint(s.RaftTerm, 10, 64)
	known := s.Leader != "" && s.Leader != "0"
	return status{leader: known && s.Leader == s.Header.MemberID, joined: known, term: term}, nil
}

// askHTTP sends one request to member i's client address through the
// lab's Dialer, within askTimeout, and returns the body of a 200 answer;
// what names the answer in errors, with %d for i.
func (c *Cluster) askHTTP(ctx context.Context, i int, method, path string, body []byte, what string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, askTimeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+c.ClientAddr(i)+path, rd)
	if err != nil {
		return nil, fmt.Errorf("lab: %w", err)
	}
	transport := &http.Transport{DialContext: c.Dialer().DialContext, DisableKeepAlives: true}
	defer transport.CloseIdleConnections()
	resp, err := (&http.Client{Transport: transport}).Do(req)
	if err != nil {
		return nil, fmt.Errorf("lab: "+what+": %w", i, err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("lab: "+what+": %s %.200q: %v", i, resp.Status, got, err)
	}
	return got, nil
}
