package chaos

import "testing"

// testProxy starts a proxy to target for one test and closes it when the
// test ends.
func testProxy(tb testing.TB, target string) *Proxy {
	tb.Helper()
	p, err := StartProxy(target, 1)
	if err != nil {
		tb.Fatalf("chaos: %v", err)
	}
	tb.Cleanup(func() { _ = p.Close() })
	return p
}

// TestProxy is testProxy for the package's external tests.
var TestProxy = testProxy
