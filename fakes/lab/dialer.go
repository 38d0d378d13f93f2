package lab

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"time"
)

// ErrOutsideLab is wrapped by a Dialer's error for an address it refuses:
// not an IP literal, or outside loopback and the lab's subnet.
var ErrOutsideLab = errors.New("lab: address outside the lab")

// loopback are the prefixes every Dialer allows besides its lab's subnet.
var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}

// Dialer is the one way test code reaches a lab's members: it dials TCP to
// an IP literal in its subnet or on loopback and refuses anything else
// before a socket exists (no name is resolved), and checks the address
// again as the socket connects.
type Dialer struct {
	allow []netip.Prefix
	dial  func(ctx context.Context, network, addr string) (net.Conn, error)
}

// NewDialer returns a Dialer for the members of subnet (and loopback).
func NewDialer(subnet netip.Prefix) *Dialer {
	d := &Dialer{allow: append([]netip.Prefix{subnet.Masked()}, loopback...)}
	nd := &net.Dialer{Control: func(network, address string, _ syscall.RawConn) error {
		return d.Check(network, address)
	}}
	d.dial = nd.DialContext
	return d
}

// Check returns nil if the Dialer would dial addr over network, and an
// error wrapping ErrOutsideLab if not.
func (d *Dialer) Check(network, addr string) error {
	switch network {
	case "tcp", "tcp4", "tcp6":
	default:
		return fmt.Errorf("%w: network %q (only tcp)", ErrOutsideLab, network)
	}
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return fmt.Errorf("%w: %q is not an IP literal and port: %w", ErrOutsideLab, addr, err)
	}
	ip := ap.Addr().Unmap()
	if ip.Zone() != "" {
		return fmt.Errorf("%w: %s has a zone", ErrOutsideLab, addr)
	}
	for _, p := range d.allow {
		if p.Contains(ip) {
			return nil
		}
	}
	return fmt.Errorf("%w: %s is outside %v", ErrOutsideLab, addr, d.allow)
}

// DialContext dials addr over network if Check allows it; its signature is
// go-redis's Options.Dialer and net/http's Transport.DialContext.
func (d *Dialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	if err := d.Check(network, addr); err != nil {
		return nil, err
	}
	return d.dial(ctx, network, addr)
}

// DialTCP dials addr over TCP; its signature is gRPC's WithContextDialer,
// for etcd's clientv3 (Config.DialOptions).
func (d *Dialer) DialTCP(ctx context.Context, addr string) (net.Conn, error) {
	return d.DialContext(ctx, "tcp", addr)
}

// DialTimeout dials addr within timeout; its signature is go-zookeeper's
// zk.Dialer, for zk.WithDialer.
func (d *Dialer) DialTimeout(network, addr string, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return d.DialContext(ctx, network, addr)
}
