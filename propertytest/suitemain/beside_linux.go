package suitemain

import "syscall"

// besideSupported: on Linux the second process can be made to die with
// the first (Pdeathsig), so that a test binary killed by go test's timeout
// leaves nothing running.
const besideSupported = true

// besideProcAttr kills the second process when the first one dies.
func besideProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
