//go:build !unix

package locals3

import (
	"errors"
	"os"
	"syscall"
)

func sysProcAttr() *syscall.SysProcAttr { return nil }

// signalGroup kills p itself: there are no process groups to signal.
func signalGroup(p *os.Process, _ bool) { _ = p.Kill() }

func pauseGroup(*os.Process, bool) error { return errors.New("locals3: cannot freeze a process here") }
