package lab

import (
	"context"
	"fmt"
	"testing"

	"github.com/hashicorp/consul/api"
)

func TestParseConsulSelf(t *testing.T) {
	good := map[string]status{
		`{"Stats":{"raft":{"state":"Leader","term":"4"}}}`:    {leader: true, joined: true, term: 4},
		`{"Stats":{"raft":{"state":"Follower","term":"2"}}}`:  {joined: true, term: 2},
		`{"Stats":{"raft":{"state":"Candidate","term":"7"}}}`: {term: 7},
	}
	for body, want := range good {
		if got, err := parseConsulSelf([]byte(body)); err != nil || got != want {
			t.Errorf("parseConsulSelf(%s) = %+v, %v; want %+v", body, got, err, want)
		}
	}
	for _, body := range []string{``, `{}`, `{"Stats":{"raft":{"state":"Leader","term":"x"}}}`,
		`{"Stats":{"raft":{"state":"Observer","term":"1"}}}`} {
		if got, err := parseConsulSelf([]byte(body)); err == nil {
			t.Errorf("parseConsulSelf(%s) = %+v, want an error", body, got)
		}
	}
}

// TestConsulCluster starts 3 Consul servers, writes keys through
// consul/api (dialing through the lab's Dialer), and fails the leader
// three ways: a new leader is elected, and the old one rejoins after the
// repair.
func TestConsulCluster(t *testing.T) {
	needLab(t)
	if reason := ConsulUnavailable(); reason != "" {
		t.Skip(reason)
	}
	c := newCluster(t, StartConsul)
	t.Logf("consul: %d MiB resident", residentMiB(t, c.Lab))
	n := 0
	exerciseFailovers(t, c, func(ctx context.Context) error {
		n++
		return consulPut(ctx, c, fmt.Sprintf("lab/%d", n))
	})
	leader, err := c.Leader(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	client, err := c.ConsulClient((leader + 1) % 3)
	if err != nil {
		t.Fatal(err)
	}
	keys, _, err := client.KV().Keys("lab/", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != n {
		t.Errorf("read back %d keys from a follower, wrote %d: %v", len(keys), n, keys)
	}
	wantNothingLeft(t, c.Lab)
}

// consulPut writes key through the current leader's HTTP API.
func consulPut(ctx context.Context, c *Cluster, key string) error {
	leader, err := c.Leader(ctx)
	if err != nil {
		return err
	}
	client, err := c.ConsulClient(leader)
	if err != nil {
		return err
	}
	_, err = client.KV().Put(&api.KVPair{Key: key, Value: []byte(key)}, (&api.WriteOptions{}).WithContext(ctx))
	return err
}
