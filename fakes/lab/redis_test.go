package lab

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisBudget bounds each wait in the Redis tests: a failover takes a few
// seconds, but a Sentinel turns a returning old primary into a replica
// only after it has reported itself a master for 8 s.
const redisBudget = 20 * time.Second

func TestParseRole(t *testing.T) {
	good := []struct {
		reply []any
		want  role
	}{
		{[]any{"master", int64(14), []any{}}, role{kind: "master"}},
		{[]any{"slave", "10.242.1.10", int64(6379), "connected", int64(14)}, role{"slave", "10.242.1.10:6379", true}},
		{[]any{"slave", "10.242.1.11", int64(6379), "connect", int64(-1)}, role{"slave", "10.242.1.11:6379", false}},
	}
	for _, g := range good {
		if got, err := parseRole(g.reply); err != nil || got != g.want {
			t.Errorf("parseRole(%v) = %+v, %v; want %+v", g.reply, got, err, g.want)
		}
	}
	bad := [][]any{nil, {"sentinel", []any{"lab"}}, {"slave", "10.242.1.10"}, {"slave", "10.242.1.10", "6379", "connected"}, {int64(1)}}
	for _, reply := range bad {
		if got, err := parseRole(reply); err == nil {
			t.Errorf("parseRole(%v) = %+v, want an error", reply, got)
		}
	}
}

// needRedis skips t unless the lab can run Redis.
func needRedis(t *testing.T) {
	t.Helper()
	needLab(t)
	if reason := RedisUnavailable(); reason != "" {
		t.Skip(reason)
	}
}

// newRedisSentinel starts a Sentinel group closed at t's cleanup, and
// logs its start-up time.
func newRedisSentinel(t *testing.T) *RedisSentinel {
	t.Helper()
	r, took := startRedis(t, StartRedisSentinel)
	t.Logf("redis: primary, 2 replicas in sync and 3 Sentinels that know them up in %v", took)
	return r
}

// startRedis runs start within 30 s and closes what it started at t's
// cleanup, pass or fail; it returns it and its start-up time.
func startRedis[L interface{ Close() error }](t *testing.T, start func(context.Context, Options) (L, error)) (L, time.Duration) {
	t.Helper()
	needRedis(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	began := time.Now()
	l, err := start(ctx, Options{Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("closing the lab: %v", err)
		}
	})
	return l, time.Since(began).Round(time.Millisecond)
}

// failoverClient is r's failover client, closed at t's cleanup before the
// lab is: go-redis's Close stalls for minutes once its Sentinels are gone.
func failoverClient(t *testing.T, r *RedisSentinel) *redis.Client {
	c := r.FailoverClient()
	t.Cleanup(func() { _ = c.Close() }) // a second Close only says it is closed
	return c
}

// closeClients closes cs, for a test that closes its lab before its end.
func closeClients(t *testing.T, cs ...*redis.Client) {
	t.Helper()
	for _, c := range cs {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	}
}

// budget is a context for one wait of a Redis test.
func budget(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), redisBudget)
	t.Cleanup(cancel)
	return ctx
}

// awaitLanded writes through c until a value it wrote is read back from
// server primary directly: the client follows the primary. It returns how
// long that took.
func awaitLanded(t *testing.T, r *RedisSentinel, c *redis.Client, primary int) time.Duration {
	t.Helper()
	direct := r.Client(primary)
	defer direct.Close()
	began := time.Now()
	for n := 0; ; n++ {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		value := fmt.Sprintf("write %d", n)
		err := c.Set(ctx, "lab", value, 0).Err()
		if err == nil {
			var got string
			got, err = direct.Get(ctx, "lab").Result()
			if err == nil && got != value {
				err = fmt.Errorf("server %d holds %q, the client wrote %q elsewhere", primary, got, value)
			}
		}
		cancel()
		if err == nil {
			return time.Since(began)
		}
		if time.Since(began) > redisBudget {
			t.Fatalf("no write through the failover client reached server %d in %v: %v", primary, redisBudget, err)
		}
		time.Sleep(pollEvery)
	}
}

