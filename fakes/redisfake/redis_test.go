package redisfake_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproof/lockproof/fakes/internal/faketest"
	"github.com/lockproof/lockproof/fakes/redisfake"
	"github.com/lockproof/lockproof/locks"
)

func TestRedisClientWorks(t *testing.T) {
	ctx := context.Background()
	s := redisfake.New(t)
	key := s.Prefix() + "k"
	if err := s.Client().Set(ctx, key, "v", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	other := s.NewClient()
	if got, err := other.Get(ctx, key).Result(); err != nil || got != "v" {
		t.Fatalf("GET from a second client = %q, %v; want \"v\"", got, err)
	}
	if s.Addr() == "" {
		t.Error("Addr() is empty")
	}
	if s.Real() != (s.Miniredis() == nil) {
		t.Errorf("Real() = %v with Miniredis() = %v", s.Real(), s.Miniredis())
	}
	if _, ok := s.Clock().(locks.SystemClock); !ok {
		t.Errorf("Clock() in real-time mode = %T, want locks.SystemClock", s.Clock())
	}
	if _, err := locks.Resolve("x:", s.LockOptions()...); err != nil {
		t.Errorf("LockOptions do not resolve: %v", err)
	}
}

func TestRedisPrefixIsUnique(t *testing.T) {
	a, b := redisfake.New(t), redisfake.New(t)
	for _, p := range []string{a.Prefix(), b.Prefix()} {
		if !strings.HasPrefix(p, "lockproof-test-") || !strings.HasSuffix(p, ":") {
			t.Errorf("Prefix() = %q, want lockproof-test-<hex>:", p)
		}
	}
	if a.Prefix() == b.Prefix() {
		t.Fatalf("two fakes share the prefix %q", a.Prefix())
	}
	o, err := locks.Resolve("x:", a.LockOptions()...)
	if err != nil || o.Prefix != a.Prefix() {
		t.Fatalf("LockOptions resolve to prefix %q, %v; want %q", o.Prefix, err, a.Prefix())
	}
}

func TestRedisManualTimeExpiresKeysOnAdvance(t *testing.T) {
	ctx := context.Background()
	s := redisfake.New(t, redisfake.ManualTime(faketest.Epoch))
	c := s.Client()
	key := s.Prefix() + "k"
	// A real server also counts down by itself: leave it room.
	margin := time.Millisecond
	if s.Real() {
		margin = 200 * time.Millisecond
	}
	if err := c.Set(ctx, key, "v", time.Second).Err(); err != nil {
		t.Fatalf("SET PX 1000: %v", err)
	}

	s.Advance(time.Second - margin)
	if n := c.Exists(ctx, key).Val(); n != 1 {
		t.Fatalf("key gone %v before its TTL", margin)
	}
	s.Advance(margin)
	if n := c.Exists(ctx, key).Val(); n != 0 {
		t.Fatal("key still present after its TTL")
	}
	if got, want := s.Clock().Now(), faketest.Epoch.Add(time.Second); !got.Equal(want) {
		t.Errorf("Clock().Now() = %v, want %v", got, want)
	}
	if s.Real() {
		return // TIME is the real server's
	}
	if got, err := c.Time(ctx).Result(); err != nil || !got.Equal(s.Clock().Now()) {
		t.Errorf("TIME = %v, %v; want the clock's %v", got, err, s.Clock().Now())
	}
}

func TestRedisAdvanceFiresTimersAfterTheBackend(t *testing.T) {
	ctx := context.Background()
	s := redisfake.New(t, redisfake.ManualTime(faketest.Epoch))
	c := s.Client()
	key := s.Prefix() + "k"
	if err := c.Set(ctx, key, "v", time.Second).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	seen := make(chan int64, 1)
	s.Clock().AfterFunc(time.Second, func() { seen <- c.Exists(ctx, key).Val() })

	s.Advance(time.Second)
	if n := <-seen; n != 0 {
		t.Fatal("a timer at the key's TTL found the key still present")
	}
}

func TestRedisRealTimeExpiresOnTheWallClock(t *testing.T) {
	ctx := context.Background()
	s := redisfake.New(t)
	c := s.Client()
	key := s.Prefix() + "k"
	const ttl = 50 * time.Millisecond

	start := time.Now()
	if err := c.Set(ctx, key, "v", ttl).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for c.Exists(ctx, key).Val() == 1 {
		if time.Since(start) > 150*time.Millisecond {
			t.Fatalf("key with PX %d still present after %v", ttl.Milliseconds(), time.Since(start))
		}
		<-tick.C
	}
	if gone := time.Since(start); gone < ttl {
		t.Fatalf("key expired after %v, before its TTL of %v", gone, ttl)
	}
}

func TestRedisAdvanceNeedsManualTime(t *testing.T) {
	msg := faketest.FatalMessage(t, func(tb testing.TB) { redisfake.New(tb).Advance(time.Second) })
	if !strings.Contains(msg, "ManualTime") {
		t.Fatalf("Advance in real-time mode failed with %q, want a hint at ManualTime", msg)
	}
}

func TestRedisStopAndRestart(t *testing.T) {
	ctx := context.Background()
	s := redisfake.New(t, redisfake.ForceMiniredis())
	c := s.Client()
	key := s.Prefix() + "k"
	if err := c.Set(ctx, key, "v", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}

	s.Stop()
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("PING to a stopped server succeeded")
	}
	s.Restart(true)
	if got, err := c.Get(ctx, key).Result(); err != nil || got != "v" {
		t.Fatalf("after Restart(true): GET = %q, %v; want \"v\"", got, err)
	}
	s.Restart(false)
	if err := c.Get(ctx, key).Err(); err != redis.Nil {
		t.Fatalf("after Restart(false): GET err = %v, want redis.Nil", err)
	}
}

