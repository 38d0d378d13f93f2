package lab

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
)

func intp(i int) *int { return &i }

func TestCheckLinks(t *testing.T) {
	veth := func(name string, nsid *int) ipLink {
		l := ipLink{Name: name, LinkType: "ether", Nsid: nsid}
		l.Info = &struct {
			Kind string `json:"info_kind"`
		}{"veth"}
		return l
	}
	lo := ipLink{Name: "lo", LinkType: "loopback"}
	labs := map[int]string{0: "lp1l1m0", 1: "lp1l1m1"}
	good := []ipLink{lo, veth("v0", intp(0)), veth("v1", intp(1)), veth("pair", nil)}
	if err := checkLinks(good, labs); err != nil {
		t.Fatalf("lab links refused: %v", err)
	}
	bad := map[string][]ipLink{
		"veth into a namespace not the lab's": {lo, veth("v9", intp(7))},
		"physical link":                       {lo, {Name: "eth0", LinkType: "ether"}},
		"ipvlan": {{Name: "ipv", LinkType: "ether", Info: &struct {
			Kind string `json:"info_kind"`
		}{"ipvlan"}}},
	}
	for name, links := range bad {
		if err := checkLinks(links, labs); !errors.Is(err, ErrLeak) {
			t.Errorf("%s: got %v, want ErrLeak", name, err)
		}
	}
}

func TestCheckRoutes(t *testing.T) {
	good := []ipRoute{
		{Type: "local", Dst: "127.0.0.1", Dev: "lo", Table: "local"},
		{Type: "local", Dst: "127.0.0.0/8", Dev: "lo", Table: "local"},
		{Dst: "10.242.3.0/24", Dev: "lpbr3"},
		{Type: "broadcast", Dst: "10.242.3.255", Dev: "lpbr3", Table: "local"},
		{Dst: "fe80::/64", Dev: "lpbr3"},
		{Type: "multicast", Dst: "ff00::/8", Dev: "lpbr3", Table: "local"},
		{Type: "local", Dst: "::1", Dev: "lo", Table: "local"},
	}
	if err := checkRoutes(good); err != nil {
		t.Fatalf("lab routes refused: %v", err)
	}
	bad := map[string]ipRoute{
		"default":                   {Dst: "default", Dev: "eth0"},
		"blackhole default":         {Type: "blackhole", Dst: "default"},
		"private /8 beyond the lab": {Dst: "10.0.0.0/8", Dev: "lpbr3"},
		"wider than the lab":        {Dst: "10.242.0.0/15", Dev: "lpbr3"},
		"public v6":                 {Dst: "2000::/3", Dev: "lpbr3"},
		"garbage":                   {Dst: "nowhere"},
	}
	for name, r := range bad {
		if err := checkRoutes(append(good[:2:2], r)); !errors.Is(err, ErrLeak) {
			t.Errorf("%s: got %v, want ErrLeak", name, err)
		}
	}
}

// TestDialerRefusesOutside shows that the Dialer refuses every address
// outside its lab and loopback before any socket is made: its dial function
// is replaced by one that fails the test.
func TestDialerRefusesOutside(t *testing.T) {
	d := NewDialer(netip.MustParsePrefix("10.242.7.0/24"))
	var reached []string
	d.dial = func(_ context.Context, network, addr string) (net.Conn, error) {
		reached = append(reached, addr)
		return nil, errors.New("test: not dialing")
	}
	outside := []struct{ network, addr string }{
		{"tcp", "8.8.8.8:53"},
		{"tcp", "10.1.2.3:80"},
		{"tcp", "10.242.8.10:2379"},
		{"tcp", "192.168.1.1:80"},
		{"tcp", "example.com:80"},
		{"tcp", "localhost:80"},
		{"tcp", "[2001:4860:4860::8888]:53"},
		{"tcp", "[::ffff:8.8.8.8]:53"},
		{"tcp", "[fe80::1%eth0]:80"},
		{"tcp", "10.242.7.10"},
		{"udp", "10.242.7.10:53"},
		{"unix", "/tmp/socket"},
	}
	for _, o := range outside {
		if _, err := d.DialContext(context.Background(), o.network, o.addr); !errors.Is(err, ErrOutsideLab) {
			t.Errorf("DialContext(%s, %s) = %v, want ErrOutsideLab", o.network, o.addr, err)
		}
		if o.network != "tcp" {
			continue
		}
		if _, err := d.DialTCP(context.Background(), o.addr); !errors.Is(err, ErrOutsideLab) {
			t.Errorf("DialTCP(%s) = %v, want ErrOutsideLab", o.addr, err)
		}
		if _, err := d.DialTimeout("tcp", o.addr, 0); !errors.Is(err, ErrOutsideLab) {
			t.Errorf("DialTimeout(%s) = %v, want ErrOutsideLab", o.addr, err)
		}
	}
	if len(reached) > 0 {
		t.Fatalf("refused addresses reached the dial function: %v", reached)
	}
	inside := []string{"10.242.7.10:2379", "10.242.7.1:1", "127.0.0.1:2181", "[::1]:1", "[::ffff:127.0.0.1]:1"}
	for _, addr := range inside {
		if _, err := d.DialContext(context.Background(), "tcp", addr); errors.Is(err, ErrOutsideLab) {
			t.Errorf("DialContext(%s) refused: %v", addr, err)
		}
	}
	if strings.Join(reached, " ") != strings.Join(inside, " ") {
		t.Fatalf("dial function reached for %v, want %v", reached, inside)
	}
}

// TestCheckIsolationOutsideTheSandbox is CheckIsolation's known-bad case:
// outside a sandbox it reports a leak, and the namespace the tests start in
// (which reaches the network) has routes the route check refuses. It only
// reads.
func TestCheckIsolationOutsideTheSandbox(t *testing.T) {
	if InSandbox() {
		t.Skip("in a sandbox: TestSandboxIsolated checks it")
	}
	if err := CheckIsolation(context.Background()); !errors.Is(err, ErrLeak) {
		t.Fatalf("CheckIsolation outside a sandbox = %v, want ErrLeak", err)
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("no ip command")
	}
	var routes []ipRoute
	if err := ipJSON(context.Background(), &routes, "-4", "route", "show", "table", "all"); err != nil {
		t.Skipf("cannot read the routes: %v", err)
	}
	if len(routes) == 0 {
		t.Skip("this namespace has no routes")
	}
	if err := checkRoutes(routes); !errors.Is(err, ErrLeak) {
		t.Skipf("this namespace has no route out (%v): nothing to refuse", err)
	}
}

// TestSandboxIsolated proves from inside the sandbox, without dialing, that
// it has no way out.
func TestSandboxIsolated(t *testing.T) {
	needLab(t)
	ctx := context.Background()
	if err := CheckIsolation(ctx); err != nil {
		t.Fatal(err)
	}
	for _, addr := range []string{"8.8.8.8", "10.1.2.3", "2001:4860:4860::8888"} {
		out, err := output(ctx, "ip", "route", "get", addr)
		if err == nil || !strings.Contains(err.Error(), "unreachable") {
			t.Errorf("ip route get %s = %q, %v; want unreachable", addr, out, err)
		}
	}
	d := NewDialer(netip.MustParsePrefix("10.242.250.0/24"))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := d.DialContext(ctx, "tcp", ln.Addr().String())
	if err != nil {
		t.Fatalf("dialing the sandbox's own loopback: %v", err)
	}
	c.Close()
}
