//go:build unix && !linux

package lambdatest

import "syscall"

// sysProcAttr puts the function in a process group of its own, so that
// Stop can kill it and anything it started.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