// go-redis stops dialing after as many failed dials as a pool's size, then
// probes once a second: the fake's clients must reconnect at once after a
// long outage, pipelines included, and leave no probe behind (TestMain).
func TestRedisClientsReconnectAfterALongOutage(t *testing.T) {
	ctx := context.Background()
	s := redisfake.New(t, redisfake.ForceMiniredis())
	c := s.Client()
	s.Stop()
	for range 8 { // 8 commands × 4 attempts: more failed dials than go-redis's default pools hold
		if c.Ping(ctx).Err() == nil {
			t.Fatal("PING to a stopped server succeeded")
		}
		_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error { return p.Ping(ctx).Err() })
		if err == nil {
			t.Fatal("pipelined PING to a stopped server succeeded")
		}
	}
	s.Restart(true)
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING right after Restart: %v", err)
	}
	if _, err := c.Pipelined(ctx, func(p redis.Pipeliner) error { return p.Ping(ctx).Err() }); err != nil {
		t.Fatalf("pipelined PING right after Restart: %v", err)
	}
}

func TestRedisStopSkipsOnARealServer(t *testing.T) {
	if os.Getenv(redisfake.EnvAddr) == "" {
		t.Skipf("needs a real server: set %s", redisfake.EnvAddr)
	}
	msg := faketest.FatalMessage(t, func(tb testing.TB) { redisfake.New(tb).Stop() })
	if !strings.HasPrefix(msg, "skip: ") || !strings.Contains(msg, "ForceMiniredis") {
		t.Fatalf("Stop on a real server ended with %q, want a skip pointing at ForceMiniredis", msg)
	}
}

func TestRedisRestartEmptiesScriptCache(t *testing.T) {
	ctx := context.Background()
	s := redisfake.New(t, redisfake.ForceMiniredis())
	c := s.Client()
	sha, err := c.ScriptLoad(ctx, "return 1").Result()
	if err != nil {
		t.Fatalf("SCRIPT LOAD: %v", err)
	}
	s.Restart(true)
	err = c.EvalSha(ctx, sha, nil).Err()
	if err == nil || !strings.HasPrefix(err.Error(), "NOSCRIPT") {
		t.Fatalf("EVALSHA after a restart = %v, want NOSCRIPT", err)
	}
}

