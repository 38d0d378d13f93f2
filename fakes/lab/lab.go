package lab

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
)

// maxMembers bounds a lab's size: members get addresses .10 to .209.
const maxMembers = 200

// labs numbers the labs of this process; lab k gets subnet 10.242.k.0/24.
var labs atomic.Int32

// Options configures a lab.
type Options struct {
	// Members is the number of members, 1 to 200.
	Members int
	// Dir is where the lab's directory (data, logs) is made; "" is the
	// system's temporary directory. Close removes the lab's directory.
	Dir string
	// Logf, if set, receives a line per node control and process exit.
	Logf func(format string, args ...any)
}

// Lab is a set of members, each a network namespace joined by a veth pair
// to a bridge in the sandbox, all in one private /24. The test process
// sits on the bridge at the subnet's .1 and reaches member i at .10+i.
type Lab struct {
	num     int
	subnet  netip.Prefix
	bridge  string
	dir     string
	logf    func(format string, args ...any)
	dialer  *Dialer
	members []*Member

	mu     sync.Mutex
	made   []string // the namespaces made so far, for Close
	closed bool
}

// New makes a lab of opts.Members members, each in a namespace of its own
// and running nothing yet. It refuses (ErrNotSandboxed, ErrLeak) unless
// this process is in a sandbox that CheckIsolation finds closed. On error
// it removes what it made.
func New(ctx context.Context, opts Options) (*Lab, error) {
	if opts.Members < 1 || opts.Members > maxMembers {
		return nil, fmt.Errorf("lab: %d members: want 1 to %d", opts.Members, maxMembers)
	}
	if err := sandboxed(); err != nil {
		return nil, err
	}
	if err := CheckIsolation(ctx); err != nil {
		return nil, err
	}
	num := int(labs.Add(1))
	if num > 254 {
		return nil, fmt.Errorf("lab: this process made %d labs; subnets run out at 254", num-1)
	}
	dir, err := os.MkdirTemp(opts.Dir, "lockproof-lab-")
	if err != nil {
		return nil, fmt.Errorf("lab: %w", err)
	}
	logf := opts.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	subnet := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 242, byte(num), 0}), 24)
	l := &Lab{num: num, subnet: subnet, bridge: fmt.Sprintf("lpbr%d", num), dir: dir, logf: logf, dialer: NewDialer(subnet)}
	if err := l.build(ctx, opts.Members); err != nil {
		return nil, errors.Join(err, l.Close())
	}
	return l, nil
}

// build makes the bridge and the members' namespaces and links.
func (l *Lab) build(ctx context.Context, n int) error {
	host := l.addr(1)
	err := ipBatch(ctx, "",
		"link add "+l.bridge+" type bridge",
		fmt.Sprintf("addr add %s/24 dev %s", host, l.bridge),
		"link set "+l.bridge+" up")
	if err != nil {
		return err
	}
	for i := range n {
		m := &Member{lab: l, index: i, ns: fmt.Sprintf("%sl%dm%d", nsPrefix(), l.num, i), ip: l.addr(10 + i),
			dir: filepath.Join(l.dir, fmt.Sprintf("m%d", i))}
		if err := os.MkdirAll(m.DataDir(), 0o700); err != nil {
			return fmt.Errorf("lab: %w", err)
		}
		if err := run(ctx, "ip", "netns", "add", m.ns); err != nil {
			return err
		}
		l.mu.Lock()
		l.made = append(l.made, m.ns)
		l.mu.Unlock()
		outside, inside := fmt.Sprintf("lp%dv%d", l.num, i), fmt.Sprintf("lp%dp%d", l.num, i)
		err := ipBatch(ctx, "",
			"link add "+outside+" type veth peer name "+inside,
			"link set "+inside+" netns "+m.ns,
			"link set "+outside+" master "+l.bridge,
			"link set "+outside+" up")
		if err != nil {
			return err
		}
		err = ipBatch(ctx, m.ns,
			"link set lo up",
			"link set "+inside+" name eth0",
			fmt.Sprintf("addr add %s/24 dev eth0", m.ip),
			"link set eth0 up")
		if err != nil {
			return err
		}
		l.members = append(l.members, m)
	}
	return nil
}

// ipBatch runs ip's commands, in namespace ns unless ns is "".
func ipBatch(ctx context.Context, ns string, lines ...string) error {
	args := []string{"-batch", "-"}
	if ns != "" {
		args = append([]string{"-n", ns}, args...)
	}
	_, err := outputIn(ctx, []byte(strings.Join(lines, "\n")+"\n"), "ip", args...)
	return err
}

// addr is host number h of the lab's subnet.
func (l *Lab) addr(h int) netip.Addr {
	a := l.subnet.Addr().As4()
	a[3] = byte(h)
	return netip.AddrFrom4(a)
}

// Subnet is the lab's private /24.
func (l *Lab) Subnet() netip.Prefix { return l.subnet }

// Dialer is the lab's Dialer: its subnet and loopback only.
func (l *Lab) Dialer() *Dialer { return l.dialer }

// Members returns the lab's members, in index order.
func (l *Lab) Members() []*Member { return append([]*Member(nil), l.members...) }

// Member returns member i, or nil if there is none.
func (l *Lab) Member(i int) *Member {
	if i < 0 || i >= len(l.members) {
		return nil
	}
	return l.members[i]
}

// member returns member i or an error naming the bad index.
func (l *Lab) member(i int) (*Member, error) {
	if m := l.Member(i); m != nil {
		return m, nil
	}
	return nil, fmt.Errorf("lab: no member %d (the lab has %d)", i, len(l.members))
}

// Close kills every member's process (SIGKILL, by its id) and waits for
// it, deletes the members' namespaces (and with them their links and
// nftables rules) and the bridge, and removes the lab's directory. It is
// safe to call more than once; it returns the errors it met.
func (l *Lab) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	made := l.made
	l.mu.Unlock()
	var errs []error
	for _, m := range l.members {
		errs = append(errs, m.Kill())
	}
	ctx := context.Background()
	for i := range made {
		// A socket of a killed process (a TCP stream that still retransmits)
		// keeps its namespace, and so its veth, alive past the namespace's
		// deletion: deleting the veth first cuts it off all the same.
		if link := fmt.Sprintf("lp%dv%d", l.num, i); run(ctx, "ip", "link", "show", link) == nil {
			errs = append(errs, run(ctx, "ip", "link", "del", link))
		}
	}
	for _, ns := range made {
		errs = append(errs, run(ctx, "ip", "netns", "del", ns))
	}
	if err := run(ctx, "ip", "link", "show", l.bridge); err == nil {
		errs = append(errs, run(ctx, "ip", "link", "del", l.bridge))
	}
	errs = append(errs, os.RemoveAll(l.dir))
	return errors.Join(errs...)
}
