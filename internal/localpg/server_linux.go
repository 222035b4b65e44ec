package localpg

import "syscall"

// serverAttr runs the server as cred in a process group of its own.
// SIGINT is postgres's "fast shutdown"; it is also what the server gets
// if this process dies without calling Stop.
func serverAttr(cred *credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGINT, Setpgid: true}
}
