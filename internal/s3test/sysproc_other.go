//go:build !unix

package s3test

import (
	"os"
	"syscall"
)

func sysProcAttr() *syscall.SysProcAttr { return nil }

// signalGroup kills p itself: there are no process groups to signal.
func signalGroup(p *os.Process, _ bool) { _ = p.Kill() }
