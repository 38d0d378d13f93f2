package api

// lockproof's stand-in for the helpers of consul/api's api_test.go that
// the KV, session, lock, semaphore and status tests call: the same names
// (makeClient, makeClientWithoutConnect), but the server is a miniconsul,
// a fresh one per call, not a consul agent. tools/peersuites copies this
// file beside those tests at run time; api_test.go is not copied.
//
// When LOCKPROOF_PEERSUITE_ADDR names a real agent (tools/peersuites
// -consul), makeClient gives a client of that agent instead, after
// deleting every key and session on it (so that it looks as a fresh
// agent does to these tests), and Stop leaves it running.

import (
	"crypto/rand"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/lockproof/lockproof/fakes/miniconsul"
)

// testServer is what the tests use of the sdk's testutil.TestServer.
type testServer struct {
	Config   testServerConfig
	HTTPAddr string
	fake     *miniconsul.Server
	client   *Client
}

// testServerConfig is what the tests read of the agent's configuration.
type testServerConfig struct {
	NodeName   string
	Datacenter string
}

// realAddr is the real agent the tests run against; "": miniconsul.
var realAddr = os.Getenv("LOCKPROOF_PEERSUITE_ADDR")

// makeClient starts a miniconsul, closed when the test ends, and a client
// of it.
func makeClient(t *testing.T) (*Client, *testServer) {
	if testing.Short() {
		t.Skip("too slow for testing.Short")
	}
	if realAddr != "" {
		return realAgent(t)
	}
	fake, err := miniconsul.Start()
	if err != nil {
		t.Fatalf("starting miniconsul: %v", err)
	}
	t.Cleanup(func() { fake.Close() })
	conf := DefaultConfig()
	conf.Address = fake.Addr()
	client, err := NewClient(conf)
	if err != nil {
		t.Fatalf("err: %v", err)
	}
	s := &testServer{HTTPAddr: fake.Addr(), fake: fake, client: client,
		Config: testServerConfig{NodeName: fake.NodeName(), Datacenter: fake.Datacenter()}}
	return client, s
}

// makeClientWithoutConnect is makeClient: miniconsul has no Connect CA to
// leave out.
func makeClientWithoutConnect(t *testing.T) (*Client, *testServer) {
	return makeClient(t)
}

// realAgent empties the real agent's KV store and sessions and returns a
// client of it.
func realAgent(t *testing.T) (*Client, *testServer) {
	conf := DefaultConfig()
	conf.Address = realAddr
	client, err := NewClient(conf)
	if err != nil {
		t.Fatalf("err: %v", err)
	}
	self, err := client.Agent().Self()
	if err != nil {
		t.Fatalf("the agent at %s: %v", realAddr, err)
	}
	node, _ := self["Config"]["NodeName"].(string)
	dc, _ := self["Config"]["Datacenter"].(string)
	if _, err := client.KV().DeleteTree("", nil); err != nil {
		t.Fatalf("emptying the agent's KV store: %v", err)
	}
	sessions, _, err := client.Session().List(nil)
	if err != nil {
		t.Fatalf("listing the agent's sessions: %v", err)
	}
	for _, se := range sessions {
		if _, err := client.Session().Destroy(se.ID, nil); err != nil {
			t.Fatalf("destroying session %s: %v", se.ID, err)
		}
	}
	return client, &testServer{HTTPAddr: realAddr, client: client,
		Config: testServerConfig{NodeName: node, Datacenter: dc}}
}

// Stop closes the fake; a real agent keeps running.
func (s *testServer) Stop() error {
	if s.fake == nil {
		return nil
	}
	return s.fake.Close()
}

// WaitForSerfCheck waits, as the sdk's does, until the agent's node check
// can back a session: on a real agent until its serfHealth check passes
// (at most 10 s); on miniconsul, whose serfHealth check passes from the
// start, until the server answers as its own leader.
func (s *testServer) WaitForSerfCheck(t testing.TB) {
	t.Helper()
	if s.fake == nil {
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			checks, _, err := s.client.Health().Node(s.Config.NodeName, nil)
			if err == nil && len(checks) > 0 && checks.AggregatedStatus() == HealthPassing {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the agent's node checks do not pass: %v, %v", checks, err)
			}
		}
	}
	leader, err := s.client.Status().Leader()
	if err != nil || leader == "" {
		t.Fatalf("miniconsul has no leader: %q, %v", leader, err)
	}
}

// testKey returns a random key in the form of a UUID, as the tests expect
// of it: one no other test writes.
func testKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read does not fail
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
