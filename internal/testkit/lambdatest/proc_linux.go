package lambdatest

import "syscall"

// sysProcAttr puts the function in a process group of its own, so that
// Stop can kill it and anything it started, and has the kernel kill it if
// the test binary dies first.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
