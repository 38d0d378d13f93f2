package faketest

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/lockproof/lockproof/fakes"
)

// CloseOK closes a fake and fails t if Close fails, the first time or the
// second (which must do nothing).
func CloseOK(t *testing.T, c interface{ Close() error }) {
	t.Helper()
	if err := c.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// WantStartError fails t unless err is an error whose message holds want.
func WantStartError(t *testing.T, what string, err error, want string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("%s: error %v, want one that says %q", what, err, want)
	}
}

// TCPDial dials addr over TCP whatever a client asks for: a library's
// client of a server on a loopback port.
func TCPDial(addr string) fakes.DialFunc {
	return func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	}
}

// ClosedAddr is a loopback address nothing listens on.
const ClosedAddr = "127.0.0.1:1"

// Epoch is the start of the manual clocks in the fakes' tests.
var Epoch = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
