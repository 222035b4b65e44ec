//go:build unix

package lambdatest

import "syscall"

// signalGroup sends sig to the process group led by pid. A group that is
// already gone is not an error.
func signalGroup(pid int, sig syscall.Signal) {
	_ = syscall.Kill(-pid, sig)
}
