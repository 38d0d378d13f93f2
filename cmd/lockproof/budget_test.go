package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/lockproof/lockproof/propertytest"
	"github.com/lockproof/lockproof/propertytest/backends"
)

// slowMemLock is MemLock, correct, with every run slowed by d of wall time
// (as a backend that runs in real time is).
func slowMemLock(d time.Duration) cell {
	mem := backends.MemLock()
	return cell{lock: "slow-memlock", faults: "crash", about: "MemLock, each run slowed",
		factory: func(env propertytest.Env) (*propertytest.Backend, error) {
			time.Sleep(d)
			return mem(env)
		}}
}

func fastMemLock() cell {
	return cell{lock: "memlock", faults: "crash", about: "MemLock", factory: backends.MemLock()}
}

// In budget mode every cell makes at least minRuns runs, a slow one
// included, and a slow cell that overruns its share leaves the next cell
// its whole share.
func TestBudgetIsSharedFairly(t *testing.T) {
	cells := []cell{slowMemLock(300 * time.Millisecond), fastMemLock()}
	cfg := checkConfig{seed: 3, budget: 2 * time.Second, chunk: 10, steps: 10, outDir: t.TempDir(), shrink: time.Second}
	var log bytes.Buffer
	res := runMatrix(cells, cfg, newProgress(&log, cells, cfg))
	slow, fast := res.Cells[0], res.Cells[1]
	if slow.Runs < minRuns {
		t.Errorf("the slow cell made %d runs, fewer than the minimum %d", slow.Runs, minRuns)
	}
	share := cfg.budget / time.Duration(len(cells))
	if got := time.Duration(fast.Seconds * float64(time.Second)); got < share*8/10 {
		t.Errorf("the fast cell ran %v after the slow one's %.1fs, less than its share %v", got, slow.Seconds, share)
	}
	for _, c := range res.Cells {
		if c.Props[0].Status != statusPass {
			t.Errorf("%s: exclusivity %s after %d runs", c.Lock, c.Props[0].Status, c.Runs)
		}
	}
}

// A property checked by fewer than minRuns runs does not pass: it says
// "too few runs (n)"; "-" is kept for a property the cell cannot check.
func TestTooFewRunsIsNotAPass(t *testing.T) {
	cells := []cell{fastMemLock()}
	cfg := checkConfig{seed: 3, runs: 2, chunk: 10, steps: 10, outDir: t.TempDir(), shrink: time.Second}
	res := runMatrix(cells, cfg, newProgress(&bytes.Buffer{}, cells, cfg))
	c := res.Cells[0]
	byName := map[string]propResult{}
	for _, p := range c.Props {
		byName[p.Property] = p
	}
	if p := byName[string(propertytest.Exclusivity)]; p.Status != statusTooFew || cellText(c, p) != "too few runs (2)" {
		t.Errorf("exclusivity after 2 runs: %+v, %q", p, cellText(c, p))
	}
	if p := byName[string(propertytest.Availability)]; p.Status != statusNotChecked || cellText(c, p) != "-" {
		t.Errorf("availability on one node: %+v", p)
	}
	var table bytes.Buffer
	printTable(&table, res)
	row := strings.Split(table.String(), "\n")[1]
	if strings.Contains(row, "pass") || !strings.Contains(row, "too few runs (2)") {
		t.Errorf("row %q: want too few runs, not pass", row)
	}
	for _, want := range []string{"too few runs (n)", "-: "} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("the legend does not explain %q:\n%s", want, table.String())
		}
	}
}

// The progress line of a cell says what its row says: expected
// violations and too few runs as such, not "pass".
func TestProgressAgreesWithTheTable(t *testing.T) {
	cells := []cell{{lock: "redislock", faults: "failover", about: "failover"}}
	cfg := checkConfig{seed: 1, budget: time.Minute}
	var log bytes.Buffer
	p := newProgress(&log, cells, cfg)
	p.begin()
	p.startCell(0, time.Minute)
	cr := cellResult{Lock: "redislock", Faults: "failover", Runs: 71, Seconds: 9.5, Props: []propResult{
		{Property: string(propertytest.Exclusivity), Status: statusExpected, Checked: 71, Expected: 21},
		{Property: string(propertytest.Symmetry), Status: statusTooFew, Checked: 3},
		{Property: string(propertytest.DeadlockFreedom), Status: statusPass, Checked: 71},
		{Property: string(propertytest.Availability), Status: statusNotChecked},
	}}
	p.endCell(&cr)
	p.end()
	line := log.String()
	for _, want := range []string{"exclusivity: expected (21/71 runs)", "symmetry: too few runs (3)"} {
		if !strings.Contains(line, want) {
			t.Errorf("progress %q lacks %q", line, want)
		}
	}
	if strings.Contains(line, ": pass") {
		t.Errorf("progress %q says pass where the table does not", line)
	}
}

// The replay hint says how to get the binary it names.
func TestReplayHintSaysHowToGetTheBinary(t *testing.T) {
	res := checkResult{Seed: 1, Exit: exitIllegal, Verdict: statusViolated, Cells: []cellResult{{
		Lock: "mutant/x", Faults: "mutant", Runs: 1, Violated: true, Seed: 77, Replay: "lockproof replay 77",
		Props: []propResult{{Property: string(propertytest.Exclusivity), Status: statusViolated, Checked: 1}},
	}}}
	var table bytes.Buffer
	printTable(&table, res)
	for _, want := range []string{"lockproof replay 77", "go install ./cmd/lockproof", "go run ./cmd/lockproof replay 77"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("the table lacks %q:\n%s", want, table.String())
		}
	}
}
