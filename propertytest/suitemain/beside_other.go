//go:build !linux

package suitemain

import "syscall"

// besideSupported: elsewhere a second process would outlive a test binary
// killed by go test's timeout, so Main runs every test in one process.
const besideSupported = false

// besideProcAttr is not called where besideSupported is false.
func besideProcAttr() *syscall.SysProcAttr { return nil }