func TestRedisBlockingCommandsAfterRestart(t *testing.T) {
	ctx := context.Background()
	s := redisfake.New(t, redisfake.ForceMiniredis())
	s.Restart(true)
	q := s.Prefix() + "q"
	if err := s.Client().LPush(ctx, q, "v").Err(); err != nil {
		t.Fatalf("LPUSH: %v", err)
	}
	got, err := s.Client().BLPop(ctx, time.Second, q).Result()
	if err != nil || len(got) != 2 || got[1] != "v" {
		t.Fatalf("BLPOP after a restart = %q, %v; want [%s v]", got, err, q)
	}
}

func TestRedisCommandCount(t *testing.T) {
	ctx := context.Background()
	s := redisfake.New(t)
	if err := s.Client().Ping(ctx).Err(); err != nil { // connects: HELLO counts too
		t.Fatalf("PING: %v", err)
	}
	before := s.CommandCount()
	for range 3 {
		if err := s.Client().Ping(ctx).Err(); err != nil {
			t.Fatalf("PING: %v", err)
		}
	}
	if got := s.CommandCount(); got < before+3 {
		t.Fatalf("CommandCount() = %d after 3 PINGs, want at least %d", got, before+3)
	}
	if s.Real() {
		return
	}
	if got := s.CommandCount(); got != before+3 {
		t.Fatalf("CommandCount() = %d, want exactly %d on miniredis", got, before+3)
	}
	s.Stop()
	if got := s.CommandCount(); got != before+3 {
		t.Fatalf("CommandCount() of a stopped server = %d, want %d", got, before+3)
	}
	s.Restart(true)
	if err := s.Client().Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after restart: %v", err)
	}
	if got := s.CommandCount(); got < before+4 {
		t.Fatalf("CommandCount() = %d after a restart and a PING, want at least %d", got, before+4)
	}
}

// TestRedisKeyspaceNotifications: real Redis publishes a key's del event
// once notify-keyspace-events asks for it; miniredis, which publishes none,
// refuses the setting with an error that names the gap and the way out,
// also after a restart, and accepts the empty setting.
func TestRedisKeyspaceNotifications(t *testing.T) {
	ctx := context.Background()
	s := redisfake.New(t)
	c := s.NewClient()
	set := c.ConfigSet(ctx, "notify-keyspace-events", "Kg")
	if !s.Real() {
		for _, restart := range []bool{false, true} {
			if restart {
				s.Restart(true)
				set = c.ConfigSet(ctx, "notify-keyspace-events", "Kg")
			}
			if err := set.Err(); err == nil || err.Error() != redisfake.ErrMiniredisNoKeyspaceNotifications {
				t.Fatalf("CONFIG SET notify-keyspace-events Kg on miniredis (restarted %v): %v; want %q",
					restart, err, redisfake.ErrMiniredisNoKeyspaceNotifications)
			}
		}
		if err := c.ConfigSet(ctx, "notify-keyspace-events", "").Err(); err != nil {
			t.Fatalf("CONFIG SET notify-keyspace-events \"\": %v", err)
		}
		if got, err := c.ConfigGet(ctx, "notify-keyspace-events").Result(); err != nil || len(got) != 1 || got["notify-keyspace-events"] != "" {
			t.Fatalf("CONFIG GET notify-keyspace-events = %v, %v; want it empty", got, err)
		}
		if err := c.ConfigSet(ctx, "maxmemory", "1").Err(); err == nil || !strings.Contains(err.Error(), "maxmemory") {
			t.Fatalf("CONFIG SET maxmemory: %v, want an error naming the parameter", err)
		}
		return
	}
	if err := set.Err(); err != nil {
		t.Fatal(err)
	}
	defer c.ConfigSet(ctx, "notify-keyspace-events", "")
	key := s.Prefix() + "watched"
	sub := c.Subscribe(ctx, "__keyspace@0__:"+key)
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil { // the subscription's confirmation
		t.Fatal(err)
	}
	c.Set(ctx, key, "v", 0)
	c.Del(ctx, key)
	msg, err := sub.ReceiveMessage(ctx)
	if err != nil || msg.Payload != "del" {
		t.Fatalf("the keyspace event of DEL: %v, %v; want del", msg, err)
	}
}
