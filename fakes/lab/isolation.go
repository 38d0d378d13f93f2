package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"syscall"
)

// Supernet holds every lab's subnet: lab number k gets 10.242.k.0/24. It is
// routable only inside a sandbox, which has no route anywhere else.
var Supernet = netip.MustParsePrefix("10.242.0.0/16")

// ErrLeak is wrapped by CheckIsolation's error when the sandbox has a way
// out: a link to a namespace not the lab's, a default route, a route
// outside the lab's subnets.
var ErrLeak = errors.New("lab: the sandbox has a way out")

// inLab holds the prefixes a sandbox may route: loopback, link-local and
// multicast (kernel routes on every link, which route nothing out of it),
// and the labs' supernet.
var inLab = []netip.Prefix{
	Supernet,
	netip.MustParsePrefix("127.0.0.0/8"),
	netip.MustParsePrefix("::1/128"),
	netip.MustParsePrefix("fe80::/10"),
	netip.MustParsePrefix("ff00::/8"),
}

// CheckIsolation proves, without sending a packet, that this process's
// network namespace cannot reach anything beyond the lab: it is a sandbox
// (InSandbox), each of its links is a loopback, a bridge or a veth whose
// peer is in a lab namespace (none of them process 1's), its routing tables
// have no default route and no route outside Supernet and loopback, and
// route look-ups for outside addresses answer "unreachable". Its error
// wraps ErrLeak or says why it could not look.
func CheckIsolation(ctx context.Context) error {
	if err := sandboxed(); err != nil {
		return fmt.Errorf("%w: %w", ErrLeak, err)
	}
	nsids, err := labNsids(ctx)
	if err != nil {
		return err
	}
	var links []ipLink
	if err := ipJSON(ctx, &links, "-d", "link", "show"); err != nil {
		return err
	}
	if err := checkLinks(links, nsids); err != nil {
		return err
	}
	for _, family := range []string{"-4", "-6"} {
		var routes []ipRoute
		if err := ipJSON(ctx, &routes, family, "route", "show", "table", "all"); err != nil {
			return err
		}
		if err := checkRoutes(routes); err != nil {
			return err
		}
	}
	for _, outside := range []string{"8.8.8.8", "10.1.2.3", "192.168.1.1", "2001:4860:4860::8888"} {
		if err := checkUnreachable(ctx, outside); err != nil {
			return err
		}
	}
	return nil
}

// ipLink is the part of `ip -j -d link show` the check reads.
type ipLink struct {
	Name     string `json:"ifname"`
	LinkType string `json:"link_type"`
	Nsid     *int   `json:"link_netnsid"`
	Info     *struct {
		Kind string `json:"info_kind"`
	} `json:"linkinfo"`
}

// ipRoute is the part of `ip -j route show` the check reads.
type ipRoute struct {
	Type  string `json:"type"`
	Dst   string `json:"dst"`
	Dev   string `json:"dev"`
	Table string `json:"table"`
}

// checkLinks accepts loopbacks, bridges and veths, and a link into another
// namespace only if that namespace's id is in labs.
func checkLinks(links []ipLink, labs map[int]string) error {
	for _, l := range links {
		kind := ""
		if l.Info != nil {
			kind = l.Info.Kind
		}
		switch {
		case l.LinkType == "loopback" && kind == "":
		case kind == "bridge" || kind == "veth":
		default:
			return fmt.Errorf("%w: link %s (type %q, kind %q) is neither loopback, bridge nor veth", ErrLeak, l.Name, l.LinkType, kind)
		}
		if l.Nsid == nil {
			continue
		}
		if _, ok := labs[*l.Nsid]; !ok {
			return fmt.Errorf("%w: link %s leads to namespace id %d, which is no lab namespace", ErrLeak, l.Name, *l.Nsid)
		}
	}
	return nil
}

