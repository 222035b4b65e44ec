//go:build unix && !linux

package localpg

import "syscall"

// serverAttr runs the server as cred in a process group of its own. Only
// Linux can have the kernel stop it when this process dies; elsewhere a
// crashed test may leave it running.
func serverAttr(cred *credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred, Setpgid: true}
}
