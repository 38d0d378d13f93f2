package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// flagProblems collects what is wrong with a command's flag values, each
// naming the flag, the value given and what it must be, so that a command
// refuses them all at once, before any work starts.
type flagProblems struct {
	cmd  string // "lockproof bench"
	msgs []string
}

// need records a problem with flag -name (given value) unless ok; want
// says what the flag accepts.
func (p *flagProblems) need(ok bool, name string, value any, want string) {
	if !ok {
		p.msgs = append(p.msgs, fmt.Sprintf("-%s %v: %s", name, value, want))
	}
}

// add records a problem described in full by msg.
func (p *flagProblems) add(msg string) { p.msgs = append(p.msgs, msg) }

// report prints every problem on w and reports whether there was one.
func (p *flagProblems) report(w io.Writer) bool {
	if len(p.msgs) == 0 {
		return false
	}
	fmt.Fprintf(w, "%s: bad flag value: %s\n", p.cmd, strings.Join(p.msgs, "; "))
	return true
}

// hostPort records a problem with flag -name, a server's address (empty:
// none), unless it is a host:port with a host and a port from 1 to 65535.
func (p *flagProblems) hostPort(name, addr string) {
	if addr == "" {
		return
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		p.need(false, name, addr, "want host:port")
		return
	}
	n, err := strconv.Atoi(port)
	p.need(host != "" && err == nil && n >= 1 && n <= 65535, name, addr, "want host:port with a host and a port from 1 to 65535")
}

// output records a problem with flag -name, a file the command will write
// after its run (empty: none), unless it can be written now: its directory
// exists, it is not a directory itself, and a file can be created there.
// Nothing is left behind.
func (p *flagProblems) output(name, path string) {
	if path == "" {
		return
	}
	if err := writable(path); err != nil {
		p.need(false, name, path, err.Error())
	}
}

// outDir records a problem with flag -name, a directory the command writes
// into (empty: a temporary one), unless it exists or can be made, and
// files can be created in it.
func (p *flagProblems) outDir(name, dir string) {
	if dir == "" {
		return
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		p.need(false, name, dir, "cannot make the directory: "+err.Error())
		return
	}
	if err := canCreateIn(dir); err != nil {
		p.need(false, name, dir, err.Error())
	}
}

// writable reports why path cannot be written as a file, or nil.
func writable(path string) error {
	dir := filepath.Dir(path)
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("directory %s does not exist", dir)
	case err != nil:
		return err
	case !st.IsDir():
		return fmt.Errorf("%s is not a directory", dir)
	}
	if st, err := os.Stat(path); err == nil {
		if st.IsDir() {
			return errors.New("is a directory")
		}
		fh, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return fmt.Errorf("cannot be written: %w", err)
		}
		return fh.Close()
	}
	return canCreateIn(dir)
}

// canCreateIn reports why no file can be created in dir, or nil; the file
// it tries is removed.
func canCreateIn(dir string) error {
	fh, err := os.CreateTemp(dir, ".lockproof-probe-*")
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the probe's random name says nothing
		}
		return fmt.Errorf("cannot create files in %s: %w", dir, err)
	}
	name := fh.Name()
	_ = fh.Close()
	return os.Remove(name)
}