// checkRoutes refuses a default route and any route to a prefix outside
// inLab.
func checkRoutes(routes []ipRoute) error {
	for _, r := range routes {
		if r.Dst == "default" {
			return fmt.Errorf("%w: default route (type %q, dev %s, table %s)", ErrLeak, r.Type, r.Dev, r.Table)
		}
		p, err := parseDst(r.Dst)
		if err != nil {
			return fmt.Errorf("%w: route to %q: %w", ErrLeak, r.Dst, err)
		}
		if !within(p, inLab) {
			return fmt.Errorf("%w: route to %s (dev %s, table %s) is outside the lab", ErrLeak, p, r.Dev, r.Table)
		}
	}
	return nil
}

// parseDst parses a route's destination, a prefix or a bare address.
func parseDst(dst string) (netip.Prefix, error) {
	if strings.Contains(dst, "/") {
		return netip.ParsePrefix(dst)
	}
	a, err := netip.ParseAddr(dst)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// within reports whether p lies wholly inside one of outer.
func within(p netip.Prefix, outer []netip.Prefix) bool {
	for _, o := range outer {
		if o.Bits() <= p.Bits() && o.Contains(p.Addr()) {
			return true
		}
	}
	return false
}

// checkUnreachable asks the kernel for its route to addr (`ip route get`
// looks the route up and sends nothing) and wants "unreachable".
func checkUnreachable(ctx context.Context, addr string) error {
	out, err := output(ctx, "ip", "route", "get", addr)
	if err == nil {
		return fmt.Errorf("%w: the kernel has a route to %s: %s", ErrLeak, addr, strings.TrimSpace(string(out)))
	}
	if !strings.Contains(err.Error(), "unreachable") {
		return fmt.Errorf("lab: looking up the route to %s: %w", addr, err)
	}
	return nil
}

// labNsids maps the namespace ids, as this namespace knows them, of the
// named namespaces this process's labs created to their names; it checks
// that none of them is process 1's namespace or the one SandboxMain left.
func labNsids(ctx context.Context) (map[int]string, error) {
	var named []struct {
		Name string `json:"name"`
		ID   *int   `json:"id"`
	}
	out, err := output(ctx, "ip", "-j", "netns", "list")
	if err != nil {
		return nil, err
	}
	if len(strings.TrimSpace(string(out))) > 0 {
		if err := json.Unmarshal(out, &named); err != nil {
			return nil, fmt.Errorf("lab: parsing `ip -j netns list`: %w", err)
		}
	}
	var root syscall.Stat_t
	rootKnown := syscall.Stat("/proc/1/ns/net", &root) == nil
	ids := map[int]string{}
	for _, n := range named {
		if n.ID == nil || !strings.HasPrefix(n.Name, nsPrefix()) {
			continue
		}
		var st syscall.Stat_t
		if err := syscall.Stat(netnsPath(n.Name), &st); err != nil {
			return nil, fmt.Errorf("lab: %w", err)
		}
		if rootKnown && st.Ino == root.Ino && st.Dev == root.Dev {
			return nil, fmt.Errorf("%w: lab namespace %s is process 1's namespace", ErrLeak, n.Name)
		}
		if fmt.Sprintf("net:[%d]", st.Ino) == os.Getenv(envSandbox) {
			return nil, fmt.Errorf("%w: lab namespace %s is the one SandboxMain left", ErrLeak, n.Name)
		}
		ids[*n.ID] = n.Name
	}
	return ids, nil
}

// ipJSON runs ip -j with args and decodes its output into v.
func ipJSON(ctx context.Context, v any, args ...string) error {
	out, err := output(ctx, "ip", append([]string{"-j"}, args...)...)
	if err != nil {
		return err
	}
	if len(strings.TrimSpace(string(out))) == 0 {
		return nil
	}
	if err := json.Unmarshal(out, v); err != nil {
		return fmt.Errorf("lab: parsing `ip -j %s`: %w", strings.Join(args, " "), err)
	}
	return nil
}

// nsPrefix begins the name of every namespace this process's labs create.
func nsPrefix() string { return fmt.Sprintf("lp%d", os.Getpid()) }

// netnsPath is where `ip netns add` mounts a named namespace.
func netnsPath(name string) string { return "/run/netns/" + name }
