package consulfake

import (
	"net"
	"testing"
)

// An agent whose first ports include one another process holds fails with
// "address already in use"; startAgent tries again on new ports and starts.
// It needs a consul binary (EnvBin or PATH), as CI's step 8 has.
func TestAgentStartsAgainOnATakenPort(t *testing.T) {
	bin := Binary()
	if bin == "" {
		t.Skip("no consul binary: set " + EnvBin)
	}
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	tries := 0
	agentPorts = func(n int) ([]int, error) {
		tries++
		ports, err := kernelPorts(n)
		if err == nil && tries == 1 {
			ports[2] = taken.Addr().(*net.TCPAddr).Port // HTTPS, as in the failure CI saw
		}
		return ports, err
	}
	defer func() { agentPorts = kernelPorts }()
	a, err := startAgent(bin, 0)
	if err != nil {
		t.Fatalf("after %d tries: %v", tries, err)
	}
	defer func() {
		if err := a.stop(); err != nil {
			t.Error(err)
		}
	}()
	if tries != 2 {
		t.Errorf("the agent started after %d tries, want 2: the first had a taken port", tries)
	}
}
