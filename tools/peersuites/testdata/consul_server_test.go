package api

// lockproof's stand-in for the helpers of consul/api's api_test.go that
// the KV, session, lock, semaphore and status tests call: the same names
// (makeClient, makeClientWithoutConnect), but the server is a miniconsul,
// a fresh one per call, not a consul agent. tools/peersuites copies this
// file beside those tests at run time; api_test.go is not copied.

import (
	"crypto/rand"
	"fmt"
	"testing"

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

// makeClient starts a miniconsul, closed when the test ends, and a client
// of it.
func makeClient(t *testing.T) (*Client, *testServer) {
	if testing.Short() {
		t.Skip("too slow for testing.Short")
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

// Stop closes the fake.
func (s *testServer) Stop() error { return s.fake.Close() }

// WaitForSerfCheck waits, as the sdk's does, until the agent's node check
// can back a session: on miniconsul, whose serfHealth check passes from
// the start, until the server answers as its own leader.
func (s *testServer) WaitForSerfCheck(t testing.TB) {
	t.Helper()
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