// TestRedisSentinel starts a primary, 2 replicas and 3 Sentinels, writes
// through go-redis's failover client (dialing through the lab's Dialer),
// and fails the primary twice: killed, then isolated. Each time a replica
// is promoted, the client follows it, and the old primary rejoins as a
// replica after the repair.
func TestRedisSentinel(t *testing.T) {
	r := newRedisSentinel(t)
	fc := failoverClient(t, r)
	primary, err := r.Primary(budget(t))
	if err != nil {
		t.Fatal(err)
	}
	if primary != 0 {
		t.Fatalf("the Sentinels name server %d, not server 0, before any failover", primary)
	}
	awaitLanded(t, r, fc, primary)
	faults := []struct {
		name           string
		inject, repair func(ctx context.Context, i int) error
	}{
		{"kill", func(_ context.Context, i int) error { return r.Member(i).Kill() },
			func(_ context.Context, i int) error { return r.Member(i).Restart(false) }},
		{"isolate", func(ctx context.Context, i int) error {
			g, err := Isolate(len(r.Members()), i)
			if err != nil {
				return err
			}
			return r.Apply(ctx, g)
		}, func(ctx context.Context, _ int) error { return r.Heal(ctx) }},
	}
	for _, f := range faults {
		ctx := budget(t)
		old, err := r.AwaitSettled(ctx)
		if err != nil {
			t.Fatal(err)
		}
		began := time.Now()
		if err := f.inject(ctx, old); err != nil {
			t.Fatal(err)
		}
		if primary, err = r.AwaitFailover(ctx, old); err != nil {
			t.Fatalf("%s of primary %d: %v\n%s", f.name, old, err, r.Member(r.Sentinels()[0]).LogTail(15))
		}
		promoted := time.Since(began)
		if promoted < sentinelDownAfter {
			t.Errorf("server %d was promoted %v after the %s, before the Sentinels could see it down: another failover was under way\n%s",
				primary, promoted, f.name, r.Member(r.Sentinels()[0]).LogTail(30))
		}
		followed := awaitLanded(t, r, fc, primary)
		repaired := time.Now()
		if err := f.repair(ctx, old); err != nil {
			t.Fatal(err)
		}
		if err := r.AwaitReplica(ctx, old); err != nil {
			t.Fatalf("after the %s, old primary %d did not rejoin: %v\n%s", f.name, old, err, r.Member(old).LogTail(15))
		}
		t.Logf("redis: %s of primary %d: server %d promoted after %v, the failover client wrote to it %v later; server %d rejoined as a replica %v after the repair",
			f.name, old, primary, promoted.Round(time.Millisecond), followed.Round(time.Millisecond), old,
			time.Since(repaired).Round(time.Millisecond))
	}
	awaitLanded(t, r, fc, primary)
	closeClients(t, fc)
	wantNothingLeft(t, r.Lab)
}

// lockTTL is the lease of the locks in TestRedisSentinelLosesUnreplicatedLock:
// far longer than the test, so both holders hold at once.
const lockTTL = time.Minute

// TestRedisSentinelLosesUnreplicatedLock reproduces issue 35's failure: a
// lock SET NX PX that the primary acknowledged but had not replicated is
// lost when the primary fails over, and a second client takes the same
// lock while the first one's lease runs. The control comes first: a lock
// the replicas acknowledged (WAIT) survives a failover.
func TestRedisSentinelLosesUnreplicatedLock(t *testing.T) {
	r := newRedisSentinel(t)
	alice, bob := failoverClient(t, r), failoverClient(t, r)

	// Replicated: the new primary has the key, and Bob is refused.
	ctx := budget(t)
	primary, err := r.Primary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := alice.SetNX(ctx, "replicated", "alice", lockTTL).Result(); err != nil || !got {
		t.Fatalf("alice's SET NX = %v, %v", got, err)
	}
	if n, err := alice.Wait(ctx, 2, time.Second).Result(); err != nil || n != 2 {
		t.Fatalf("WAIT 2: %d replicas acknowledged, %v", n, err)
	}
	primary = failOver(t, r, primary)
	if got := awaitSetNX(t, bob, "replicated"); got {
		t.Fatal("bob took a lock whose key was replicated before the failover")
	}

	// Not replicated: the primary is cut off from the replicas first.
	ctx = budget(t)
	cut := Grudge{primary: others(r.Servers(), primary)}
	if err := r.Apply(ctx, cut); err != nil {
		t.Fatal(err)
	}
	granted := time.Now()
	if got, err := alice.SetNX(ctx, "unreplicated", "alice", lockTTL).Result(); err != nil || !got {
		t.Fatalf("alice's SET NX = %v, %v", got, err)
	}
	if n, err := alice.Wait(ctx, 1, 200*time.Millisecond).Result(); err != nil || n != 0 {
		t.Fatalf("WAIT 1 on the cut-off primary: %d replicas acknowledged, %v; want 0", n, err)
	}
	// The partition stays until the end: healed while the killed primary's
	// socket still held the SET in its send queue, the kernel would deliver
	// it to the replica once the path is back, and the key would survive.
	next := failOver(t, r, primary)
	if got := awaitSetNX(t, bob, "unreplicated"); !got {
		t.Fatal("bob was refused the lock: the unreplicated key survived the failover")
	}
	if held := time.Since(granted); held >= lockTTL {
		t.Fatalf("alice's lease ran out (%v) before bob took the lock: not two holders", held)
	}
	direct := r.Client(next)
	t.Cleanup(func() { _ = direct.Close() })
	if owner, err := direct.Get(budget(t), "unreplicated").Result(); err != nil || owner != "bob" {
		t.Fatalf("the new primary %d holds %q, %v; want bob's lock", next, owner, err)
	}
	t.Logf("redis: alice's acknowledged, unreplicated lock on server %d was lost in the failover to server %d; bob took it %v into alice's %v lease",
		primary, next, time.Since(granted).Round(time.Millisecond), lockTTL)
	closeClients(t, alice, bob, direct)
	wantNothingLeft(t, r.Lab)
	// The killed primary's socket still retransmits alice's SET into the
	// partition and keeps its namespace alive: Close must cut its veth.
	vethsLeft(t, r.num)
}

