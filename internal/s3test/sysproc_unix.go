//go:build unix && !linux

package s3test

import (
	"os"
	"syscall"
)

// sysProcAttr puts the server in its own process group, so stop reaches
// anything it spawns. Without Pdeathsig outside Linux, only Main stops it.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// signalGroup sends SIGTERM, or SIGKILL when kill is set, to p's process
// group.
func signalGroup(p *os.Process, kill bool) {
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	_ = syscall.Kill(-p.Pid, sig)
}
