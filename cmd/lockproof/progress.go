package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// progress shows check's advance on stderr: on a terminal, one status line
// redrawn four times a second; otherwise a plain line as each cell starts
// and ends.
type progress struct {
	w     io.Writer
	tty   bool
	cells []cell
	cfg   checkConfig

	mu        sync.Mutex
	start     time.Time
	cell      int           // the running cell
	cellStart time.Time     // when it started
	share     time.Duration // its share of the budget
	cellRuns  int           // runs of the running cell so far
	doneRuns  int           // runs of finished cells
	finished  int           // cells finished
	stop      chan struct{}
	stopped   chan struct{}
}

func newProgress(w io.Writer, cells []cell, cfg checkConfig) *progress {
	return &progress{w: w, tty: isTerminal(w), cells: cells, cfg: cfg}
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func (p *progress) begin() {
	p.mu.Lock()
	p.start = time.Now()
	p.mu.Unlock()
	mode := fmt.Sprintf("budget %v", p.cfg.budget)
	if p.cfg.runs > 0 {
		mode = fmt.Sprintf("%d runs per cell", p.cfg.runs)
	}
	fmt.Fprintf(p.w, "lockproof check: %s, seed %d, %s\n", plural(len(p.cells), "cell", "cells"), p.cfg.seed, mode)
	if !p.tty {
		return
	}
	p.stop, p.stopped = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(p.stopped)
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
				p.mu.Lock()
				fmt.Fprintf(p.w, "\r\033[K%s", p.statusLocked())
				p.mu.Unlock()
			}
		}
	}()
}

func (p *progress) startCell(i int, share time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cell, p.cellStart, p.share, p.cellRuns = i, time.Now(), share, 0
	if !p.tty {
		fmt.Fprintf(p.w, "%s: started (%s)\n", p.prefixLocked(), p.cells[i].about)
	}
}

// note prints a line of its own, such as a cluster starting, above the
// status line on a terminal.
func (p *progress) note(line string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty {
		line = "\r\033[K" + line
	}
	fmt.Fprintln(p.w, line)
}

func (p *progress) runs(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cellRuns = n
}

func (p *progress) endCell(cr *cellResult) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.doneRuns += cr.Runs
	p.cellRuns = 0
	p.finished++
	line := fmt.Sprintf("%s: %s in %.1fs: %s", p.prefixLocked(), plural(cr.Runs, "run", "runs"), cr.Seconds, cellSummary(cr))
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s\n", line)
		return
	}
	fmt.Fprintf(p.w, "%s | %s\n", line, p.overallLocked())
}

func (p *progress) end() {
	if p.stop != nil {
		close(p.stop)
		<-p.stopped
		fmt.Fprint(p.w, "\r\033[K")
	}
}

func (p *progress) prefixLocked() string {
	return fmt.Sprintf("[%d/%d] %s", p.cell+1, len(p.cells), p.cells[p.cell].name())
}

// statusLocked is the terminal's status line.
func (p *progress) statusLocked() string {
	return fmt.Sprintf("%s: %d runs, %.0fs | %s", p.prefixLocked(), p.cellRuns,
		time.Since(p.cellStart).Seconds(), p.overallLocked())
}

// overallLocked is the whole matrix's advance and the time it has left:
// in budget mode what the budget has left (a failure being minimized can
// overrun it by the shrink bound); with -runs, the average run time so far
// times the runs to go.
func (p *progress) overallLocked() string {
	done := p.finished
	elapsed := time.Since(p.start)
	var left time.Duration
	if p.cfg.runs > 0 {
		ran := p.doneRuns + p.cellRuns
		total := p.cfg.runs * len(p.cells)
		if ran > 0 {
			left = elapsed / time.Duration(ran) * time.Duration(total-ran)
		}
	} else {
		left = max(p.cfg.budget-elapsed, 0)
	}
	pct := 100 * done / len(p.cells)
	return fmt.Sprintf("overall %d%% (%d/%d cells), %.0fs elapsed, about %.0fs left", pct, done, len(p.cells), elapsed.Seconds(), left.Seconds())
}