// failOver kills primary, waits for the Sentinels to promote a replica
// and returns it.
func failOver(t *testing.T, r *RedisSentinel, primary int) int {
	t.Helper()
	ctx := budget(t)
	began := time.Now()
	if err := r.Member(primary).Kill(); err != nil {
		t.Fatal(err)
	}
	next, err := r.AwaitFailover(ctx, primary)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("redis: primary %d killed, server %d promoted after %v", primary, next, time.Since(began).Round(time.Millisecond))
	return next
}

// awaitSetNX retries SET key bob NX PX lockTTL through c until the server
// answers, and returns whether the lock was granted.
func awaitSetNX(t *testing.T, c *redis.Client, key string) bool {
	t.Helper()
	began := time.Now()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		got, err := c.SetNX(ctx, key, "bob", lockTTL).Result()
		cancel()
		if err == nil {
			return got
		}
		if time.Since(began) > redisBudget {
			t.Fatalf("bob's SET NX never got an answer in %v: %v", redisBudget, err)
		}
		time.Sleep(pollEvery)
	}
}

// vethsLeft fails t if a veth of lab number num remains in the sandbox.
func vethsLeft(t *testing.T, num int) {
	t.Helper()
	out, err := output(context.Background(), "ip", "-o", "link", "show")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if _, name, ok := strings.Cut(line, ": "); ok && strings.HasPrefix(name, fmt.Sprintf("lp%dv", num)) {
			t.Errorf("a veth of lab %d is left: %s", num, line)
		}
	}
}

// TestRedisNodes starts 5 independent servers, and restarts one with its
// append-only file (its key survives) and one without persistence (its key
// is gone, and it stays without persistence until restarted with it).
func TestRedisNodes(t *testing.T) {
	r, took := startRedis(t, StartRedisNodes)
	t.Logf("redis: %d nodes up in %v", len(r.Addrs()), took)
	ctx := budget(t)
	for i := range r.Addrs() {
		withNode(t, r, i, func(c *redis.Client) {
			if err := c.Set(ctx, "lock", fmt.Sprintf("node %d", i), 0).Err(); err != nil {
				t.Fatal(err)
			}
		})
	}
	for _, step := range []struct {
		node    int
		persist bool
		kept    bool
		aof     string
	}{{0, true, true, "yes"}, {1, false, false, "no"}, {1, true, false, "yes"}} {
		began := time.Now()
		if err := r.Restart(ctx, step.node, step.persist); err != nil {
			t.Fatal(err)
		}
		t.Logf("redis: node %d restarted (persistence %v) in %v", step.node, step.persist, time.Since(began).Round(time.Millisecond))
		withNode(t, r, step.node, func(c *redis.Client) {
			got, err := c.Get(ctx, "lock").Result()
			switch {
			case step.kept && (err != nil || got != fmt.Sprintf("node %d", step.node)):
				t.Errorf("node %d restarted with persistence: GET = %q, %v; want its key", step.node, got, err)
			case !step.kept && !errors.Is(err, redis.Nil):
				t.Errorf("node %d restarted after running without persistence: GET = %q, %v; want no key", step.node, got, err)
			}
			conf, err := c.ConfigGet(ctx, "appendonly").Result()
			if err != nil || conf["appendonly"] != step.aof {
				t.Errorf("node %d: appendonly = %v, %v; want %s", step.node, conf, err, step.aof)
			}
			if conf, err := c.ConfigGet(ctx, "save").Result(); err != nil || strings.TrimSpace(conf["save"]) != "" {
				t.Errorf("node %d: save = %v, %v; want no RDB snapshots", step.node, conf, err)
			}
		})
	}
	wantNothingLeft(t, r.Lab)
}

// withNode runs f with a client of node i, closed after.
func withNode(t *testing.T, r *RedisNodes, i int, f func(c *redis.Client)) {
	t.Helper()
	c := r.Client(i)
	defer c.Close()
	f(c)
}
