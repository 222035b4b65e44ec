//go:build !unix

package lambdatest

import (
	"os"
	"syscall"
)

// sysProcAttr has nothing to add outside Unix: no process groups.
func sysProcAttr() *syscall.SysProcAttr { return nil }

// signalGroup kills the process pid (outside Unix there is no group to
// signal, and no signal but kill).
func signalGroup(pid int, _ syscall.Signal) {
	if p, err := os.FindProcess(pid); err == nil {
		_ = p.Kill()
	}
}
