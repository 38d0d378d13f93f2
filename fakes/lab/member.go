package lab

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
)

// Command is what a member runs, in its namespace.
type Command struct {
	// Args is the program and its arguments.
	Args []string
	// Env is added to this process's environment.
	Env []string
	// Prepare, if set, runs before each start with the member's data
	// directory, for the files the program expects there.
	Prepare func(dataDir string) error
}

// Member is one node of a lab: a network namespace, an address, a data
// directory and at most one process at a time.
type Member struct {
	lab   *Lab
	index int
	ns    string
	ip    netip.Addr
	dir   string

	mu      sync.Mutex
	command Command
	proc    *process
	paused  bool
}

// process is a started program and its end.
type process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the process is reaped
	err  error         // its exit, set before done closes
}

// Index is the member's index in its lab.
func (m *Member) Index() int { return m.index }

// Namespace is the name of the member's network namespace.
func (m *Member) Namespace() string { return m.ns }

// IP is the member's address.
func (m *Member) IP() netip.Addr { return m.ip }

// DataDir is the member's data directory, kept across restarts unless
// wiped.
func (m *Member) DataDir() string { return filepath.Join(m.dir, "data") }

// LogPath is the file that receives the member's output, every run's.
func (m *Member) LogPath() string { return filepath.Join(m.dir, "log") }

// Start runs c in the member's namespace and remembers it for Restart. It
// fails if the member already runs a process.
func (m *Member) Start(c Command) error {
	if len(c.Args) == 0 {
		return errors.New("lab: Start with no program")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.command = c
	return m.startLocked()
}

// startLocked starts m.command; m.mu is held.
func (m *Member) startLocked() error {
	if m.proc != nil {
		return fmt.Errorf("lab: member %d already runs pid %d", m.index, m.proc.cmd.Process.Pid)
	}
	if len(m.command.Args) == 0 {
		return fmt.Errorf("lab: member %d was never started", m.index)
	}
	if err := os.MkdirAll(m.DataDir(), 0o700); err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	if m.command.Prepare != nil {
		if err := m.command.Prepare(m.DataDir()); err != nil {
			return fmt.Errorf("lab: preparing member %d: %w", m.index, err)
		}
	}
	log, err := os.OpenFile(m.LogPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	defer log.Close()
	// nsenter enters the namespace and execs the program: the pid is the
	// program's own, so signals reach it directly.
	args := append([]string{"--net=" + netnsPath(m.ns), "--"}, m.command.Args...)
	cmd := exec.Command("nsenter", args...)
	cmd.Dir = m.DataDir()
	cmd.Env = append(os.Environ(), m.command.Env...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("lab: starting member %d: %w", m.index, err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	m.proc, m.paused = p, false
	m.lab.logf("lab: member %d (%s) started: pid %d", m.index, m.ip, cmd.Process.Pid)
	return nil
}

// Pid is the id of the member's process, 0 when none runs.
func (m *Member) Pid() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.proc == nil {
		return 0
	}
	return m.proc.cmd.Process.Pid
}

// Running reports whether the member's process is alive (paused or not).
func (m *Member) Running() bool {
	m.mu.Lock()
	p := m.proc
	m.mu.Unlock()
	if p == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Kill ends the member's process with SIGKILL and waits until it is gone;
// nothing running is no error.
func (m *Member) Kill() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.killLocked()
}

// killLocked kills m.proc; m.mu is held.
func (m *Member) killLocked() error {
	p := m.proc
	if p == nil {
		return nil
	}
	m.proc, m.paused = nil, false
	pid := p.cmd.Process.Pid
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("lab: killing member %d (pid %d): %w", m.index, pid, err)
	}
	<-p.done
	m.lab.logf("lab: member %d killed (pid %d: %v)", m.index, pid, p.err)
	return nil
}

// Restart kills the member's process if one runs, empties its data
// directory if wipe, and starts its Command again.
func (m *Member) Restart(wipe bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.killLocked(); err != nil {
		return err
	}
	if wipe {
		if err := os.RemoveAll(m.DataDir()); err != nil {
			return fmt.Errorf("lab: wiping member %d: %w", m.index, err)
		}
	}
	return m.startLocked()
}

// Pause stops the member's process with SIGSTOP.
func (m *Member) Pause() error { return m.signal(syscall.SIGSTOP, true) }

// Resume continues the member's process with SIGCONT.
func (m *Member) Resume() error { return m.signal(syscall.SIGCONT, false) }

// signal sends sig to the running process and records whether it is paused.
func (m *Member) signal(sig syscall.Signal, paused bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.proc == nil {
		return fmt.Errorf("lab: member %d runs nothing to %v", m.index, sig)
	}
	if err := syscall.Kill(m.proc.cmd.Process.Pid, sig); err != nil {
		return fmt.Errorf("lab: member %d: %v: %w", m.index, sig, err)
	}
	m.paused = paused
	m.lab.logf("lab: member %d: %v", m.index, sig)
	return nil
}

// Paused reports whether the member's process was paused and not resumed.
func (m *Member) Paused() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.paused
}

// LogTail returns the last n lines of the member's output.
func (m *Member) LogTail(n int) string {
	b, err := os.ReadFile(m.LogPath())
	if err != nil {
		return ""
	}
	return lastLines(string(b), n)
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
