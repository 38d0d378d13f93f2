package lab

import (
	"context"
	"fmt"
	"testing"

	"github.com/hashicorp/consul/api"
)

func TestParseConsulLeader(t *testing.T) {
	for body, want := range map[string]string{`"10.242.1.12:8300"`: "10.242.1.12:8300", `""`: ""} {
		if got, err := parseConsulLeader([]byte(body)); err != nil || got != want {
			t.Errorf("parseConsulLeader(%s) = %q, %v; want %q", body, got, err, want)
		}
	}
	for _, body := range []string{``, `{}`, `5`, `"a`} {
		if got, err := parseConsulLeader([]byte(body)); err == nil {
			t.Errorf("parseConsulLeader(%s) = %q, want an error", body, got)
		}
	}
}

func TestConsulStatus(t *testing.T) {
	const a, b = "10.0.0.1:8300", "10.0.0.2:8300"
	for _, tc := range []struct {
		name  string
		views map[int]string
		i     int
		self  string
		want  status
	}{
		{"a leader all name", map[int]string{0: a, 1: a, 2: a}, 0, a, status{leader: true, joined: true}},
		{"a follower", map[int]string{0: a, 1: a, 2: a}, 1, b, status{joined: true}},
		{"a leader with one member silent", map[int]string{0: a, 1: a}, 0, a, status{leader: true, joined: true}},
		{"a resumed leader still naming itself", map[int]string{0: a, 1: b, 2: b}, 0, a, status{}},
		{"the new leader beside it", map[int]string{0: a, 1: b, 2: b}, 1, b, status{leader: true, joined: true}},
		{"a candidate", map[int]string{0: "", 1: b, 2: b}, 0, a, status{}},
		{"no majority", map[int]string{0: a, 1: b}, 0, a, status{}},
	} {
		if got := consulStatus(tc.views, tc.i, tc.self, 3); got != tc.want {
			t.Errorf("%s: consulStatus(%v, %d) = %+v, want %+v", tc.name, tc.views, tc.i, got, tc.want)
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
