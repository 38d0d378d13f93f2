package fakes

import "testing"

// TestHTTPConnsIn: a goroutine serving or reading an HTTP connection keeps
// the wait going, unless it is wedged in etcd's version handler.
func TestHTTPConnsIn(t *testing.T) {
	const (
		idle  = "goroutine 1 [running]:\nmain.main()\n\t/x/main.go:3 +0x1"
		serve = "goroutine 7 [IO wait]:\nnet/http.(*conn).serve(0xc0)\n\t/go/src/net/http/server.go:2067 +0xe65"
		read  = "goroutine 8 [select]:\nnet/http.(*persistConn).readLoop(0xc0)\n\t/go/src/net/http/transport.go:2205 +0x1"
		wedge = "goroutine 9 [sync.Mutex.Lock]:\nsync.(*Mutex).Lock(...)\n" +
			etcdVersionHandler + "({0x1b5}, 0xc0)\n\t/v/version.go:37 +0x7f\n" +
			"net/http.(*conn).serve(0xc0)\n\t/go/src/net/http/server.go:2067 +0xe65"
	)
	for _, c := range []struct {
		name string
		dump string
		want bool
	}{
		{"none", idle, false},
		{"serving", idle + "\n\n" + serve, true},
		{"reading", read + "\n\n" + idle, true},
		{"only wedged", idle + "\n\n" + wedge, false},
		{"wedged and serving", wedge + "\n\n" + serve, true},
	} {
		if got := httpConnsIn(c.dump); got != c.want {
			t.Errorf("%s: httpConnsIn = %v, want %v", c.name, got, c.want)
		}
	}
}
