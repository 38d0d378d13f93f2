package chaos

import (
	"context"
	"flag"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockproof/lockproof/fakes"
)

var nemesisSeed = flag.Uint64("chaos.seed", 0, "seed of TestNemesisReplays (0: derive from the time)")

var testSet = FaultSet{
	Kinds: []Kind{KindPartition, KindPause, KindCrash, KindAdvance},
	Targets: map[Kind][]string{
		KindPartition: {"node0", "node1", "node2"},
		KindPause:     {"client-a", "client-b"},
		KindCrash:     {"client-a", "client-b"},
	},
	MaxDuration: 2 * time.Second,
}

// TestNemesisReplays: a schedule is a function of its seed, and its printed
// form parses back to the same schedule.
func TestNemesisReplays(t *testing.T) {
	seed := *nemesisSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay: go test ./chaos -run TestNemesisReplays -chaos.seed %d)", seed, seed)
	a, err := Plan(seed, testSet, 10*time.Second, 40)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Plan(seed, testSet, 10*time.Second, 40)
	if !slices.Equal(a, b) {
		t.Fatal("same seed, different schedules")
	}
	c, _ := Plan(seed+1, testSet, 10*time.Second, 40)
	if slices.Equal(a, c) {
		t.Fatal("different seeds, same schedule")
	}
	parsed, err := ParseSchedule(a.String())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(a, parsed) {
		t.Fatalf("printed schedule does not parse back:\n%s\n---\n%s", a, parsed)
	}
	for i, f := range a {
		if i > 0 && f.At < a[i-1].At {
			t.Fatalf("schedule out of order at %d:\n%s", i, a)
		}
		if f.Kind != KindAdvance && f.Target == "" {
			t.Fatalf("fault without target: %s", f)
		}
	}
}

func TestPlanAndParseRejectBadInput(t *testing.T) {
	bad := []FaultSet{
		{},
		{Kinds: []Kind{KindPartition}, MaxDuration: time.Second},
		{Kinds: []Kind{KindAdvance}},
	}
	for _, set := range bad {
		if _, err := Plan(1, set, time.Second, 3); err == nil {
			t.Errorf("Plan(%+v) succeeded", set)
		}
	}
	if _, err := Plan(1, testSet, 0, 3); err == nil {
		t.Error("Plan with span 0 succeeded")
	}
	for _, text := range []string{
		"partition node0",
		"+x partition node0",
		"+1s partition node0 for never",
		"+1s partition a b",
		"+2s advance for 1s\n+1s advance for 1s",
	} {
		if _, err := ParseSchedule(text); err == nil {
			t.Errorf("ParseSchedule(%q) succeeded", text)
		}
	}
}

// TestScheduleRunsOnTheClock: faults fire in order, each only once the
// manual clock reaches its time.
func TestScheduleRunsOnTheClock(t *testing.T) {
	s, err := ParseSchedule("+100ms partition node1 for 50ms\n+300ms crash client-a\n+300ms advance for 1s")
	if err != nil {
		t.Fatal(err)
	}
	clock := fakes.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	start := clock.Now()
	got := make(chan string, 3)
	done := make(chan error, 1)
	go func() {
		done <- s.Run(context.Background(), clock, func(_ context.Context, f Fault) error {
			got <- clock.Now().Sub(start).String() + " " + string(f.Kind)
			return nil
		})
	}()
	ctx := context.Background()
	if err := clock.WaitTimers(ctx, 1); err != nil {
		t.Fatal(err)
	}
	select {
	case g := <-got:
		t.Fatalf("fault %q fired before its time", g)
	default:
	}
	clock.Advance(100 * time.Millisecond)
	if g := <-got; g != "100ms partition" {
		t.Fatalf("first fault: %q", g)
	}
	if err := clock.WaitTimers(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clock.Advance(200 * time.Millisecond)
	var rest []string
	for range 2 {
		rest = append(rest, <-got)
	}
	if want := "300ms crash,300ms advance"; strings.Join(rest, ",") != want {
		t.Fatalf("then: %v, want %s", rest, want)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
