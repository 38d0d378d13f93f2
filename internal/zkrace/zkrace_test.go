package zkrace

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"go.uber.org/goleak"

	"github.com/lockproof/lockproof/fakes/minizk"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// dump builds a two-goroutine stack dump: goroutine 9, created by
// zk.Connect in goroutine 7, with the given frames above its loop frame,
// and an unrelated goroutine.
func dump(above ...string) []byte {
	var b strings.Builder
	b.WriteString("goroutine 1 [running]:\nmain.main()\n\t/x/main.go:3 +0x1\n\n")
	b.WriteString("goroutine 9 [select]:\n")
	for _, f := range above {
		b.WriteString(f + "(...)\n\t/x/f.go:1 +0x2\n")
	}
	b.WriteString("github.com/go-zookeeper/zk.(*Conn).loop(0xc000010000, {0x1, 0x2})\n\t/x/conn.go:485 +0x3\n")
	b.WriteString("created by github.com/go-zookeeper/zk.Connect in goroutine 7\n\t/x/conn.go:224 +0x4\n")
	return []byte(b.String())
}

func TestSettled(t *testing.T) {
	mine := []byte("created by github.com/go-zookeeper/zk.Connect in goroutine 7\n")
	other := []byte("created by github.com/go-zookeeper/zk.Connect in goroutine 70\n")
	for _, c := range []struct {
		name  string
		dump  []byte
		by    []byte
		ready bool
	}{
		{"waits on its loops", dump("sync.runtime_SemacquireWaitGroup", "sync.(*WaitGroup).Wait"), mine, true},
		{"dials", dump("time.Sleep", "github.com/go-zookeeper/zk.(*Conn).connect"), mine, true},
		{"runs in the loop itself", dump(), mine, false},
		{"still in authenticate", dump("github.com/go-zookeeper/zk.(*Conn).setState", "github.com/go-zookeeper/zk.(*Conn).authenticate"), mine, false},
		{"sends its watches", dump("sync.(*Mutex).Lock", "github.com/go-zookeeper/zk.(*Conn).sendSetWatches"), mine, false},
		{"another goroutine's connection", dump(), other, true},
	} {
		if got := settled(c.dump, c.by); got != c.ready {
			t.Errorf("%s: settled = %v, want %v", c.name, got, c.ready)
		}
	}
}

// A connection that has its session is, after Settle, found settled in
// a live dump, whether or not the race detector runs.
func TestSettleOnALiveConnection(t *testing.T) {
	srv, err := minizk.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	conn, events, err := zk.Connect([]string{srv.Addr()}, 4*time.Second, zk.WithLogger(quiet{}))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for ev := range events {
		if ev.State == zk.StateHasSession {
			break
		}
	}
	Settle(10 * time.Second)
	created := []byte("created by github.com/go-zookeeper/zk.Connect in goroutine " + itoa(goroutineID()) + "\n")
	if !Enabled {
		deadline := time.Now().Add(10 * time.Second)
		for !settled(allStacks(), created) && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
	}
	if !settled(allStacks(), created) {
		t.Fatalf("the connection's loop is not settled:\n%s", allStacks())
	}
	if strings.Count(string(allStacks()), string(created)) < 1 {
		t.Fatal("no goroutine of the connection found in the dump: settled would hold vacuously")
	}
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }

type quiet struct{}

func (quiet) Printf(string, ...any) {}
