//go:build unix && !linux

package locals3

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

// pauseGroup stops (SIGSTOP) or resumes (SIGCONT) p's process group.
func pauseGroup(p *os.Process, stop bool) error {
	sig := syscall.SIGCONT
	if stop {
		sig = syscall.SIGSTOP
	}
	return syscall.Kill(-p.Pid, sig)
}
