package lab

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// faultBudget bounds each wait for a leader or a rejoin.
const faultBudget = 15 * time.Second

// newCluster starts a cluster with start, closes it at t's cleanup (pass
// or fail) and logs its start-up time.
func newCluster(t *testing.T, start func(context.Context, Options) (*Cluster, error)) *Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	began := time.Now()
	c, err := start(ctx, Options{Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("closing the cluster: %v", err)
		}
	})
	t.Logf("%s: 3 members up with a leader in %v", c.Kind, time.Since(began).Round(time.Millisecond))
	return c
}

// awaitWrite retries write until it succeeds, within faultBudget, and
// returns how long that took.
func awaitWrite(t *testing.T, c *Cluster, write func(context.Context) error) time.Duration {
	t.Helper()
	began := time.Now()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := write(ctx)
		cancel()
		if err == nil {
			return time.Since(began)
		}
		if time.Since(began) > faultBudget {
			t.Fatalf("no write went through in %v: %v\n%s", faultBudget, err, describe(c))
		}
		time.Sleep(pollEvery)
	}
}

// exerciseFailovers checks that writes go through, then for each fault on
// the leader (kill, pause, isolation) that another member is elected and
// takes writes, and that the old leader rejoins after the repair (restart,
// resume, heal). It logs each failover's time.
func exerciseFailovers(t *testing.T, c *Cluster, write func(context.Context) error) {
	t.Helper()
	awaitWrite(t, c, write)
	faults := []struct {
		name           string
		inject, repair func(ctx context.Context, leader int) error
	}{
		{"kill", func(_ context.Context, i int) error { return c.Member(i).Kill() },
			func(_ context.Context, i int) error { return c.Member(i).Restart(false) }},
		{"pause", func(_ context.Context, i int) error { return c.Member(i).Pause() },
			func(_ context.Context, i int) error { return c.Member(i).Resume() }},
		{"isolate", func(ctx context.Context, i int) error {
			g, err := Isolate(len(c.Members()), i)
			if err != nil {
				return err
			}
			return c.Apply(ctx, g)
		}, func(ctx context.Context, _ int) error { return c.Heal(ctx) }},
	}
	for _, f := range faults {
		ctx, cancel := context.WithTimeout(context.Background(), faultBudget)
		old, err := c.Leader(ctx)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		began := time.Now()
		if err := f.inject(ctx, old); err != nil {
			cancel()
			t.Fatal(err)
		}
		next, err := c.AwaitLeader(ctx, old)
		if err != nil {
			cancel()
			t.Fatalf("%s of leader %d: %v", f.name, old, err)
		}
		elected := time.Since(began)
		wrote := awaitWrite(t, c, write)
		if err := f.repair(ctx, old); err != nil {
			cancel()
			t.Fatal(err)
		}
		if err := c.AwaitJoined(ctx, old); err != nil {
			cancel()
			t.Fatalf("after the %s, old leader %d did not rejoin: %v\n%s", f.name, old, err, c.Member(old).LogTail(15))
		}
		cancel()
		t.Logf("%s: %s of leader %d: member %d elected after %v, a write went through %v later; member %d rejoined %v after the repair",
			c.Kind, f.name, old, next, elected.Round(time.Millisecond), wrote.Round(time.Millisecond), old,
			(time.Since(began) - elected - wrote).Round(time.Millisecond))
	}
	awaitWrite(t, c, write)
}

// describe says what each member of c answers and logged last.
func describe(c *Cluster) string {
	var b strings.Builder
	for i, m := range c.Members() {
		s, err := c.ask(context.Background(), c, i)
		fmt.Fprintf(&b, "member %d (pid %d, paused %v): %+v %v\n%s\n", i, m.Pid(), m.Paused(), s, err, m.LogTail(8))
	}
	return b.String()
}
